//! Children a rollout run inherits from the run before it: a run continues as new without
//! waiting for its children (so its history stays bounded however long a drain takes); they
//! run on (ParentClosePolicy Abandon) and the next run finds them again by their workflow IDs
//! and run IDs (the status's `in_flight`, carried over; [`run_ids`]). Temporal tells how each
//! ended ([`RunEnd`]), and it is booked as a child of its own that ended so
//! ([`RunEnd::child_end`]). On the cancellation path the run asks them to cancel and waits for
//! their ends, within bounds ([`CancelWait`]).

use serde::{Deserialize, Serialize};

use super::booking::ChildEnd;
use super::status::InFlight;

/// How many asks in a row may fail on the cancellation path before the children still in
/// flight are booked as not confirmed ([`CancelWait`]).
pub const CANCEL_ASKS_FAILED_IN_A_ROW: u32 = 5;

/// How many asks (of up to a minute each) the cancellation path makes in all before the
/// children still in flight are booked as not confirmed: an hour, longer than a cancelled
/// create's clean-up or a delete past its point of no return takes.
pub const CANCEL_ASKS: u32 = 60;

/// The run IDs to ask Temporal about, one per child of `inherited` in order (`None` where it is
/// not known); empty when none is known, as runs recorded before run IDs were kept asked (their
/// activity inputs stay the same).
pub fn run_ids(inherited: &[InFlight]) -> Vec<Option<String>> {
    if inherited.iter().all(|child| child.run_id.is_none()) {
        return Vec::new();
    }
    inherited.iter().map(|child| child.run_id.clone()).collect()
}

/// The cancellation path's asks so far: it waits for the inherited children's ends while
/// [`CancelWait::goes_on`], and then books those still in flight as not confirmed
/// ([`cancel_not_confirmed`]), so the cancelled rollout ends (its history has no continue-as-new
/// there) even when Temporal cannot answer or a child ignores the request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CancelWait {
    /// Asks made.
    pub asks: u32,
    /// Asks that failed since the last one answered.
    pub failed_in_a_row: u32,
}

impl CancelWait {
    /// The asks after one more, `answered` or failed.
    pub fn after(self, answered: bool) -> Self {
        Self {
            asks: self.asks.saturating_add(1),
            failed_in_a_row: if answered {
                0
            } else {
                self.failed_in_a_row.saturating_add(1)
            },
        }
    }

    /// Whether to ask again: fewer than [`CANCEL_ASKS`] asks, and fewer than
    /// [`CANCEL_ASKS_FAILED_IN_A_ROW`] failed in a row.
    pub fn goes_on(&self) -> bool {
        self.asks < CANCEL_ASKS && self.failed_in_a_row < CANCEL_ASKS_FAILED_IN_A_ROW
    }
}

/// How a child still in flight when the cancellation path stopped asking is booked: cancelled
/// (not counted; a delete waits for the last look, which tells whether its machine is gone),
/// saying that its end was not confirmed and where to look.
pub fn cancel_not_confirmed(child: &InFlight, wait: CancelWait) -> ChildEnd {
    let run = child
        .run_id
        .as_deref()
        .map(|run| format!(" run {run}"))
        .unwrap_or_default();
    let why = if wait.failed_in_a_row >= CANCEL_ASKS_FAILED_IN_A_ROW {
        format!("{} asks in a row failed", wait.failed_in_a_row)
    } else {
        format!("still running after {} asks", wait.asks)
    };
    ChildEnd::Canceled(format!(
        "asked to cancel, end not confirmed ({why}); see {}{run} in Temporal",
        child.workflow_id
    ))
}

/// How a workflow run ended, as Temporal describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "end")]
pub enum RunEnd {
    /// It completed.
    Completed,
    /// It failed: its failure and causes, in one line.
    Failed {
        /// The failure's text.
        message: String,
    },
    /// It was cancelled.
    Canceled {
        /// What the cancellation said.
        message: String,
    },
    /// Someone terminated it.
    Terminated {
        /// The reason given.
        reason: String,
    },
    /// It ran out of its execution timeout.
    TimedOut,
}

impl RunEnd {
    /// The end as the rollout books a child's: a terminated or timed-out child failed.
    pub fn child_end(&self) -> ChildEnd {
        match self {
            RunEnd::Completed => ChildEnd::Succeeded,
            RunEnd::Failed { message } => ChildEnd::Failed(message.clone()),
            RunEnd::Canceled { message } => ChildEnd::Canceled(message.clone()),
            RunEnd::Terminated { reason } if reason.is_empty() => {
                ChildEnd::Failed("terminated".to_owned())
            }
            RunEnd::Terminated { reason } => ChildEnd::Failed(format!("terminated: {reason}")),
            RunEnd::TimedOut => ChildEnd::Failed("timed out".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::status::ChildKind;

    fn child(machine: &str, run_id: Option<&str>) -> InFlight {
        InFlight {
            machine: machine.to_owned(),
            kind: ChildKind::Delete,
            workflow_id: format!("delete/dev/{machine}"),
            started_at: 1_000,
            zone: None,
            run_id: run_id.map(str::to_owned),
            capacity_type: None,
        }
    }

    #[test]
    fn the_runs_asked_about_are_the_ones_started_and_absent_when_none_is_known() {
        let table: [(Vec<InFlight>, Vec<Option<&str>>); 4] = [
            (Vec::new(), Vec::new()),
            // Carried by a run recorded before run IDs were kept: the input it sent.
            (vec![child("a", None), child("b", None)], Vec::new()),
            (
                vec![child("a", Some("r-a")), child("b", None)],
                vec![Some("r-a"), None],
            ),
            (
                vec![child("a", Some("r-a")), child("b", Some("r-b"))],
                vec![Some("r-a"), Some("r-b")],
            ),
        ];
        for (inherited, expected) in table {
            let expected: Vec<Option<String>> = expected
                .into_iter()
                .map(|run| run.map(str::to_owned))
                .collect();
            assert_eq!(run_ids(&inherited), expected, "{inherited:?}");
        }
    }

    #[test]
    fn a_carried_child_decodes_with_or_without_its_run_id() {
        // As runs recorded before run IDs were kept carry it.
        let recorded =
            r#"{"machine":"a","kind":"delete","workflowId":"delete/dev/a","startedAt":1000}"#;
        let decoded: InFlight = serde_json::from_str(recorded).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(decoded, child("a", None));
        assert_eq!(
            serde_json::to_string(&decoded).unwrap_or_else(|e| panic!("{e}")),
            recorded,
            "serialized as before"
        );
        let kept = child("a", Some("4f1c"));
        let json = serde_json::to_string(&kept).unwrap_or_else(|e| panic!("{e}"));
        assert!(json.ends_with(r#","runId":"4f1c"}"#), "{json}");
        let back: InFlight = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, kept);
    }

    #[test]
    fn the_cancellation_path_stops_asking_within_bounds() {
        // (answers in order, true = answered) → whether it asks again after them.
        let failed = |n: usize| vec![false; n];
        let answered = |n: usize| vec![true; n];
        let table: [(Vec<bool>, bool); 7] = [
            (Vec::new(), true),
            (failed(4), true),
            (failed(5), false),
            ([failed(4), answered(1), failed(4)].concat(), true),
            ([answered(3), failed(5)].concat(), false),
            (answered(59), true),
            (answered(60), false),
        ];
        for (answers, goes_on) in table {
            let wait = answers
                .iter()
                .fold(CancelWait::default(), |wait, answered| {
                    wait.after(*answered)
                });
            assert_eq!(wait.goes_on(), goes_on, "{answers:?}");
        }
    }

    #[test]
    fn a_child_not_confirmed_is_booked_cancelled_naming_its_run() {
        let failing = CancelWait {
            asks: 5,
            failed_in_a_row: 5,
        };
        let running = CancelWait {
            asks: 60,
            failed_in_a_row: 0,
        };
        let table = [
            (
                child("a", Some("r-a")),
                failing,
                "asked to cancel, end not confirmed (5 asks in a row failed); see delete/dev/a run r-a in Temporal",
            ),
            (
                child("b", None),
                running,
                "asked to cancel, end not confirmed (still running after 60 asks); see delete/dev/b in Temporal",
            ),
        ];
        for (entry, wait, text) in table {
            let end = cancel_not_confirmed(&entry, wait);
            assert_eq!(end, ChildEnd::Canceled(text.to_owned()));
            assert!(
                end.waits_for_last_look(ChildKind::Delete),
                "the last look tells"
            );
        }
    }

    #[test]
    fn each_end_is_booked_as_a_child_of_the_run_would_be() {
        let table = [
            (RunEnd::Completed, ChildEnd::Succeeded),
            (
                RunEnd::Failed {
                    message: "provision-vm: AllocationFailed".to_owned(),
                },
                ChildEnd::Failed("provision-vm: AllocationFailed".to_owned()),
            ),
            (
                RunEnd::Canceled {
                    message: "canceled".to_owned(),
                },
                ChildEnd::Canceled("canceled".to_owned()),
            ),
            (
                RunEnd::Terminated {
                    reason: "by hand".to_owned(),
                },
                ChildEnd::Failed("terminated: by hand".to_owned()),
            ),
            (
                RunEnd::Terminated {
                    reason: String::new(),
                },
                ChildEnd::Failed("terminated".to_owned()),
            ),
            (RunEnd::TimedOut, ChildEnd::Failed("timed out".to_owned())),
        ];
        for (end, booked) in table {
            assert_eq!(end.child_end(), booked, "{end:?}");
        }
    }
}
