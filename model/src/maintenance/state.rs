//! Whether the maintenance windows are open at an instant, and that answer in words.

use super::local::utc_words;

/// The maintenance windows at one instant. Instants are Unix seconds, as everywhere in `model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    /// A window is open. `closes_at` is when no window is open any more (overlapping and
    /// touching windows count as one); `None` when the windows stay open past what one look
    /// searches (`MaintenanceWindows::state_at` says how far): look again later.
    Open {
        /// The first instant at which no window is open.
        closes_at: Option<i64>,
    },
    /// No window is open. `opens_at` is the next opening; `None` when none comes within the
    /// look-ahead (eight years).
    Closed {
        /// The next instant at which a window opens.
        opens_at: Option<i64>,
    },
}

impl WindowState {
    /// Whether a window is open.
    pub fn is_open(&self) -> bool {
        matches!(self, Self::Open { .. })
    }

    /// The state for the pool's status: `open until 2026-11-30 06:00 UTC`,
    /// `closed; opens 2026-11-30 02:00 UTC`.
    pub fn words(&self) -> String {
        match self {
            Self::Open {
                closes_at: Some(closes_at),
            } => {
                format!("open until {}", utc_words(*closes_at))
            }
            Self::Open { closes_at: None } => {
                "open, with no close found in the schedule's next week".to_owned()
            }
            Self::Closed {
                opens_at: Some(opens_at),
            } => {
                format!("closed; opens {}", utc_words(*opens_at))
            }
            Self::Closed { opens_at: None } => {
                "closed; the schedule opens no window in the next eight years".to_owned()
            }
        }
    }
}
