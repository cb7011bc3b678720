//! Children a rollout run inherits from the run before it: a run continues as new without
//! waiting for its children (so its history stays bounded however long a drain takes); they
//! run on (ParentClosePolicy Abandon) and the next run finds them again by their workflow IDs
//! (the status's `in_flight`, carried over). Temporal tells how each ended ([`RunEnd`]), and
//! it is booked as a child of its own that ended so ([`RunEnd::child_end`]).

use serde::{Deserialize, Serialize};

use super::booking::ChildEnd;

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
