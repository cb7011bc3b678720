//! The order of a drain's lanes, what an eviction's answer means for its pod, when a round of
//! evictions is over, and how long a wait inside the drain lasts.
//!
//! A drain runs its lanes in order ([`DrainPhase`]): the pods without persistent volumes, then
//! those with them one at a time, then the volumes whose detach timed out; force mode takes over
//! from any of them when it is due, and a lane that waited long ends the run so that a new one
//! continues it.

use std::time::Duration;

use super::answer::{AfterRefusal, after_refusal, refusal_of};
use super::force::ForceReason;
use super::pdb::PdbFacts;

/// A wait that ends by itself is never shorter than this (a deadline already passed still gets
/// one look).
pub const MIN_WAIT: Duration = Duration::from_secs(1);

/// How long force mode waits for ARM to force-detach the VM's data disks.
pub const FORCE_DETACH_BUDGET: Duration = Duration::from_secs(10 * 60);

/// What the drain does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainPhase {
    /// Step 5: evict the pods without persistent volumes (and, with both lanes at once, move
    /// those with them).
    EvictPods,
    /// Step 6: move the pods with persistent volumes, one at a time.
    MoveVolumes,
    /// Step 6, again: look at the volumes whose detach timed out until they detach.
    AwaitStuckVolumes,
    /// Step 7: force mode, for this reason.
    Force(ForceReason),
    /// The history is long: continue as a new run.
    ContinueAsNew,
    /// Nothing left to do: the node is drained.
    Done,
}

/// How a lane of the drain ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneEnd {
    /// Its pods are gone.
    Finished,
    /// Force mode is due, for this reason.
    Forced(ForceReason),
    /// The history is long: continue as a new run (the world is re-read there).
    ContinueAsNew,
}

/// The first lane: force mode when it is due already (requested, deadline passed, node dead),
/// else the pods without volumes.
pub fn first_phase(force: Option<ForceReason>) -> DrainPhase {
    match force {
        Some(reason) => DrainPhase::Force(reason),
        None => DrainPhase::EvictPods,
    }
}

/// The phase after `phase` ended as `end`; `stuck_volumes` says whether volumes whose detach
/// timed out are left to look at; `together` whether [`DrainPhase::EvictPods`] ran both lanes
/// at once (see `interleave`), so that no [`DrainPhase::MoveVolumes`] follows it. Force mode
/// ends the drain; so do [`DrainPhase::Done`] and [`DrainPhase::ContinueAsNew`].
pub fn next_phase(
    phase: &DrainPhase,
    end: LaneEnd,
    stuck_volumes: bool,
    together: bool,
) -> DrainPhase {
    match (phase, end) {
        (DrainPhase::Force(_) | DrainPhase::Done, _) => DrainPhase::Done,
        (DrainPhase::ContinueAsNew, _) | (_, LaneEnd::ContinueAsNew) => DrainPhase::ContinueAsNew,
        (_, LaneEnd::Forced(reason)) => DrainPhase::Force(reason),
        (DrainPhase::EvictPods, LaneEnd::Finished) if !together => DrainPhase::MoveVolumes,
        (DrainPhase::EvictPods | DrainPhase::MoveVolumes, LaneEnd::Finished) if stuck_volumes => {
            DrainPhase::AwaitStuckVolumes
        }
        (
            DrainPhase::EvictPods | DrainPhase::MoveVolumes | DrainPhase::AwaitStuckVolumes,
            LaneEnd::Finished,
        ) => DrainPhase::Done,
    }
}

/// The answer of one eviction, as the drain reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionAnswer<'a> {
    /// Accepted: the pod is terminating with its grace period.
    Accepted,
    /// The pod (with that UID) is already gone.
    Gone,
    /// Refused with 429: a PodDisruptionBudget allows no disruption now.
    Blocked {
        /// The budget that selects the pod, when one was found.
        pdb: Option<&'a PdbFacts>,
        /// The apiserver's message.
        message: &'a str,
    },
    /// Refused otherwise (read by `refusal_of`), or not answered.
    Refused {
        /// The HTTP code (`NO_ANSWER` when none came).
        code: u16,
        /// The status reason (`NamespaceTerminating`, `InternalError`, ...).
        reason: &'a str,
        /// The apiserver's message (or the transport error's).
        message: &'a str,
        /// The PodDisruptionBudgets selecting the pod, when several do.
        budgets: &'a [String],
    },
}

/// What the drain does with a pod after its eviction's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterEviction {
    /// Evicted: count it as evicted (and its local data as lost) and wait for it to go.
    Leaving,
    /// Gone already: nothing to wait for.
    Left,
    /// Blocked or refused: try again after the PDB retry interval, if it is still there.
    RetryLater,
    /// Not evicted but going anyway (its namespace is deleted): wait for it to go.
    AwaitGone,
}

/// What an eviction's answer means for its pod.
pub fn after_eviction(answer: &EvictionAnswer<'_>) -> AfterEviction {
    match answer {
        EvictionAnswer::Accepted => AfterEviction::Leaving,
        EvictionAnswer::Gone => AfterEviction::Left,
        EvictionAnswer::Blocked { .. } => AfterEviction::RetryLater,
        EvictionAnswer::Refused {
            code,
            reason,
            message,
            ..
        } => match after_refusal(refusal_of(*code, reason, message)) {
            AfterRefusal::AwaitGone => AfterEviction::AwaitGone,
            AfterRefusal::RetryUntilDeadline => AfterEviction::RetryLater,
        },
    }
}

/// How a round of parallel evictions ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundEnd {
    /// No pod blocked, none still leaving: the lane is done.
    Finished,
    /// Pods are left and the history is long: continue as a new run.
    ContinueAsNew,
    /// Pods are left: wait the PDB retry interval and evict those still there again.
    RetryAfterPause,
}

/// The end of a round that left `blocked` pods refused by a PodDisruptionBudget and `leaving`
/// pods still terminating; `continue_as_new_suggested` is Temporal's hint that the history is
/// long.
pub fn after_round(blocked: usize, leaving: usize, continue_as_new_suggested: bool) -> RoundEnd {
    if blocked == 0 && leaving == 0 {
        RoundEnd::Finished
    } else if continue_as_new_suggested {
        RoundEnd::ContinueAsNew
    } else {
        RoundEnd::RetryAfterPause
    }
}

/// How long a wait of up to `wanted` lasts when `left` is the time left until the drain's
/// deadline (`None` for a wait the deadline does not bound): never past the deadline, never
/// shorter than [`MIN_WAIT`].
pub fn wait_within_deadline(wanted: Duration, left: Option<Duration>) -> Duration {
    left.unwrap_or(wanted).min(wanted).max(MIN_WAIT)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn lanes_run_in_order_and_force_mode_takes_over_from_any() {
        use DrainPhase::*;
        let forced = || LaneEnd::Forced(ForceReason::DeadlinePassed);
        let force = || Force(ForceReason::DeadlinePassed);
        let table = [
            (EvictPods, LaneEnd::Finished, false, MoveVolumes),
            (EvictPods, LaneEnd::Finished, true, MoveVolumes),
            (EvictPods, forced(), false, force()),
            (EvictPods, LaneEnd::ContinueAsNew, false, ContinueAsNew),
            (MoveVolumes, LaneEnd::Finished, false, Done),
            (MoveVolumes, LaneEnd::Finished, true, AwaitStuckVolumes),
            (MoveVolumes, forced(), true, force()),
            (MoveVolumes, LaneEnd::ContinueAsNew, true, ContinueAsNew),
            (AwaitStuckVolumes, LaneEnd::Finished, false, Done),
            (AwaitStuckVolumes, forced(), true, force()),
            (
                AwaitStuckVolumes,
                LaneEnd::ContinueAsNew,
                true,
                ContinueAsNew,
            ),
            (force(), LaneEnd::Finished, false, Done),
            (Done, LaneEnd::Finished, true, Done),
        ];
        for (phase, end, stuck, expected) in table {
            let said = format!("{phase:?} {end:?} stuck={stuck}");
            assert_eq!(next_phase(&phase, end, stuck, false), expected, "{said}");
        }
        // Both lanes at once: no volume lane after them.
        let together = [
            (EvictPods, LaneEnd::Finished, false, Done),
            (EvictPods, LaneEnd::Finished, true, AwaitStuckVolumes),
            (EvictPods, forced(), true, force()),
            (EvictPods, LaneEnd::ContinueAsNew, false, ContinueAsNew),
            (AwaitStuckVolumes, LaneEnd::Finished, false, Done),
        ];
        for (phase, end, stuck, expected) in together {
            let said = format!("together {phase:?} {end:?} stuck={stuck}");
            assert_eq!(next_phase(&phase, end, stuck, true), expected, "{said}");
        }
    }

    #[test]
    fn a_drain_starts_in_force_mode_only_when_it_is_due() {
        assert_eq!(first_phase(None), DrainPhase::EvictPods);
        assert_eq!(
            first_phase(Some(ForceReason::Requested)),
            DrainPhase::Force(ForceReason::Requested)
        );
    }

    #[test]
    fn an_eviction_answer_says_what_becomes_of_the_pod() {
        let pdb = PdbFacts {
            namespace: "shop".to_owned(),
            name: "web".to_owned(),
            generation: None,
            observed_generation: None,
            disruptions_allowed: 0,
            current_healthy: 2,
            desired_healthy: 2,
            expected_pods: 2,
        };
        let table = [
            (EvictionAnswer::Accepted, AfterEviction::Leaving),
            (EvictionAnswer::Gone, AfterEviction::Left),
            (
                EvictionAnswer::Blocked {
                    pdb: Some(&pdb),
                    message: "",
                },
                AfterEviction::RetryLater,
            ),
            (
                EvictionAnswer::Blocked {
                    pdb: None,
                    message: "Too many requests",
                },
                AfterEviction::RetryLater,
            ),
            (
                EvictionAnswer::Refused {
                    code: 500,
                    reason: "InternalError",
                    message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                    budgets: &[],
                },
                AfterEviction::RetryLater,
            ),
            (
                EvictionAnswer::Refused {
                    code: 403,
                    reason: "NamespaceTerminating",
                    message: "namespace shop is being terminated",
                    budgets: &[],
                },
                AfterEviction::AwaitGone,
            ),
            (
                EvictionAnswer::Refused {
                    code: 0,
                    reason: "",
                    message: "connection refused",
                    budgets: &[],
                },
                AfterEviction::RetryLater,
            ),
        ];
        for (answer, expected) in table {
            assert_eq!(after_eviction(&answer), expected, "{answer:?}");
        }
    }

    #[test]
    fn a_round_is_done_when_no_pod_is_blocked_or_leaving() {
        use RoundEnd::*;
        let table = [
            (0, 0, false, Finished),
            (0, 0, true, Finished),
            (1, 0, false, RetryAfterPause),
            (0, 1, false, RetryAfterPause),
            (2, 3, true, ContinueAsNew),
            (0, 1, true, ContinueAsNew),
        ];
        for (blocked, leaving, suggested, expected) in table {
            assert_eq!(
                after_round(blocked, leaving, suggested),
                expected,
                "{blocked} {leaving} {suggested}"
            );
        }
    }

    #[test]
    fn a_wait_stops_at_the_deadline_but_gets_one_look() {
        let s = Duration::from_secs;
        let table = [
            (s(20), None, s(20)),
            (s(20), Some(s(300)), s(20)),
            (s(20), Some(s(5)), s(5)),
            (s(20), Some(Duration::ZERO), MIN_WAIT),
            (Duration::ZERO, None, MIN_WAIT),
            (Duration::ZERO, Some(s(60)), MIN_WAIT),
        ];
        for (wanted, left, expected) in table {
            assert_eq!(
                wait_within_deadline(wanted, left),
                expected,
                "{wanted:?} {left:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn a_wait_is_never_past_the_deadline_nor_shorter_than_a_look(
            wanted in 0u64..1_000_000,
            left in proptest::option::of(0u64..1_000_000),
        ) {
            let wanted = Duration::from_secs(wanted);
            let left = left.map(Duration::from_secs);
            let wait = wait_within_deadline(wanted, left);
            prop_assert!(wait >= MIN_WAIT);
            prop_assert!(wait <= wanted.max(MIN_WAIT));
            if let Some(left) = left {
                prop_assert!(wait <= left.max(MIN_WAIT));
            }
        }
    }
}
