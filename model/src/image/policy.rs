//! `spec.imageUpdate` and the decision on a newer image version.

use serde::{Deserialize, Serialize};

use super::version::ImageVersion;
use crate::maintenance::WindowState;

/// What nodewright does when a newer eligible version of the pool's image appears.
///
/// The default is `notify`: a pool file written before image updates existed, or by someone who
/// did not think about them, must not start replacing every machine on its own; `notify` still
/// says in the status and an Event that a newer version exists, so nothing goes unnoticed, and
/// `auto` is one word away.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageUpdatePolicy {
    /// Roll to the newer version, inside the maintenance windows.
    Auto,
    /// Report the newer version (status, Event); change nothing.
    #[default]
    Notify,
    /// Neither roll nor report.
    Pinned,
}

/// `spec.imageUpdate` checked: the policy and how often the versions are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageUpdate {
    /// What a newer version does.
    #[serde(default)]
    pub policy: ImageUpdatePolicy,
    /// How often the versions are listed.
    #[serde(default = "default_check_interval")]
    pub check_interval: std::time::Duration,
}

/// How often a pool controller lists its image's versions unless `checkInterval` says.
pub const DEFAULT_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3600);

fn default_check_interval() -> std::time::Duration {
    DEFAULT_CHECK_INTERVAL
}

impl Default for ImageUpdate {
    fn default() -> Self {
        Self {
            policy: ImageUpdatePolicy::default(),
            check_interval: DEFAULT_CHECK_INTERVAL,
        }
    }
}

impl ImageUpdate {
    /// Whether this is the default (left out of inputs, as before it existed).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// [`check_interval`](Self::check_interval) in whole seconds (at least one).
    pub fn check_secs(&self) -> i64 {
        i64::try_from(self.check_interval.as_secs())
            .unwrap_or(i64::MAX)
            .max(1)
    }
}

impl std::fmt::Display for ImageUpdatePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Notify => "notify",
            Self::Pinned => "pinned",
        })
    }
}

/// What to do about the pool's image version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageAction {
    /// Nothing: no newer version, or the image is pinned.
    Nothing,
    /// Say that `newer` exists.
    Notify {
        /// The newest eligible version.
        newer: ImageVersion,
    },
    /// Make a new template revision at `to` and roll it out now.
    Roll {
        /// The version to roll to.
        to: ImageVersion,
    },
    /// Roll to `to` once the maintenance window opens at `opens_at` (Unix seconds; `None` when
    /// no opening is in sight).
    WaitForWindow {
        /// The version to roll to.
        to: ImageVersion,
        /// When the next window opens.
        opens_at: Option<i64>,
    },
}

/// Decides on the pool's image: `current` is the version its template runs, `newest` the
/// newest eligible one found (`None` when the look found none), `pinned_by_operator` whether
/// `nodewright pool image pin` holds it, `window` the state of the windows gating automatic
/// rollouts (`None` when no window is set: nothing waits).
pub fn image_update(
    current: &ImageVersion,
    newest: Option<&ImageVersion>,
    policy: ImageUpdatePolicy,
    pinned_by_operator: bool,
    window: Option<&WindowState>,
) -> ImageAction {
    let Some(newer) = newest.filter(|newest| *newest > current) else {
        return ImageAction::Nothing;
    };
    if pinned_by_operator {
        return ImageAction::Nothing;
    }
    match policy {
        ImageUpdatePolicy::Pinned => ImageAction::Nothing,
        ImageUpdatePolicy::Notify => ImageAction::Notify {
            newer: newer.clone(),
        },
        ImageUpdatePolicy::Auto => match window {
            None | Some(WindowState::Open { .. }) => ImageAction::Roll { to: newer.clone() },
            Some(WindowState::Closed { opens_at }) => ImageAction::WaitForWindow {
                to: newer.clone(),
                opens_at: *opens_at,
            },
        },
    }
}
