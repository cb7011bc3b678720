//! Deletes that did not finish, tried again.
//!
//! A DeleteMachine that fails leaves its machine where it stopped: drained with the draining
//! taint (a pre-terminate hold, a VM delete that kept failing), or its VM in `Deleting`. Such a
//! machine looks deleting ([`Activity::Deleting`]) although nothing of this rollout works on it:
//! it is *stranded*. It holds room in the budget (it exists) and serves nothing, so a rollout
//! with maxUnavailable 0 would wait for it for ever. A Deployment's ReplicaSet controller
//! deletes a pod again until it is gone; the rollout does the same with back-off: a stranded
//! machine is deleted again (its drain included) once [`backoff_secs`] passed since the last
//! try. A machine first seen stranded whose template is outdated (a delete of an earlier run, or
//! someone else's; the rollout would delete it anyway) is given [`FIRST_RETRY_SECS`] before the
//! first try: if a DeleteMachine of that machine still runs, starting one collides with its
//! workflow ID and the machine is left to it, which is booked like a try (not a failure). A
//! machine of the new template found drained with no failed delete of this rollout behind it is
//! someone else's doing (a maintenance drain leaves the Node cordoned and tainted): it is left
//! alone, and the status says so.
//!
//! What waits is kept in the status ([`DeleteRetry`]), so `pool rollout status` names what
//! blocks the rollout and when it tries again; a failed delete is booked there, and counts
//! against `maxFailures`, by `booking` (`RolloutStatus::book_delete_failure`).
//!
//! A delete that fails *before* the cordon (a pre-delete hook, the owner check, an early refusal)
//! gives its machine back Idle: it is not stranded, and the planner would pick it again at the
//! next look. Its record is kept while the machine exists (`keep_failed`), so the next failure
//! waits longer, and [`backoff_holds`] holds the machine out of the plan (through the planner's
//! `held`, [`crate::rollout::hold`]) until the record is due.

use serde::{Deserialize, Serialize};

use super::hold::HeldMachine;
use super::observed::{Activity, ObservedMachine};
use super::plan::{DeleteReason, Victim};

/// Seconds before the first try at a machine found stranded.
pub const FIRST_RETRY_SECS: i64 = 30;

/// The longest wait between two tries.
pub const MAX_RETRY_SECS: i64 = 600;

/// A stranded machine the rollout deletes again, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteRetry {
    /// The machine.
    pub machine: String,
    /// Deletes of it that failed in this rollout.
    pub failures: u32,
    /// The last try, or when it was first seen stranded (Unix seconds).
    pub last_at: i64,
    /// Why it waits: the last failure, or how it was found.
    pub reason: String,
    /// Never tried: the rollout did not decide its deletion (a drain of the new template's
    /// machine by someone else).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub left_alone: bool,
}

impl DeleteRetry {
    /// When it is tried again (Unix seconds).
    pub fn due_at(&self) -> i64 {
        self.last_at.saturating_add(backoff_secs(self.failures))
    }
}

/// The wait after `failures` failed deletes: 30 s, then doubling, at most 10 minutes.
pub fn backoff_secs(failures: u32) -> i64 {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_RETRY_SECS
        .saturating_mul(1_i64 << doublings)
        .min(MAX_RETRY_SECS)
}

/// The machines that look deleting while no create or delete of this rollout runs on them
/// (`running`: the machines of its children in flight).
pub fn stranded<'a>(machines: &'a [ObservedMachine], running: &[&str]) -> Vec<&'a ObservedMachine> {
    machines
        .iter()
        .filter(|m| m.activity == Activity::Deleting && !running.contains(&m.name.as_str()))
        .collect()
}

/// Why a stranded machine is deleted again: the reason it would be deleted now (its template is
/// outdated, it is broken, or it is one too many), which also decides whether its do-not-disrupt
/// marks count (`hold::disruption_of`).
pub fn retry_reason(
    machine: &ObservedMachine,
    template_hash: &str,
    now: i64,
    health_timeout_secs: i64,
) -> DeleteReason {
    if machine.is_unhealthy(now, health_timeout_secs) {
        DeleteReason::Unhealthy
    } else if machine.template_hash != template_hash {
        DeleteReason::Outdated
    } else {
        DeleteReason::Surplus
    }
}

/// What a look decides about stranded machines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retries {
    /// Delete these again now.
    pub now: Vec<Victim>,
    /// Every stranded machine and its retry, as the status keeps them (machines no longer
    /// stranded are forgotten).
    pub kept: Vec<DeleteRetry>,
}

/// The retries after a look at `now` (Unix seconds): each stranded machine keeps its record (a
/// new one starts its [`FIRST_RETRY_SECS`]); those due are deleted again now, and their
/// record's `last_at` moves to now. Records of machines no longer stranded are dropped, except,
/// with `keep_failed`, those with failed deletes of machines still in the pool (a delete that
/// failed before the cordon, or a machine a child works on again): the next failure then waits
/// longer.
pub fn plan_retries(
    machines: &[ObservedMachine],
    running: &[&str],
    known: &[DeleteRetry],
    template_hash: &str,
    now: i64,
    health_timeout_secs: i64,
    keep_failed: bool,
) -> Retries {
    let mut retries = Retries::default();
    for machine in stranded(machines, running) {
        let record = known.iter().find(|r| r.machine == machine.name);
        let mut record = record.cloned().unwrap_or_else(|| {
            let outdated = machine.template_hash != template_hash;
            DeleteRetry {
                machine: machine.name.clone(),
                failures: 0,
                last_at: now,
                reason: if outdated {
                    "found being deleted with no delete of this rollout running".to_owned()
                } else {
                    format!(
                        "drained by someone else, no delete of this rollout ran on it; left alone: delete it (nodewright machine delete {}) or give it back (nodewright machine uncordon {})",
                        machine.name, machine.name
                    )
                },
                left_alone: !outdated,
            }
        });
        if !record.left_alone && record.due_at() <= now {
            record.last_at = now;
            retries.now.push(Victim {
                name: machine.name.clone(),
                reason: retry_reason(machine, template_hash, now, health_timeout_secs),
            });
        }
        retries.kept.push(record);
    }
    if keep_failed {
        let others: Vec<DeleteRetry> = failed_elsewhere(machines, known, &retries.kept)
            .cloned()
            .collect();
        retries.kept.extend(others);
    }
    retries
}

/// The records of failed deletes of machines still in the pool that [`plan_retries`] drops
/// without `keep_failed` (none of them is in `kept`, the stranded machines' records).
fn failed_elsewhere<'a>(
    machines: &'a [ObservedMachine],
    known: &'a [DeleteRetry],
    kept: &'a [DeleteRetry],
) -> impl Iterator<Item = &'a DeleteRetry> + 'a {
    known.iter().filter(move |record| {
        record.failures > 0
            && !kept.iter().any(|k| k.machine == record.machine)
            && machines.iter().any(|m| m.name == record.machine)
    })
}

/// A machine held out of the plan until its retry is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackoffHold {
    /// The machine.
    pub machine: String,
    /// Why, for people: the last failure and how many.
    pub reason: String,
    /// When it may be chosen again (Unix seconds): its record's due time.
    pub until: i64,
}

/// The machines to hold out of the plan at `now` (Unix seconds): each machine in the pool, Idle
/// and with no child of the rollout on it (`running`), whose delete failed (`known`, the
/// status's records) and whose back-off has not passed; a machine `held` that long already is
/// left out. A stranded machine needs no hold (the planner never picks a machine that looks
/// deleting; [`plan_retries`] deletes it again).
pub fn backoff_holds(
    known: &[DeleteRetry],
    held: &[HeldMachine],
    machines: &[ObservedMachine],
    running: &[&str],
    now: i64,
) -> Vec<BackoffHold> {
    known
        .iter()
        .filter(|record| record.failures > 0 && !record.left_alone && record.due_at() > now)
        .filter(|record| {
            machines.iter().any(|m| {
                m.name == record.machine
                    && m.activity == Activity::Idle
                    && !running.contains(&m.name.as_str())
            })
        })
        .filter(|record| {
            !held
                .iter()
                .any(|h| h.machine == record.machine && h.recheck_at >= record.due_at())
        })
        .map(|record| BackoffHold {
            machine: record.machine.clone(),
            reason: format!(
                "{} ({}); not chosen again until its back-off of {}s has passed",
                record.reason,
                failed_deletes(record.failures),
                backoff_secs(record.failures)
            ),
            until: record.due_at(),
        })
        .collect()
}

/// `1 failed delete`, `3 failed deletes`.
fn failed_deletes(failures: u32) -> String {
    match failures {
        1 => "1 failed delete".to_owned(),
        n => format!("{n} failed deletes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::Health;

    fn machine(name: &str, template: &str, activity: Activity) -> ObservedMachine {
        ObservedMachine {
            name: name.to_owned(),
            template_hash: template.to_owned(),
            health: Health::Ready,
            created_at: 0,
            activity,
            tainted_outdated: false,
            zone: None,
            ready_since: 0,
        }
    }

    #[test]
    fn back_off_doubles_from_thirty_seconds_up_to_ten_minutes() {
        let table = [
            (0, 30),
            (1, 30),
            (2, 60),
            (3, 120),
            (4, 240),
            (5, 480),
            (6, 600),
            (40, 600),
            (u32::MAX, 600),
        ];
        for (failures, secs) in table {
            assert_eq!(backoff_secs(failures), secs, "after {failures} failures");
        }
    }

    #[test]
    fn only_machines_deleting_without_a_child_of_the_rollout_are_stranded() {
        let machines = [
            machine("a", "new", Activity::Deleting),
            machine("b", "new", Activity::Deleting),
            machine("c", "new", Activity::Idle),
            machine("d", "new", Activity::Creating),
        ];
        let names: Vec<&str> = stranded(&machines, &["b"])
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(names, ["a"]);
    }

    #[test]
    fn a_machine_found_stranded_waits_thirty_seconds_then_is_deleted_again() {
        let machines = [machine("p-old", "old", Activity::Deleting)];
        let first = plan_retries(&machines, &[], &[], "new", 1_000, 300, false);
        assert!(first.now.is_empty(), "{first:?}");
        assert_eq!(first.kept.len(), 1);
        assert_eq!(first.kept[0].due_at(), 1_030);

        let early = plan_retries(&machines, &[], &first.kept, "new", 1_029, 300, false);
        assert!(early.now.is_empty());
        let due = plan_retries(&machines, &[], &early.kept, "new", 1_030, 300, false);
        assert_eq!(
            due.now,
            [Victim {
                name: "p-old".to_owned(),
                reason: DeleteReason::Outdated
            }]
        );
        assert_eq!(due.kept[0].last_at, 1_030, "the try restarts the wait");
        let again = plan_retries(&machines, &[], &due.kept, "new", 1_031, 300, false);
        assert!(again.now.is_empty(), "one try per back-off: {again:?}");
    }

    #[test]
    fn failed_deletes_wait_longer_and_records_of_machines_gone_are_dropped() {
        let failed_twice = DeleteRetry {
            machine: "p-a".to_owned(),
            failures: 2,
            last_at: 2_100,
            reason: "its delete failed: VM delete failed again".to_owned(),
            left_alone: false,
        };
        assert_eq!(failed_twice.due_at(), 2_160);

        let machines = [
            machine("p-a", "new", Activity::Deleting),
            machine("p-b", "new", Activity::Idle),
        ];
        let known = [
            failed_twice,
            DeleteRetry {
                machine: "p-gone".to_owned(),
                failures: 1,
                last_at: 0,
                reason: String::new(),
                left_alone: false,
            },
        ];
        let retries = plan_retries(&machines, &[], &known, "new", 2_159, 300, false);
        assert!(retries.now.is_empty());
        let kept: Vec<&str> = retries.kept.iter().map(|r| r.machine.as_str()).collect();
        assert_eq!(kept, ["p-a"]);
        let retries = plan_retries(&machines, &[], &known, "new", 2_160, 300, false);
        assert_eq!(retries.now.len(), 1);
        assert_eq!(retries.now[0].reason, DeleteReason::Surplus);
    }

    #[test]
    fn a_machine_a_child_works_on_is_not_retried() {
        let machines = [machine("p-a", "old", Activity::Deleting)];
        let known = [DeleteRetry {
            machine: "p-a".to_owned(),
            failures: 1,
            last_at: 0,
            reason: String::new(),
            left_alone: false,
        }];
        let retries = plan_retries(&machines, &["p-a"], &known, "new", 10_000, 300, false);
        assert_eq!(retries, Retries::default());
    }

    #[test]
    fn a_new_machine_drained_by_someone_else_is_left_alone_and_named() {
        let machines = [machine("p-new", "new", Activity::Deleting)];
        let first = plan_retries(&machines, &[], &[], "new", 0, 300, false);
        let later = plan_retries(&machines, &[], &first.kept, "new", 100_000, 300, false);
        assert!(later.now.is_empty(), "{later:?}");
        assert!(later.kept[0].left_alone);
        assert!(
            later.kept[0]
                .reason
                .contains("nodewright machine uncordon p-new"),
            "{}",
            later.kept[0].reason
        );

        let mut failed = later.kept;
        failed[0].failures = 1;
        failed[0].left_alone = false;
        failed[0].last_at = 100_000;
        let due = plan_retries(&machines, &[], &failed, "new", 100_030, 300, false);
        assert_eq!(
            due.now.len(),
            1,
            "once a delete of the rollout failed on it"
        );
    }

    fn failed(machine: &str, failures: u32, last_at: i64) -> DeleteRetry {
        DeleteRetry {
            machine: machine.to_owned(),
            failures,
            last_at,
            reason: "its delete failed: a pre-delete hook refused".to_owned(),
            left_alone: false,
        }
    }

    /// `backoff_holds` for one record against one machine at `now`: the hold's end, if any.
    fn check_hold(
        record: DeleteRetry,
        machine: Option<Activity>,
        running: bool,
        held_until: Option<i64>,
        now: i64,
    ) -> Option<i64> {
        let machines: Vec<ObservedMachine> = machine
            .into_iter()
            .map(|activity| self::machine("p-a", "old", activity))
            .collect();
        let running: &[&str] = if running { &["p-a"] } else { &[] };
        let held: Vec<HeldMachine> = held_until
            .into_iter()
            .map(|recheck_at| HeldMachine {
                machine: "p-a".to_owned(),
                reason: String::new(),
                since: 0,
                recheck_at,
                after_failed_delete: false,
            })
            .collect();
        let holds = backoff_holds(&[record], &held, &machines, running, now);
        assert!(holds.len() <= 1, "{holds:?}");
        holds.first().map(|hold| hold.until)
    }

    #[test]
    fn a_delete_that_failed_before_the_cordon_holds_its_machine_until_the_back_off_passed() {
        use Activity::{Creating, Deleting, Idle};
        let left_alone = DeleteRetry {
            left_alone: true,
            ..failed("p-a", 1, 1_000)
        };
        let table = [
            // (case, record, the machine as seen, a child on it, held until, now, held until)
            (
                "given back Idle: held",
                failed("p-a", 1, 1_000),
                Some(Idle),
                false,
                None,
                1_010,
                Some(1_030),
            ),
            (
                "held until the back-off, not a second longer",
                failed("p-a", 1, 1_000),
                Some(Idle),
                false,
                None,
                1_030,
                None,
            ),
            (
                "two failures: a longer wait",
                failed("p-a", 2, 1_000),
                Some(Idle),
                false,
                None,
                1_030,
                Some(1_060),
            ),
            (
                "held as long already",
                failed("p-a", 1, 1_000),
                Some(Idle),
                false,
                Some(1_030),
                1_010,
                None,
            ),
            (
                "a shorter do-not-disrupt hold is extended",
                failed("p-a", 1, 1_000),
                Some(Idle),
                false,
                Some(1_020),
                1_010,
                Some(1_030),
            ),
            (
                "stranded: deleted again by the retries, never planned",
                failed("p-a", 1, 1_000),
                Some(Deleting),
                false,
                None,
                1_010,
                None,
            ),
            (
                "a child works on it",
                failed("p-a", 1, 1_000),
                Some(Idle),
                true,
                None,
                1_010,
                None,
            ),
            (
                "creating",
                failed("p-a", 1, 1_000),
                Some(Creating),
                false,
                None,
                1_010,
                None,
            ),
            (
                "gone",
                failed("p-a", 1, 1_000),
                None,
                false,
                None,
                1_010,
                None,
            ),
            (
                "found stranded, never failed",
                failed("p-a", 0, 1_000),
                Some(Idle),
                false,
                None,
                1_010,
                None,
            ),
            (
                "left alone",
                left_alone,
                Some(Idle),
                false,
                None,
                1_010,
                None,
            ),
        ];
        for (case, record, seen, running, held_until, now, expected) in table {
            assert_eq!(
                check_hold(record, seen, running, held_until, now),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn records_of_failed_deletes_are_kept_while_their_machine_exists_when_asked() {
        let machines = [
            machine("p-idle", "old", Activity::Idle),
            machine("p-busy", "old", Activity::Deleting),
        ];
        let known = [
            failed("p-idle", 1, 1_000),
            failed("p-busy", 2, 1_000),
            failed("p-gone", 1, 1_000),
            DeleteRetry {
                failures: 0,
                ..failed("p-never", 0, 1_000)
            },
        ];
        let kept = |keep_failed| {
            plan_retries(
                &machines,
                &["p-busy"],
                &known,
                "new",
                1_010,
                300,
                keep_failed,
            )
            .kept
            .into_iter()
            .map(|r| (r.machine, r.failures))
            .collect::<Vec<_>>()
        };
        assert_eq!(kept(false), Vec::<(String, u32)>::new());
        assert_eq!(
            kept(true),
            [("p-idle".to_owned(), 1), ("p-busy".to_owned(), 2)],
            "failed records of machines still in the pool; the gone and the never failed dropped"
        );
    }

    #[test]
    fn a_machine_given_back_after_a_failed_delete_is_planned_again_only_after_its_back_off() {
        use crate::pool::Amount;
        use crate::rollout::plan::{Budget, Holdup, PlanInput, plan};
        use crate::rollout::{RolloutStatus, held_now, hold_after_failed_delete};

        // One replica: the new machine is up, the old one is a surplus to delete.
        let machines = [
            machine("p-old", "old", Activity::Idle),
            machine("p-new", "new", Activity::Idle),
        ];
        let mut status = RolloutStatus::empty();
        let planned_at = |status: &mut RolloutStatus, now: i64| {
            for hold in backoff_holds(&status.retries, &status.held, &machines, &[], now) {
                hold_after_failed_delete(
                    &mut status.held,
                    &hold.machine,
                    hold.reason,
                    now,
                    hold.until,
                );
            }
            let held = held_now(&status.held, now);
            let plan = plan(&PlanInput {
                replicas: 1,
                template_hash: "new",
                budget: Budget::resolve(Amount::Count(1), Amount::Count(0), 1),
                new_target: 1,
                machines: &machines,
                now,
                health_timeout_secs: 300,
                held: &held,
                held_firmly: &std::collections::BTreeSet::new(),
                min_ready_secs: 0,
            });
            status.retries =
                plan_retries(&machines, &[], &status.retries, "new", now, 300, true).kept;
            plan
        };
        assert_eq!(planned_at(&mut status, 990).delete.len(), 1, "planned once");
        status.book_delete_failure("p-old", "a pre-delete hook refused", 1_000);

        let held = planned_at(&mut status, 1_015);
        assert!(held.delete.is_empty(), "{held:?}");
        assert_eq!(held.holdup, Some(Holdup::DoNotDisrupt));
        assert!(status.held[0].after_failed_delete);
        assert!(
            status.held[0]
                .reason
                .contains("a pre-delete hook refused (1 failed delete)")
        );
        assert_eq!(status.retries[0].failures, 1, "the record stays");

        assert_eq!(planned_at(&mut status, 1_030).delete.len(), 1, "due again");
        status.book_delete_failure("p-old", "a pre-delete hook refused", 1_040);
        assert_eq!(
            status.retries[0].failures, 2,
            "the second failure counts on"
        );
        assert!(planned_at(&mut status, 1_099).delete.is_empty());
        assert_eq!(
            planned_at(&mut status, 1_100).delete.len(),
            1,
            "60 s after it"
        );
    }

    #[test]
    fn a_broken_stranded_machine_is_deleted_again_as_unhealthy() {
        let mut broken = machine("p-a", "new", Activity::Deleting);
        broken.health = Health::Failed;
        assert_eq!(
            retry_reason(&broken, "new", 0, 300),
            DeleteReason::Unhealthy
        );
    }
}
