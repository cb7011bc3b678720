//! The pure parts of the image version listings: where a gallery's versions are listed, and
//! what ARM's answers become.

use nodewright_model::image::{ListedVersion, pick_newest};

use super::gallery_path;
use super::listed::{GalleryVersion, MarketplaceVersion};

#[test]
fn a_compute_gallery_is_listed_under_its_id_and_shared_ones_under_the_location() {
    let own =
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/ubuntu";
    assert_eq!(gallery_path(own, "s", "westeurope"), own);
    assert_eq!(
        gallery_path("/SharedGalleries/abc-team/Images/ubuntu", "s", "westeurope"),
        "/subscriptions/s/providers/Microsoft.Compute/locations/westeurope/sharedGalleries/abc-team/Images/ubuntu"
    );
    assert_eq!(
        gallery_path("/CommunityGalleries/pub-1/Images/ubuntu", "s", "westeurope"),
        "/subscriptions/s/providers/Microsoft.Compute/locations/westeurope/communityGalleries/pub-1/Images/ubuntu"
    );
}

#[test]
fn gallery_versions_carry_what_makes_them_eligible() {
    let page = serde_json::json!([
        {"name": "1.0.9", "properties": {"provisioningState": "Succeeded",
            "publishingProfile": {"excludeFromLatest": false}}},
        {"name": "1.0.10", "properties": {"provisioningState": "Succeeded",
            "publishingProfile": {"endOfLifeDate": "2026-01-01T00:00:00+00:00"}}},
        {"name": "1.0.11", "properties": {"provisioningState": "Succeeded",
            "publishingProfile": {"excludeFromLatest": true}}},
        {"name": "1.0.12", "properties": {"provisioningState": "Creating",
            "publishingProfile": {}}},
    ]);
    let listed: Vec<GalleryVersion> =
        serde_json::from_value(page).unwrap_or_else(|e| panic!("{e}"));
    let listed: Vec<ListedVersion> = listed.into_iter().map(GalleryVersion::listed).collect();
    assert_eq!(listed[1].end_of_life, Some(1_767_225_600));
    assert!(listed[2].exclude_from_latest);
    // 2026-11-28: 1.0.10 is past its end of life, 1.0.11 excluded, 1.0.12 not provisioned.
    let newest = pick_newest(&listed, 1_795_824_000).map(|v| v.to_string());
    assert_eq!(newest.as_deref(), Some("1.0.9"));
}

#[test]
fn a_deprecated_marketplace_version_is_not_picked() {
    let page = serde_json::json!([
        {"name": "24.04.202410010", "location": "westeurope", "id": "x",
            "properties": {"imageDeprecationStatus": {"imageState": "Active"}}},
        {"name": "24.04.202411010", "location": "westeurope", "id": "y",
            "properties": {"imageDeprecationStatus": {"imageState": "Deprecated"}}},
        {"name": "24.04.202409010", "location": "westeurope", "id": "z"},
    ]);
    let listed: Vec<MarketplaceVersion> =
        serde_json::from_value(page).unwrap_or_else(|e| panic!("{e}"));
    let listed: Vec<ListedVersion> = listed.into_iter().map(MarketplaceVersion::listed).collect();
    let newest = pick_newest(&listed, 0).map(|v| v.to_string());
    assert_eq!(newest.as_deref(), Some("24.04.202410010"));
}

#[test]
fn a_version_is_usable_only_where_it_is_replicated() {
    let page = serde_json::json!([
        {"name": "1.0.0", "properties": {"publishingProfile": {"targetRegions": [{"name": "West Europe"}]}}},
        {"name": "2.0.0", "properties": {"publishingProfile": {"targetRegions": [{"name": "East US"}]}}},
        {"name": "3.0.0", "properties": {"publishingProfile": {}}},
    ]);
    let listed: Vec<GalleryVersion> =
        serde_json::from_value(page).unwrap_or_else(|e| panic!("{e}"));
    let here: Vec<bool> = listed
        .iter()
        .map(|v| v.replicated_to("westeurope"))
        .collect();
    assert_eq!(here, [true, false, true]);
}
