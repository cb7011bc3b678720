//! How RollingUpdate books a child that ended or could not start: a success counts and times
//! it; a failure is listed and, when it counts, spends the failure budget, and the rollout pauses
//! itself once `max_failures` counted failures are reached ([`self_pause_due`]).

use super::phase::{PhaseEvent, RolloutPhase, next_phase};
use super::retry::DeleteRetry;
use super::status::{ChildFailure, ChildKind, InFlight, RolloutStatus};
use crate::cancel::delete_finished_anyway;

/// How a child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildEnd {
    /// It did what it was started for.
    Succeeded,
    /// It failed: why.
    Failed(String),
    /// Cancelled with the rollout: it ended by its own runbook (a create removed what it made,
    /// a delete gave its machine back or finished past its point of no return).
    Canceled(String),
}

impl ChildEnd {
    /// Whether a child of `kind` that ended so is booked only after the rollout's last look: a
    /// cancelled delete may have finished past its point of no return, which that look tells.
    pub fn waits_for_last_look(&self, kind: ChildKind) -> bool {
        matches!(self, ChildEnd::Canceled(_)) && kind == ChildKind::Delete
    }

    /// How a child of `machine` that ended so and waited for the last look ended, given the
    /// machines that look saw (`None` when it could not look): a cancelled delete whose machine
    /// that look no longer sees finished the deletion (it was past its point of no return).
    pub fn after_last_look(self, machine: &str, seen: Option<&[&str]>) -> Self {
        match (self, seen) {
            (ChildEnd::Canceled(_), Some(left)) if delete_finished_anyway(machine, left) => {
                ChildEnd::Succeeded
            }
            (end, _) => end,
        }
    }
}

/// Whether a rollout in `phase` with `failures_counted` counted failures pauses itself under
/// `max_failures`: only a progressing rollout does, once the count reaches the maximum.
pub const fn self_pause_due(phase: RolloutPhase, failures_counted: u32, max_failures: u32) -> bool {
    failures_counted >= max_failures && next_phase(phase, PhaseEvent::FailureBudgetSpent).is_some()
}

impl RolloutStatus {
    /// Books a delete of `machine` that failed at `at` (Unix seconds) because of `reason`: its
    /// retry waits longer (counting toward `maxFailures` is `book_child`'s).
    pub fn book_delete_failure(&mut self, machine: &str, reason: &str, at: i64) {
        let line = format!("its delete failed: {reason}");
        match self.retries.iter_mut().find(|r| r.machine == machine) {
            Some(record) => {
                record.failures = record.failures.saturating_add(1);
                record.last_at = at;
                record.reason = line;
                record.left_alone = false;
            }
            None => self.retries.push(DeleteRetry {
                machine: machine.to_owned(),
                failures: 1,
                last_at: at,
                reason: line,
                left_alone: false,
            }),
        }
    }

    /// Books `entry`, a child of the rollout of `pool`, that ended so at `at_millis` (Unix
    /// milliseconds): a success is timed and counted (a deleted machine's retry record goes); a failure is listed and counted against
    /// `max_failures`; a cancelled child is listed without counting.
    pub fn book_child(&mut self, entry: InFlight, end: ChildEnd, at_millis: i64, pool: &str) {
        let at = at_millis.div_euclid(1000);
        match end {
            ChildEnd::Succeeded => {
                let millis = u64::try_from(at_millis.saturating_sub(entry.started_at)).unwrap_or(0);
                self.timings.record(entry.kind, millis);
                match entry.kind {
                    ChildKind::Create => self.created = self.created.saturating_add(1),
                    ChildKind::Delete => {
                        self.deleted = self.deleted.saturating_add(1);
                        // Deleted at last: nothing of it is retried or held any more.
                        self.retries.retain(|r| r.machine != entry.machine);
                    }
                }
            }
            ChildEnd::Failed(reason) => self.book_failure(entry, reason, true, at, pool),
            ChildEnd::Canceled(reason) => {
                self.book_failure(entry, format!("canceled: {reason}"), false, at, pool);
            }
        }
    }

    /// Lists `entry`'s failure at `at` (Unix seconds); a `counted` one spends the failure budget
    /// and may pause the rollout of `pool` itself, saying why and how to go on.
    pub fn book_failure(
        &mut self,
        entry: InFlight,
        reason: String,
        counted: bool,
        at: i64,
        pool: &str,
    ) {
        let machine = entry.machine.clone();
        self.failures.push(ChildFailure {
            machine: entry.machine,
            kind: entry.kind,
            workflow_id: entry.workflow_id,
            reason: reason.clone(),
            at,
        });
        if !counted {
            return;
        }
        self.failures_counted = self.failures_counted.saturating_add(1);
        if self_pause_due(self.phase, self.failures_counted, self.max_failures) {
            self.phase = RolloutPhase::Paused;
            self.paused_because = Some(format!(
                "paused itself after {} failed machine operations (maxFailures {}); last: {machine}: {reason}. Fix the cause, then run `nodewright pool rollout resume {pool}`",
                self.failures_counted, self.max_failures
            ));
        }
    }
}

#[cfg(test)]
mod tests;
