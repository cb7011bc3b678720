//! Table tests and properties of a round of the rollout's loop.

use proptest::prelude::*;

use super::*;
use crate::rollout::observed::{Activity, Health};

fn round(phase: RolloutPhase, in_flight: bool, done: bool) -> Round {
    Round {
        phase,
        in_flight,
        done,
        holdup: None,
        continue_due: false,
        leave_children: false,
        restamping: false,
    }
}

const fn go(await_approval: bool, start_children: bool, continue_as_new: bool) -> AfterLook {
    AfterLook::GoOn {
        await_approval,
        start_children,
        continue_as_new,
    }
}

#[test]
fn a_done_rollout_completes_only_once_no_machine_waits_for_its_drain_settings() {
    let restamping = Round {
        restamping: true,
        ..round(RolloutPhase::Progressing, false, true)
    };
    assert_eq!(after_look(&restamping), go(false, true, false));
    let stamped = Round {
        restamping: false,
        ..restamping
    };
    assert_eq!(after_look(&stamped), AfterLook::Complete);
    // An abort still ends.
    let aborting = Round {
        phase: RolloutPhase::Aborting,
        ..restamping
    };
    assert_eq!(after_look(&aborting), AfterLook::EndAborted);
}

#[test]
fn each_round_goes_on_as_the_table_says() {
    use RolloutPhase::{Aborting, AwaitingApproval, Paused, Progressing};
    let canary = |r: Round| Round {
        holdup: Some(Holdup::CanaryReached),
        ..r
    };
    let long = |r: Round| Round {
        continue_due: true,
        ..r
    };
    let leave = |r: Round| Round {
        leave_children: true,
        ..r
    };
    let table = [
        (round(Aborting, false, false), AfterLook::EndAborted),
        (round(Aborting, false, true), AfterLook::EndAborted),
        (round(Aborting, true, true), go(false, false, false)),
        (long(round(Aborting, true, false)), go(false, false, false)),
        (
            leave(long(round(Aborting, true, false))),
            go(false, false, true),
        ),
        (
            long(round(Progressing, true, false)),
            go(false, false, false),
        ),
        (
            leave(long(round(Progressing, true, false))),
            go(false, false, true),
        ),
        (
            leave(round(Progressing, true, false)),
            go(false, true, false),
        ),
        (round(Progressing, false, true), AfterLook::Complete),
        (round(Paused, false, true), AfterLook::Complete),
        (round(AwaitingApproval, false, true), AfterLook::Complete),
        (round(Progressing, true, true), go(false, true, false)),
        (round(Progressing, false, false), go(false, true, false)),
        (round(Progressing, true, false), go(false, true, false)),
        (round(Paused, false, false), go(false, false, false)),
        (
            round(AwaitingApproval, true, false),
            go(false, false, false),
        ),
        (
            canary(round(Progressing, false, false)),
            go(true, false, false),
        ),
        (
            canary(round(Progressing, true, false)),
            go(false, true, false),
        ),
        (canary(round(Paused, false, false)), go(false, false, false)),
        (
            canary(round(AwaitingApproval, false, false)),
            go(false, false, false),
        ),
        (
            long(round(Progressing, false, false)),
            go(false, false, true),
        ),
        (
            long(round(Progressing, true, false)),
            go(false, false, false),
        ),
        (long(round(Paused, false, false)), go(false, false, true)),
        (
            long(canary(round(Progressing, false, false))),
            go(true, false, true),
        ),
        (long(round(Progressing, false, true)), AfterLook::Complete),
    ];
    for (round, expected) in table {
        assert_eq!(after_look(&round), expected, "{round:?}");
    }
}

#[test]
fn the_canary_caps_the_new_machines_until_approved() {
    let table = [
        (None, false, 5, 5),
        (None, true, 5, 5),
        (Some(2), false, 5, 2),
        (Some(2), true, 5, 5),
        (Some(9), false, 5, 5),
        (Some(0), false, 5, 0),
    ];
    for (canary, approved, replicas, expected) in table {
        assert_eq!(
            canary_target(canary, approved, replicas),
            expected,
            "{canary:?} {approved}"
        );
    }
}

fn machine(name: &str, template_hash: &str, tainted_outdated: bool) -> ObservedMachine {
    ObservedMachine {
        name: name.to_owned(),
        template_hash: template_hash.to_owned(),
        health: Health::Ready,
        created_at: 0,
        activity: Activity::Idle,
        tainted_outdated,
        zone: None,
        ready_since: 0,
    }
}

#[test]
fn outdated_nodes_are_tainted_once_and_cleared_at_the_end() {
    let machines = [
        machine("new-1", "new", false),
        machine("old-1", "old", false),
        machine("old-2", "old", true),
        machine("old-3", "old", false),
        machine("new-2", "new", true),
    ];
    let marked = BTreeSet::from(["old-3".to_owned()]);
    let names =
        |ms: Vec<&ObservedMachine>| -> Vec<String> { ms.iter().map(|m| m.name.clone()).collect() };
    assert_eq!(
        names(to_mark_outdated(&machines, "new", &marked)),
        ["old-1"]
    );
    assert_eq!(names(to_clear_outdated(&machines)), ["old-2", "new-2"]);
}

fn phase() -> impl Strategy<Value = RolloutPhase> {
    prop_oneof![
        Just(RolloutPhase::Progressing),
        Just(RolloutPhase::Paused),
        Just(RolloutPhase::AwaitingApproval),
        Just(RolloutPhase::Aborting),
    ]
}

fn holdup() -> impl Strategy<Value = Option<Holdup>> {
    prop_oneof![
        Just(None),
        Just(Some(Holdup::InFlight)),
        Just(Some(Holdup::Budget)),
        Just(Some(Holdup::CanaryReached)),
    ]
}

proptest! {
    /// No round ends with children in flight, none continues as new with children in flight
    /// unless it may leave them running, and children start only
    /// in a progressing rollout that stays progressing and is not about to continue as new.
    #[test]
    fn nothing_ends_with_children_in_flight(
        phase in phase(),
        in_flight in any::<bool>(),
        done in any::<bool>(),
        holdup in holdup(),
        continue_due in any::<bool>(),
        leave_children in any::<bool>(),
        restamping in any::<bool>(),
    ) {
        let round = Round { phase, in_flight, done, holdup, continue_due, leave_children, restamping };
        match after_look(&round) {
            AfterLook::EndAborted => prop_assert!(!in_flight && phase == RolloutPhase::Aborting),
            AfterLook::Complete => prop_assert!(!in_flight && done && !restamping && phase != RolloutPhase::Aborting),
            AfterLook::GoOn { await_approval, start_children, continue_as_new } => {
                prop_assert!(!(continue_as_new && in_flight && !leave_children));
                prop_assert_eq!(continue_as_new, continue_due && (!in_flight || leave_children));
                prop_assert!(!(start_children && (await_approval || continue_due)));
                if start_children {
                    prop_assert_eq!(phase, RolloutPhase::Progressing);
                }
                if await_approval {
                    prop_assert!(phase == RolloutPhase::Progressing && !in_flight);
                }
            }
        }
    }
}
