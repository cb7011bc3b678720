//! Which image version a VM is created from: a VM create's `storageProfile.imageReference`
//! resolved as Azure resolves it, to the version its `exactVersion` names.
//!
//! - A marketplace image (`publisher`, `offer`, `sku`, `version`): `latest` is the newest version
//!   of the catalog offered in the VM's region; a version or an image the catalog does not hold
//!   is 404 `PlatformImageNotFound`, target `imageReference`.
//! - A gallery image by `id`: the image definition's id (no `/versions/`) or `…/versions/latest`
//!   is the newest version that succeeded, is replicated to the VM's region and is not excluded
//!   from latest (`publishingProfile.excludeFromLatest`, or its target region's); a version past
//!   its `endOfLifeDate` still counts, as in Azure, where the date is informational. A pinned
//!   version must exist, have succeeded and be replicated to the region. Otherwise 404
//!   `GalleryImageNotFound`, target `imageReference`.
//! - Any other reference (a managed image, a shared or community gallery image) is accepted as it
//!   is and gets no `exactVersion`: those are not emulated.

use serde_json::Value;

use super::error::ArmError;
use super::state::images::{compare_versions, region};
use super::state::{Kind, Resource, State, key};

/// The version a VM created in `location` from `reference` (its `imageReference`) gets, `None`
/// when the reference is not one the emulator resolves; Azure's 404 when the image is not there.
pub fn resolve(
    state: &State,
    location: &str,
    reference: &Value,
) -> Result<Option<String>, ArmError> {
    if let Some(id) = reference["id"].as_str() {
        return resolve_gallery(state, location, id);
    }
    let field = |name: &str| reference[name].as_str().unwrap_or_default();
    let (publisher, offer, sku) = (field("publisher"), field("offer"), field("sku"));
    if publisher.is_empty() && offer.is_empty() && sku.is_empty() {
        return Ok(None);
    }
    let version = match field("version") {
        "" => "latest",
        version => version,
    };
    state
        .images
        .find(location, publisher, offer, sku, version)
        .map(|image| Some(image.version.clone()))
        .ok_or_else(|| {
            ArmError::rejected_at(
                404,
                "PlatformImageNotFound",
                "imageReference",
                format!(
                    "The platform image '{publisher}:{offer}:{sku}:{version}' is not available. Verify that all fields in the storage profile are correct. For more details about storage profile information, please refer to https://aka.ms/storageprofile"
                ),
            )
        })
}

/// A gallery image reference by id; other ids are not resolved.
fn resolve_gallery(state: &State, location: &str, id: &str) -> Result<Option<String>, ArmError> {
    let lower = key(id);
    if !lower.contains("/providers/microsoft.compute/galleries/") || !lower.contains("/images/") {
        return Ok(None);
    }
    let (definition, version) = match lower.find("/versions/") {
        Some(at) => (&id[..at], Some(&id[at + "/versions/".len()..])),
        None => (id.trim_end_matches('/'), None),
    };
    let not_found = || {
        // Azure's message carries the quotes.
        ArmError::rejected_at(
            404,
            "GalleryImageNotFound",
            "imageReference",
            format!(
                "\"The gallery image {id} is not available in {location} region. Please contact image owner to replicate to this region, or change your requested region.\""
            ),
        )
    };
    let usable =
        |v: &&Resource| v.provisioning_state() == "Succeeded" && replicated_to(v, location);
    match version.filter(|v| !v.eq_ignore_ascii_case("latest")) {
        Some(pinned) => state
            .get(&format!("{definition}/versions/{pinned}"))
            .filter(|v| v.kind == Kind::GalleryImageVersion)
            .filter(usable)
            .map(|v| Some(v.name().to_owned()))
            .ok_or_else(not_found),
        None => versions_of(state, definition)
            .filter(usable)
            .filter(|v| !excluded_from_latest(v, location))
            .max_by(|a, b| compare_versions(a.name(), b.name()))
            .map(|v| Some(v.name().to_owned()))
            .ok_or_else(not_found),
    }
}

/// The versions of the image definition `definition` (its id).
pub fn versions_of<'a>(state: &'a State, definition: &str) -> impl Iterator<Item = &'a Resource> {
    let prefix = format!("{}/versions/", key(definition));
    state
        .resources
        .range(prefix.clone()..)
        .take_while(move |(k, _)| k.starts_with(&prefix))
        .map(|(_, r)| r)
        .filter(|r| r.kind == Kind::GalleryImageVersion)
}

/// Whether the version has a replica in `location` (its target regions; without any, the
/// version's own region).
fn replicated_to(version: &Resource, location: &str) -> bool {
    let wanted = region(location);
    match version.body["properties"]["publishingProfile"]["targetRegions"].as_array() {
        Some(regions) if !regions.is_empty() => regions
            .iter()
            .any(|r| r["name"].as_str().is_some_and(|n| region(n) == wanted)),
        _ => region(version.location()) == wanted,
    }
}

/// Whether `latest` skips the version in `location`: its publishing profile, or its target
/// region there, sets `excludeFromLatest`.
fn excluded_from_latest(version: &Resource, location: &str) -> bool {
    let profile = &version.body["properties"]["publishingProfile"];
    let wanted = region(location);
    profile["excludeFromLatest"].as_bool() == Some(true)
        || profile["targetRegions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| {
                r["name"].as_str().is_some_and(|n| region(n) == wanted)
                    && r["excludeFromLatest"].as_bool() == Some(true)
            })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::state::images::default_catalog;
    use super::*;

    const DEFINITION: &str =
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/node";

    fn with_versions(versions: &[(&str, Value)]) -> State {
        let mut state = State::default();
        for (name, profile) in versions {
            let id = format!("{DEFINITION}/versions/{name}");
            let body = json!({"id": id, "name": name, "location": "westeurope",
                "properties": {"provisioningState": "Succeeded", "publishingProfile": profile}});
            state
                .resources
                .insert(key(&id), Resource::new(Kind::GalleryImageVersion, body));
        }
        state
    }

    fn check(state: &State, reference: Value, expected: Result<Option<&str>, &str>) {
        let got = resolve(state, "westeurope", &reference);
        match expected {
            Ok(version) => assert_eq!(got, Ok(version.map(str::to_owned)), "{reference}"),
            Err(code) => assert_eq!(
                got.map_err(|e| e.code().to_owned()),
                Err(code.to_owned()),
                "{reference}"
            ),
        }
    }

    #[test]
    fn gallery_latest_skips_excluded_versions_but_not_end_of_life_ones() {
        let state = with_versions(&[
            ("1.2.0", json!({})),
            ("1.10.0", json!({"endOfLifeDate": "2000-01-01T00:00:00Z"})),
            ("2.0.0", json!({"excludeFromLatest": true})),
            (
                "3.0.0",
                json!({"targetRegions": [{"name": "West Europe", "excludeFromLatest": true}]}),
            ),
            ("4.0.0", json!({"targetRegions": [{"name": "East US"}]})),
        ]);
        check(&state, json!({"id": DEFINITION}), Ok(Some("1.10.0")));
        check(
            &state,
            json!({"id": format!("{DEFINITION}/versions/latest")}),
            Ok(Some("1.10.0")),
        );
        check(
            &state,
            json!({"id": format!("{DEFINITION}/versions/2.0.0")}),
            Ok(Some("2.0.0")),
        );
        // Not replicated to westeurope.
        check(
            &state,
            json!({"id": format!("{DEFINITION}/versions/4.0.0")}),
            Err("GalleryImageNotFound"),
        );
        check(
            &state,
            json!({"id": format!("{DEFINITION}/versions/9.9.9")}),
            Err("GalleryImageNotFound"),
        );
        check(
            &with_versions(&[]),
            json!({"id": DEFINITION}),
            Err("GalleryImageNotFound"),
        );
    }

    #[test]
    fn marketplace_latest_is_the_newest_and_unknown_images_are_not_found() {
        let mut state = State::default();
        default_catalog().into_iter().for_each(|i| {
            state.images.publish(i);
        });
        let image = |version: &str| json!({"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": version});
        check(&state, image("latest"), Ok(Some("24.04.202505150")));
        check(
            &state,
            image("24.04.202409120"),
            Ok(Some("24.04.202409120")),
        );
        check(&state, image("24.04.9"), Err("PlatformImageNotFound"));
        check(
            &state,
            json!({"publisher": "Nobody", "offer": "o", "sku": "s", "version": "latest"}),
            Err("PlatformImageNotFound"),
        );
        // Not emulated: accepted as they are.
        check(
            &state,
            json!({"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/images/custom"}),
            Ok(None),
        );
        check(
            &state,
            json!({"sharedGalleryImageId": "/SharedGalleries/x/Images/y/Versions/latest"}),
            Ok(None),
        );
    }
}
