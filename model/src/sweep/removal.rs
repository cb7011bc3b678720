//! How the sweep removes one planned subject, and what each answer comes to in the audit.
//!
//! A removal's failure is the subject's outcome, never the sweep's: a child that cannot start
//! because its workflow ID is taken is left to whoever runs it, a VM whose tags changed is
//! left alone, anything else failed is recorded as failed.

use super::audit::Outcome;
use super::classify::{Action, Decision, SubjectKind};
use crate::disruption::{Disruption, DisruptionDecision, DoNotDisrupt, decide, describe};

/// Which leftover a removal deletes (checked again by the activity before it deletes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftoverSubject {
    /// A NIC.
    Nic,
    /// An OS disk.
    Disk,
}

/// How one planned subject is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalStep {
    /// An orphan VM: DeleteMachine without a drain (it has no Node).
    DeleteMachine,
    /// An unhealthy machine: DeleteMachine (drained) and, for a pool machine, CreateMachine.
    ReplaceMachine,
    /// An orphan NIC or OS disk.
    DeleteLeftover(LeftoverSubject),
    /// An orphan Node object, conditional on its uid.
    DeleteNode,
    /// Nothing (a VM kept or reported, or a Node untainted, never reaches the removals).
    Nothing,
}

/// How `decision`'s subject is removed.
pub fn removal_step(decision: &Decision) -> RemovalStep {
    match (decision.kind, decision.action) {
        (_, Action::Untaint) => RemovalStep::Nothing,
        (SubjectKind::Vm, Action::Delete) => RemovalStep::DeleteMachine,
        (SubjectKind::Vm, Action::Replace) => RemovalStep::ReplaceMachine,
        (SubjectKind::Nic, _) => RemovalStep::DeleteLeftover(LeftoverSubject::Nic),
        (SubjectKind::Disk, _) => RemovalStep::DeleteLeftover(LeftoverSubject::Disk),
        (SubjectKind::Node, _) => RemovalStep::DeleteNode,
        (SubjectKind::Vm, _) => RemovalStep::Nothing,
    }
}

/// What removing a stale outdated taint from a Node came to, from what `kube.mark_outdated`
/// found: the taint removed (`changed`), the Node gone (`absent`), a Node that is not the
/// machine's (`not_ours`, left as it is), or none of these: the taint was gone already.
pub fn untaint_outcome(changed: bool, absent: bool, not_ours: bool) -> Outcome {
    if not_ours {
        Outcome::LeftAlone {
            reason: "the Node is not the machine's (its providerID or machine label changed)"
                .to_owned(),
        }
    } else if changed {
        Outcome::Untainted
    } else if absent {
        Outcome::AlreadyGone
    } else {
        Outcome::Skipped {
            reason: "the taint was gone already".to_owned(),
        }
    }
}

/// The outcome of a subject there was nothing to do about.
pub fn nothing_to_do() -> Outcome {
    Outcome::Skipped {
        reason: "nothing to do".to_owned(),
    }
}

/// The prefix of a replacement machine's name: a replacement gets a new name (the pool's, or
/// `machine` for a machine of no pool), any other removal none.
pub fn replacement_prefix(decision: &Decision) -> Option<&str> {
    match decision.action {
        Action::Replace => Some(decision.pool.as_deref().unwrap_or("machine")),
        _ => None,
    }
}

/// What a DeleteMachine of an orphan VM came to: the VM's tags changed (`foreign_vm` says
/// how), it was deleted, or it was already gone.
pub fn machine_deleted(foreign_vm: Option<&str>, vm_deleted: bool) -> Outcome {
    match foreign_vm {
        Some(found) => Outcome::LeftAlone {
            reason: format!("the VM's tags changed: {found}"),
        },
        None if vm_deleted => Outcome::Deleted,
        None => Outcome::AlreadyGone,
    }
}

/// A child workflow that could not start: its ID taken (`already_running`) means someone else
/// works on the machine and it is left to them; anything else failed.
pub fn child_not_started(workflow_id: &str, already_running: bool, error: &str) -> Outcome {
    if already_running {
        Outcome::Skipped {
            reason: format!("{workflow_id} is already running; left to it"),
        }
    } else {
        Outcome::Failed {
            error: format!("could not start {workflow_id}: {error}"),
        }
    }
}

/// A pool machine to replace whose pool has no completed rollout: no replacement can be built,
/// so nothing is started.
pub fn no_recorded_template(pool: &str, machine: &str) -> Outcome {
    Outcome::Skipped {
        reason: format!(
            "no completed rollout of pool {pool} records its template, so no replacement can be built; run `nodewright pool rollout` for the pool, or `nodewright machine delete {machine}`"
        ),
    }
}

/// The outcome of a NIC or OS disk the activity looked at again and did not delete.
pub fn leftover_left_alone() -> Outcome {
    Outcome::LeftAlone {
        reason: "looked at again, it is attached, re-tagged or not a nodewright OS disk".to_owned(),
    }
}

/// Whether an unhealthy machine's replacement is held by its do-not-disrupt marks: a sweep's
/// remediation is voluntary (`--remediate` chose it, nobody asked for this machine), so any mark
/// leaves the machine alone, and the audit names the marks.
pub fn remediation_held(marks: Vec<DoNotDisrupt>) -> Option<Outcome> {
    match decide(Disruption::SweepRemediation, marks) {
        DisruptionDecision::Hold { marks } => Some(Outcome::LeftAlone {
            reason: format!("do not disrupt: {}", describe(&marks)),
        }),
        DisruptionDecision::Proceed { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::Rule;

    fn decision(kind: SubjectKind, action: Action, pool: Option<&str>) -> Decision {
        Decision {
            kind,
            name: "web-abc12".to_owned(),
            rule: Rule::OrphanVm,
            action,
            detail: String::new(),
            pool: pool.map(str::to_owned),
            uid: None,
        }
    }

    #[test]
    fn each_kind_and_action_is_removed_its_own_way() {
        use Action::*;
        use SubjectKind::*;
        let table = [
            (Vm, Delete, RemovalStep::DeleteMachine),
            (Vm, Replace, RemovalStep::ReplaceMachine),
            (Vm, Keep, RemovalStep::Nothing),
            (Vm, Report, RemovalStep::Nothing),
            (
                Nic,
                Delete,
                RemovalStep::DeleteLeftover(LeftoverSubject::Nic),
            ),
            (
                Disk,
                Delete,
                RemovalStep::DeleteLeftover(LeftoverSubject::Disk),
            ),
            (Node, Delete, RemovalStep::DeleteNode),
        ];
        for (kind, action, step) in table {
            assert_eq!(
                removal_step(&decision(kind, action, None)),
                step,
                "{kind} {action}"
            );
        }
    }

    #[test]
    fn only_a_replacement_gets_a_new_name_after_its_pool() {
        let table = [
            (Action::Replace, Some("web"), Some("web")),
            (Action::Replace, None, Some("machine")),
            (Action::Delete, Some("web"), None),
            (Action::Report, Some("web"), None),
        ];
        for (action, pool, prefix) in table {
            let decision = decision(SubjectKind::Vm, action, pool);
            assert_eq!(replacement_prefix(&decision), prefix, "{action}");
        }
    }

    #[test]
    fn an_untaint_is_done_gone_left_alone_or_found_done() {
        let table = [
            ((true, false, false), "untainted"),
            ((false, true, false), "already-gone"),
            ((false, false, true), "left-alone"),
            ((true, false, true), "left-alone"),
            ((false, false, false), "skipped"),
        ];
        for ((changed, absent, not_ours), word) in table {
            assert_eq!(
                untaint_outcome(changed, absent, not_ours).word(),
                word,
                "{changed} {absent} {not_ours}"
            );
        }
    }

    #[test]
    fn a_deleted_machine_is_left_alone_deleted_or_already_gone() {
        let table = [
            (
                Some("its tag nodewright.io-cluster is \"other\""),
                true,
                Outcome::LeftAlone {
                    reason: "the VM's tags changed: its tag nodewright.io-cluster is \"other\""
                        .to_owned(),
                },
            ),
            (None, true, Outcome::Deleted),
            (None, false, Outcome::AlreadyGone),
        ];
        for (foreign, deleted, outcome) in table {
            assert_eq!(machine_deleted(foreign, deleted), outcome);
        }
    }

    #[test]
    fn a_child_whose_id_is_taken_is_left_to_it() {
        assert_eq!(
            child_not_started("delete/prod/web-abc12", true, "already exists"),
            Outcome::Skipped {
                reason: "delete/prod/web-abc12 is already running; left to it".to_owned()
            }
        );
        assert_eq!(
            child_not_started("delete/prod/web-abc12", false, "namespace gone"),
            Outcome::Failed {
                error: "could not start delete/prod/web-abc12: namespace gone".to_owned()
            }
        );
    }

    #[test]
    fn a_pool_without_a_rollout_skips_the_replacement_and_says_what_to_run() {
        let Outcome::Skipped { reason } = no_recorded_template("web", "web-abc12") else {
            panic!("a replacement without a template is skipped");
        };
        assert!(
            reason.contains("no completed rollout of pool web"),
            "{reason}"
        );
        assert!(
            reason.contains("`nodewright machine delete web-abc12`"),
            "{reason}"
        );
    }

    #[test]
    fn a_marked_machine_is_not_remediated() {
        use crate::disruption::Marked;
        assert_eq!(remediation_held(Vec::new()), None);
        let marks = vec![DoNotDisrupt {
            marked: Marked::Node,
            annotation: "nodewright.io/do-not-disrupt".to_owned(),
        }];
        assert_eq!(
            remediation_held(marks),
            Some(Outcome::LeftAlone {
                reason: "do not disrupt: Node (nodewright.io/do-not-disrupt)".to_owned()
            })
        );
    }
}
