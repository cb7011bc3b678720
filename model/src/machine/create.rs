//! CreateMachine's decisions: what a failed or cancelled create does with what it made (undo
//! it, or keep it marked for debugging), what the undo and the join token's deletion came to,
//! how a step past the creation deadline is told, what a VM create Azure ended `Failed` does
//! (sent again on a retryable code, else the step fails), what a failure to tag the OS disk
//! does (a warning, never an undo), and the replacement the orphan sweep builds from a pool's
//! last rollout.

use std::collections::BTreeMap;
use std::time::Duration;

use super::CreateMachineRequest;
use crate::ClusterName;
use crate::arm::{Disposition, operation_code_disposition};
use crate::ownership::{TAG_MACHINE, is_owned_by};
use crate::pool::ValidPool;

impl CreateMachineRequest {
    /// The create of `machine`, a replacement in `pool` as its last completed rollout
    /// recorded it (its template, hash, creation timeout and drain settings); never kept on
    /// failure.
    pub fn replacement(cluster: ClusterName, machine: String, pool: &ValidPool) -> Self {
        Self {
            cluster,
            pool: pool.name.clone(),
            machine,
            template: pool.template.clone(),
            template_hash: pool.template_hash.clone(),
            creation_timeout: pool.timeouts.creation,
            keep_on_failure: false,
            drain: pool.drain.clone(),
            zone: None,
            capacity_type: None,
        }
    }

    /// Whether the create mints a join token (the template has `bootstrapToken`), which it
    /// deletes once the Node is Ready and before any undo.
    pub fn mints_join_token(&self) -> bool {
        self.template.bootstrap_token.is_some()
    }
}

/// Whether a NIC or VM a create finds under its machine's name, with `tags`, is the one an
/// earlier attempt of this create made and may be adopted: it carries this cluster's tag and
/// names this machine. Anything else is refused, never changed.
pub fn may_adopt(tags: &BTreeMap<String, String>, cluster: &ClusterName, machine: &str) -> bool {
    is_owned_by(tags, cluster) && tags.get(TAG_MACHINE).map(String::as_str) == Some(machine)
}

/// What a create that did not reach Ready does with what it made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureCleanup {
    /// Remove the machine's VM, NIC, OS disk, Node and join token: nothing is left behind.
    Compensate,
    /// Leave them, marked with the kept tag so the orphan sweep leaves them too
    /// (`keepOnFailure`), and delete the join token.
    Keep,
}

/// What a create that stopped does: a cancelled one always undoes what it made (a cancellation
/// asks for nothing to be left), a failed one keeps it only when `keepOnFailure` asks.
pub fn decide_failure_cleanup(canceled: bool, keep_on_failure: bool) -> FailureCleanup {
    if keep_on_failure && !canceled {
        FailureCleanup::Keep
    } else {
        FailureCleanup::Compensate
    }
}

/// How many PUTs a VM create sends in all when Azure ends them `Failed` with a retryable code
/// (`InternalExecutionError`, `OperationPreempted`, ...): the first and two more.
pub const MAX_VM_CREATE_SENDS: u32 = 3;

/// What a create does when its VM's create operation ended `Failed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VmCreateFailed {
    /// Send the PUT again (the same body): Azure means the code as "try again".
    Resend {
        /// Which send this is, 2 ..= [`MAX_VM_CREATE_SENDS`].
        send: u32,
        /// The status line and warning: `VM create ended Failed (<code>), sending again (2 of 3)`.
        detail: String,
    },
    /// Fail the step: the code is final (quota, allocation, bad request) or the sends are spent;
    /// the create compensates (or keeps) as for any failure.
    Fail,
}

/// What a VM create whose `sends`-th PUT (1-based) ended `Failed` with `code` does next: a
/// retryable code ([`operation_code_disposition`]) sends it again until
/// [`MAX_VM_CREATE_SENDS`] PUTs were sent; anything else fails the step.
pub fn decide_vm_create_failed(code: &str, sends: u32) -> VmCreateFailed {
    if operation_code_disposition(code) != Disposition::Retryable || sends >= MAX_VM_CREATE_SENDS {
        return VmCreateFailed::Fail;
    }
    let send = sends + 1;
    VmCreateFailed::Resend {
        send,
        detail: format!(
            "VM create ended Failed ({}), sending again ({send} of {MAX_VM_CREATE_SENDS})",
            code.trim()
        ),
    }
}

/// How tagging a provisioned VM's OS disk with the ownership tags ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OsDiskTagging {
    /// The tags were merged in (one PATCH).
    Tagged,
    /// The disk carried them already, or ARM knows no such disk: nothing was written.
    Unchanged,
    /// The PATCH failed after the activity's retries; why.
    Failed(String),
}

/// What the create shows of its OS disk's tags, and whether it goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsDiskTagsOutcome {
    /// The provision step's detail.
    pub detail: String,
    /// A warning for the status and the result, when the tags could not be set.
    pub warning: Option<String>,
}

/// What a create whose VM provisioned well does after tagging its OS disk `disk`: it always
/// goes on (an untagged disk is no reason to undo a good VM: it goes with the VM, and clean-up
/// finds it by its name under the machine's VM), with a warning when the tags could not be set.
pub fn os_disk_tags_outcome(disk: &str, tagging: &OsDiskTagging) -> OsDiskTagsOutcome {
    match tagging {
        OsDiskTagging::Tagged => OsDiskTagsOutcome {
            detail: format!("provisioningState Succeeded; OS disk {disk} tagged"),
            warning: None,
        },
        OsDiskTagging::Unchanged => OsDiskTagsOutcome {
            detail: "provisioningState Succeeded".to_owned(),
            warning: None,
        },
        OsDiskTagging::Failed(reason) => {
            let warning = format!(
                "tagging OS disk {disk} failed: {reason}; the VM is kept, and the disk goes with it (clean-up finds it by its name under the machine's VM), but the orphan sweep does not see it as this cluster's"
            );
            OsDiskTagsOutcome {
                detail: format!("provisioningState Succeeded; {warning}"),
                warning: Some(warning),
            }
        }
    }
}

/// What deleting the machine's join token came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinTokenCleanup {
    /// Deleted; the status detail.
    Deleted(String),
    /// There was none, or it is not this machine's; the status detail.
    Untouched(String),
    /// The deletion failed after its retries; why, and that the token expires at its TTL.
    Failed(String),
}

impl JoinTokenCleanup {
    /// The detail or the failure, for the run's message.
    pub fn text(&self) -> &str {
        match self {
            JoinTokenCleanup::Deleted(text)
            | JoinTokenCleanup::Untouched(text)
            | JoinTokenCleanup::Failed(text) => text,
        }
    }

    /// Why the deletion failed, when it did.
    pub fn failure(&self) -> Option<&str> {
        match self {
            JoinTokenCleanup::Failed(reason) => Some(reason),
            JoinTokenCleanup::Deleted(_) | JoinTokenCleanup::Untouched(_) => None,
        }
    }
}

/// What compensation removed, and what it left because it is not this run's (or could not be
/// removed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compensated {
    /// What went, for people: `the VM web-abc12`, `the join token Secret …`.
    pub undone: Vec<String>,
    /// What was left, and why.
    pub kept: Vec<String>,
}

impl Compensated {
    /// The undo of a machine whose removal took `undone` and left `foreign_vm` (a VM that is
    /// not this machine's), with what the join token's deletion (`token`, made before it) came
    /// to: a deleted token is undone (as `token_secret`), a failed deletion kept.
    pub fn of(
        undone: Vec<String>,
        foreign_vm: Option<String>,
        token: Option<&JoinTokenCleanup>,
        token_secret: &str,
    ) -> Self {
        let mut compensated = Compensated {
            undone,
            kept: foreign_vm.into_iter().collect(),
        };
        match token {
            Some(JoinTokenCleanup::Deleted(_)) => compensated
                .undone
                .push(format!("the join token Secret {token_secret}")),
            Some(JoinTokenCleanup::Failed(reason)) => compensated.kept.push(reason.clone()),
            Some(JoinTokenCleanup::Untouched(_)) | None => {}
        }
        compensated
    }

    /// One line: `removed the VM …, the NIC …; <kept>`, or `nothing to remove`.
    pub fn summary(&self) -> String {
        let mut summary = if self.undone.is_empty() {
            "nothing to remove".to_owned()
        } else {
            format!("removed {}", self.undone.join(", "))
        };
        for kept in &self.kept {
            summary.push_str("; ");
            summary.push_str(kept);
        }
        summary
    }
}

/// Why compensation could not finish: the removal step that failed, its reason, and a join
/// token deletion that failed before it.
pub fn compensation_failed(step: &str, reason: &str, token: Option<&JoinTokenCleanup>) -> String {
    let mut text = format!(
        "compensation failed at {step}: {reason}; the orphan sweep will remove what is left"
    );
    if let Some(token) = token.and_then(JoinTokenCleanup::failure) {
        text.push_str("; ");
        text.push_str(token);
    }
    text
}

/// A step that did not finish by the creation deadline: `<what> within the creation timeout
/// <timeout> (<detail>)`, the timeout as people write it in pool files (`20m`, `1h 30m`).
pub fn past_creation_timeout(what: &str, timeout: Duration, detail: &str) -> String {
    format!(
        "{what} within the creation timeout {} ({detail})",
        humantime::format_duration(timeout)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A case of the adoption table: its name, the tags found, whether it is adopted.
    type AdoptionCase<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);

    #[test]
    fn only_this_clusters_resource_of_this_machine_is_adopted() {
        use crate::ownership::TAG_CLUSTER;
        let cluster = ClusterName::parse("cluster", "prod").expect("a valid cluster name");
        let table: [AdoptionCase; 5] = [
            (
                "ours",
                &[(TAG_CLUSTER, "prod"), (TAG_MACHINE, "web-abc12")],
                true,
            ),
            (
                "another machine's",
                &[(TAG_CLUSTER, "prod"), (TAG_MACHINE, "web-zzz99")],
                false,
            ),
            (
                "another cluster's",
                &[(TAG_CLUSTER, "staging"), (TAG_MACHINE, "web-abc12")],
                false,
            ),
            ("no machine tag", &[(TAG_CLUSTER, "prod")], false),
            ("untagged", &[], false),
        ];
        for (case, pairs, adopted) in table {
            let tags = pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            assert_eq!(may_adopt(&tags, &cluster, "web-abc12"), adopted, "{case}");
        }
    }

    #[test]
    fn a_cancelled_create_always_undoes_and_a_failed_one_keeps_only_when_asked() {
        use FailureCleanup::*;
        let table = [
            // canceled, keep_on_failure, cleanup
            (false, false, Compensate),
            (false, true, Keep),
            (true, false, Compensate),
            (true, true, Compensate),
        ];
        for (canceled, keep, cleanup) in table {
            assert_eq!(
                decide_failure_cleanup(canceled, keep),
                cleanup,
                "canceled {canceled}, keepOnFailure {keep}"
            );
        }
    }

    #[test]
    fn a_failed_vm_create_is_sent_again_only_on_a_retryable_code_and_at_most_three_times() {
        // code, sends so far, the send that follows (None: the step fails)
        let table = [
            ("InternalExecutionError", 1, Some(2)),
            ("InternalExecutionError", 2, Some(3)),
            ("InternalExecutionError", 3, None),
            ("internalexecutionerror", 1, Some(2)),
            ("InternalOperationError", 1, Some(2)),
            ("OperationPreempted", 2, Some(3)),
            ("RetryableError", 1, Some(2)),
            ("AllocationFailed", 1, None),
            ("ZonalAllocationFailed", 1, None),
            ("OperationNotAllowed", 1, None),
            ("QuotaExceeded", 1, None),
            ("InvalidParameter", 1, None),
            ("ProvisioningFailed", 1, None),
            ("", 1, None),
        ];
        for (code, sends, next) in table {
            let decided = decide_vm_create_failed(code, sends);
            match next {
                Some(send) => assert_eq!(
                    decided,
                    VmCreateFailed::Resend {
                        send,
                        detail: format!(
                            "VM create ended Failed ({code}), sending again ({send} of 3)"
                        ),
                    },
                    "{code} after {sends}"
                ),
                None => assert_eq!(decided, VmCreateFailed::Fail, "{code} after {sends}"),
            }
        }
    }

    #[test]
    fn a_failure_to_tag_the_os_disk_warns_and_never_stops_the_create() {
        let disk = "web-abc12-osdisk";
        let table = [
            (
                OsDiskTagging::Tagged,
                "provisioningState Succeeded; OS disk web-abc12-osdisk tagged",
                false,
            ),
            (
                OsDiskTagging::Unchanged,
                "provisioningState Succeeded",
                false,
            ),
            (
                OsDiskTagging::Failed("403 AuthorizationFailed".to_owned()),
                "provisioningState Succeeded; tagging OS disk web-abc12-osdisk failed: 403 AuthorizationFailed;",
                true,
            ),
        ];
        for (tagging, detail, warns) in table {
            let outcome = os_disk_tags_outcome(disk, &tagging);
            assert!(outcome.detail.starts_with(detail), "{}", outcome.detail);
            assert_eq!(outcome.warning.is_some(), warns, "{}", outcome.detail);
            if let Some(warning) = outcome.warning {
                assert!(warning.contains(disk) && warning.contains("the VM is kept"));
            }
        }
    }

    fn check(compensated: &Compensated, undone: &[&str], kept: &[&str], summary: &str) {
        assert_eq!(compensated.undone, undone);
        assert_eq!(compensated.kept, kept);
        assert_eq!(compensated.summary(), summary);
    }

    #[test]
    fn the_undo_says_what_went_and_what_was_left() {
        let secret = "kube-system/bootstrap-token-abc123";
        let vm = || vec!["the VM web-abc12".to_owned()];
        check(
            &Compensated::of(Vec::new(), None, None, secret),
            &[],
            &[],
            "nothing to remove",
        );
        check(
            &Compensated::of(
                vm(),
                None,
                Some(&JoinTokenCleanup::Deleted("deleted".to_owned())),
                secret,
            ),
            &[
                "the VM web-abc12",
                "the join token Secret kube-system/bootstrap-token-abc123",
            ],
            &[],
            "removed the VM web-abc12, the join token Secret kube-system/bootstrap-token-abc123",
        );
        check(
            &Compensated::of(
                vm(),
                Some("the VM is another cluster's".to_owned()),
                Some(&JoinTokenCleanup::Untouched("none".to_owned())),
                secret,
            ),
            &["the VM web-abc12"],
            &["the VM is another cluster's"],
            "removed the VM web-abc12; the VM is another cluster's",
        );
        check(
            &Compensated::of(
                Vec::new(),
                None,
                Some(&JoinTokenCleanup::Failed("deleting it failed".to_owned())),
                secret,
            ),
            &[],
            &["deleting it failed"],
            "nothing to remove; deleting it failed",
        );
    }

    #[test]
    fn a_failed_compensation_names_its_step_and_a_failed_token_deletion() {
        let failed = JoinTokenCleanup::Failed("deleting the token failed".to_owned());
        let deleted = JoinTokenCleanup::Deleted("deleted".to_owned());
        let table = [
            (None, ""),
            (Some(&deleted), ""),
            (Some(&failed), "; deleting the token failed"),
        ];
        for (token, tail) in table {
            assert_eq!(
                compensation_failed("delete-vm", "409 Conflict", token),
                format!(
                    "compensation failed at delete-vm: 409 Conflict; the orphan sweep will remove what is left{tail}"
                )
            );
        }
    }

    #[test]
    fn a_step_past_the_deadline_names_the_timeout_as_written() {
        assert_eq!(
            past_creation_timeout(
                "the Node did not register",
                Duration::from_secs(90 * 60),
                "no Node"
            ),
            "the Node did not register within the creation timeout 1h 30m (no Node)"
        );
    }
}
