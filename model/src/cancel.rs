//! Cancellation as an ending of its own: what a cancelled run reports, and the rules that
//! decide what a cancellation undoes and what it lets finish.
//!
//! A cancellation request (the Temporal UI's "Request Cancellation", `temporal workflow
//! cancel`, `nodewright … cancel`) ends a run as **Canceled**, never Failed. Before it ends, the
//! run puts the world back where its runbook says: a create removes what it made, a drain gives
//! the Node back, a delete that has not sent its VM delete gives the machine back and one that
//! has finishes the deletion (the point of no return).

use serde::{Deserialize, Serialize};

/// What a cancelled run undid and kept: the details of its Canceled ending, and the `canceled`
/// field of its `status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Canceled {
    /// The step that was under way when the request was seen (`none` before the first).
    pub at_step: String,
    /// Who asked, when the request said (`reason` of the cancellation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What the clean-up undid, in words.
    #[serde(default)]
    pub undone: Vec<String>,
    /// What stays as it is, and why.
    #[serde(default)]
    pub kept: Vec<String>,
    /// Set when a clean-up step failed: what is left is named here and the orphan sweep finds
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_failure: Option<String>,
}

impl Canceled {
    /// A cancellation seen during `at_step`.
    pub fn at(at_step: impl Into<String>, reason: Option<String>) -> Self {
        Self {
            at_step: at_step.into(),
            reason: reason.filter(|r| !r.trim().is_empty()),
            ..Self::default()
        }
    }

    /// One line for people: `canceled during wait-ready; undone: …; kept: …`.
    pub fn summary(&self) -> String {
        let mut parts = vec![format!("canceled during {}", self.at_step)];
        if let Some(reason) = &self.reason {
            parts.push(format!("reason: {reason}"));
        }
        if !self.undone.is_empty() {
            parts.push(format!("undone: {}", self.undone.join(", ")));
        }
        if !self.kept.is_empty() {
            parts.push(format!("kept: {}", self.kept.join(", ")));
        }
        if self.undone.is_empty() && self.kept.is_empty() && self.cleanup_failure.is_none() {
            parts.push("nothing to undo".to_owned());
        }
        if let Some(failure) = &self.cleanup_failure {
            parts.push(format!("clean-up failed: {failure}"));
        }
        parts.join("; ")
    }
}

/// Whether a delete cancelled with its rollout finished its deletion anyway (it was past its
/// point of no return): its machine is not among those a look after it ended saw.
pub fn delete_finished_anyway(machine: &str, seen_after: &[&str]) -> bool {
    !seen_after.contains(&machine)
}

/// What a cancelled DeleteMachine does, by how far it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOnCancel {
    /// The VM delete was not sent: give the machine back to service as it was.
    RestoreMachine,
    /// The VM delete was sent (the point of no return): finish the deletion.
    FinishDeletion,
}

/// The rule for a cancelled DeleteMachine.
pub fn delete_on_cancel(vm_delete_sent: bool) -> DeleteOnCancel {
    if vm_delete_sent {
        DeleteOnCancel::FinishDeletion
    } else {
        DeleteOnCancel::RestoreMachine
    }
}

/// How a cancelled drain leaves the Node's `spec.unschedulable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CordonOnCancel {
    /// The drain cordoned it: uncordon.
    Uncordon,
    /// It was cordoned before the drain began (by someone else, or an earlier drain): keep it.
    KeepCordoned,
}

/// The rule for the cordon of a cancelled drain: undo only what the drain did.
pub fn cordon_on_cancel(cordoned_before_drain: bool) -> CordonOnCancel {
    if cordoned_before_drain {
        CordonOnCancel::KeepCordoned
    } else {
        CordonOnCancel::Uncordon
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_delete_finished_when_a_later_look_no_longer_sees_its_machine() {
        let seen = ["pool-a", "pool-b"];
        assert!(!delete_finished_anyway("pool-a", &seen));
        assert!(delete_finished_anyway("pool-c", &seen));
        assert!(delete_finished_anyway("pool-a", &[]));
    }

    #[test]
    fn a_delete_restores_the_machine_until_its_vm_delete_is_sent() {
        assert_eq!(delete_on_cancel(false), DeleteOnCancel::RestoreMachine);
        assert_eq!(delete_on_cancel(true), DeleteOnCancel::FinishDeletion);
    }

    #[test]
    fn a_drain_undoes_only_its_own_cordon() {
        assert_eq!(cordon_on_cancel(false), CordonOnCancel::Uncordon);
        assert_eq!(cordon_on_cancel(true), CordonOnCancel::KeepCordoned);
    }

    #[test]
    fn the_summary_says_where_what_was_undone_and_what_was_kept() {
        let mut canceled = Canceled::at("wait-ready", Some("alice: wrong pool".to_owned()));
        canceled
            .undone
            .push("removed the VM (with its NIC and OS disk)".to_owned());
        canceled.kept.push("nothing".to_owned());
        assert_eq!(
            canceled.summary(),
            "canceled during wait-ready; reason: alice: wrong pool; undone: removed the VM (with its NIC and OS disk); kept: nothing"
        );
        assert_eq!(
            Canceled::at("none", Some("  ".to_owned())).summary(),
            "canceled during none; nothing to undo"
        );
        let mut failed = Canceled::at("delete-vm", None);
        failed.cleanup_failure = Some("ARM answered 500".to_owned());
        assert_eq!(
            failed.summary(),
            "canceled during delete-vm; clean-up failed: ARM answered 500"
        );
    }
}
