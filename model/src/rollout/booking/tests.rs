//! Table tests and properties of booking a rollout's children.

use proptest::prelude::*;

use super::*;

const POOL: &str = "workers";

fn status(phase: RolloutPhase, failures_counted: u32) -> RolloutStatus {
    let mut status = RolloutStatus::empty();
    status.phase = phase;
    status.failures_counted = failures_counted;
    status.max_failures = 3;
    status
}

fn entry(kind: ChildKind, started_at: i64) -> InFlight {
    InFlight {
        machine: "workers-abc12".to_owned(),
        kind,
        workflow_id: "create/test/workers-abc12".to_owned(),
        started_at,
        zone: None,
        run_id: None,
        capacity_type: None,
    }
}

/// What booking changed: phase, failures counted, failures listed, created, deleted.
type Seen = (RolloutPhase, u32, usize, u32, u32);

fn check(before: RolloutStatus, kind: ChildKind, end: ChildEnd, expected: Seen) -> RolloutStatus {
    let mut status = before;
    status.book_child(entry(kind, 30_000), end.clone(), 90_500, POOL);
    let seen = (
        status.phase,
        status.failures_counted,
        status.failures.len(),
        status.created,
        status.deleted,
    );
    assert_eq!(seen, expected, "{kind:?} {end:?}");
    status
}

#[test]
fn each_ending_is_booked_as_the_table_says() {
    use ChildKind::{Create, Delete};
    use RolloutPhase::{Aborting, AwaitingApproval, Paused, Progressing};
    let failed = || ChildEnd::Failed("boom".to_owned());
    let canceled = || ChildEnd::Canceled("stopped".to_owned());
    let table = [
        (
            status(Progressing, 0),
            Create,
            ChildEnd::Succeeded,
            (Progressing, 0, 0, 1, 0),
        ),
        (
            status(Progressing, 2),
            Delete,
            ChildEnd::Succeeded,
            (Progressing, 2, 0, 0, 1),
        ),
        (
            status(Progressing, 0),
            Create,
            failed(),
            (Progressing, 1, 1, 0, 0),
        ),
        (
            status(Progressing, 2),
            Delete,
            failed(),
            (Paused, 3, 1, 0, 0),
        ),
        (status(Paused, 2), Create, failed(), (Paused, 3, 1, 0, 0)),
        (
            status(AwaitingApproval, 5),
            Create,
            failed(),
            (AwaitingApproval, 6, 1, 0, 0),
        ),
        (
            status(Aborting, 2),
            Create,
            failed(),
            (Aborting, 3, 1, 0, 0),
        ),
        (
            status(Progressing, 2),
            Create,
            canceled(),
            (Progressing, 2, 1, 0, 0),
        ),
        (
            status(Progressing, 2),
            Delete,
            canceled(),
            (Progressing, 2, 1, 0, 0),
        ),
    ];
    for (before, kind, end, expected) in table {
        check(before, kind, end, expected);
    }
}

#[test]
fn a_success_is_timed_and_a_failure_stamped_in_seconds() {
    let mut status = status(RolloutPhase::Progressing, 0);
    status.book_child(
        entry(ChildKind::Create, 30_000),
        ChildEnd::Succeeded,
        90_500,
        POOL,
    );
    assert_eq!(status.timings.create_millis, 60_500);
    // A child that seems to end before it started (clock skew) is timed 0, not negative.
    status.book_child(
        entry(ChildKind::Delete, 99_000),
        ChildEnd::Succeeded,
        90_500,
        POOL,
    );
    assert_eq!(status.timings.delete_millis, 0);
    let canceled = ChildEnd::Canceled("stopped".to_owned());
    status.book_child(entry(ChildKind::Delete, 0), canceled, 90_500, POOL);
    let failure = status.failures.first().map(|f| (f.reason.as_str(), f.at));
    assert_eq!(failure, Some(("canceled: stopped", 90)));
}

#[test]
fn the_rollout_pauses_itself_saying_why_and_how_to_go_on() {
    let failed = ChildEnd::Failed("VM quota exceeded".to_owned());
    let status = check(
        status(RolloutPhase::Progressing, 2),
        ChildKind::Create,
        failed,
        (RolloutPhase::Paused, 3, 1, 0, 0),
    );
    assert_eq!(
        status.paused_because.as_deref(),
        Some(
            "paused itself after 3 failed machine operations (maxFailures 3); last: workers-abc12: VM quota exceeded. Fix the cause, then run `nodewright pool rollout resume workers`"
        )
    );
}

#[test]
fn a_failure_that_does_not_count_spends_nothing() {
    let mut status = status(RolloutPhase::Progressing, 2);
    let taken =
        "create/test/workers-abc12 is already running (started by someone else); left to it";
    status.book_failure(
        entry(ChildKind::Create, 0),
        taken.to_owned(),
        false,
        7,
        POOL,
    );
    assert_eq!(status.failures_counted, 2);
    assert_eq!(status.phase, RolloutPhase::Progressing);
    assert_eq!(status.failures.len(), 1);
}

#[test]
fn self_pause_is_due_only_for_a_progressing_rollout_at_its_maximum() {
    use RolloutPhase::{Aborting, AwaitingApproval, Canceled, Paused, Progressing};
    let table = [
        (Progressing, 2, 3, false),
        (Progressing, 3, 3, true),
        (Progressing, 4, 3, true),
        (Progressing, 1, 0, true),
        (Paused, 3, 3, false),
        (AwaitingApproval, 3, 3, false),
        (Aborting, 3, 3, false),
        (Canceled, 9, 3, false),
    ];
    for (phase, counted, max, expected) in table {
        assert_eq!(
            self_pause_due(phase, counted, max),
            expected,
            "{phase:?} {counted}/{max}"
        );
    }
}

#[test]
fn a_canceled_delete_waits_for_the_last_look_which_tells_whether_it_finished() {
    let stopped = || "stopped".to_owned();
    assert!(ChildEnd::Canceled(stopped()).waits_for_last_look(ChildKind::Delete));
    assert!(!ChildEnd::Canceled(stopped()).waits_for_last_look(ChildKind::Create));
    assert!(!ChildEnd::Failed(stopped()).waits_for_last_look(ChildKind::Delete));
    assert!(!ChildEnd::Succeeded.waits_for_last_look(ChildKind::Delete));
    let canceled = || ChildEnd::Canceled(stopped());
    let failed = || ChildEnd::Failed(stopped());
    let table: [(ChildEnd, Option<&[&str]>, ChildEnd); 5] = [
        (canceled(), Some(&["workers-other"]), ChildEnd::Succeeded),
        (
            canceled(),
            Some(&["workers-abc12", "workers-other"]),
            canceled(),
        ),
        (canceled(), None, canceled()),
        (failed(), Some(&["workers-other"]), failed()),
        (ChildEnd::Succeeded, None, ChildEnd::Succeeded),
    ];
    for (end, seen, expected) in table {
        assert_eq!(end.after_last_look("workers-abc12", seen), expected);
    }
}

proptest! {
    /// However failures come, every one is listed, only counted ones are counted, and a
    /// progressing rollout is paused exactly when the count reached its maximum.
    #[test]
    fn a_progressing_rollout_pauses_itself_exactly_at_its_maximum(
        counted in proptest::collection::vec(any::<bool>(), 0..30),
        max_failures in 0u32..10,
    ) {
        let mut status = status(RolloutPhase::Progressing, 0);
        status.max_failures = max_failures;
        for (n, counts) in counted.iter().enumerate() {
            status.book_failure(entry(ChildKind::Create, 0), format!("failure {n}"), *counts, 0, POOL);
        }
        let expected = u32::try_from(counted.iter().filter(|c| **c).count()).unwrap_or(u32::MAX);
        prop_assert_eq!(status.failures.len(), counted.len());
        prop_assert_eq!(status.failures_counted, expected);
        let paused = expected > 0 && expected >= max_failures;
        prop_assert_eq!(status.phase == RolloutPhase::Paused, paused);
    }
}

#[test]
fn a_failed_delete_is_booked_for_a_later_try_that_waits_longer_each_time() {
    let mut status = RolloutStatus::empty();
    status.book_delete_failure("p-a", "VM delete failed", 2_000);
    assert_eq!(status.retries[0].due_at(), 2_030);
    status.book_delete_failure("p-a", "VM delete failed again", 2_100);
    assert_eq!(status.retries.len(), 1);
    assert_eq!(status.retries[0].failures, 2);
    assert_eq!(status.retries[0].due_at(), 2_160);
    assert_eq!(
        status.retries[0].reason,
        "its delete failed: VM delete failed again"
    );
    status.retries[0].left_alone = true;
    status.book_delete_failure("p-a", "drain failed", 2_200);
    assert!(
        !status.retries[0].left_alone,
        "a delete of the rollout failed on it: it is the rollout's to try again"
    );
}

#[test]
fn a_machine_deleted_at_last_leaves_no_retry_record_behind() {
    let mut status = RolloutStatus::empty();
    status.book_delete_failure("workers-abc12", "VM delete failed", 2_000);
    status.book_delete_failure("workers-other", "VM delete failed", 2_000);
    status.book_child(
        entry(ChildKind::Delete, 30_000),
        ChildEnd::Succeeded,
        90_500,
        POOL,
    );
    let left: Vec<&str> = status.retries.iter().map(|r| r.machine.as_str()).collect();
    assert_eq!(left, ["workers-other"]);
    // A create's success touches no record.
    status.book_child(
        InFlight {
            machine: "workers-other".to_owned(),
            ..entry(ChildKind::Create, 30_000)
        },
        ChildEnd::Succeeded,
        90_500,
        POOL,
    );
    assert_eq!(status.retries.len(), 1);
}
