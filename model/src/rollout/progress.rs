//! Stall detection: whether a look at the pool shows progress, stops the progress deadline's
//! clock (paused or waiting) or finds the rollout stalled ([`judge_progress`]), and how a look
//! updates the status ([`RolloutStatus::record_look`]).

use std::time::Duration;

use super::phase::RolloutPhase;
use super::plan::{Counts, Holdup};
use super::status::{MachineView, RolloutStatus, made_progress};
use super::zones::machines_per_zone;

/// What a look means for the progress deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressVerdict {
    /// The pool moved forward (or this is the first look): the clock starts again and a stall
    /// is over.
    Progressed,
    /// No progress, but the rollout is not progressing (paused, awaiting approval, aborting):
    /// the clock does not run.
    ClockHeld,
    /// No progress for the deadline: the rollout is stalled since `for_secs` seconds (it goes
    /// on).
    Stalled {
        /// Seconds since the last progress.
        for_secs: i64,
    },
    /// Nothing to record: the clock runs, or the stall is already recorded.
    Unchanged,
}

/// What [`judge_progress`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressInput {
    /// Whether the status has seen no look yet.
    pub first_look: bool,
    /// The counts at the last look.
    pub before: Counts,
    /// The counts now.
    pub after: Counts,
    /// The rollout's phase.
    pub phase: RolloutPhase,
    /// When the pool last made progress, Unix seconds.
    pub last_progress_at: i64,
    /// Whether a stall is already recorded.
    pub stalled: bool,
    /// Now, Unix seconds.
    pub at: i64,
    /// The progress deadline, seconds.
    pub deadline_secs: i64,
}

/// Judges a look against the progress deadline (Kubernetes' `progressDeadlineSeconds`).
pub fn judge_progress(input: &ProgressInput) -> ProgressVerdict {
    if input.first_look || made_progress(&input.before, &input.after) {
        return ProgressVerdict::Progressed;
    }
    if input.phase != RolloutPhase::Progressing {
        return ProgressVerdict::ClockHeld;
    }
    let for_secs = input.at.saturating_sub(input.last_progress_at);
    if for_secs >= input.deadline_secs && !input.stalled {
        ProgressVerdict::Stalled { for_secs }
    } else {
        ProgressVerdict::Unchanged
    }
}

/// Machines left to replace: the old ones, or the updated ones missing, whichever is more.
pub fn remaining(counts: &Counts, replicas: u32) -> u32 {
    counts.old.max(replicas.saturating_sub(counts.updated))
}

/// What one look at the pool saw, for [`RolloutStatus::record_look`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    /// The pool in numbers.
    pub counts: Counts,
    /// Its machines.
    pub machines: Vec<MachineView>,
    /// Why the plan started nothing.
    pub holdup: Option<Holdup>,
    /// When, Unix seconds.
    pub at: i64,
    /// The progress deadline.
    pub deadline: Duration,
    /// The pool's replicas.
    pub replicas: u32,
}

impl RolloutStatus {
    /// Brings the status up to date with `look`: progress or stall, counts, machines, holdup,
    /// the estimate of the time left.
    pub fn record_look(&mut self, look: Look) {
        let Look {
            counts,
            machines,
            holdup,
            at,
            deadline,
            replicas,
        } = look;
        let verdict = judge_progress(&ProgressInput {
            first_look: self.machines.is_empty() && self.counts == Counts::default(),
            before: self.counts,
            after: counts,
            phase: self.phase,
            last_progress_at: self.last_progress_at,
            stalled: self.stalled.is_some(),
            at,
            deadline_secs: i64::try_from(deadline.as_secs()).unwrap_or(i64::MAX),
        });
        match verdict {
            ProgressVerdict::Progressed => {
                self.last_progress_at = at;
                self.stalled = None;
            }
            ProgressVerdict::ClockHeld => self.last_progress_at = at,
            ProgressVerdict::Stalled { for_secs } => {
                self.stalled = Some(format!(
                    "no progress for {for_secs}s (progressDeadline): {} of {replicas} machines updated, {} available; see the failures and in-flight children",
                    counts.updated, counts.available
                ));
            }
            ProgressVerdict::Unchanged => {}
        }
        self.counts = counts;
        self.zones = machines_per_zone(&machines, &[], &[]);
        self.machines = machines;
        self.holdup = holdup;
        self.estimated_seconds_left = self
            .timings
            .estimate_seconds_left(remaining(&counts, replicas), self.strategy.budget.pace());
    }
}

#[cfg(test)]
mod tests;
