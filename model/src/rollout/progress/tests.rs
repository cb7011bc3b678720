//! Table tests and properties of stall detection.

use proptest::prelude::*;

use super::*;

const DEADLINE: i64 = 600;

fn counts(updated: u32, old: u32) -> Counts {
    Counts {
        total: updated + old,
        updated,
        ready: updated + old,
        available: updated + old,
        old,
        ..Counts::default()
    }
}

fn input(phase: RolloutPhase, after: Counts, at: i64, stalled: bool) -> ProgressInput {
    ProgressInput {
        first_look: false,
        before: counts(1, 2),
        after,
        phase,
        last_progress_at: 1_000,
        stalled,
        at,
        deadline_secs: DEADLINE,
    }
}

fn check(input: ProgressInput, expected: ProgressVerdict) {
    assert_eq!(judge_progress(&input), expected, "{input:?}");
}

#[test]
fn each_look_is_judged_against_the_deadline_as_the_table_says() {
    use RolloutPhase::{Aborting, AwaitingApproval, Paused, Progressing};
    let same = counts(1, 2);
    let moved = counts(2, 1);
    let table = [
        (
            input(Progressing, moved, 5_000, true),
            ProgressVerdict::Progressed,
        ),
        (
            input(Paused, moved, 5_000, false),
            ProgressVerdict::Progressed,
        ),
        (
            ProgressInput {
                first_look: true,
                ..input(Progressing, same, 5_000, true)
            },
            ProgressVerdict::Progressed,
        ),
        (
            input(Paused, same, 5_000, false),
            ProgressVerdict::ClockHeld,
        ),
        (
            input(AwaitingApproval, same, 5_000, false),
            ProgressVerdict::ClockHeld,
        ),
        (
            input(Aborting, same, 5_000, true),
            ProgressVerdict::ClockHeld,
        ),
        (
            input(Progressing, same, 1_599, false),
            ProgressVerdict::Unchanged,
        ),
        (
            input(Progressing, same, 1_600, false),
            ProgressVerdict::Stalled { for_secs: 600 },
        ),
        (
            input(Progressing, same, 5_000, false),
            ProgressVerdict::Stalled { for_secs: 4_000 },
        ),
        (
            input(Progressing, same, 5_000, true),
            ProgressVerdict::Unchanged,
        ),
        // More machines being created is not progress.
        (
            input(
                Progressing,
                Counts {
                    total: 5,
                    creating: 2,
                    ..same
                },
                5_000,
                false,
            ),
            ProgressVerdict::Stalled { for_secs: 4_000 },
        ),
    ];
    for (input, expected) in table {
        check(input, expected);
    }
}

#[test]
fn the_machines_left_are_the_old_or_the_missing_whichever_is_more() {
    let table = [
        (counts(1, 2), 3, 2),
        (counts(0, 0), 3, 3),
        (counts(3, 0), 3, 0),
        (counts(4, 0), 3, 0),
        (counts(2, 3), 3, 3),
    ];
    for (counts, replicas, expected) in table {
        assert_eq!(remaining(&counts, replicas), expected, "{counts:?}");
    }
}

fn look(counts: Counts, at: i64) -> Look {
    Look {
        counts,
        machines: Vec::new(),
        holdup: None,
        at,
        deadline: std::time::Duration::from_secs(600),
        replicas: 3,
    }
}

#[test]
fn a_stall_is_said_once_and_ends_with_progress() {
    let mut status = RolloutStatus::empty();
    status.record_look(look(counts(1, 2), 1_000));
    assert_eq!(status.last_progress_at, 1_000);
    status.record_look(look(counts(1, 2), 1_700));
    assert_eq!(
        status.stalled.as_deref(),
        Some(
            "no progress for 700s (progressDeadline): 1 of 3 machines updated, 3 available; see the failures and in-flight children"
        )
    );
    status.record_look(look(counts(1, 2), 2_000));
    assert!(
        status
            .stalled
            .as_deref()
            .is_some_and(|s| s.contains("700s"))
    );
    status.record_look(look(counts(2, 1), 2_100));
    assert_eq!(
        (status.stalled.as_deref(), status.last_progress_at),
        (None, 2_100)
    );
}

#[test]
fn the_clock_does_not_run_while_paused() {
    let mut status = RolloutStatus::empty();
    status.record_look(look(counts(1, 2), 1_000));
    status.phase = RolloutPhase::Paused;
    status.record_look(look(counts(1, 2), 5_000));
    status.phase = RolloutPhase::Progressing;
    status.record_look(look(counts(1, 2), 5_100));
    assert_eq!(
        (status.stalled.as_deref(), status.last_progress_at),
        (None, 5_000)
    );
}

fn phase() -> impl Strategy<Value = RolloutPhase> {
    prop_oneof![
        Just(RolloutPhase::Progressing),
        Just(RolloutPhase::Paused),
        Just(RolloutPhase::AwaitingApproval),
        Just(RolloutPhase::Aborting),
    ]
}

fn any_counts() -> impl Strategy<Value = Counts> {
    (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
        |(updated, old, ready, available)| Counts {
            updated,
            old,
            ready,
            available,
            ..Counts::default()
        },
    )
}

proptest! {
    /// Any times and counts are judged without overflow, and a stall is found only for a
    /// progressing rollout without progress, not yet stalled, past its deadline.
    #[test]
    fn a_stall_needs_a_progressing_rollout_past_its_deadline(
        before in any_counts(),
        after in any_counts(),
        phase in phase(),
        last_progress_at in any::<i64>(),
        at in any::<i64>(),
        deadline_secs in any::<i64>(),
        stalled in any::<bool>(),
        first_look in any::<bool>(),
    ) {
        let input = ProgressInput { first_look, before, after, phase, last_progress_at, stalled, at, deadline_secs };
        let verdict = judge_progress(&input);
        if let ProgressVerdict::Stalled { for_secs } = verdict {
            prop_assert_eq!(phase, RolloutPhase::Progressing);
            prop_assert!(!stalled && !first_look && !made_progress(&before, &after));
            prop_assert!(for_secs >= deadline_secs);
        }
        if first_look || made_progress(&before, &after) {
            prop_assert_eq!(verdict, ProgressVerdict::Progressed);
        }
    }
}

#[test]
fn a_create_failing_and_retried_again_and_again_shows_stalled_after_the_deadline() {
    // 3 replicas: 2 old and 1 new machine, all Ready. The next create fails and is retried
    // every 100 s: looks alternate between the create in flight (counted in `updated` from its
    // start) and the pool without it.
    let settled = Counts {
        total: 3,
        updated: 1,
        updated_available: 1,
        ready: 3,
        available: 3,
        old: 2,
        ..Counts::default()
    };
    let creating = Counts {
        total: 4,
        updated: 2,
        creating: 1,
        ..settled
    };
    let mut status = RolloutStatus::empty();
    status.record_look(look(settled, 1_000));
    for i in 1..=8 {
        let counts = if i % 2 == 1 { creating } else { settled };
        status.record_look(look(counts, 1_000 + i * 100));
    }
    assert_eq!(status.last_progress_at, 1_000);
    assert!(
        status
            .stalled
            .as_deref()
            .is_some_and(|s| s.starts_with("no progress for 600s")),
        "{:?}",
        status.stalled
    );
    // The create finally comes up: progress, the stall is over.
    let up = Counts {
        total: 4,
        updated: 2,
        updated_available: 2,
        ready: 4,
        available: 4,
        ..settled
    };
    status.record_look(look(up, 2_000));
    assert_eq!(
        (status.stalled.as_deref(), status.last_progress_at),
        (None, 2_000)
    );
}
