//! The checked maintenance windows of a pool and the one question asked of them: are they open
//! now, and until when (or from when)?

use super::spec::ApplyTo;
use super::state::WindowState;
use super::window::MaintenanceWindow;

/// How far past `now` the search for the close of overlapping windows goes, in seconds: a week
/// and a day, longer than any single window ([`crate::limits::MAX_MAINTENANCE_WINDOW`]).
const CLOSE_LOOK_AHEAD_SECS: i64 = 8 * 24 * 3600;

/// How many openings the search for the close of overlapping windows follows, at most: each
/// round moves the close to the end of the last opening before it.
const MAX_CLOSE_ROUNDS: usize = 256;

/// A pool's checked `spec.maintenance`: what the windows gate and when they are open.
#[derive(Debug, Clone, PartialEq)]
pub struct MaintenanceWindows {
    pub(super) apply_to: ApplyTo,
    pub(super) windows: Vec<MaintenanceWindow>,
}

impl MaintenanceWindows {
    /// What the windows gate.
    pub fn apply_to(&self) -> ApplyTo {
        self.apply_to
    }

    /// The windows, in the order of the file.
    pub fn windows(&self) -> &[MaintenanceWindow] {
        &self.windows
    }

    /// Whether no window is set: then nothing is gated and [`Self::state_at`] is always open.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// The windows at `now` (Unix seconds).
    ///
    /// Open: `closes_at` is when the union of the open windows ends, or `None` when it goes on
    /// past a week and a day from `now` (or past 256 consecutive openings), and always `None`
    /// when no window is set. Closed: the next opening of any window within eight years.
    ///
    /// Every search is bounded: at most eight years of days for the next opening, a week and a
    /// few hours of days per window for the last one.
    pub fn state_at(&self, now: i64) -> WindowState {
        if self.windows.is_empty() {
            return WindowState::Open { closes_at: None };
        }
        let mut covered_until: Option<i64> = None;
        let mut cursor = now;
        for _ in 0..MAX_CLOSE_ROUNDS {
            let reach = self
                .windows
                .iter()
                .filter_map(|window| window.open_until(cursor))
                .max();
            match reach {
                Some(end) if end > cursor => {
                    covered_until = Some(end);
                    cursor = end;
                    if end.saturating_sub(now) > CLOSE_LOOK_AHEAD_SECS {
                        return WindowState::Open { closes_at: None };
                    }
                }
                _ => {
                    return match covered_until {
                        Some(closes_at) => WindowState::Open {
                            closes_at: Some(closes_at),
                        },
                        None => WindowState::Closed {
                            opens_at: self
                                .windows
                                .iter()
                                .filter_map(|window| window.first_opening_from(now))
                                .min(),
                        },
                    };
                }
            }
        }
        WindowState::Open { closes_at: None }
    }
}
