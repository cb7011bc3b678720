//! The pool's `CapacityAvailable` condition: what the last headroom check before a batch of
//! creates found ([`CapacityView`], from [`crate::headroom::Cut`]) and the condition it shows
//! ([`capacity_condition`]).
//!
//! | status | reason | when |
//! |---|---|---|
//! | `True` | `NotChecked` | no batch of creates was checked yet (or the check could not be read) |
//! | `True` | `Fits` | the last batch fit whole |
//! | `True` | `SubnetFull`, `QuotaExhausted`, `SizeRestricted` | the last batch was cut to part of it |
//! | `False` | `SubnetFull`, `QuotaExhausted`, `SizeRestricted` | no machine fit: creates wait |

use serde::{Deserialize, Serialize};

use super::status::Condition;
use crate::headroom::{Cut, Limit};

/// The condition's type.
pub const CAPACITY_AVAILABLE: &str = "CapacityAvailable";

/// What the last headroom check found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum CapacityView {
    /// No batch checked yet.
    #[default]
    NotChecked,
    /// The last batch fit whole.
    Fits,
    /// The last batch was cut: `started` of `wanted` machines.
    Cut {
        /// Machines started.
        started: u32,
        /// Machines wanted.
        wanted: u32,
        /// The limit.
        limit: Limit,
    },
    /// No machine fit: creates wait.
    Full {
        /// Machines wanted.
        wanted: u32,
        /// The limit.
        limit: Limit,
    },
}

impl CapacityView {
    /// What `cut` of a batch of `wanted` machines shows.
    pub fn of(wanted: u32, cut: &Cut) -> Self {
        match &cut.limit {
            None => Self::Fits,
            Some(limit) if cut.machines == 0 => Self::Full {
                wanted,
                limit: limit.clone(),
            },
            Some(limit) => Self::Cut {
                started: cut.machines,
                wanted,
                limit: limit.clone(),
            },
        }
    }

    /// `(status, reason, message)` of the condition.
    fn shown(&self) -> (&'static str, &'static str, String) {
        match self {
            Self::NotChecked => (
                "True",
                "NotChecked",
                "no batch of creates checked yet".to_owned(),
            ),
            Self::Fits => (
                "True",
                "Fits",
                "the last batch of creates fit the subnet and the vCPU quotas".to_owned(),
            ),
            Self::Cut {
                started,
                wanted,
                limit,
            } => (
                "True",
                limit.reason(),
                format!(
                    "the last batch started {started} of {wanted} machines: {}",
                    limit.message()
                ),
            ),
            Self::Full { wanted, limit } => (
                "False",
                limit.reason(),
                format!(
                    "{}; {wanted} new machines wait until room returns",
                    limit.message()
                ),
            ),
        }
    }
}

/// The `CapacityAvailable` condition for `view`, keeping the `lastTransitionTime` of the one in
/// `previous` when its status did not change.
pub fn capacity_condition(
    previous: &[Condition],
    view: &CapacityView,
    now_rfc3339: &str,
) -> Condition {
    let (status, reason, message) = view.shown();
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == CAPACITY_AVAILABLE && c.status == status)
        .map_or_else(
            || now_rfc3339.to_owned(),
            |c| c.last_transition_time.clone(),
        );
    Condition {
        type_: CAPACITY_AVAILABLE.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        last_transition_time,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EARLIER: &str = "2026-11-28T08:00:00Z";
    const NOW: &str = "2026-11-28T09:00:00Z";

    fn subnet_limit(free: u64, needed: u64) -> Limit {
        Limit::Subnet {
            name: "workers".to_owned(),
            free,
            needed,
        }
    }

    fn cut(machines: u32, limit: Option<Limit>) -> Cut {
        Cut {
            machines,
            zones: Vec::new(),
            skipped: Vec::new(),
            limit,
        }
    }

    #[test]
    fn each_check_shows_its_condition() {
        let table = [
            (
                CapacityView::NotChecked,
                "True",
                "NotChecked",
                "no batch of creates checked yet",
            ),
            (
                CapacityView::of(3, &cut(3, None)),
                "True",
                "Fits",
                "the last batch of creates fit the subnet and the vCPU quotas",
            ),
            (
                CapacityView::of(3, &cut(2, Some(subnet_limit(2, 3)))),
                "True",
                "SubnetFull",
                "the last batch started 2 of 3 machines: subnet workers: 2 free addresses, 3 needed",
            ),
            (
                CapacityView::of(3, &cut(0, Some(subnet_limit(0, 3)))),
                "False",
                "SubnetFull",
                "subnet workers: 0 free addresses, 3 needed; 3 new machines wait until room returns",
            ),
        ];
        for (view, status, reason, message) in table {
            let condition = capacity_condition(&[], &view, NOW);
            assert_eq!(condition.type_, "CapacityAvailable");
            assert_eq!(
                (
                    condition.status.as_str(),
                    condition.reason.as_str(),
                    condition.message.as_str()
                ),
                (status, reason, message)
            );
        }
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let full = CapacityView::of(3, &cut(0, Some(subnet_limit(0, 3))));
        let before = capacity_condition(&[], &full, EARLIER);
        let still = capacity_condition(
            std::slice::from_ref(&before),
            &CapacityView::of(2, &cut(0, Some(subnet_limit(0, 2)))),
            NOW,
        );
        assert_eq!(still.last_transition_time, EARLIER);
        let fits = capacity_condition(&[still], &CapacityView::Fits, NOW);
        assert_eq!(
            (fits.status.as_str(), fits.last_transition_time.as_str()),
            ("True", NOW)
        );
    }
}
