//! The versions an activity lists for an image, and the pick of the newest one that may be
//! used.

use serde::{Deserialize, Serialize};

use super::version::ImageVersion;
use crate::limits::MAX_IMAGE_VERSIONS;

/// One listed version of an image, as the listing activity hands it over: a gallery image
/// version (`publishingProfile`, `provisioningState`) or a marketplace version
/// (`imageDeprecationStatus`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedVersion {
    /// The version's name, e.g. `1.0.12`.
    pub name: String,
    /// Galleries: `publishingProfile.excludeFromLatest`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclude_from_latest: bool,
    /// Galleries: `publishingProfile.endOfLifeDate`, in Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_of_life: Option<i64>,
    /// Galleries: `provisioningState`; only `Succeeded` is usable. Absent for marketplace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Marketplace: `imageDeprecationStatus.imageState` (`Active`, `ScheduledForDeprecation`,
    /// `Deprecated`); `Deprecated` is not picked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_state: Option<String>,
}

impl ListedVersion {
    /// The version, when it may be picked as latest at `now` (Unix seconds): a well-formed
    /// name, not excluded from latest, not past its end of life, provisioned (when the state is
    /// known) and not deprecated.
    pub fn eligible_at(&self, now: i64) -> Option<ImageVersion> {
        let provisioned = self
            .provisioning_state
            .as_deref()
            .is_none_or(|state| state.eq_ignore_ascii_case("Succeeded"));
        let deprecated = self
            .image_state
            .as_deref()
            .is_some_and(|state| state.eq_ignore_ascii_case("Deprecated"));
        let ended = self.end_of_life.is_some_and(|end| end <= now);
        if self.exclude_from_latest || ended || !provisioned || deprecated {
            return None;
        }
        ImageVersion::parse(&self.name).ok()
    }
}

/// The highest version of `versions` that [`ListedVersion::eligible_at`] `now`, looking at the
/// first [`MAX_IMAGE_VERSIONS`] only; malformed names are skipped.
pub fn pick_newest(versions: &[ListedVersion], now: i64) -> Option<ImageVersion> {
    versions
        .iter()
        .take(MAX_IMAGE_VERSIONS)
        .filter_map(|version| version.eligible_at(now))
        .max()
}
