//! Gallery, image definition and image version bodies: what a create or update must hold (in
//! Azure's words), what the server writes into them, and how GET renders them.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::super::error::ArmError;
use super::super::state::{Kind, props, timestamp};

/// The name the errors give the request body of each kind (ARM's parameter names).
fn parameter(kind: Kind) -> &'static str {
    match kind {
        Kind::GalleryImage => "galleryImage",
        Kind::GalleryImageVersion => "galleryImageVersion",
        _ => "gallery",
    }
}

/// Server-owned fields a client's copy of is ignored.
pub fn drop_server_fields(request: &mut Value) {
    if let Some(obj) = request.as_object_mut() {
        for field in ["id", "name", "type", "etag"] {
            obj.remove(field);
        }
    }
    if let Some(p) = request.get_mut("properties").and_then(Value::as_object_mut) {
        p.remove("provisioningState");
        p.remove("replicationStatus");
        if let Some(identifier) = p.get_mut("identifier").and_then(Value::as_object_mut) {
            identifier.remove("uniqueName");
        }
        if let Some(profile) = p
            .get_mut("publishingProfile")
            .and_then(Value::as_object_mut)
        {
            profile.remove("publishedDate");
        }
    }
}

fn missing(kind: Kind, field: &str) -> ArmError {
    let target = format!("{}.{field}", parameter(kind));
    ArmError::invalid(
        &target,
        format!("Required parameter '{target}' is missing (null)."),
    )
}

/// Refuses an image version name that is not `Major.Minor.Patch` with 32-bit numbers, in Azure's
/// words.
pub fn check_version_name(name: &str) -> Result<(), ArmError> {
    let parts: Vec<&str> = name.split('.').collect();
    let valid = parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) && p.parse::<i32>().is_ok()
        });
    if valid {
        return Ok(());
    }
    Err(ArmError::invalid(
        "galleryImageVersionName",
        "The image version name is invalid. The image version name should follow Major(int).Minor(int).Patch(int) format, for e.g: 1.0.0, 2018.12.1 etc.",
    ))
}

/// Checks what a create of `kind` must hold.
pub fn check_create(kind: Kind, request: &Value) -> Result<(), ArmError> {
    let p = &request["properties"];
    match kind {
        Kind::GalleryImage => {
            one_of(kind, p, "osType", &["Windows", "Linux"])?;
            one_of(kind, p, "osState", &["Generalized", "Specialized"])?;
            for field in ["publisher", "offer", "sku"] {
                if p["identifier"][field].as_str().is_none_or(str::is_empty) {
                    return Err(missing(kind, &format!("properties.identifier.{field}")));
                }
            }
            if p.get("hyperVGeneration").is_some() {
                one_of(kind, p, "hyperVGeneration", &["V1", "V2"])?;
            }
            Ok(())
        }
        Kind::GalleryImageVersion => {
            if !p["storageProfile"].is_object() {
                return Err(missing(kind, "properties.storageProfile"));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Refuses `properties.field` missing or not one of `allowed` (compared case-insensitively).
fn one_of(kind: Kind, p: &Value, field: &str, allowed: &[&str]) -> Result<(), ArmError> {
    let Some(value) = p[field].as_str() else {
        return Err(missing(kind, &format!("properties.{field}")));
    };
    if allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
        return Ok(());
    }
    let target = format!("{}.properties.{field}", parameter(kind));
    Err(ArmError::invalid(
        &target,
        format!(
            "The value '{value}' of parameter '{target}' is not allowed. Allowed values are '{}'.",
            allowed.join("', '")
        ),
    ))
}

/// Refuses an update of an image definition that changes what cannot change once created.
pub fn check_update(kind: Kind, old: &Value, new: &Value) -> Result<(), ArmError> {
    let immutable: &[&str] = match kind {
        Kind::GalleryImage => &["osType", "osState", "identifier", "hyperVGeneration"],
        Kind::GalleryImageVersion => &["storageProfile"],
        _ => &[],
    };
    for field in immutable {
        let (before, after) = (&old["properties"][field], &new["properties"][field]);
        let same = match (before, after) {
            (Value::String(a), Value::String(b)) => a.eq_ignore_ascii_case(b),
            (Value::Object(_), Value::Object(_)) => {
                before.as_object().into_iter().flatten().all(|(k, v)| {
                    after.get(k).is_none_or(|w| w == v)
                        || k == "osDiskImage"
                        || k == "dataDiskImages"
                })
            }
            (a, b) => a == b || b.is_null(),
        };
        if !same {
            let target = format!("{}.properties.{field}", parameter(kind));
            return Err(ArmError::rejected_at(
                409,
                "PropertyChangeNotAllowed",
                &target,
                format!("Changing property '{target}' is not allowed."),
            ));
        }
    }
    Ok(())
}

/// Writes what the server owns into a created body of `kind` named `name` in subscription
/// `sub`, at `now`.
pub fn stamp_created(kind: Kind, body: &mut Value, sub: &str, name: &str, now: DateTime<Utc>) {
    let location = body["location"].as_str().unwrap_or_default().to_owned();
    let p = props(body);
    match kind {
        Kind::Gallery => {
            let identifier = p.entry("identifier").or_insert_with(|| json!({}));
            identifier["uniqueName"] = json!(format!("{sub}-{}", name.to_ascii_uppercase()));
        }
        Kind::GalleryImage => {
            p.entry("hyperVGeneration").or_insert_with(|| json!("V1"));
            p.entry("architecture").or_insert_with(|| json!("x64"));
        }
        Kind::GalleryImageVersion => {
            let profile = p.entry("publishingProfile").or_insert_with(|| json!({}));
            profile["publishedDate"] = json!(timestamp(now));
        }
        _ => {}
    }
    if kind == Kind::GalleryImageVersion {
        fill_version_defaults(body, &location);
    }
}

/// Azure's defaults of an image version: replica count 1, `Standard_LRS`, not excluded from
/// latest, one target region (its own) when none is given, each target region's count and
/// storage type, and the OS disk image's size and caching.
pub fn fill_version_defaults(body: &mut Value, location: &str) {
    let p = props(body);
    let profile = p.entry("publishingProfile").or_insert_with(|| json!({}));
    if !profile.is_object() {
        *profile = json!({});
    }
    let replicas = profile["replicaCount"].as_u64().unwrap_or(1);
    let storage = profile["storageAccountType"]
        .as_str()
        .unwrap_or("Standard_LRS")
        .to_owned();
    let excluded = profile["excludeFromLatest"].as_bool().unwrap_or(false);
    profile["replicaCount"] = json!(replicas);
    profile["storageAccountType"] = json!(storage);
    profile["excludeFromLatest"] = json!(excluded);
    if profile["targetRegions"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        profile["targetRegions"] = json!([{"name": location}]);
    }
    if let Some(regions) = profile["targetRegions"].as_array_mut() {
        for region in regions.iter_mut().filter(|r| r.is_object()) {
            if region.get("regionalReplicaCount").is_none() {
                region["regionalReplicaCount"] = json!(replicas);
            }
            if region.get("storageAccountType").is_none() {
                region["storageAccountType"] = json!(storage);
            }
            if region.get("excludeFromLatest").is_none() {
                region["excludeFromLatest"] = json!(false);
            }
        }
    }
    let storage_profile = p.entry("storageProfile").or_insert_with(|| json!({}));
    if storage_profile.is_object() && storage_profile.get("osDiskImage").is_none() {
        storage_profile["osDiskImage"] = json!({"sizeInGB": 30, "hostCaching": "ReadOnly"});
    }
}

/// The body as GET returns it; an image version with `$expand=ReplicationStatus` also gets its
/// `replicationStatus` (every target region complete once the version succeeded).
pub fn render(kind: Kind, body: &Value, replication: bool) -> Value {
    let mut body = body.clone();
    if kind == Kind::GalleryImageVersion && replication {
        let done = body["properties"]["provisioningState"] == "Succeeded";
        let (state, progress) = if done {
            ("Completed", 100)
        } else {
            ("Replicating", 0)
        };
        let summary: Vec<Value> = body["properties"]["publishingProfile"]["targetRegions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| json!({"region": r["name"], "state": state, "progress": progress}))
            .collect();
        props(&mut body).insert(
            "replicationStatus".into(),
            json!({"aggregatedState": if done { "Completed" } else { "InProgress" }, "summary": summary}),
        );
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_names_are_three_int32_numbers() {
        for valid in ["1.0.0", "2018.12.1", "0.0.2147483647"] {
            assert_eq!(check_version_name(valid), Ok(()), "{valid}");
        }
        for invalid in [
            "1.0",
            "1.0.0.0",
            "a.b.c",
            "1.0.2147483648",
            "1..0",
            "latest",
        ] {
            let refused = check_version_name(invalid).map_err(|e| e.code().to_owned());
            assert_eq!(refused, Err("InvalidParameter".to_owned()), "{invalid}");
        }
    }

    #[test]
    fn an_image_definition_needs_os_type_state_and_identifier() {
        let full = json!({"properties": {"osType": "Linux", "osState": "Generalized",
            "identifier": {"publisher": "p", "offer": "o", "sku": "s"}}});
        assert_eq!(check_create(Kind::GalleryImage, &full), Ok(()));
        let mut no_sku = full.clone();
        no_sku["properties"]["identifier"]["sku"] = Value::Null;
        let refused = check_create(Kind::GalleryImage, &no_sku).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "Required parameter 'galleryImage.properties.identifier.sku' is missing (null)."
        );
        let mut bad_state = full;
        bad_state["properties"]["osState"] = json!("Frozen");
        assert!(check_create(Kind::GalleryImage, &bad_state).is_err());
    }

    #[test]
    fn a_version_gets_its_own_region_as_target_and_azures_defaults() {
        let mut body = json!({"location": "westeurope", "properties": {"storageProfile": {"source": {"id": "x"}}}});
        stamp_created(
            Kind::GalleryImageVersion,
            &mut body,
            "s",
            "1.0.0",
            Utc::now(),
        );
        let profile = &body["properties"]["publishingProfile"];
        assert_eq!(profile["targetRegions"][0]["name"], "westeurope");
        assert_eq!(profile["targetRegions"][0]["regionalReplicaCount"], 1);
        assert_eq!(profile["excludeFromLatest"], false);
        assert!(profile["publishedDate"].is_string());
    }
}
