//! The drain's hard deadline (`spec.drain.terminationGracePeriod`, Karpenter's NodePool field):
//! the latest instant a drain may still be graceful, and what changes once it has passed.
//!
//! # Rules
//! - It is counted from the drain's start and never moves: `machine extend-drain` and the
//!   Node's annotation move the drain's deadline (when force mode starts), never past the hard
//!   deadline ([`capped_deadline`]).
//! - Pods are evicted with their termination grace period cut to the time left until it
//!   ([`trimmed_grace`]), so a pod asking for an hour still ends by then.
//! - Once it has passed, force mode comes whatever else holds the drain
//!   ([`super::ForceReason::HardDeadlinePassed`]), and it overrides do-not-disrupt marks
//!   ([`overrides_marks`]): every marked pod it deletes is named.
//! - Without one, the drain's deadline is its hard deadline: force mode at that deadline
//!   overrides the marks too, as it overrides PodDisruptionBudgets.
//!
//! Times are seconds since the Unix epoch.

use super::force::{ForceReason, HardDeadline};
use super::rules::RuledPod;
use crate::disruption::Disruption;
use crate::pool::DrainPolicy;

/// The hard deadline of a drain that started at `started`, when its settings have one.
pub fn hard_deadline(started: i64, policy: &DrainPolicy) -> Option<HardDeadline> {
    let period = policy.termination_grace_period?;
    let period_seconds = period.as_secs();
    let seconds = i64::try_from(period_seconds).unwrap_or(i64::MAX);
    Some(HardDeadline {
        at: started.saturating_add(seconds),
        period_seconds,
    })
}

/// The drain's deadline `deadline`, never later than the hard deadline `hard`.
pub fn capped_deadline(deadline: i64, hard: Option<HardDeadline>) -> i64 {
    hard.map_or(deadline, |hard| deadline.min(hard.at))
}

/// Whether force mode for `reason` deletes pods marked do-not-disrupt in a drain that honours
/// them. Only the drain's own deadline, when a later hard deadline exists, does not: until the
/// hard deadline the marked pods are waited for. A request (`machine force-drain`, `--force`)
/// is an operator's, and an unhealthy Node has nothing left to protect.
pub fn overrides_marks(reason: &ForceReason, has_hard_deadline: bool) -> bool {
    match reason {
        ForceReason::DeadlinePassed => !has_hard_deadline,
        ForceReason::Requested
        | ForceReason::HardDeadlinePassed { .. }
        | ForceReason::NotReady { .. }
        | ForceReason::ReadonlyFilesystem { .. } => true,
    }
}

/// The grace period to evict a pod asking for `grace_seconds` with at `now`: `None` (the pod's
/// own) without a hard deadline or while the pod's fits before it, else the seconds left until
/// the hard deadline (0 once it has passed).
pub fn trimmed_grace(grace_seconds: u64, now: i64, hard: Option<HardDeadline>) -> Option<u64> {
    let hard = hard?;
    let left = u64::try_from(hard.at.saturating_sub(now)).unwrap_or(0);
    (left < grace_seconds).then_some(left)
}

/// How a drain names a do-not-disrupt mark it went past: `shop/db-0
/// (nodewright.io/do-not-disrupt): {how}`.
pub fn overridden_mark(pod: &RuledPod, how: &str) -> String {
    format!("{} ({}): {how}", pod.pod.key(), pod.by)
}

/// Why a drain for `disruption` does not hold pods marked do-not-disrupt, for the names of the
/// marks it goes past.
pub fn not_held_because(disruption: Disruption) -> &'static str {
    match disruption {
        Disruption::Operator => "an operator's drain is not held by do-not-disrupt",
        Disruption::MachineGone => "the machine is gone or broken, nothing is left to protect",
        Disruption::PastHardDeadline => "the drain's hard deadline has passed",
        Disruption::RolloutReplacement
        | Disruption::ScaleDown
        | Disruption::SweepRemediation
        | Disruption::HealthRemediation => {
            "a voluntary drain holds marked pods: this one was not held"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    const START: i64 = 1_800_000_000;

    fn policy(period: Option<u64>) -> DrainPolicy {
        DrainPolicy {
            termination_grace_period: period.map(Duration::from_secs),
            ..DrainPolicy::default()
        }
    }

    #[test]
    fn the_hard_deadline_counts_from_the_start() {
        assert_eq!(hard_deadline(START, &policy(None)), None);
        assert_eq!(
            hard_deadline(START, &policy(Some(600))).map(|h| h.at),
            Some(START + 600)
        );
        assert_eq!(
            hard_deadline(i64::MAX - 5, &policy(Some(600))).map(|h| h.at),
            Some(i64::MAX)
        );
    }

    fn at(at: i64) -> Option<HardDeadline> {
        Some(HardDeadline {
            at,
            period_seconds: 600,
        })
    }

    #[test]
    fn the_deadline_never_passes_the_hard_deadline() {
        // (deadline, hard, expected)
        let cases = [
            (START + 7200, None, START + 7200),
            (START + 7200, at(START + 600), START + 600),
            (START + 60, at(START + 600), START + 60),
            (START + 600, at(START + 600), START + 600),
        ];
        for (deadline, hard, expected) in cases {
            assert_eq!(
                capped_deadline(deadline, hard),
                expected,
                "{deadline} {hard:?}"
            );
        }
    }

    #[test]
    fn only_the_soft_deadline_before_a_hard_one_keeps_the_marks() {
        let hard = ForceReason::HardDeadlinePassed { after_seconds: 600 };
        let not_ready = ForceReason::NotReady { for_seconds: 400 };
        let readonly = ForceReason::ReadonlyFilesystem { for_seconds: 400 };
        // (reason, has a hard deadline, overrides)
        let cases = [
            (ForceReason::DeadlinePassed, true, false),
            (ForceReason::DeadlinePassed, false, true),
            (ForceReason::Requested, true, true),
            (ForceReason::Requested, false, true),
            (hard.clone(), true, true),
            (not_ready, true, true),
            (readonly, true, true),
        ];
        for (reason, has_hard, expected) in cases {
            assert_eq!(
                overrides_marks(&reason, has_hard),
                expected,
                "{reason} (hard deadline: {has_hard})"
            );
        }
    }

    #[test]
    fn grace_is_cut_to_the_time_left() {
        // (grace asked, now, hard, expected)
        let cases = [
            (30, START, None, None),
            (30, START, at(START + 600), None),
            (3600, START, at(START + 600), Some(600)),
            (600, START, at(START + 600), None),
            (601, START, at(START + 600), Some(600)),
            (30, START + 700, at(START + 600), Some(0)),
            (0, START + 700, at(START + 600), None),
        ];
        for (grace, now, hard, expected) in cases {
            assert_eq!(
                trimmed_grace(grace, now, hard),
                expected,
                "{grace} {now} {hard:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn a_pod_evicted_before_the_hard_deadline_ends_by_it(
            grace in 0u64..100_000,
            offset in -100_000i64..100_000,
            period in 1i64..100_000,
        ) {
            let hard = START + period;
            let now = START + offset;
            let used = trimmed_grace(grace, now, at(hard)).unwrap_or(grace);
            prop_assert!(used <= grace);
            let ends = now.saturating_add(i64::try_from(used).unwrap_or(i64::MAX));
            prop_assert!(ends <= hard.max(now), "ends {ends}, hard {hard}, now {now}");
        }
    }
}
