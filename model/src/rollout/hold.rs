//! Machines a rollout leaves alone for now because they carry do-not-disrupt marks
//! ([`crate::disruption`]): replacing an outdated machine or removing a surplus one is voluntary,
//! so a marked Node, or a marked active pod on it, holds that machine. Deleting an unhealthy
//! machine is not: it goes ahead, and the rollout names the marks it went past.
//!
//! # Rules
//! - A hold lasts [`HOLD_RECHECK_SECS`]; then the machine may be chosen again, and is checked
//!   again before anything is done to it. A machine held again keeps the time it was first held.
//! - The planner skips held machines when it picks victims ([`crate::rollout::PlanInput::held`]);
//!   when nothing else can be done because of them, the plan's holdup says so.
//! - Held machines still count as outdated: the rollout does not complete while one is left.
//! - A machine whose delete failed before it was cordoned (it is left Idle) is held the same way
//!   until its retry's back-off has passed ([`crate::rollout::retry::backoff_holds`]), so the
//!   planner does not pick it again at every look; such a hold is marked `after_failed_delete`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::disruption::Disruption;
use crate::rollout::plan::DeleteReason;

/// Seconds a do-not-disrupt hold lasts before the machine is looked at again.
pub const HOLD_RECHECK_SECS: i64 = 30;

/// A machine the rollout leaves alone for now, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldMachine {
    /// The machine.
    pub machine: String,
    /// The marks that hold it, for people (`pod shop/db-0 (karpenter.sh/do-not-disrupt)`).
    pub reason: String,
    /// Since when it is held, Unix seconds.
    pub since: i64,
    /// When it may be chosen again, Unix seconds.
    pub recheck_at: i64,
    /// Held for the back-off after a delete of it failed, not for do-not-disrupt marks.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_failed_delete: bool,
}

/// The kind of disruption a rollout's deletion is: replacing an outdated machine and removing a
/// surplus one are voluntary; an unhealthy machine is gone or broken.
pub fn disruption_of(reason: DeleteReason) -> Disruption {
    match reason {
        DeleteReason::Outdated => Disruption::RolloutReplacement,
        DeleteReason::Surplus => Disruption::ScaleDown,
        DeleteReason::Unhealthy => Disruption::MachineGone,
    }
}

/// The machines held at `now`.
pub fn held_now(held: &[HeldMachine], now: i64) -> BTreeSet<String> {
    held.iter()
        .filter(|hold| hold.recheck_at > now)
        .map(|hold| hold.machine.clone())
        .collect()
}

/// Records that `machine` is held at `now` for `reason` (what [`describe`] says of its marks): a
/// new entry, or the existing one renewed
/// (its `since` kept). Expired entries of other machines are dropped; the list stays sorted by
/// machine (it names machines of the pool only, so the pool's size bounds it).
pub fn hold(held: &mut Vec<HeldMachine>, machine: &str, reason: String, now: i64) {
    put(
        held,
        machine,
        reason,
        now,
        now.saturating_add(HOLD_RECHECK_SECS),
        false,
    );
}

/// Records that `machine`, whose delete failed, is held at `now` until `until` (its retry's
/// due time), for `reason`; as [`hold`] otherwise.
pub fn hold_after_failed_delete(
    held: &mut Vec<HeldMachine>,
    machine: &str,
    reason: String,
    now: i64,
    until: i64,
) {
    put(held, machine, reason, now, until, true);
}

fn put(
    held: &mut Vec<HeldMachine>,
    machine: &str,
    reason: String,
    now: i64,
    recheck_at: i64,
    after_failed_delete: bool,
) {
    let since = held
        .iter()
        .find(|hold| hold.machine == machine)
        .map_or(now, |hold| hold.since);
    held.retain(|hold| hold.machine != machine && hold.recheck_at > now);
    held.push(HeldMachine {
        machine: machine.to_owned(),
        reason,
        since,
        recheck_at,
        after_failed_delete,
    });
    held.sort_by(|a, b| a.machine.cmp(&b.machine));
}

/// Forgets `machine`'s hold (its marks are gone, or it is being deleted).
pub fn release(held: &mut Vec<HeldMachine>, machine: &str) {
    held.retain(|hold| hold.machine != machine);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disruption::{DoNotDisrupt, Marked, describe};

    fn marks(pod: &str) -> String {
        describe(&[DoNotDisrupt {
            marked: Marked::Pod {
                namespace: "shop".to_owned(),
                name: pod.to_owned(),
            },
            annotation: "karpenter.sh/do-not-disrupt".to_owned(),
        }])
    }

    #[test]
    fn only_voluntary_deletions_are_held() {
        for (reason, voluntary) in [
            (DeleteReason::Outdated, true),
            (DeleteReason::Surplus, true),
            (DeleteReason::Unhealthy, false),
        ] {
            assert_eq!(disruption_of(reason).is_voluntary(), voluntary, "{reason}");
        }
    }

    #[test]
    fn a_hold_lasts_its_recheck_and_keeps_its_first_time() {
        let mut held = Vec::new();
        hold(&mut held, "pool-b", marks("db-0"), 100);
        hold(&mut held, "pool-a", marks("db-1"), 110);
        assert_eq!(
            held.iter().map(|h| h.machine.as_str()).collect::<Vec<_>>(),
            ["pool-a", "pool-b"]
        );
        assert_eq!(
            held[1].reason,
            "pod shop/db-0 (karpenter.sh/do-not-disrupt)"
        );
        assert_eq!(
            held_now(&held, 129),
            BTreeSet::from(["pool-a".to_owned(), "pool-b".to_owned()])
        );
        assert_eq!(held_now(&held, 130), BTreeSet::from(["pool-a".to_owned()]));
        assert_eq!(held_now(&held, 140), BTreeSet::new());

        // Held again later: the first time stays, the recheck moves; pool-a's expired hold goes.
        hold(&mut held, "pool-b", marks("db-2"), 150);
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].since, 100);
        assert_eq!(held[0].recheck_at, 150 + HOLD_RECHECK_SECS);
        assert_eq!(
            held[0].reason,
            "pod shop/db-2 (karpenter.sh/do-not-disrupt)"
        );

        release(&mut held, "pool-b");
        assert!(held.is_empty());
    }

    #[test]
    fn a_hold_after_a_failed_delete_lasts_until_its_retry_is_due() {
        let mut held = Vec::new();
        hold_after_failed_delete(
            &mut held,
            "pool-a",
            "its delete failed".to_owned(),
            100,
            160,
        );
        assert!(held[0].after_failed_delete);
        assert_eq!(held_now(&held, 159), BTreeSet::from(["pool-a".to_owned()]));
        assert_eq!(held_now(&held, 160), BTreeSet::new());

        // Held later by its marks: a do-not-disrupt hold again, its first time kept.
        hold(&mut held, "pool-a", marks("db-0"), 120);
        assert!(!held[0].after_failed_delete);
        assert_eq!((held[0].since, held[0].recheck_at), (100, 150));
    }
}
