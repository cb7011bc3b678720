//! How a rollout ends: its summary ([`ending_summary`]), the pool's template history it leaves
//! for a later `pool rollback` ([`history_after`]), the status it ends with
//! ([`RolloutStatus::end`]) and the one a continued run starts from
//! ([`RolloutStatus::carried_over`]), and the Nodes whose outdated taint it removes when it
//! ends aborted or cancelled ([`to_clear_on_end`]).

use std::collections::BTreeSet;

use super::observed::ObservedMachine;
use super::request::{PoolHistory, RolloutOutcome, TemplateRecord};
use super::status::RolloutStatus;
use crate::pool::ValidPool;

/// The one line that says how the rollout of `pool` ended, from its last `status`.
pub fn ending_summary(outcome: RolloutOutcome, pool: &ValidPool, status: &RolloutStatus) -> String {
    let counts = status.counts;
    let word = match outcome {
        RolloutOutcome::Completed => {
            return format!(
                "pool {} runs template {}: {} machines Ready ({} created, {} deleted)",
                pool.name, pool.template_hash, counts.available, status.created, status.deleted
            );
        }
        RolloutOutcome::Aborted => "aborted",
        RolloutOutcome::Canceled => "canceled",
    };
    format!(
        "{word}: pool {} has {} machines for {} replicas: {} of template {} and {} of older templates, {} available ({} created, {} deleted); roll again or `nodewright pool rollback {}` to make it whole",
        pool.name,
        counts.total,
        pool.replicas,
        counts.updated,
        pool.template_hash,
        counts.old,
        counts.available,
        status.created,
        status.deleted,
        pool.name
    )
}

/// The machines whose outdated taint a rollout that ends now removes: those a look saw tainted,
/// and those this run tainted (`marked`) after the look that saw them (an abort that ends the
/// round that tainted them). The taint means "the running rollout replaces this machine": with
/// the rollout gone nobody would remove it.
pub fn to_clear_on_end<'a>(
    machines: &'a [ObservedMachine],
    marked: &BTreeSet<String>,
) -> Vec<&'a ObservedMachine> {
    machines
        .iter()
        .filter(|m| m.tainted_outdated || marked.contains(&m.name))
        .collect()
}

/// The pool's template history after a rollout of `pool` ended so: a completed rollout makes
/// its template the current one (and the one before it what `pool rollback` rolls back to); an
/// aborted or canceled one changes nothing.
pub fn history_after(
    outcome: RolloutOutcome,
    history: &PoolHistory,
    pool: &ValidPool,
) -> PoolHistory {
    match outcome {
        RolloutOutcome::Completed => history.completed(TemplateRecord {
            template_hash: pool.template_hash.clone(),
            template: pool.template.clone(),
        }),
        RolloutOutcome::Aborted | RolloutOutcome::Canceled => history.clone(),
    }
}

impl RolloutStatus {
    /// The status as the rollout ends so: the outcome's phase, the summary, nothing in flight
    /// or holding up.
    pub fn end(&mut self, outcome: RolloutOutcome, summary: String) {
        self.phase = outcome.phase();
        self.summary = Some(summary);
        self.in_flight.clear();
        self.holdup = None;
    }

    /// The status a run continued as new starts from: this one, one continuation more, its
    /// children in flight kept (the next run finds them again by their workflow IDs,
    /// [`crate::rollout::inherited`]), the machines left out (the next look shows them again:
    /// a large pool's list would weigh on both runs' histories).
    pub fn carried_over(mut self) -> Self {
        self.continuation = self.continuation.saturating_add(1);
        self.machines.clear();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::from_yaml;
    use crate::rollout::phase::RolloutPhase;
    use crate::rollout::plan::Counts;
    use crate::rollout::status::{ChildKind, InFlight};

    fn pool() -> ValidPool {
        from_yaml(include_str!("../../../examples/pools/workers.yaml"))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn status() -> RolloutStatus {
        let mut status = RolloutStatus::empty();
        status.counts = Counts {
            total: 4,
            updated: 1,
            available: 3,
            old: 2,
            ..Counts::default()
        };
        status.created = 1;
        status.deleted = 1;
        status
    }

    #[test]
    fn an_ending_rollout_clears_the_taint_it_saw_and_the_taint_it_put() {
        use crate::rollout::observed::{Activity, Health};
        let machine = |name: &str, tainted_outdated: bool| ObservedMachine {
            name: name.to_owned(),
            template_hash: "old".to_owned(),
            health: Health::Ready,
            created_at: 0,
            activity: Activity::Idle,
            tainted_outdated,
            zone: None,
            ready_since: 0,
        };
        let machines = [
            machine("p-seen", true),
            machine("p-marked", false),
            machine("p-clean", false),
        ];
        let marked = BTreeSet::from(["p-marked".to_owned(), "p-gone".to_owned()]);
        let names: Vec<&str> = to_clear_on_end(&machines, &marked)
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(names, ["p-seen", "p-marked"]);
        assert!(to_clear_on_end(&machines[2..], &BTreeSet::new()).is_empty());
    }

    #[test]
    fn each_ending_is_summed_up_in_one_line() {
        let pool = pool();
        let (name, hash, replicas) = (&pool.name, &pool.template_hash, pool.replicas);
        let mixed = |word: &str| {
            format!(
                "{word}: pool {name} has 4 machines for {replicas} replicas: 1 of template {hash} and 2 of older templates, 3 available (1 created, 1 deleted); roll again or `nodewright pool rollback {name}` to make it whole"
            )
        };
        let table = [
            (
                RolloutOutcome::Completed,
                format!(
                    "pool {name} runs template {hash}: 3 machines Ready (1 created, 1 deleted)"
                ),
            ),
            (RolloutOutcome::Aborted, mixed("aborted")),
            (RolloutOutcome::Canceled, mixed("canceled")),
        ];
        for (outcome, expected) in table {
            assert_eq!(ending_summary(outcome, &pool, &status()), expected);
        }
    }

    #[test]
    fn only_a_completed_rollout_changes_what_a_rollback_rolls_to() {
        let pool = pool();
        let before = PoolHistory {
            current: Some(TemplateRecord {
                template_hash: "older".to_owned(),
                template: pool.template.clone(),
            }),
            previous: None,
        };
        let hashes = |h: &PoolHistory| {
            (
                h.current.as_ref().map(|r| r.template_hash.clone()),
                h.previous.as_ref().map(|r| r.template_hash.clone()),
            )
        };
        let table = [
            (
                RolloutOutcome::Completed,
                (Some(pool.template_hash.clone()), Some("older".to_owned())),
            ),
            (RolloutOutcome::Aborted, (Some("older".to_owned()), None)),
            (RolloutOutcome::Canceled, (Some("older".to_owned()), None)),
        ];
        for (outcome, expected) in table {
            assert_eq!(
                hashes(&history_after(outcome, &before, &pool)),
                expected,
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn an_ended_status_has_the_outcomes_phase_and_nothing_in_flight() {
        for (outcome, phase) in [
            (RolloutOutcome::Completed, RolloutPhase::Completed),
            (RolloutOutcome::Aborted, RolloutPhase::Aborted),
            (RolloutOutcome::Canceled, RolloutPhase::Canceled),
        ] {
            let mut status = status();
            status.holdup = Some(crate::rollout::plan::Holdup::Budget);
            status.in_flight.push(InFlight {
                machine: "m".to_owned(),
                kind: ChildKind::Create,
                workflow_id: "create/c/m".to_owned(),
                started_at: 0,
                zone: None,
                run_id: None,
                capacity_type: None,
            });
            status.end(outcome, "done".to_owned());
            assert_eq!(status.phase, phase);
            assert_eq!(status.summary.as_deref(), Some("done"));
            assert!(status.in_flight.is_empty() && status.holdup.is_none());
        }
    }

    #[test]
    fn a_continued_run_counts_one_continuation_more_and_keeps_its_children_in_flight() {
        let mut status = status();
        status.continuation = 2;
        status.in_flight = vec![InFlight {
            machine: "workers-abc12".to_owned(),
            kind: ChildKind::Delete,
            workflow_id: "delete/dev/workers-abc12".to_owned(),
            started_at: 1_000,
            zone: None,
            run_id: None,
            capacity_type: None,
        }];
        let next = status.clone().carried_over();
        assert_eq!(next.continuation, 3);
        assert_eq!(
            RolloutStatus {
                continuation: 3,
                machines: Vec::new(),
                ..status
            },
            next
        );
        assert_eq!(next.in_flight.len(), 1, "found again by the next run");
    }
}
