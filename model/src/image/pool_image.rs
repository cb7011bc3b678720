//! What a pool controller keeps of its pool's image: the version its template runs (resolved
//! once from `latest`, then moved only by an update, a rollback or a different image named),
//! the newest version the last check found, the operator's pin, the Event already recorded,
//! and what `pool status` and `pool image` show of it.

use serde::{Deserialize, Serialize};

use super::history::ImageHistory;
use super::policy::{ImageAction, ImageUpdate, ImageUpdatePolicy, image_update};
use super::source::VersionLookup;
use super::version::ImageVersion;
use crate::maintenance::WindowState;

/// The pool's image versions as the controller holds them; carried across continue-as-new.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolImage {
    /// Where the versions are listed (the image the pool file names).
    pub lookup: VersionLookup,
    /// The version the pool's template runs and the ones before it.
    pub history: ImageHistory,
    /// The newest eligible version the last check found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<ImageVersion>,
    /// When the versions were last listed, Unix seconds.
    pub checked_at: i64,
    /// `nodewright pool image pin`, or a rollback to an earlier version: no update until
    /// `pool image unpin`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// The newer version an Event was recorded for (one Event per version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notified: Option<ImageVersion>,
    /// The version `imageUpdate: auto` moved to: the rollout to it is an automatic one, gated
    /// by the maintenance windows like one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_to: Option<ImageVersion>,
}

impl PoolImage {
    /// The image first resolved to `version` at `now`.
    pub fn resolved(lookup: VersionLookup, version: ImageVersion, now: i64) -> Self {
        Self {
            lookup,
            history: ImageHistory::new(version.clone()),
            newest: Some(version),
            checked_at: now,
            pinned: false,
            notified: None,
            updated_to: None,
        }
    }

    /// The version the pool's template runs.
    pub fn current(&self) -> &ImageVersion {
        &self.history.current
    }

    /// Whether the versions are due to be listed again at `now`.
    pub fn check_due(&self, update: &ImageUpdate, now: i64) -> bool {
        now >= self.next_check(update)
    }

    /// When the versions are listed next, Unix seconds.
    pub fn next_check(&self, update: &ImageUpdate) -> i64 {
        self.checked_at.saturating_add(update.check_secs())
    }

    /// Books a check at `now` that found `newest`.
    pub fn checked(&mut self, newest: Option<ImageVersion>, now: i64) {
        self.newest = newest;
        self.checked_at = now;
    }

    /// What to do about a newer version under `update`'s policy, the pin and `window` (the
    /// state of the windows gating automatic rollouts; `None`: none gates them).
    pub fn action(&self, update: &ImageUpdate, window: Option<&WindowState>) -> ImageAction {
        image_update(
            self.current(),
            self.newest.as_ref(),
            update.policy,
            self.pinned,
            window,
        )
    }

    /// Moves the template to `to` because `imageUpdate: auto` found it.
    pub fn update_to(&mut self, to: ImageVersion) {
        self.history.advance(to.clone());
        self.updated_to = Some(to);
    }

    /// Moves the template back to `to` (a rollback), pinned there: the update that moved it
    /// forward must not come again by itself.
    pub fn roll_back_to(&mut self, to: ImageVersion) {
        self.history.advance(to);
        self.updated_to = None;
        self.pinned = true;
    }

    /// Whether the current version is the one `imageUpdate: auto` moved to.
    pub fn automatic(&self) -> bool {
        self.updated_to.as_ref() == Some(self.current())
    }

    /// What `pool status` and `pool image` show; `message` says what is going on.
    pub fn status(&self, update: &ImageUpdate, message: String) -> ImageStatus {
        ImageStatus {
            image: self.lookup.to_string(),
            current: self.current().to_string(),
            newest: self.newest.as_ref().map(ToString::to_string),
            previous: self
                .history
                .previous
                .iter()
                .map(ToString::to_string)
                .collect(),
            policy: update.policy,
            pinned: self.pinned,
            checked_at: self.checked_at,
            next_check_at: self.next_check(update),
            message,
        }
    }
}

/// The image part of a pool's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// The image whose versions are followed, in words.
    pub image: String,
    /// The version the pool's template runs.
    pub current: String,
    /// The newest eligible version the last check found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<String>,
    /// The versions before the current one, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous: Vec<String>,
    /// `spec.imageUpdate.policy`.
    pub policy: ImageUpdatePolicy,
    /// Pinned by `pool image pin` or a rollback.
    #[serde(default)]
    pub pinned: bool,
    /// When the versions were last listed, Unix seconds.
    pub checked_at: i64,
    /// When they are listed next, Unix seconds.
    pub next_check_at: i64,
    /// What is going on, for people.
    pub message: String,
}

/// The image state to keep for a pool whose image is listed at `lookup`: `held` when it
/// follows the same image, else none (a different image named is resolved afresh).
pub fn for_lookup(held: Option<PoolImage>, lookup: &VersionLookup) -> Option<PoolImage> {
    held.filter(|image| image.lookup == *lookup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::DEFAULT_CHECK_INTERVAL;

    fn v(text: &str) -> ImageVersion {
        ImageVersion::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn lookup(name: &str) -> VersionLookup {
        VersionLookup::Gallery {
            image_id: format!(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/{name}"
            ),
        }
    }

    fn update(policy: ImageUpdatePolicy) -> ImageUpdate {
        ImageUpdate {
            policy,
            check_interval: DEFAULT_CHECK_INTERVAL,
        }
    }

    #[test]
    fn a_resolved_image_is_checked_again_after_the_interval() {
        let image = PoolImage::resolved(lookup("node"), v("1.0.0"), 1_000);
        let hourly = update(ImageUpdatePolicy::Auto);
        assert_eq!(image.current(), &v("1.0.0"));
        assert!(!image.check_due(&hourly, 1_000 + 3_599));
        assert!(image.check_due(&hourly, 1_000 + 3_600));
        assert_eq!(image.action(&hourly, None), ImageAction::Nothing);
    }

    #[test]
    fn an_update_is_automatic_until_a_rollback_pins_the_version_before() {
        let mut image = PoolImage::resolved(lookup("node"), v("1.0.0"), 0);
        let auto = update(ImageUpdatePolicy::Auto);
        image.checked(Some(v("1.0.1")), 10);
        assert_eq!(
            image.action(&auto, None),
            ImageAction::Roll { to: v("1.0.1") }
        );
        image.update_to(v("1.0.1"));
        assert!(image.automatic());
        assert_eq!(image.history.previous, [v("1.0.0")]);
        assert_eq!(image.action(&auto, None), ImageAction::Nothing);

        image.checked(Some(v("1.0.2")), 20);
        image.roll_back_to(v("1.0.0"));
        assert!(image.pinned && !image.automatic());
        assert_eq!(image.current(), &v("1.0.0"));
        assert_eq!(image.history.previous, [v("1.0.1")]);
        // Pinned: the newer versions wait for `pool image unpin`.
        assert_eq!(image.action(&auto, None), ImageAction::Nothing);
        image.pinned = false;
        assert_eq!(
            image.action(&auto, None),
            ImageAction::Roll { to: v("1.0.2") }
        );
    }

    #[test]
    fn the_status_shows_the_versions_and_the_next_check() {
        let mut image = PoolImage::resolved(lookup("node"), v("1.0.0"), 100);
        image.update_to(v("1.0.1"));
        let shown = image.status(&update(ImageUpdatePolicy::Notify), "words".to_owned());
        assert_eq!(shown.current, "1.0.1");
        assert_eq!(shown.previous, ["1.0.0"]);
        assert_eq!(shown.next_check_at, 3_700);
        assert_eq!(shown.policy, ImageUpdatePolicy::Notify);
        assert!(shown.image.starts_with("gallery image /subscriptions/"));
    }

    #[test]
    fn a_different_image_named_starts_afresh() {
        let held = PoolImage::resolved(lookup("node"), v("1.0.0"), 0);
        assert!(for_lookup(Some(held.clone()), &lookup("node")).is_some());
        assert!(for_lookup(Some(held), &lookup("other")).is_none());
        assert!(for_lookup(None, &lookup("node")).is_none());
    }
}
