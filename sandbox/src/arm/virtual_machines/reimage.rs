//! A VM's reimage (`POST …/virtualMachines/{name}/reimage`), as Azure answers it: the request
//! body (`tempDisk`, `exactVersion`, `osProfile.adminPassword`/`customData`, all optional, the
//! body itself too), what Azure refuses in it, and what completion does: a non-ephemeral OS disk
//! is replaced by a new one made from the image (the old one deleted or kept detached by its
//! `deleteOption`); an ephemeral one is reset in place.
//!
//! Refusals, in Azure's words where they were found:
//!
//! - `tempDisk: true` on a VM without an ephemeral OS disk: 400 `InvalidParameter`, target
//!   `tempDisk`, "The value of parameter tempDisk is invalid." (Azure's answer to a temp-disk
//!   reimage it does not support);
//! - `osProfile.customData` other than the VM's: 400 `BadRequest`, "Reimage requires the custom
//!   data provided should be same as the custom data provided while creating the Virtual
//!   Machine.";
//! - a VM whose OS disk was attached (no image to reimage from): 409 `OperationNotAllowed` (the
//!   sandbox's message: Azure's was not found).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::super::data_disks;
use super::super::error::ArmError;
use super::super::state::{Kind, Resource, State, key, name_of, obj_at, props, timestamp};

/// What a reimage request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReimageRequest {
    /// `tempDisk`: reimage the temp disk too (ephemeral OS disks only).
    pub temp_disk: bool,
    /// `exactVersion`: the image version the OS disk is reimaged to.
    pub exact_version: Option<String>,
    /// `osProfile.adminPassword`.
    pub admin_password: Option<String>,
    /// `osProfile.customData`.
    pub custom_data: Option<String>,
}

/// Reads a reimage body; an empty body asks for a plain reimage.
pub fn parse(raw: &[u8]) -> Result<ReimageRequest, ArmError> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Ok(ReimageRequest::default());
    }
    let body: Value =
        serde_json::from_slice(raw).map_err(|e| ArmError::InvalidRequestContent(e.to_string()))?;
    if !body.is_object() {
        return Err(ArmError::InvalidRequestContent(
            "the request body must be a JSON object".into(),
        ));
    }
    let temp_disk = match &body["tempDisk"] {
        Value::Null => false,
        Value::Bool(b) => *b,
        _ => {
            return Err(ArmError::invalid(
                "tempDisk",
                "The value of parameter tempDisk is invalid.",
            ));
        }
    };
    let text = |value: &Value, target: &str| -> Result<Option<String>, ArmError> {
        match value {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            _ => Err(ArmError::invalid(
                target,
                format!("The value of parameter {target} is invalid."),
            )),
        }
    };
    if !matches!(body["osProfile"], Value::Null | Value::Object(_)) {
        return Err(ArmError::invalid(
            "osProfile",
            "The value of parameter osProfile is invalid.",
        ));
    }
    Ok(ReimageRequest {
        temp_disk,
        exact_version: text(&body["exactVersion"], "exactVersion")?,
        admin_password: text(
            &body["osProfile"]["adminPassword"],
            "osProfile.adminPassword",
        )?,
        custom_data: text(&body["osProfile"]["customData"], "osProfile.customData")?,
    })
}

/// Whether the VM body has an ephemeral (local, `diffDiskSettings.option: Local`) OS disk.
pub fn ephemeral(vm_body: &Value) -> bool {
    vm_body["properties"]["storageProfile"]["osDisk"]["diffDiskSettings"]["option"]
        .as_str()
        .is_some_and(|o| o.eq_ignore_ascii_case("Local"))
}

/// Refuses a reimage of `vm` Azure refuses.
pub fn check(vm: &Resource, request: &ReimageRequest) -> Result<(), ArmError> {
    let os = &vm.body["properties"]["storageProfile"]["osDisk"];
    let attached = os["createOption"]
        .as_str()
        .is_some_and(|c| c.eq_ignore_ascii_case("Attach"));
    if attached {
        return Err(ArmError::rejected(
            409,
            "OperationNotAllowed",
            format!(
                "The VM {} cannot be reimaged: its OS disk was attached, not created from an image.",
                vm.name()
            ),
        ));
    }
    if request.temp_disk && !ephemeral(&vm.body) {
        return Err(ArmError::invalid(
            "tempDisk",
            "The value of parameter tempDisk is invalid.",
        ));
    }
    let stored = vm.body["properties"]["osProfile"]["customData"].as_str();
    if let (Some(stored), Some(given)) = (stored, request.custom_data.as_deref())
        && stored != given
    {
        return Err(ArmError::rejected(
            400,
            "BadRequest",
            "Reimage requires the custom data provided should be same as the custom data provided while creating the Virtual Machine.",
        ));
    }
    Ok(())
}

/// Writes what the request gives into the VM body: the exact image version, the admin
/// password and custom data (write-only, as at create).
pub fn apply_request(vm: &mut Resource, request: &ReimageRequest) {
    if let Some(version) = &request.exact_version {
        let storage = obj_at(&mut vm.body["properties"], "storageProfile");
        let image = storage.entry("imageReference").or_insert_with(|| json!({}));
        if image.is_object() {
            image["exactVersion"] = json!(version);
        }
    }
    for (field, value) in [
        ("adminPassword", &request.admin_password),
        ("customData", &request.custom_data),
    ] {
        if let Some(value) = value {
            obj_at(&mut vm.body["properties"], "osProfile").insert(field.into(), json!(value));
        }
    }
}

/// At a reimage's completion: replaces the VM's non-ephemeral managed OS disk by a new one of
/// the same kind (a new name and id, `Attached`, managed by the VM) and deletes the old one when
/// its `deleteOption` is `Delete`, else leaves it detached (`Unattached`). An ephemeral OS disk
/// is reset in place: nothing to replace.
pub fn replace_os_disk(state: &mut State, vm_id: &str, now: DateTime<Utc>) {
    let Some(vm) = state.get(vm_id) else {
        return;
    };
    if ephemeral(&vm.body) {
        return;
    }
    let os = vm.body["properties"]["storageProfile"]["osDisk"].clone();
    let Some(old_id) = os["managedDisk"]["id"].as_str().map(str::to_owned) else {
        return;
    };
    let Some(old) = state.get(&old_id).cloned() else {
        return;
    };
    let name = format!("{}_OsDisk_1_{}", vm.name(), uuid::Uuid::new_v4().simple());
    let prefix = old_id
        .trim_end_matches('/')
        .rsplit_once('/')
        .map_or(String::new(), |(p, _)| p.to_owned());
    let new_id = format!("{prefix}/{name}");
    let mut disk = Resource::new(Kind::Disk, old.body.clone());
    disk.body["id"] = json!(new_id);
    disk.body["name"] = json!(name);
    disk.body["managedBy"] = json!(vm.id());
    let p = props(&mut disk.body);
    p.insert("diskState".into(), json!("Attached"));
    p.insert("provisioningState".into(), json!("Succeeded"));
    p.insert("timeCreated".into(), json!(timestamp(now)));
    p.insert("uniqueId".into(), json!(uuid::Uuid::new_v4().to_string()));
    disk.new_etag();
    let delete = os["deleteOption"]
        .as_str()
        .is_some_and(|d| d.eq_ignore_ascii_case("Delete"));
    if delete {
        state.resources.remove(&key(&old_id));
    } else {
        data_disks::release_disk(state, &old_id);
    }
    state.resources.insert(key(&new_id), disk);
    if let Some(vm) = state.get_mut(vm_id) {
        let storage = obj_at(&mut vm.body["properties"], "storageProfile");
        if let Some(os) = storage.get_mut("osDisk") {
            os["name"] = json!(name);
            os["managedDisk"]["id"] = json!(new_id);
        }
        vm.new_etag();
    }
    tracing::debug!(vm = name_of(vm_id), old = name_of(&old_id), new = %name, "os disk reimaged");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(os: Value) -> Resource {
        Resource::new(
            Kind::Vm,
            json!({"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/a", "name": "a",
                   "properties": {"storageProfile": {"osDisk": os}, "osProfile": {"customData": "Ym9vdA=="}}}),
        )
    }

    #[test]
    fn an_empty_body_is_a_plain_reimage_and_wrong_types_are_refused() {
        assert_eq!(parse(b""), Ok(ReimageRequest::default()));
        assert_eq!(parse(b"{}"), Ok(ReimageRequest::default()));
        let bad = parse(br#"{"tempDisk": "yes"}"#);
        assert!(
            matches!(bad, Err(ArmError::InvalidParameter { ref target, .. }) if target == "tempDisk"),
            "{bad:?}"
        );
        assert!(parse(b"[1]").is_err());
        let full = parse(br#"{"exactVersion": "1.2.3", "osProfile": {"adminPassword": "p", "customData": "Yg=="}}"#);
        assert_eq!(
            full,
            Ok(ReimageRequest {
                temp_disk: false,
                exact_version: Some("1.2.3".into()),
                admin_password: Some("p".into()),
                custom_data: Some("Yg==".into()),
            })
        );
    }

    #[test]
    fn azure_refuses_a_temp_disk_reimage_without_an_ephemeral_os_disk_and_other_custom_data() {
        let managed = vm(json!({"createOption": "FromImage"}));
        let temp = ReimageRequest {
            temp_disk: true,
            ..ReimageRequest::default()
        };
        assert_eq!(
            check(&managed, &temp).map_err(|e| e.code().to_owned()),
            Err("InvalidParameter".to_owned())
        );
        let local =
            vm(json!({"createOption": "FromImage", "diffDiskSettings": {"option": "Local"}}));
        assert!(check(&local, &temp).is_ok());
        let other = ReimageRequest {
            custom_data: Some("b3RoZXI=".into()),
            ..ReimageRequest::default()
        };
        assert_eq!(
            check(&managed, &other).map_err(|e| e.code().to_owned()),
            Err("BadRequest".to_owned())
        );
        let same = ReimageRequest {
            custom_data: Some("Ym9vdA==".into()),
            ..ReimageRequest::default()
        };
        assert!(check(&managed, &same).is_ok());
        let attached = vm(json!({"createOption": "Attach"}));
        assert_eq!(
            check(&attached, &ReimageRequest::default()).map_err(|e| e.code().to_owned()),
            Err("OperationNotAllowed".to_owned())
        );
    }
}
