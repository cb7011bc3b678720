//! Where a rollout is ([`RolloutPhase`]), how it ended ([`RolloutOutcome`]) and the one rule of
//! how its phase moves ([`next_phase`]): every signal, observation and ending the RollingUpdate
//! workflow meets is a [`PhaseEvent`], and the table in the tests says which phase each leads
//! to, or that it is refused (the phase stays).

use serde::{Deserialize, Serialize};

/// Where a rollout is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RolloutPhase {
    /// Replacing machines.
    Progressing,
    /// Paused (by `pause`, or by itself after too many failures): nothing new starts; children
    /// in flight finish.
    Paused,
    /// The canary is done; waiting for `approve`.
    AwaitingApproval,
    /// `abort` asked: children in flight finish, nothing new starts.
    Aborting,
    /// Every machine runs the new template.
    Completed,
    /// Ended by `abort`.
    Aborted,
    /// Ended by a cancellation request: the children in flight were cancelled with it and
    /// ended by their own runbooks; nothing new started.
    Canceled,
}

impl RolloutPhase {
    /// The word the `NodewrightPhase` search attribute and the CLI show.
    pub const fn as_str(self) -> &'static str {
        match self {
            RolloutPhase::Progressing => "progressing",
            RolloutPhase::Paused => "paused",
            RolloutPhase::AwaitingApproval => "awaiting-approval",
            RolloutPhase::Aborting => "aborting",
            RolloutPhase::Completed => "completed",
            RolloutPhase::Aborted => "aborted",
            RolloutPhase::Canceled => "canceled",
        }
    }

    /// Whether the rollout has ended (completed, aborted or canceled): nothing moves it on.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            RolloutPhase::Completed | RolloutPhase::Aborted | RolloutPhase::Canceled
        )
    }
}

/// How a rollout ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RolloutOutcome {
    /// Every machine runs the new template, `replicas` of them, all Ready.
    Completed,
    /// Aborted: the children in flight finished, nothing new was started; the pool may mix
    /// templates.
    Aborted,
    /// Canceled: the children in flight were cancelled (a create removes what it made, a
    /// delete gives its machine back unless its VM delete was sent), nothing new was started;
    /// the pool may mix templates.
    Canceled,
}

/// What can move a rollout's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseEvent {
    /// Signal `pause`.
    Pause,
    /// Signal `resume`.
    Resume,
    /// Signal `abort`.
    Abort,
    /// Signal `approve`.
    Approve,
    /// A look found the canary's target reached with nothing in flight.
    CanaryReached,
    /// The counted failures reached `max_failures` (the rollout pauses itself).
    FailureBudgetSpent,
    /// The workflow ends the rollout so.
    Ended(RolloutOutcome),
}

/// The phase `event` moves a rollout in `current` to, or `None` when the event is refused there
/// (the phase stays; a signal may still record who sent it).
///
/// - `pause` stops a rollout that is progressing or awaiting approval.
/// - `resume` goes on from a pause, whoever paused it.
/// - `abort` ends any rollout that has not ended; asked again while aborting it is taken again
///   (the status names the last sender).
/// - `approve` lets a rollout awaiting approval go on (the approval is recorded in any phase).
/// - The canary's target and a spent failure budget stop only a progressing rollout.
/// - An ending is the workflow's call and always taken.
pub const fn next_phase(current: RolloutPhase, event: PhaseEvent) -> Option<RolloutPhase> {
    use RolloutPhase::{Aborting, AwaitingApproval, Paused, Progressing};
    match (current, event) {
        (_, PhaseEvent::Ended(outcome)) => Some(outcome.phase()),
        (phase, _) if phase.is_terminal() => None,
        (Progressing | AwaitingApproval, PhaseEvent::Pause) => Some(Paused),
        (Paused, PhaseEvent::Resume) => Some(Progressing),
        (_, PhaseEvent::Abort) => Some(Aborting),
        (AwaitingApproval, PhaseEvent::Approve) => Some(Progressing),
        (Progressing, PhaseEvent::CanaryReached) => Some(AwaitingApproval),
        (Progressing, PhaseEvent::FailureBudgetSpent) => Some(Paused),
        _ => None,
    }
}

impl RolloutOutcome {
    /// The phase a rollout that ended so is in.
    pub const fn phase(self) -> RolloutPhase {
        match self {
            RolloutOutcome::Completed => RolloutPhase::Completed,
            RolloutOutcome::Aborted => RolloutPhase::Aborted,
            RolloutOutcome::Canceled => RolloutPhase::Canceled,
        }
    }
}

/// The word the `NodewrightPhase` search attribute shows: the phase, or `stalled` while a
/// progressing rollout is stalled.
pub const fn shown_phase(phase: RolloutPhase, stalled: bool) -> &'static str {
    match phase {
        RolloutPhase::Progressing if stalled => "stalled",
        phase => phase.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PhaseEvent::{Abort, Approve, CanaryReached, Ended, FailureBudgetSpent, Pause, Resume};
    use RolloutOutcome::{Aborted as A, Canceled as X, Completed as C};
    use RolloutPhase::{
        Aborted, Aborting, AwaitingApproval, Canceled, Completed, Paused, Progressing,
    };

    /// Every event, in the order of the table's columns.
    const EVENTS: [PhaseEvent; 9] = [
        Pause,
        Resume,
        Abort,
        Approve,
        CanaryReached,
        FailureBudgetSpent,
        Ended(C),
        Ended(A),
        Ended(X),
    ];

    /// One row per phase: what each of [`EVENTS`] moves it to; `None` is refused.
    #[rustfmt::skip]
    const TABLE: [(RolloutPhase, [Option<RolloutPhase>; 9]); 7] = [
        //                 pause         resume             abort           approve            canary                  failures      completed        aborted        canceled
        (Progressing,      [Some(Paused), None,              Some(Aborting), None,              Some(AwaitingApproval), Some(Paused), Some(Completed), Some(Aborted), Some(Canceled)]),
        (Paused,           [None,         Some(Progressing), Some(Aborting), None,              None,                   None,         Some(Completed), Some(Aborted), Some(Canceled)]),
        (AwaitingApproval, [Some(Paused), None,              Some(Aborting), Some(Progressing), None,                   None,         Some(Completed), Some(Aborted), Some(Canceled)]),
        (Aborting,         [None,         None,              Some(Aborting), None,              None,                   None,         Some(Completed), Some(Aborted), Some(Canceled)]),
        (Completed,        [None,         None,              None,           None,              None,                   None,         Some(Completed), Some(Aborted), Some(Canceled)]),
        (Aborted,          [None,         None,              None,           None,              None,                   None,         Some(Completed), Some(Aborted), Some(Canceled)]),
        (Canceled,         [None,         None,              None,           None,              None,                   None,         Some(Completed), Some(Aborted), Some(Canceled)]),
    ];

    fn check(current: RolloutPhase, event: PhaseEvent, expected: Option<RolloutPhase>) {
        assert_eq!(
            next_phase(current, event),
            expected,
            "{current:?} on {event:?}"
        );
    }

    #[test]
    fn every_phase_moves_on_every_event_as_the_table_says() {
        for (current, row) in TABLE {
            for (event, expected) in EVENTS.into_iter().zip(row) {
                check(current, event, expected);
            }
        }
    }

    #[test]
    fn the_table_covers_every_phase_once() {
        let phases: Vec<RolloutPhase> = TABLE.iter().map(|(phase, _)| *phase).collect();
        for phase in [
            Progressing,
            Paused,
            AwaitingApproval,
            Aborting,
            Completed,
            Aborted,
            Canceled,
        ] {
            assert_eq!(
                phases.iter().filter(|p| **p == phase).count(),
                1,
                "{phase:?}"
            );
        }
    }

    #[test]
    fn the_phase_attribute_says_stalled_only_for_a_progressing_rollout() {
        let table = [
            (Progressing, false, "progressing"),
            (Progressing, true, "stalled"),
            (Paused, true, "paused"),
            (AwaitingApproval, true, "awaiting-approval"),
            (Aborting, true, "aborting"),
            (Completed, false, "completed"),
            (Aborted, false, "aborted"),
            (Canceled, true, "canceled"),
        ];
        for (phase, stalled, expected) in table {
            assert_eq!(shown_phase(phase, stalled), expected, "{phase:?} {stalled}");
        }
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    fn event() -> impl Strategy<Value = PhaseEvent> {
        prop_oneof![
            Just(PhaseEvent::Pause),
            Just(PhaseEvent::Resume),
            Just(PhaseEvent::Abort),
            Just(PhaseEvent::Approve),
            Just(PhaseEvent::CanaryReached),
            Just(PhaseEvent::FailureBudgetSpent),
            Just(PhaseEvent::Ended(RolloutOutcome::Completed)),
            Just(PhaseEvent::Ended(RolloutOutcome::Aborted)),
            Just(PhaseEvent::Ended(RolloutOutcome::Canceled)),
        ]
    }

    proptest! {
        /// Whatever happens to a rollout, only an ending ends it, nothing but an ending moves
        /// it once ended, and a pause is left only by resume, abort or an ending.
        #[test]
        fn only_an_ending_ends_a_rollout(events in proptest::collection::vec(event(), 0..40)) {
            let mut phase = RolloutPhase::Progressing;
            for event in events {
                let next = next_phase(phase, event).unwrap_or(phase);
                let ending = matches!(event, PhaseEvent::Ended(_));
                prop_assert_eq!(next.is_terminal(), ending || phase.is_terminal());
                if phase.is_terminal() && !ending {
                    prop_assert_eq!(next, phase);
                }
                if phase == RolloutPhase::Paused && next != phase {
                    prop_assert!(matches!(
                        event,
                        PhaseEvent::Resume | PhaseEvent::Abort | PhaseEvent::Ended(_)
                    ));
                }
                phase = next;
            }
        }
    }
}
