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

use serde::{Deserialize, Serialize};

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
/// record's `last_at` moves to now; records of machines no longer stranded are dropped.
pub fn plan_retries(
    machines: &[ObservedMachine],
    running: &[&str],
    known: &[DeleteRetry],
    template_hash: &str,
    now: i64,
    health_timeout_secs: i64,
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
    retries
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
        let first = plan_retries(&machines, &[], &[], "new", 1_000, 300);
        assert!(first.now.is_empty(), "{first:?}");
        assert_eq!(first.kept.len(), 1);
        assert_eq!(first.kept[0].due_at(), 1_030);

        let early = plan_retries(&machines, &[], &first.kept, "new", 1_029, 300);
        assert!(early.now.is_empty());
        let due = plan_retries(&machines, &[], &early.kept, "new", 1_030, 300);
        assert_eq!(
            due.now,
            [Victim {
                name: "p-old".to_owned(),
                reason: DeleteReason::Outdated
            }]
        );
        assert_eq!(due.kept[0].last_at, 1_030, "the try restarts the wait");
        let again = plan_retries(&machines, &[], &due.kept, "new", 1_031, 300);
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
        let retries = plan_retries(&machines, &[], &known, "new", 2_159, 300);
        assert!(retries.now.is_empty());
        let kept: Vec<&str> = retries.kept.iter().map(|r| r.machine.as_str()).collect();
        assert_eq!(kept, ["p-a"]);
        let retries = plan_retries(&machines, &[], &known, "new", 2_160, 300);
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
        let retries = plan_retries(&machines, &["p-a"], &known, "new", 10_000, 300);
        assert_eq!(retries, Retries::default());
    }

    #[test]
    fn a_new_machine_drained_by_someone_else_is_left_alone_and_named() {
        let machines = [machine("p-new", "new", Activity::Deleting)];
        let first = plan_retries(&machines, &[], &[], "new", 0, 300);
        let later = plan_retries(&machines, &[], &first.kept, "new", 100_000, 300);
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
        let due = plan_retries(&machines, &[], &failed, "new", 100_030, 300);
        assert_eq!(
            due.now.len(),
            1,
            "once a delete of the rollout failed on it"
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
