//! The marketplace image catalog: every platform image version the emulator offers, by
//! publisher, offer, SKU and version (served by `images.rs`, resolved for a VM's
//! `imageReference` by `image_reference.rs`, persisted with the rest of the state). It starts as
//! [`default_catalog`] plus the configuration's `[[images]]`; `PUT /sandbox/images/...` publishes
//! more while the emulator runs.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

/// One platform image version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarketplaceImage {
    /// Publisher, e.g. `Canonical`.
    pub publisher: String,
    /// Offer, e.g. `ubuntu-24_04-lts`.
    pub offer: String,
    /// SKU, e.g. `server`.
    pub sku: String,
    /// Version, dotted numbers, e.g. `24.04.202411030`.
    pub version: String,
    /// The one region it is offered in (lower case, no spaces); `None`: every region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// `Linux` or `Windows`.
    pub os_type: String,
    /// `V1` or `V2`.
    pub hyper_v_generation: String,
    /// `x64` or `Arm64`.
    pub architecture: String,
}

impl MarketplaceImage {
    /// Whether it is offered in `location` (any spelling: `West Europe`, `westeurope`).
    pub fn offered_in(&self, location: &str) -> bool {
        self.location
            .as_deref()
            .is_none_or(|own| region(own) == region(location))
    }

    /// Whether it is the image `publisher:offer:sku` (names compare case-insensitively).
    pub fn is(&self, publisher: &str, offer: &str, sku: &str) -> bool {
        self.publisher.eq_ignore_ascii_case(publisher)
            && self.offer.eq_ignore_ascii_case(offer)
            && self.sku.eq_ignore_ascii_case(sku)
    }

    /// Whether it is the same publisher, offer, SKU, version and region as `other`.
    fn same_slot(&self, other: &Self) -> bool {
        self.is(&other.publisher, &other.offer, &other.sku)
            && self.version.eq_ignore_ascii_case(&other.version)
            && self.location.as_deref().map(region) == other.location.as_deref().map(region)
    }
}

/// A `[[images]]` entry of the configuration: versions of one platform image to offer besides
/// [`default_catalog`].
///
/// ```toml
/// [[images]]
/// publisher = "Canonical"
/// offer = "ubuntu-24_04-lts"
/// sku = "server"
/// versions = ["24.04.202411030"]
/// # location = "westeurope"        # only there; every region when absent
/// # os_type = "Linux"               # Linux | Windows
/// # hyper_v_generation = "V2"       # V1 | V2
/// # architecture = "x64"            # x64 | Arm64
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageConfig {
    /// Publisher.
    pub publisher: String,
    /// Offer.
    pub offer: String,
    /// SKU.
    pub sku: String,
    /// The versions offered (dotted numbers).
    pub versions: Vec<String>,
    /// The one region offering them; every region when absent.
    #[serde(default)]
    pub location: Option<String>,
    /// `Linux` (default) or `Windows`.
    #[serde(default = "linux")]
    pub os_type: String,
    /// `V2` (default) or `V1`.
    #[serde(default = "generation_2")]
    pub hyper_v_generation: String,
    /// `x64` (default) or `Arm64`.
    #[serde(default = "x64")]
    pub architecture: String,
}

fn linux() -> String {
    "Linux".into()
}

fn generation_2() -> String {
    "V2".into()
}

fn x64() -> String {
    "x64".into()
}

impl ImageConfig {
    /// The image versions this entry offers.
    pub fn images(&self) -> Vec<MarketplaceImage> {
        self.versions
            .iter()
            .map(|version| MarketplaceImage {
                publisher: self.publisher.clone(),
                offer: self.offer.clone(),
                sku: self.sku.clone(),
                version: version.clone(),
                location: self.location.clone(),
                os_type: self.os_type.clone(),
                hyper_v_generation: self.hyper_v_generation.clone(),
                architecture: self.architecture.clone(),
            })
            .collect()
    }

    /// Why the entry is refused, if it is: a name empty, no version, a version that is not dotted
    /// numbers, or a value outside the lists above.
    pub fn problem(&self) -> Option<String> {
        for (field, value) in [
            ("publisher", &self.publisher),
            ("offer", &self.offer),
            ("sku", &self.sku),
        ] {
            if value.trim().is_empty() || value.contains('/') {
                return Some(format!("{field} must be a name (not empty, no '/')"));
            }
        }
        if self.versions.is_empty() {
            return Some("versions must list at least one version".into());
        }
        if let Some(bad) = self.versions.iter().find(|v| !is_version(v)) {
            return Some(format!(
                "version '{bad}' is not dotted numbers (e.g. 24.04.202411030)"
            ));
        }
        check_properties(&self.os_type, &self.hyper_v_generation, &self.architecture)
    }
}

/// Why an image's OS type, generation or architecture is refused, if it is.
pub fn check_properties(os_type: &str, generation: &str, architecture: &str) -> Option<String> {
    let allowed = |value: &str, list: &[&str]| list.iter().any(|a| a.eq_ignore_ascii_case(value));
    if !allowed(os_type, &["Linux", "Windows"]) {
        return Some(format!("os_type '{os_type}' must be Linux or Windows"));
    }
    if !allowed(generation, &["V1", "V2"]) {
        return Some(format!(
            "hyper_v_generation '{generation}' must be V1 or V2"
        ));
    }
    if !allowed(architecture, &["x64", "Arm64"]) {
        return Some(format!(
            "architecture '{architecture}' must be x64 or Arm64"
        ));
    }
    None
}

/// The marketplace catalog.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    /// Every image version, in the order published.
    pub images: Vec<MarketplaceImage>,
}

impl Catalog {
    /// Publishes `image`, replacing the one in the same slot; true when it is new.
    pub fn publish(&mut self, image: MarketplaceImage) -> bool {
        match self.images.iter_mut().find(|i| i.same_slot(&image)) {
            Some(existing) => {
                *existing = image;
                false
            }
            None => {
                self.images.push(image);
                true
            }
        }
    }

    /// Removes the version `publisher:offer:sku:version` (every region's); true when there was
    /// one.
    pub fn withdraw(&mut self, publisher: &str, offer: &str, sku: &str, version: &str) -> bool {
        let before = self.images.len();
        self.images
            .retain(|i| !(i.is(publisher, offer, sku) && i.version.eq_ignore_ascii_case(version)));
        before != self.images.len()
    }

    /// The versions of `publisher:offer:sku` offered in `location`, oldest first.
    pub fn versions(
        &self,
        location: &str,
        publisher: &str,
        offer: &str,
        sku: &str,
    ) -> Vec<&MarketplaceImage> {
        let mut found: Vec<&MarketplaceImage> = self
            .images
            .iter()
            .filter(|i| i.offered_in(location) && i.is(publisher, offer, sku))
            .collect();
        found.sort_by(|a, b| compare_versions(&a.version, &b.version));
        found.dedup_by(|a, b| a.version.eq_ignore_ascii_case(&b.version));
        found
    }

    /// The version `version` of `publisher:offer:sku` in `location`; `latest` is the newest.
    pub fn find(
        &self,
        location: &str,
        publisher: &str,
        offer: &str,
        sku: &str,
        version: &str,
    ) -> Option<&MarketplaceImage> {
        let versions = self.versions(location, publisher, offer, sku);
        if version.eq_ignore_ascii_case("latest") {
            return versions.last().copied();
        }
        versions
            .into_iter()
            .find(|i| i.version.eq_ignore_ascii_case(version))
    }
}

/// A region's name as ARM compares it: lower case without spaces (`West Europe` = `westeurope`).
pub fn region(name: &str) -> String {
    name.chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Orders dotted versions by their numbers (`1.10.0` after `1.9.0`); parts that are not numbers
/// compare as text.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let parts = |v: &str| -> Vec<(u64, String)> {
        v.split('.')
            .map(|p| (p.parse::<u64>().unwrap_or(u64::MAX), p.to_ascii_lowercase()))
            .collect()
    };
    parts(a).cmp(&parts(b))
}

/// Whether `version` is dotted numbers (`24.04.202411030`), as platform image versions are.
pub fn is_version(version: &str) -> bool {
    !version.is_empty()
        && version
            .split('.')
            .all(|p| !p.is_empty() && p.len() <= 18 && p.chars().all(|c| c.is_ascii_digit()))
}

/// The images every emulator offers: those nodewright's tests, examples and the SDK harness
/// create VMs from (Canonical's Ubuntu 24.04 `server`, `latest` or the versions their rollouts
/// pin), with a few versions each so that `latest` has something to choose between, and their
/// Arm64 and generation-1 SKUs.
pub fn default_catalog() -> Vec<MarketplaceImage> {
    let image =
        |offer: &str, sku: &str, version: &str, generation: &str, arch: &str| MarketplaceImage {
            publisher: "Canonical".into(),
            offer: offer.into(),
            sku: sku.into(),
            version: version.into(),
            location: None,
            os_type: "Linux".into(),
            hyper_v_generation: generation.into(),
            architecture: arch.into(),
        };
    let mut images = Vec::new();
    // Real-looking versions, and the short ones nodewright's end-to-end tests pin (a rollout from
    // 24.04.1 to 24.04.2 is their usual template change); `latest` is the newest of all.
    for version in [
        "24.04.1",
        "24.04.2",
        "24.04.3",
        "24.04.202409120",
        "24.04.202501140",
        "24.04.202505150",
    ] {
        images.push(image("ubuntu-24_04-lts", "server", version, "V2", "x64"));
        images.push(image(
            "ubuntu-24_04-lts",
            "server-gen1",
            version,
            "V1",
            "x64",
        ));
        images.push(image(
            "ubuntu-24_04-lts",
            "server-arm64",
            version,
            "V2",
            "Arm64",
        ));
    }
    for version in ["22.04.202409110", "22.04.202505140"] {
        images.push(image(
            "0001-com-ubuntu-server-jammy",
            "22_04-lts-gen2",
            version,
            "V2",
            "x64",
        ));
    }
    images
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        Catalog {
            images: default_catalog(),
        }
    }

    #[test]
    fn latest_is_the_highest_version_by_number_not_by_text() {
        let mut catalog = catalog();
        let mut newer = catalog.images[0].clone();
        newer.version = "24.04.1000000000".into();
        assert!(catalog.publish(newer));
        let latest = catalog
            .find(
                "westeurope",
                "canonical",
                "UBUNTU-24_04-LTS",
                "server",
                "latest",
            )
            .map(|i| i.version.as_str());
        assert_eq!(latest, Some("24.04.1000000000"));
        assert_eq!(
            compare_versions("1.10.0", "1.9.0"),
            Ordering::Greater,
            "numbers, not text"
        );
    }

    #[test]
    fn an_image_of_one_region_is_not_offered_elsewhere_and_republishing_replaces() {
        let mut catalog = Catalog::default();
        let mut image = default_catalog().remove(0);
        image.location = Some("West Europe".into());
        assert!(catalog.publish(image.clone()));
        assert!(!catalog.publish(image), "same slot: replaced");
        assert_eq!(catalog.images.len(), 1);
        let found = |catalog: &Catalog, location: &str| {
            catalog
                .find(
                    location,
                    "Canonical",
                    "ubuntu-24_04-lts",
                    "server",
                    "latest",
                )
                .is_some()
        };
        assert!(found(&catalog, "westeurope"));
        assert!(!found(&catalog, "eastus"));
        assert!(catalog.withdraw("canonical", "ubuntu-24_04-lts", "server", "24.04.1"));
        assert!(!found(&catalog, "westeurope"));
    }

    #[test]
    fn versions_are_dotted_numbers() {
        assert!(is_version("24.04.202411030"));
        assert!(is_version("1"));
        for refused in ["", "latest", "1..2", "1.a", "1.2."] {
            assert!(!is_version(refused), "{refused}");
        }
    }
}
