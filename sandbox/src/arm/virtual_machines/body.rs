//! VM bodies: building the stored envelope from a create or update request (OS disk, NICs, data
//! disks), rendering it with its instance view, and the deleteOption cascade.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::super::data_disks::{self, DiskPlan};
use super::super::error::ArmError;
use super::super::state::{
    Kind, Power, Reservation, Resource, State, key, name_of, obj_at, props, required_location,
    resource_id, stamp_envelope, timestamp,
};

/// What a VM request will change, validated but not yet applied.
pub struct VmChange {
    /// The new stored body.
    pub body: Value,
    /// Data disks attached and detached.
    pub disks: DiskPlan,
    /// NIC ids the VM now uses.
    pub nics: Vec<String>,
    /// NIC ids it no longer uses.
    pub released_nics: Vec<String>,
    /// A managed disk to create as the OS disk.
    pub os_disk: Option<Resource>,
    /// An existing disk attached as the OS disk.
    pub os_disk_attach: Option<String>,
}

/// Fields the server owns; a client's copy is ignored.
fn drop_server_fields(body: &mut Value) {
    if let Some(p) = body.get_mut("properties").and_then(Value::as_object_mut) {
        for field in ["provisioningState", "instanceView", "vmId", "timeCreated"] {
            p.remove(field);
        }
    }
    if let Some(obj) = body.as_object_mut() {
        for field in ["id", "name", "type", "etag", "resources"] {
            obj.remove(field);
        }
    }
}

/// Validates a create request and builds the VM.
pub fn create(
    state: &State,
    sub: &str,
    rg: &str,
    name: &str,
    mut req: Value,
    now: DateTime<Utc>,
) -> Result<VmChange, ArmError> {
    drop_server_fields(&mut req);
    let location = required_location(&req)?;
    if req["properties"]["hardwareProfile"]["vmSize"]
        .as_str()
        .is_none()
    {
        return Err(ArmError::invalid(
            "properties.hardwareProfile.vmSize",
            "The property 'vmSize' is required.",
        ));
    }
    let os_disk_name = req["properties"]["storageProfile"]["osDisk"]["name"]
        .as_str()
        .map_or_else(|| format!("{name}_OsDisk_1"), str::to_owned);
    super::refusals::check_create(&req, &os_disk_name)?;
    stamp_exact_version(state, &location, &mut req)?;
    let id = resource_id(sub, rg, Kind::Vm, name);
    stamp_envelope(&mut req, Kind::Vm, &id, name, &location);
    let p = props(&mut req);
    p.insert("vmId".into(), json!(uuid::Uuid::new_v4().to_string()));
    p.insert("timeCreated".into(), json!(timestamp(now)));
    p.insert("provisioningState".into(), json!("Creating"));

    let (os_disk, os_disk_attach) = os_disk(state, sub, rg, &id, name, &location, &mut req, now)?;
    let (nics, _) = nics(state, &id, &req, &Value::Null)?;
    let requested = data_disks::entries_of(&req);
    let disks = data_disks::plan(state, &id, &[], requested)?;
    obj_at(&mut req["properties"], "storageProfile")
        .insert("dataDisks".into(), json!(disks.entries));
    Ok(VmChange {
        body: req,
        disks,
        nics,
        released_nics: Vec::new(),
        os_disk,
        os_disk_attach,
    })
}

/// Resolves a create's `storageProfile.imageReference` (see `image_reference.rs`) and writes the
/// version it names as `exactVersion`; Azure's 404 when the image is not there.
fn stamp_exact_version(state: &State, location: &str, req: &mut Value) -> Result<(), ArmError> {
    let reference = &req["properties"]["storageProfile"]["imageReference"];
    if !reference.is_object() {
        return Ok(());
    }
    if let Some(version) = super::super::image_reference::resolve(state, location, reference)? {
        req["properties"]["storageProfile"]["imageReference"]["exactVersion"] = json!(version);
    }
    Ok(())
}

/// An update keeps the `exactVersion` the create resolved when the request's `imageReference`
/// does not carry it (a client sends back what it created the VM with).
fn keep_exact_version(old: &Value, body: &mut Value) {
    let exact = &old["properties"]["storageProfile"]["imageReference"]["exactVersion"];
    let reference = &mut body["properties"]["storageProfile"]["imageReference"];
    if exact.is_string() && reference.is_object() && reference.get("exactVersion").is_none() {
        reference["exactVersion"] = exact.clone();
    }
}

/// The body an update request asks for (`patch`: merged into the stored body; otherwise a full
/// PUT, keeping what a PUT cannot change), before validation and without a provisioning state
/// change.
pub fn merged(old: &Resource, mut req: Value, patch: bool) -> Result<Value, ArmError> {
    drop_server_fields(&mut req);
    let mut body = if patch {
        let mut body = old.body.clone();
        let explicit_disks = req["properties"]["storageProfile"]
            .get("dataDisks")
            .is_some();
        super::super::state::merge(&mut body, req);
        if !explicit_disks {
            let keep = data_disks::entries_of(&old.body);
            obj_at(&mut body["properties"], "storageProfile")
                .insert("dataDisks".into(), json!(keep));
        }
        body
    } else {
        if let Some(location) = req["location"].as_str()
            && !location.eq_ignore_ascii_case(old.location())
        {
            return Err(ArmError::rejected(
                409,
                "PropertyChangeNotAllowed",
                "Changing property 'location' is not allowed.",
            ));
        }
        carry_over(&old.body, &mut req);
        req
    };
    for field in ["id", "name", "type", "location"] {
        body[field] = old.body[field].clone();
    }
    keep_exact_version(&old.body, &mut body);
    let p = props(&mut body);
    for field in ["vmId", "timeCreated"] {
        if let Some(v) = old.body["properties"].get(field) {
            p.insert(field.into(), v.clone());
        }
    }
    Ok(body)
}

/// Whether `new` differs from `old` (VM bodies) in nothing but the data-disk list, the
/// provisioning state and the etag.
pub fn only_data_disks_differ(old: &Value, new: &Value) -> bool {
    let comparable = |body: &Value| {
        let mut body = body.clone();
        if let Some(obj) = body.as_object_mut() {
            obj.remove("etag");
        }
        if let Some(p) = body.get_mut("properties").and_then(Value::as_object_mut) {
            p.remove("provisioningState");
            if let Some(storage) = p.get_mut("storageProfile").and_then(Value::as_object_mut) {
                storage.remove("dataDisks");
            }
        }
        body
    };
    comparable(old) == comparable(new)
}

/// Validates an update (`patch`: merge into the stored body; otherwise a full PUT) and builds the
/// new body.
pub fn update(
    state: &State,
    old: &Resource,
    req: Value,
    patch: bool,
) -> Result<VmChange, ArmError> {
    let mut body = merged(old, req, patch)?;
    props(&mut body).insert("provisioningState".into(), json!("Updating"));
    let (nics, released_nics) = nics(state, old.id(), &body, &old.body)?;
    let requested = data_disks::entries_of(&body);
    let disks = data_disks::plan(
        state,
        old.id(),
        &data_disks::entries_of(&old.body),
        requested,
    )?;
    obj_at(&mut body["properties"], "storageProfile")
        .insert("dataDisks".into(), json!(disks.entries));
    Ok(VmChange {
        body,
        disks,
        nics,
        released_nics,
        os_disk: None,
        os_disk_attach: None,
    })
}

/// A full PUT keeps what the client did not send but cannot change: the OS disk's identity,
/// secrets (never returned by GET), sections left out, and the data disks when the key is absent.
fn carry_over(old: &Value, req: &mut Value) {
    let old_props = &old["properties"];
    let p = props(req);
    for section in [
        "hardwareProfile",
        "osProfile",
        "networkProfile",
        "storageProfile",
    ] {
        if !p.contains_key(section)
            && let Some(v) = old_props.get(section)
        {
            p.insert(section.into(), v.clone());
        }
    }
    for secret in ["customData", "adminPassword"] {
        if let Some(v) = old_props["osProfile"].get(secret)
            && req["properties"]
                .get("osProfile")
                .is_some_and(|o| o.get(secret).is_none())
        {
            obj_at(&mut req["properties"], "osProfile").insert(secret.into(), v.clone());
        }
    }
    let storage = obj_at(&mut req["properties"], "storageProfile");
    if !storage.contains_key("dataDisks") {
        storage.insert("dataDisks".into(), json!(data_disks::entries_of(old)));
    }
    let mut os = old_props["storageProfile"]["osDisk"].clone();
    if let Some(new_os) = storage.remove("osDisk") {
        super::super::state::merge(&mut os, new_os);
    }
    if !os.is_null() {
        storage.insert("osDisk".into(), os);
    }
}

/// The NICs a VM body uses: validated, plus those the old body used and the new one does not.
fn nics(
    state: &State,
    vm_id: &str,
    body: &Value,
    old: &Value,
) -> Result<(Vec<String>, Vec<String>), ArmError> {
    let ids = |b: &Value| -> Vec<String> {
        b["properties"]["networkProfile"]["networkInterfaces"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(|n| n["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let new = ids(body);
    for (i, id) in new.iter().enumerate() {
        let target = format!("properties.networkProfile.networkInterfaces[{i}].id");
        let nic = state
            .get(id)
            .filter(|r| r.kind == Kind::Nic)
            .ok_or_else(|| {
                ArmError::invalid(&target, format!("Network interface {id} does not exist."))
            })?;
        if let Some(user) = nic.body["properties"]["virtualMachine"]["id"].as_str()
            && key(user) != key(vm_id)
        {
            return Err(ArmError::invalid(
                &target,
                format!("Network interface {id} is in use by virtual machine {user}."),
            ));
        }
    }
    let released = ids(old)
        .into_iter()
        .filter(|o| !new.iter().any(|n| key(n) == key(o)))
        .collect();
    Ok((new, released))
}

/// The OS disk of a new VM: a managed disk created from the image, or an existing disk attached.
#[allow(clippy::too_many_arguments)]
fn os_disk(
    state: &State,
    sub: &str,
    rg: &str,
    vm_id: &str,
    vm_name: &str,
    location: &str,
    req: &mut Value,
    now: DateTime<Utc>,
) -> Result<(Option<Resource>, Option<String>), ArmError> {
    let zones = req.get("zones").cloned();
    let Some(os) = req["properties"]["storageProfile"]
        .get_mut("osDisk")
        .and_then(Value::as_object_mut)
    else {
        return Ok((None, None));
    };
    let create = os
        .get("createOption")
        .and_then(Value::as_str)
        .unwrap_or("FromImage")
        .to_owned();
    os.entry("deleteOption").or_insert_with(|| json!("Detach"));
    if create.eq_ignore_ascii_case("attach") {
        let id = os
            .get("managedDisk")
            .and_then(|m| m["id"].as_str())
            .ok_or_else(|| {
                ArmError::invalid(
                    "properties.storageProfile.osDisk.managedDisk.id",
                    "required with createOption Attach",
                )
            })?
            .to_owned();
        data_disks::check_attachable(state, vm_id, &id)?;
        return Ok((None, Some(id)));
    }
    let name = os
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("{vm_name}_OsDisk_1_{}", uuid::Uuid::new_v4().simple()));
    let disk_id = resource_id(sub, rg, Kind::Disk, &name);
    if state.get(&disk_id).is_some() {
        return Err(ArmError::rejected(
            409,
            "Conflict",
            format!(
                "Disk {name} already exists; an OS disk created from an image needs a new name."
            ),
        ));
    }
    let sku = os
        .get("managedDisk")
        .and_then(|m| m["storageAccountType"].as_str())
        .unwrap_or("Premium_LRS")
        .to_owned();
    let size = os.get("diskSizeGB").and_then(Value::as_u64).unwrap_or(30);
    os.insert("name".into(), json!(name));
    let managed = os.entry("managedDisk").or_insert_with(|| json!({}));
    managed["id"] = json!(disk_id);
    managed["storageAccountType"] = json!(sku);
    let mut body = json!({
        "id": disk_id,
        "name": name,
        "type": Kind::Disk.type_name(),
        "location": location,
        "tags": {},
        "managedBy": vm_id,
        "sku": {"name": sku},
        "properties": {
            "osType": "Linux",
            "creationData": {"createOption": "FromImage"},
            "diskSizeGB": size,
            "diskState": "Attached",
            "provisioningState": "Creating",
            "timeCreated": timestamp(now),
            "uniqueId": uuid::Uuid::new_v4().to_string(),
        },
    });
    if let Some(zones) = zones {
        body["zones"] = zones;
    }
    let mut disk = Resource::new(Kind::Disk, body);
    disk.new_etag();
    Ok((Some(disk), None))
}

/// Applies a validated change: stores the VM, creates or reserves disks, claims NICs.
pub fn apply(state: &mut State, vm: Resource, change: VmChange) {
    let vm_id = vm.id().to_owned();
    data_disks::commit(state, &vm_id, &change.disks);
    if let Some(disk) = change.os_disk {
        state.resources.insert(key(disk.id()), disk);
    }
    if let Some(id) = &change.os_disk_attach
        && let Some(disk) = state.get_mut(id)
    {
        disk.body["managedBy"] = json!(vm_id);
        props(&mut disk.body).insert("diskState".into(), json!("Attached"));
        disk.new_etag();
    }
    for id in &change.nics {
        if let Some(nic) = state.get_mut(id) {
            props(&mut nic.body).insert("virtualMachine".into(), json!({ "id": vm_id }));
            nic.reserved = None;
            nic.new_etag();
        }
    }
    for id in &change.released_nics {
        release_nic(state, id);
    }
    state.resources.insert(key(&vm_id), vm);
}

fn release_nic(state: &mut State, id: &str) {
    if let Some(nic) = state.get_mut(id) {
        props(&mut nic.body).remove("virtualMachine");
        nic.new_etag();
    }
}

/// The instance view of a VM, its statuses as Azure writes them ("VM states and billing"):
/// a transitional provisioning state (`ProvisioningState/creating|updating|deleting`) has the
/// display status `Creating`/`Updating`/`Deleting` and no time; a terminal one is `Provisioning
/// succeeded` (or `failed`, level `Error`, with the code and message of the failed operation,
/// or `canceled`) with the time the last operation ended; then the power state (`VM running`, …).
pub fn instance_view(vm: &Resource, now: DateTime<Utc>) -> Value {
    let provisioning = vm.provisioning_state().to_ascii_lowercase();
    let status = match provisioning.as_str() {
        "creating" | "updating" | "deleting" => {
            let display = match provisioning.as_str() {
                "creating" => "Creating",
                "updating" => "Updating",
                _ => "Deleting",
            };
            json!({
                "code": format!("ProvisioningState/{provisioning}"),
                "level": "Info",
                "displayStatus": display,
            })
        }
        _ => {
            let failed = provisioning == "failed";
            let code = match (&vm.last_error, failed) {
                (Some(code), true) => format!("ProvisioningState/failed/{code}"),
                _ => format!("ProvisioningState/{provisioning}"),
            };
            let time = vm
                .provisioned_at
                .or_else(|| {
                    vm.body["properties"]["timeCreated"]
                        .as_str()
                        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                        .map(|t| t.with_timezone(&Utc))
                })
                .unwrap_or(now);
            let mut status = json!({
                "code": code,
                "level": if failed { "Error" } else { "Info" },
                "displayStatus": format!("Provisioning {provisioning}"),
                "time": timestamp(time),
            });
            if failed && let Some(message) = &vm.last_error_message {
                status["message"] = json!(message);
            }
            status
        }
    };
    let power = vm.power_at(now).unwrap_or(Power::Running);
    let display_power = match power {
        Power::Starting => "VM starting",
        Power::Running => "VM running",
        Power::Stopping => "VM stopping",
        Power::Stopped => "VM stopped",
        Power::Deallocating => "VM deallocating",
        Power::Deallocated => "VM deallocated",
    };
    let mut view = Map::new();
    if let Some(name) = vm.body["properties"]["osProfile"]["computerName"].as_str() {
        view.insert("computerName".into(), json!(name));
    }
    view.insert(
        "statuses".into(),
        json!([
            status,
            {
                "code": format!("PowerState/{}", power.as_str()),
                "level": "Info",
                "displayStatus": display_power,
            },
        ]),
    );
    Value::Object(view)
}

/// The VM as GET returns it: secrets removed, the instance view added when asked for.
pub fn render(vm: &Resource, now: DateTime<Utc>, expand: bool) -> Value {
    let mut body = vm.body.clone();
    if let Some(os) = body["properties"]
        .get_mut("osProfile")
        .and_then(Value::as_object_mut)
    {
        os.remove("customData");
        os.remove("adminPassword");
    }
    if expand {
        props(&mut body).insert("instanceView".into(), instance_view(vm, now));
    }
    body
}

/// The ids of the NICs a VM body lists.
fn listed_nics(vm_body: &Value) -> Vec<String> {
    vm_body["properties"]["networkProfile"]["networkInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["id"].as_str().map(str::to_owned))
        .collect()
}

/// Whether the NIC `id` is used by the VM `vm_id` (`properties.virtualMachine.id`).
fn held_by(state: &State, id: &str, vm_id: &str) -> bool {
    state
        .get(id)
        .and_then(|n| n.body["properties"]["virtualMachine"]["id"].as_str())
        .is_some_and(|user| key(user) == key(vm_id))
}

/// Reserves the NIC `id` for the VM `vm_id` from `now`, unless another VM uses it.
fn reserve_nic(state: &mut State, id: &str, vm_id: &str, now: DateTime<Utc>) {
    let Some(nic) = state.get_mut(id).filter(|n| n.kind == Kind::Nic) else {
        return;
    };
    let other_user = nic.body["properties"]["virtualMachine"]["id"]
        .as_str()
        .is_some_and(|user| key(user) != key(vm_id));
    if !other_user {
        nic.reserved = Some(Reservation {
            vm: vm_id.to_owned(),
            since: now,
        });
    }
}

/// After a VM's create ended `Failed` or `Canceled`: the VM holds none of its NICs any more
/// (they lose `virtualMachine.id`, so deleting the VM does not cascade to them) and each is
/// reserved for the VM from `now`, as Azure holds the NICs of a failed create.
pub fn release_after_failed_create(state: &mut State, vm_body: &Value, now: DateTime<Utc>) {
    let vm_id = vm_body["id"].as_str().unwrap_or_default();
    for id in listed_nics(vm_body) {
        if held_by(state, &id, vm_id) {
            release_nic(state, &id);
        }
        reserve_nic(state, &id, vm_id, now);
    }
}

/// The VM a NIC is reserved for at `now` with a reservation window of `window`, when that is not
/// `vm_id`: a VM PUT naming the NIC for `vm_id` is then refused.
pub fn reserved_for_another(
    state: &State,
    nic_id: &str,
    vm_id: &str,
    now: DateTime<Utc>,
    window: chrono::Duration,
) -> Option<String> {
    state
        .get(nic_id)?
        .reserved
        .as_ref()
        .filter(|r| r.holds(now, window) && key(&r.vm) != key(vm_id))
        .map(|r| r.vm.clone())
}

/// After a VM is deleted (at `now`): deletes the NICs it held whose `deleteOption` is `Delete`
/// and the disks it held whose `deleteOption` is `Delete`, and detaches the others. Every NIC
/// it listed that is still there is reserved for it from `now`.
pub fn cascade_delete(state: &mut State, vm_body: &Value, now: DateTime<Utc>) {
    let p = &vm_body["properties"];
    let vm_id = vm_body["id"].as_str().unwrap_or_default();
    let delete = |v: &Value| v.as_str().is_some_and(|d| d.eq_ignore_ascii_case("delete"));
    for nic in p["networkProfile"]["networkInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(id) = nic["id"].as_str() else {
            continue;
        };
        let held = held_by(state, id, vm_id);
        if held && (delete(&nic["properties"]["deleteOption"]) || delete(&nic["deleteOption"])) {
            state.resources.remove(&key(id));
            continue;
        }
        if held {
            release_nic(state, id);
        }
        reserve_nic(state, id, vm_id, now);
    }
    let os = &p["storageProfile"]["osDisk"];
    let data = p["storageProfile"]["dataDisks"]
        .as_array()
        .into_iter()
        .flatten();
    for disk in std::iter::once(os).chain(data) {
        let Some(id) = disk["managedDisk"]["id"].as_str() else {
            continue;
        };
        let owned = state
            .get(id)
            .and_then(|d| d.body["managedBy"].as_str())
            .is_some_and(|m| key(m) == key(vm_body["id"].as_str().unwrap_or_default()));
        if !owned {
            continue;
        }
        if delete(&disk["deleteOption"]) {
            state.resources.remove(&key(id));
        } else {
            data_disks::release_disk(state, id);
        }
    }
    tracing::debug!(
        vm = name_of(vm_body["id"].as_str().unwrap_or_default()),
        "vm deleted"
    );
}
