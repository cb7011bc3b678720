//! `machine uncordon`'s decisions: whether it may run given the machine's runs found running,
//! and what it does to the Node given the Node's marks and `--force`.
//!
//! nodewright's own draining taint always goes; taints of others never do (they are not its to
//! judge). A cordon an administrator set before nodewright's drain is recorded by the drain's
//! cordon step as [`ANNOTATION_CORDONED_BEFORE_DRAIN`] and kept by uncordon, which says so,
//! unless `--force`.

use serde::{Deserialize, Serialize};

use crate::Operation;

/// Node annotation nodewright owns: `"true"` when the drain's cordon step found the Node
/// cordoned by someone else (unschedulable without the draining taint). Uncordon keeps that
/// cordon unless forced, and removes the annotation with the cordon.
pub const ANNOTATION_CORDONED_BEFORE_DRAIN: &str = "nodewright.io/cordoned-before-drain";

/// The runs of a machine that an uncordon must not race: a drain would evict onto a Node made
/// schedulable again, a delete would drain it again or delete it.
pub const CONFLICTING: [Operation; 2] = [Operation::Drain, Operation::Delete];

/// Whether `machine uncordon` may start, given the workflow IDs of the machine's runs found
/// running, each with its operation. `Err`: why not, pointing to `machine cancel`.
pub fn may_uncordon(machine: &str, running: &[(Operation, String)]) -> Result<(), String> {
    let Some((operation, workflow_id)) = running
        .iter()
        .find(|(operation, _)| CONFLICTING.contains(operation))
    else {
        return Ok(());
    };
    let what = match operation {
        Operation::Delete => {
            "a delete of it is running; cancelling it before its VM delete gives the machine back in service"
        }
        _ => {
            "a drain of it is running; cancelling it gives the Node back (uncordoned unless it was cordoned before the drain)"
        }
    };
    Err(format!(
        "machine {machine} was not uncordoned: {what}. Wait for {workflow_id} to end, or stop it with `nodewright machine cancel {machine}`"
    ))
}

/// What uncordon finds on the Node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeMarks {
    /// `spec.unschedulable` is true.
    pub unschedulable: bool,
    /// It carries nodewright's draining taint.
    pub draining_taint: bool,
    /// It carries [`ANNOTATION_CORDONED_BEFORE_DRAIN`] `"true"`.
    pub cordoned_before_drain: bool,
}

/// What uncordon changes on the Node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UncordonPlan {
    /// Clear `spec.unschedulable`.
    pub clear_cordon: bool,
    /// Remove the draining taint (always, when there).
    pub remove_draining_taint: bool,
    /// Remove [`ANNOTATION_CORDONED_BEFORE_DRAIN`].
    pub remove_mark: bool,
    /// The Node stays cordoned: the cordon was there before nodewright's drain.
    pub keep_cordon: bool,
}

/// Decides what uncordon does: the draining taint always goes; a cordon recorded as there
/// before the drain stays (with its mark) unless `force`; any other cordon goes; a mark left on
/// a schedulable Node (an administrator uncordoned it by hand) goes.
pub fn plan_uncordon(marks: NodeMarks, force: bool) -> UncordonPlan {
    let keep_cordon = marks.unschedulable && marks.cordoned_before_drain && !force;
    UncordonPlan {
        clear_cordon: marks.unschedulable && !keep_cordon,
        remove_draining_taint: marks.draining_taint,
        remove_mark: marks.cordoned_before_drain && !keep_cordon,
        keep_cordon,
    }
}

/// What an uncordon came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UncordonOutcome {
    /// The Node is schedulable, nodewright's draining taint removed.
    Uncordoned,
    /// The draining taint removed, the cordon an administrator set before the drain kept.
    KeptCordon,
    /// No Node of that name.
    Absent,
    /// A Node of that name that is not this machine's: left alone.
    NotOurs,
}

/// What UncordonNode returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Uncordoned {
    /// The machine.
    pub machine: String,
    /// The Node stays cordoned: the cordon was there before nodewright's drain.
    #[serde(default)]
    pub kept_cordon: bool,
}

impl Uncordoned {
    /// What happened, for people.
    pub fn summary(&self) -> String {
        if self.kept_cordon {
            format!(
                "{m} stays cordoned: it was cordoned before nodewright's drain (annotation {ANNOTATION_CORDONED_BEFORE_DRAIN}); nodewright's draining taint was removed. `nodewright machine uncordon {m} --force` makes it schedulable",
                m = self.machine
            )
        } else {
            format!("{} is schedulable again", self.machine)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_running_drain_or_delete_refuses_pointing_to_cancel() {
        let run = |operation, id: &str| (operation, id.to_owned());
        let table = [
            (vec![], None),
            (vec![run(Operation::Uncordon, "uncordon/prod/web-a1")], None),
            (vec![run(Operation::Create, "create/prod/web-a1")], None),
            (
                vec![run(Operation::Drain, "drain/prod/web-a1")],
                Some("a drain of it is running"),
            ),
            (
                vec![run(Operation::Delete, "delete/prod/web-a1")],
                Some("a delete of it is running"),
            ),
            (
                vec![
                    run(Operation::Create, "create/prod/web-a1"),
                    run(Operation::Delete, "delete/prod/web-a1"),
                ],
                Some("delete/prod/web-a1"),
            ),
        ];
        for (running, refused) in table {
            match (may_uncordon("web-a1", &running), refused) {
                (Ok(()), None) => {}
                (Err(message), Some(part)) => {
                    assert!(message.contains(part), "{message}");
                    assert!(
                        message.contains("`nodewright machine cancel web-a1`"),
                        "{message}"
                    );
                }
                (outcome, expected) => panic!("{running:?}: {outcome:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn the_cordon_of_an_administrator_stays_unless_forced() {
        let marks = |unschedulable, draining_taint, cordoned_before_drain| NodeMarks {
            unschedulable,
            draining_taint,
            cordoned_before_drain,
        };
        let plan = |clear_cordon, remove_draining_taint, remove_mark, keep_cordon| UncordonPlan {
            clear_cordon,
            remove_draining_taint,
            remove_mark,
            keep_cordon,
        };
        let table = [
            // nodewright's own drain: cordon and taint go.
            (
                marks(true, true, false),
                false,
                plan(true, true, false, false),
            ),
            // cordoned by an admin before the drain: the cordon and its mark stay.
            (
                marks(true, true, true),
                false,
                plan(false, true, false, true),
            ),
            (marks(true, true, true), true, plan(true, true, true, false)),
            // the drain was cancelled and already gave the taint back: the cordon still stays.
            (
                marks(true, false, true),
                false,
                plan(false, false, false, true),
            ),
            // an admin uncordoned by hand since: the stale mark goes.
            (
                marks(false, false, true),
                false,
                plan(false, false, true, false),
            ),
            // a cordon nodewright has no record of: the operator asked, it goes.
            (
                marks(true, false, false),
                false,
                plan(true, false, false, false),
            ),
            (
                marks(false, false, false),
                false,
                plan(false, false, false, false),
            ),
            (
                marks(false, true, false),
                true,
                plan(false, true, false, false),
            ),
        ];
        for (marks, force, expected) in table {
            assert_eq!(
                plan_uncordon(marks, force),
                expected,
                "{marks:?} force={force}"
            );
        }
    }

    #[test]
    fn the_summary_says_the_cordon_was_kept_and_how_to_force() {
        let kept = Uncordoned {
            machine: "web-a1".to_owned(),
            kept_cordon: true,
        };
        assert!(kept.summary().starts_with("web-a1 stays cordoned"));
        assert!(kept.summary().contains("uncordon web-a1 --force"));
        let done = Uncordoned {
            machine: "web-a1".to_owned(),
            kept_cordon: false,
        };
        assert_eq!(done.summary(), "web-a1 is schedulable again");
    }

    proptest! {
        #[test]
        fn the_draining_taint_always_goes_and_force_always_uncordons(
            unschedulable: bool, draining_taint: bool, cordoned_before_drain: bool, force: bool,
        ) {
            let marks = NodeMarks { unschedulable, draining_taint, cordoned_before_drain };
            let plan = plan_uncordon(marks, force);
            prop_assert_eq!(plan.remove_draining_taint, draining_taint);
            prop_assert!(!(plan.keep_cordon && plan.clear_cordon));
            prop_assert!(!(plan.keep_cordon && plan.remove_mark));
            if force {
                prop_assert!(!plan.keep_cordon);
                prop_assert_eq!(plan.clear_cordon, unschedulable);
            }
        }
    }
}
