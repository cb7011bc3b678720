//! What RollingUpdate's `status` query answers, and the pure judgements behind it: whether the
//! pool made progress, and how long is left.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::observed::{Activity, Health, ObservedMachine};
use super::phase::RolloutPhase;
use super::plan::{Budget, Counts, Holdup};
use crate::pool::{Amount, RolloutStrategy};

/// Which kind of child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChildKind {
    /// CreateMachine.
    Create,
    /// DeleteMachine.
    Delete,
}

/// A child workflow in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InFlight {
    /// The machine it creates or deletes.
    pub machine: String,
    /// Create or delete.
    pub kind: ChildKind,
    /// Its workflow ID.
    pub workflow_id: String,
    /// When it started, Unix milliseconds.
    pub started_at: i64,
    /// For a create, the zone the rollout gave it (see [`crate::capacity::choose_zones`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Its run ID, from its start: the run whose end is booked and which is asked to cancel,
    /// never a newer run under the same workflow ID (`machine delete`, the sweep or a retry may
    /// start one once it ended). Absent in statuses carried by runs recorded before it was kept
    /// (those are asked about by workflow ID, their latest run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// For a create of a pool whose template lists capacity types, the type the rollout gave
    /// it (see [`crate::capacity::offering`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<crate::pool::CapacityType>,
}

/// A child that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildFailure {
    /// The machine.
    pub machine: String,
    /// Create or delete.
    pub kind: ChildKind,
    /// Its workflow ID (open it in the UI for every attempt).
    pub workflow_id: String,
    /// What happened.
    pub reason: String,
    /// When, Unix seconds.
    pub at: i64,
}

/// One machine of the pool, for the status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineView {
    /// The machine.
    pub name: String,
    /// Its template hash.
    pub template_hash: String,
    /// Whether that is the rollout's template.
    pub updated: bool,
    /// How it is doing.
    pub health: Health,
    /// What is being done to it.
    pub activity: Activity,
    /// The availability zone its VM is in, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Seconds after the look until this Ready machine counts available, while it warms up for
    /// `minReadySeconds`; none when it is available (or not Ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_in: Option<i64>,
}

impl MachineView {
    /// `machine` as the status shows it, in a rollout to `template_hash`, at a look at `at`
    /// (Unix seconds) under `min_ready_secs` (`minReadySeconds`).
    pub fn of(
        machine: &ObservedMachine,
        template_hash: &str,
        at: i64,
        min_ready_secs: i64,
    ) -> Self {
        Self {
            name: machine.name.clone(),
            template_hash: machine.template_hash.clone(),
            updated: machine.template_hash == template_hash,
            health: machine.health,
            activity: machine.activity,
            zone: machine.zone.clone(),
            available_in: machine
                .available_at(at, min_ready_secs)
                .map(|then| then.saturating_sub(at)),
        }
    }
}

/// The strategy in force and what it resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StrategyView {
    /// maxSurge as given.
    pub max_surge: Amount,
    /// maxUnavailable as given.
    pub max_unavailable: Amount,
    /// Both in machines for the pool's replicas.
    pub budget: Budget,
}

impl StrategyView {
    /// `strategy` and what it resolves to for `replicas` machines.
    pub fn of(strategy: &RolloutStrategy, replicas: u32) -> Self {
        Self {
            max_surge: strategy.max_surge,
            max_unavailable: strategy.max_unavailable,
            budget: Budget::resolve(strategy.max_surge, strategy.max_unavailable, replicas),
        }
    }
}

/// Whether a count or time is zero (left out of the status, as before it existed).
fn is_zero(value: &i64) -> bool {
    *value == 0
}

/// The strategy a rollout uses when it has none yet (before its first step): maxSurge 1,
/// maxUnavailable 0, maxFailures 3, a progress deadline of 30 minutes, no minReadySeconds, no
/// soak.
pub fn fallback_strategy() -> RolloutStrategy {
    RolloutStrategy {
        max_surge: Amount::Count(1),
        max_unavailable: Amount::Count(0),
        max_failures: 3,
        progress_deadline: std::time::Duration::from_secs(30 * 60),
        min_ready: std::time::Duration::ZERO,
        soak: std::time::Duration::ZERO,
    }
}

/// Durations measured so far, for the estimate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    /// Creates finished.
    pub creates: u32,
    /// Their total milliseconds.
    pub create_millis: u64,
    /// Deletes finished (drain included).
    pub deletes: u32,
    /// Their total milliseconds.
    pub delete_millis: u64,
}

impl Timings {
    /// Records a finished child that ran `millis` milliseconds.
    pub fn record(&mut self, kind: ChildKind, millis: u64) {
        match kind {
            ChildKind::Create => {
                self.creates = self.creates.saturating_add(1);
                self.create_millis = self.create_millis.saturating_add(millis);
            }
            ChildKind::Delete => {
                self.deletes = self.deletes.saturating_add(1);
                self.delete_millis = self.delete_millis.saturating_add(millis);
            }
        }
    }

    /// The average create and delete durations in milliseconds, once each happened.
    pub fn averages_millis(&self) -> Option<(u64, u64)> {
        if self.creates == 0 || self.deletes == 0 {
            return None;
        }
        Some((
            self.create_millis / u64::from(self.creates),
            self.delete_millis / u64::from(self.deletes),
        ))
    }

    /// Seconds left to replace `remaining` machines at `pace` machines per create-plus-delete
    /// time, from the average durations so far; `None` before one create and one delete
    /// finished.
    pub fn estimate_seconds_left(&self, remaining: u32, pace: u32) -> Option<u64> {
        if remaining == 0 {
            return Some(0);
        }
        let (create, delete) = self.averages_millis()?;
        let waves = u64::from(remaining.div_ceil(pace.max(1)));
        Some(waves.saturating_mul(create.saturating_add(delete)) / 1000)
    }
}

/// Whether the pool moved forward between two looks (Kubernetes' notion of progress: more
/// available new-template machines, fewer old, more ready or more available machines).
///
/// A create that starts is not progress: `updated` counts a machine from its create's start,
/// so a create that fails and is retried under a new name would take `updated` down and up
/// again at every attempt and the rollout would never show stalled. Only a machine that came
/// up (available with the new template) counts.
pub fn made_progress(before: &Counts, after: &Counts) -> bool {
    after.updated_available > before.updated_available
        || after.old < before.old
        || after.ready > before.ready
        || after.available > before.available
}

/// The answer of RollingUpdate's `status` query (and what a continued run resumes from).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The pool.
    pub pool: String,
    /// The template rolled to.
    pub template_hash: String,
    /// The pool's template before (from its last completed rollout), if recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_template_hash: Option<String>,
    /// Where the rollout is.
    pub phase: RolloutPhase,
    /// Why it is paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_because: Option<String>,
    /// Set when no progress was made for the progress deadline: why. The rollout goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled: Option<String>,
    /// Why the last plan started nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holdup: Option<Holdup>,
    /// The limit that cut the last batch of creates, in words ("subnet workers: 2 free
    /// addresses, 3 needed"); none when the batch fit or nothing was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<String>,
    /// The maintenance windows that gate this rollout, in words (`closed; opens 2026-11-30
    /// 02:00 UTC`); none when none gates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// The soak under way (`strategy.soak`): the batch and until when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<crate::rollout::Soak>,
    /// Every new machine available at or before this time (Unix seconds) has soaked (kept
    /// through continue-as-new).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub soaked_through: i64,
    /// `replicas`.
    pub desired: u32,
    /// The pool in numbers at the last look.
    pub counts: Counts,
    /// The strategy in force.
    pub strategy: StrategyView,
    /// The canary size, when the rollout has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<u32>,
    /// Whether the rollout beyond the canary was approved (and by whom).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// Failed children counted against `max_failures` since the last resume.
    pub failures_counted: u32,
    /// The strategy's `max_failures`.
    pub max_failures: u32,
    /// Every failed child.
    #[serde(default)]
    pub failures: Vec<ChildFailure>,
    /// Children in flight.
    #[serde(default)]
    pub in_flight: Vec<InFlight>,
    /// Machines left alone for now because they carry do-not-disrupt marks, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<crate::rollout::HeldMachine>,
    /// The VM sizes and zones that ran out of capacity, and until when new machines avoid them
    /// (kept through continue-as-new; see [`crate::capacity`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exhausted: Vec<crate::capacity::Exhausted>,
    /// Machines left deleting with no delete of this rollout running (a delete that failed), and
    /// when each is deleted again ([`crate::rollout::retry`]; kept through continue-as-new).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retries: Vec<crate::rollout::DeleteRetry>,
    /// The drain settings written on the new template's machines when they changed without the
    /// template ([`crate::rollout::restamp`]; kept through continue-as-new); none when no
    /// machine needed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_stamps: Option<crate::rollout::DrainStamps>,
    /// The pool's machines at the last look.
    #[serde(default)]
    pub machines: Vec<MachineView>,
    /// How many of them (not being deleted) are in each availability zone, as their VMs say
    /// (see [`crate::rollout::zones`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub zones: BTreeMap<String, u32>,
    /// Machines created by this rollout.
    pub created: u32,
    /// Machines deleted by this rollout.
    pub deleted: u32,
    /// When the rollout started, Unix seconds.
    pub started_at: i64,
    /// When the pool last made progress, Unix seconds.
    pub last_progress_at: i64,
    /// Durations of finished children.
    pub timings: Timings,
    /// Seconds left, estimated from the durations so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_seconds_left: Option<u64>,
    /// Continued-as-new runs before this one.
    pub continuation: u32,
    /// How it ended, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

impl RolloutStatus {
    /// The status of a rollout of `pool` to `template_hash` that starts at `started_at` (Unix
    /// seconds): progressing, nothing observed or done yet.
    pub fn new(
        pool: &str,
        template_hash: &str,
        desired: u32,
        strategy: StrategyView,
        max_failures: u32,
        started_at: i64,
    ) -> Self {
        Self {
            pool: pool.to_owned(),
            template_hash: template_hash.to_owned(),
            previous_template_hash: None,
            phase: RolloutPhase::Progressing,
            paused_because: None,
            stalled: None,
            holdup: None,
            capacity: None,
            window: None,
            soak: None,
            soaked_through: 0,
            desired,
            counts: Counts::default(),
            strategy,
            canary: None,
            approved_by: None,
            failures_counted: 0,
            max_failures,
            failures: Vec::new(),
            in_flight: Vec::new(),
            held: Vec::new(),
            exhausted: Vec::new(),
            retries: Vec::new(),
            drain_stamps: None,
            machines: Vec::new(),
            zones: BTreeMap::new(),
            created: 0,
            deleted: 0,
            started_at,
            last_progress_at: started_at,
            timings: Timings::default(),
            estimated_seconds_left: None,
            continuation: 0,
            summary: None,
        }
    }

    /// What the `status` query answers before the run has set its status.
    pub fn empty() -> Self {
        let strategy = fallback_strategy();
        Self::new(
            "",
            "",
            0,
            StrategyView::of(&strategy, 0),
            strategy.max_failures,
            0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_more_updated_available_fewer_old_more_ready_or_more_available() {
        let base = Counts {
            total: 6,
            updated: 2,
            updated_available: 2,
            ready: 6,
            available: 6,
            old: 4,
            ..Counts::default()
        };
        let table = [
            (
                Counts {
                    updated_available: 3,
                    ..base
                },
                true,
            ),
            (
                Counts {
                    total: 7,
                    updated: 3,
                    creating: 1,
                    ..base
                },
                false,
            ),
            (Counts { old: 3, ..base }, true),
            (Counts { ready: 7, ..base }, true),
            (
                Counts {
                    available: 7,
                    ..base
                },
                true,
            ),
            (base, false),
            (
                Counts {
                    total: 8,
                    creating: 2,
                    ..base
                },
                false,
            ),
            (
                Counts {
                    ready: 5,
                    available: 5,
                    ..base
                },
                false,
            ),
        ];
        for (after, expected) in table {
            assert_eq!(made_progress(&base, &after), expected, "{after:?}");
        }
    }

    #[test]
    fn the_estimate_counts_waves_of_the_pace() {
        let mut timings = Timings::default();
        assert_eq!(timings.estimate_seconds_left(4, 2), None);
        assert_eq!(timings.estimate_seconds_left(0, 2), Some(0));
        timings.record(ChildKind::Create, 30_000);
        timings.record(ChildKind::Create, 50_000);
        timings.record(ChildKind::Delete, 20_000);
        // average create 40 s + delete 20 s; 5 machines at 2 per wave = 3 waves.
        assert_eq!(timings.estimate_seconds_left(5, 2), Some(180));
        assert_eq!(timings.estimate_seconds_left(5, 0), Some(300));
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any recorded durations, however many or long, give an estimate without overflow,
        /// and none before a create and a delete finished.
        #[test]
        fn an_estimate_never_overflows(
            records in proptest::collection::vec((any::<bool>(), any::<u64>()), 0..20),
            remaining in any::<u32>(),
            pace in any::<u32>(),
        ) {
            let mut timings = Timings::default();
            for (create, millis) in records {
                let kind = if create { ChildKind::Create } else { ChildKind::Delete };
                timings.record(kind, millis);
            }
            let estimate = timings.estimate_seconds_left(remaining, pace);
            if remaining == 0 {
                prop_assert_eq!(estimate, Some(0));
            } else if timings.creates == 0 || timings.deletes == 0 {
                prop_assert_eq!(estimate, None);
            } else {
                prop_assert!(estimate.is_some());
            }
        }
    }
}
