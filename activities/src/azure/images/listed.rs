//! The versions as ARM answers them, made into `model::image::ListedVersion`s.

use chrono::DateTime;
use nodewright_model::image::ListedVersion;
use serde::Deserialize;

/// A Compute Gallery image version as listed.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GalleryVersion {
    #[serde(default)]
    name: String,
    #[serde(default)]
    properties: GalleryVersionProperties,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GalleryVersionProperties {
    #[serde(default)]
    publishing_profile: PublishingProfile,
    #[serde(default)]
    provisioning_state: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PublishingProfile {
    #[serde(default)]
    exclude_from_latest: bool,
    #[serde(default)]
    end_of_life_date: Option<String>,
    #[serde(default)]
    target_regions: Vec<TargetRegion>,
}

#[derive(Debug, Default, Deserialize)]
struct TargetRegion {
    #[serde(default)]
    name: String,
}

/// A region's name as ARM compares it: `East US` and `eastus` are one.
fn region_key(name: &str) -> String {
    name.chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect()
}

impl GalleryVersion {
    /// Whether the version is replicated to `location`: a VM there can be made from it only
    /// then (a version listing no target regions is taken to be everywhere it is listed).
    pub fn replicated_to(&self, location: &str) -> bool {
        let regions = &self.properties.publishing_profile.target_regions;
        let wanted = region_key(location);
        regions.is_empty() || regions.iter().any(|r| region_key(&r.name) == wanted)
    }

    /// The version as the model reads it; an end-of-life date that does not parse counts as
    /// none (the version stays eligible, as Azure's own `latest` treats it).
    pub fn listed(self) -> ListedVersion {
        let end_of_life = self
            .properties
            .publishing_profile
            .end_of_life_date
            .as_deref()
            .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
            .map(|at| at.timestamp());
        ListedVersion {
            name: self.name,
            exclude_from_latest: self.properties.publishing_profile.exclude_from_latest,
            end_of_life,
            provisioning_state: self.properties.provisioning_state,
            image_state: None,
        }
    }
}

/// A marketplace image version as listed with `$expand=properties`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarketplaceVersion {
    #[serde(default)]
    name: String,
    #[serde(default)]
    properties: MarketplaceProperties,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MarketplaceProperties {
    #[serde(default)]
    image_deprecation_status: Option<DeprecationStatus>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeprecationStatus {
    #[serde(default)]
    image_state: Option<String>,
}

impl MarketplaceVersion {
    /// The version as the model reads it.
    pub fn listed(self) -> ListedVersion {
        ListedVersion {
            name: self.name,
            image_state: self
                .properties
                .image_deprecation_status
                .and_then(|status| status.image_state),
            ..ListedVersion::default()
        }
    }
}
