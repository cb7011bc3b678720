//! The versions a pool's image went through: the current one and the previous ones, newest
//! first, for `nodewright pool image NAME` and a rollback to the previous version.

use serde::{Deserialize, Serialize};

use super::version::ImageVersion;
use crate::limits::MAX_IMAGE_HISTORY;

/// The pool's image versions: the current one and at most [`MAX_IMAGE_HISTORY`] before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageHistory {
    /// The version the pool's template runs.
    pub current: ImageVersion,
    /// The versions before it, newest first, each once, never the current one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous: Vec<ImageVersion>,
}

impl ImageHistory {
    /// A history that starts at `current`.
    pub fn new(current: ImageVersion) -> Self {
        Self {
            current,
            previous: Vec::new(),
        }
    }

    /// Moves to `to` (an update or a rollback): the current version becomes the newest previous
    /// one, `to` leaves the previous ones, and the oldest beyond [`MAX_IMAGE_HISTORY`] are
    /// dropped. Moving to the current version changes nothing.
    pub fn advance(&mut self, to: ImageVersion) {
        if to == self.current {
            return;
        }
        let old = std::mem::replace(&mut self.current, to);
        self.previous
            .retain(|version| *version != self.current && *version != old);
        self.previous.insert(0, old);
        self.previous.truncate(MAX_IMAGE_HISTORY);
    }

    /// The version a rollback goes back to: the one before the current.
    pub fn previous(&self) -> Option<&ImageVersion> {
        self.previous.first()
    }
}
