//! What each of RollingUpdate's signals does to the rollout's status, in each phase: the phase
//! moves by [`next_phase`]; a pause or an abort says who asked, a resume starts the failure count
//! again from 0, and an approval is recorded whatever the phase.

use super::phase::{PhaseEvent, next_phase};
use super::status::RolloutStatus;

/// A signal RollingUpdate takes (each carries who sent it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// `pause`: no new child from the next loop; those in flight finish.
    Pause,
    /// `resume`: goes on after a pause.
    Resume,
    /// `abort`: children in flight finish, nothing new starts, then the rollout ends `aborted`.
    Abort,
    /// `approve`: a canary rollout goes on beyond its canary.
    Approve,
}

impl Signal {
    /// The phase event this signal is.
    pub const fn event(self) -> PhaseEvent {
        match self {
            Signal::Pause => PhaseEvent::Pause,
            Signal::Resume => PhaseEvent::Resume,
            Signal::Abort => PhaseEvent::Abort,
            Signal::Approve => PhaseEvent::Approve,
        }
    }
}

impl RolloutStatus {
    /// Applies `signal`, sent `by` someone, to the status.
    pub fn signaled(&mut self, signal: Signal, by: &str) {
        if signal == Signal::Approve {
            self.approved_by = Some(by.to_owned());
        }
        let Some(phase) = next_phase(self.phase, signal.event()) else {
            return;
        };
        self.phase = phase;
        match signal {
            Signal::Pause => self.paused_because = Some(format!("paused by {by}")),
            Signal::Resume => {
                self.paused_because = None;
                self.failures_counted = 0;
            }
            Signal::Abort => self.paused_because = Some(format!("aborted by {by}")),
            Signal::Approve => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::phase::RolloutPhase::{
        self, Aborted, Aborting, AwaitingApproval, Canceled, Completed, Paused, Progressing,
    };

    /// What a status looks like after a signal: phase, why paused, failures counted, approver.
    type Seen = (
        RolloutPhase,
        Option<&'static str>,
        u32,
        Option<&'static str>,
    );

    fn status(phase: RolloutPhase, paused_because: Option<&str>) -> RolloutStatus {
        let mut status = RolloutStatus::empty();
        status.phase = phase;
        status.paused_because = paused_because.map(str::to_owned);
        status.failures_counted = 2;
        status
    }

    fn check(phase: RolloutPhase, before: Option<&str>, signal: Signal, expected: Seen) {
        let mut status = status(phase, before);
        status.signaled(signal, "ann@cli");
        let seen = (
            status.phase,
            status.paused_because.as_deref(),
            status.failures_counted,
            status.approved_by.as_deref(),
        );
        let (phase_after, because, counted, approved) = expected;
        assert_eq!(
            seen,
            (phase_after, because, counted, approved),
            "{phase:?} on {signal:?}"
        );
    }

    #[test]
    #[rustfmt::skip]
    fn each_signal_acts_in_each_phase_as_the_table_says() {
        const ITSELF: Option<&str> = Some("paused itself after 3 failed machine operations");
        let by = Some("ann@cli");
        let table: [(RolloutPhase, Option<&str>, Signal, Seen); 22] = [
            (Progressing, None, Signal::Pause, (Paused, Some("paused by ann@cli"), 2, None)),
            (AwaitingApproval, None, Signal::Pause, (Paused, Some("paused by ann@cli"), 2, None)),
            (Paused, ITSELF, Signal::Pause, (Paused, ITSELF, 2, None)),
            (Aborting, Some("aborted by bob"), Signal::Pause, (Aborting, Some("aborted by bob"), 2, None)),
            (Completed, None, Signal::Pause, (Completed, None, 2, None)),
            (Paused, ITSELF, Signal::Resume, (Progressing, None, 0, None)),
            (Paused, Some("paused by bob"), Signal::Resume, (Progressing, None, 0, None)),
            (Progressing, None, Signal::Resume, (Progressing, None, 2, None)),
            (AwaitingApproval, None, Signal::Resume, (AwaitingApproval, None, 2, None)),
            (Aborting, Some("aborted by bob"), Signal::Resume, (Aborting, Some("aborted by bob"), 2, None)),
            (Progressing, None, Signal::Abort, (Aborting, Some("aborted by ann@cli"), 2, None)),
            (Paused, Some("paused by bob"), Signal::Abort, (Aborting, Some("aborted by ann@cli"), 2, None)),
            (AwaitingApproval, None, Signal::Abort, (Aborting, Some("aborted by ann@cli"), 2, None)),
            (Aborting, Some("aborted by bob"), Signal::Abort, (Aborting, Some("aborted by ann@cli"), 2, None)),
            (Completed, None, Signal::Abort, (Completed, None, 2, None)),
            (Aborted, Some("aborted by bob"), Signal::Abort, (Aborted, Some("aborted by bob"), 2, None)),
            (Canceled, Some("canceled"), Signal::Abort, (Canceled, Some("canceled"), 2, None)),
            (AwaitingApproval, None, Signal::Approve, (Progressing, None, 2, by)),
            (Progressing, None, Signal::Approve, (Progressing, None, 2, by)),
            (Paused, Some("paused by bob"), Signal::Approve, (Paused, Some("paused by bob"), 2, by)),
            (Aborting, Some("aborted by bob"), Signal::Approve, (Aborting, Some("aborted by bob"), 2, by)),
            (Completed, None, Signal::Approve, (Completed, None, 2, by)),
        ];
        for (phase, before, signal, expected) in table {
            check(phase, before, signal, expected);
        }
    }
}
