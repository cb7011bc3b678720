//! What the machine workflows take, return and report: the create and delete requests, their
//! results, the names of a machine's Azure resources, and the progress the `status` query shows;
//! [`create`] holds CreateMachine's decisions.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ClusterName;
use crate::pool::MachineTemplate;

pub mod adoption;
pub mod create;
pub mod leftovers;
pub mod owner;
pub mod registration;
pub mod uncordon;

/// The name of a machine's network interface: `<machine>-nic`.
pub fn nic_name(machine: &str) -> String {
    format!("{machine}-nic")
}

/// The name of a machine's OS disk: `<machine>-osdisk`.
pub fn os_disk_name(machine: &str) -> String {
    format!("{machine}-osdisk")
}

/// The availability zone of `machine` among the pool's `zones` (none when the pool has none):
/// a stable choice from the name, so a retried or replayed step picks the same zone and a pool's
/// random names spread over its zones. [`crate::capacity::choose_zone`] moves a new machine
/// off it while it is exhausted for the pool's VM size.
pub fn zone_for(machine: &str, zones: &[String]) -> Option<String> {
    if zones.is_empty() {
        return None;
    }
    let sum = machine.bytes().fold(0usize, |acc, b| {
        acc.wrapping_mul(31).wrapping_add(usize::from(b))
    });
    zones.get(sum % zones.len()).cloned()
}

/// The input of CreateMachine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMachineRequest {
    /// The cluster the machine joins.
    pub cluster: ClusterName,
    /// The pool it belongs to.
    pub pool: String,
    /// The machine's name (= VM name = computer name = node name).
    pub machine: String,
    /// What it is built from (validated).
    pub template: MachineTemplate,
    /// The template's hash, recorded in tags and labels.
    pub template_hash: String,
    /// From the start of the run until the Node is Ready; past it the machine is removed again.
    pub creation_timeout: Duration,
    /// Leave the VM, NIC, disk and Node in place when the create fails (for debugging), marked
    /// with the `nodewright.io-kept` tag so that the orphan sweep leaves them too.
    #[serde(default)]
    pub keep_on_failure: bool,
    /// The pool's drain settings, recorded on the Node so a later drain follows them.
    #[serde(default)]
    pub drain: crate::pool::DrainPolicy,
    /// The availability zone to create the machine in, one of the template's `zones` (a rollout
    /// sets it to avoid zones that ran out of capacity, see [`crate::capacity`]); absent, the
    /// zone [`zone_for`] hashes the name to, as for runs started before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Whether the machine is a Spot or an on-demand VM, one of the template's capacity types
    /// (a rollout or the pool controller sets it to avoid offerings Azure had no room for, see
    /// [`crate::capacity`]); absent, the template's first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<crate::pool::CapacityType>,
}

impl CreateMachineRequest {
    /// The machine's capacity type: the request's, else the template's preferred one.
    pub fn chosen_capacity_type(&self) -> crate::pool::CapacityType {
        self.capacity_type
            .unwrap_or_else(|| self.template.preferred_capacity_type())
    }

    /// The zone the machine is created in: the request's, else [`zone_for`] its name (none when
    /// the template has no zones).
    pub fn chosen_zone(&self) -> Option<String> {
        self.zone
            .clone()
            .or_else(|| zone_for(&self.machine, &self.template.zones))
    }
}

/// The input of DeleteMachine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteMachineRequest {
    /// The cluster that owns the machine.
    pub cluster: ClusterName,
    /// The machine's name.
    pub machine: String,
    /// Delete without draining (only cordon): `--skip-drain`.
    #[serde(default)]
    pub skip_drain: bool,
    /// Drain in force mode from the start: `--force`.
    #[serde(default)]
    pub force: bool,
    /// Drain settings instead of the ones the Node carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_policy: Option<crate::pool::DrainPolicy>,
    /// Go on despite delete hooks on the Node (named in the status and result; never removed):
    /// `--skip-hooks`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_hooks: bool,
    /// How long each hold by delete hooks may last before the delete fails (default
    /// [`crate::hooks::DEFAULT_HOOK_TIMEOUT`]): `--hook-timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_timeout: Option<Duration>,
    /// Why the machine goes: an operator's request (the default) or nodewright's own choice (a
    /// rollout's replacement, a scale-down, a sweep's remediation), which the drain's handling
    /// of do-not-disrupt marks follows (see [`crate::disruption`]).
    #[serde(
        default,
        skip_serializing_if = "crate::disruption::Disruption::is_operator"
    )]
    pub disruption: crate::disruption::Disruption,
}

impl DeleteMachineRequest {
    /// The bound of each hold by delete hooks.
    pub fn hook_timeout(&self) -> Duration {
        self.hook_timeout
            .unwrap_or(crate::hooks::DEFAULT_HOOK_TIMEOUT)
    }
}

/// The input of UncordonNode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UncordonRequest {
    /// The cluster that owns the machine.
    pub cluster: ClusterName,
    /// The machine's name.
    pub machine: String,
    /// Clear also a cordon an administrator set before nodewright's drain
    /// ([`uncordon::ANNOTATION_CORDONED_BEFORE_DRAIN`]); without, it is kept and said so.
    #[serde(default)]
    pub force: bool,
}

/// What CreateMachine returns: the machine as it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedMachine {
    /// The machine's name.
    pub machine: String,
    /// Its pool.
    pub pool: String,
    /// The VM's ARM id.
    pub vm_id: String,
    /// The NIC's ARM id.
    pub nic_id: String,
    /// The Node's providerID.
    pub provider_id: String,
    /// The Node's name.
    pub node: String,
    /// The template hash it runs.
    pub template_hash: String,
    /// Whether the run adopted a VM an earlier attempt had already started.
    pub adopted: bool,
    /// What went wrong without failing the create (an OS disk left untagged, a VM create Azure
    /// ended `Failed` and that was sent again), for people.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What DeleteMachine returns: what it found and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletedMachine {
    /// The machine's name.
    pub machine: String,
    /// Whether the VM existed (false: it was already gone).
    pub vm_deleted: bool,
    /// The NICs and disks removed after the VM (by name and ownership tag).
    pub leftovers_deleted: Vec<String>,
    /// Whether a Node object was deleted.
    pub node_deleted: bool,
    /// Whether the Node was cordoned before the VM went.
    pub cordoned: bool,
    /// What the drain did, when the machine was drained first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained: Option<crate::drain::DrainedNode>,
    /// Set when a VM of the machine's name exists without this cluster's tags: it (and its
    /// Node) were left alone, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_vm: Option<String>,
    /// The delete hooks `--skip-hooks` went past (annotation keys; they stay on the Node).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_hooks: Vec<String>,
}

impl DeletedMachine {
    /// What went, in words: `the VM (with its NIC and OS disk)`, each leftover, `the Node`.
    pub fn what_went(&self) -> Vec<String> {
        let mut parts = Vec::new();
        if self.vm_deleted {
            parts.push("the VM (with its NIC and OS disk)".to_owned());
        }
        parts.extend(self.leftovers_deleted.iter().cloned());
        if self.node_deleted {
            parts.push("the Node".to_owned());
        }
        parts
    }
}

/// The steps of the machine workflows, in runbook order, as the `status` query and the CLI
/// show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// CreateMachine: create or adopt the network interface.
    EnsureNic,
    /// CreateMachine: start (or adopt) the VM creation.
    CreateVm,
    /// CreateMachine: wait for the VM's provisioning to end.
    ProvisionVm,
    /// CreateMachine: wait for the Node to register.
    RegisterNode,
    /// CreateMachine: apply labels and taints.
    LabelNode,
    /// CreateMachine: wait for the Node to be Ready.
    WaitReady,
    /// CreateMachine, failure path: remove what was created.
    Compensate,
    /// CreateMachine, failure path with `keepOnFailure`: mark what was created as kept for
    /// debugging, so the orphan sweep leaves it.
    Keep,
    /// CreateMachine, after the Node is Ready and after any undo: delete the machine's minted
    /// join token (templates with `bootstrapToken` only).
    DeleteJoinToken,
    /// DrainNode: cordon, taint and mark the Node (and DeleteMachine with `--skip-drain`).
    Cordon,
    /// DeleteMachine: check that the VM carries this cluster's and machine's ownership tags,
    /// before anything is cordoned or drained.
    CheckOwner,
    /// DeleteMachine: wait while `pre-drain.delete.hook.nodewright.io/*` annotations hold
    /// the delete.
    PreDrainHooks,
    /// DeleteMachine: drain the Node (the DrainNode child workflow).
    Drain,
    /// DeleteMachine: wait while `pre-terminate.delete.hook.nodewright.io/*` annotations hold
    /// the VM delete.
    PreTerminateHooks,
    /// DrainNode: list the Node's pods and decide what leaves.
    SelectPods,
    /// DrainNode: evict the pods without persistent volumes, in parallel.
    EvictPods,
    /// DrainNode: move the pods with persistent volumes one at a time.
    MoveVolumes,
    /// DrainNode: force mode — delete what is left, release the volumes.
    ForceDrain,
    /// UncordonNode: make the Node schedulable again.
    Uncordon,
    /// DeleteMachine: delete the VM (NIC and OS disk cascade).
    DeleteVm,
    /// DeleteMachine: delete NICs and disks left behind.
    DeleteLeftovers,
    /// DeleteMachine: delete the Node object.
    DeleteNode,
    /// DrainNode and DeleteMachine, cancellation path: return the Node to service as it was
    /// before the run began.
    Restore,
}

impl Step {
    /// The steps of CreateMachine's happy path.
    pub const CREATE: [Step; 6] = [
        Step::EnsureNic,
        Step::CreateVm,
        Step::ProvisionVm,
        Step::RegisterNode,
        Step::LabelNode,
        Step::WaitReady,
    ];
    /// The steps of DeleteMachine, as runs started before delete hooks show them.
    pub const DELETE: [Step; 4] = [
        Step::Drain,
        Step::DeleteVm,
        Step::DeleteLeftovers,
        Step::DeleteNode,
    ];
    /// The steps of DeleteMachine with its two looks at delete hooks.
    pub const DELETE_WITH_HOOKS: [Step; 6] = [
        Step::PreDrainHooks,
        Step::Drain,
        Step::PreTerminateHooks,
        Step::DeleteVm,
        Step::DeleteLeftovers,
        Step::DeleteNode,
    ];

    /// The steps of DeleteMachine that checks the VM's owner before anything else.
    pub const DELETE_OWNER_FIRST: [Step; 7] = [
        Step::CheckOwner,
        Step::PreDrainHooks,
        Step::Drain,
        Step::PreTerminateHooks,
        Step::DeleteVm,
        Step::DeleteLeftovers,
        Step::DeleteNode,
    ];

    /// The steps of DrainNode (force mode adds [`Step::ForceDrain`]).
    pub const DRAIN: [Step; 4] = [
        Step::Cordon,
        Step::SelectPods,
        Step::EvictPods,
        Step::MoveVolumes,
    ];
    /// The steps of UncordonNode.
    pub const UNCORDON: [Step; 1] = [Step::Uncordon];

    /// The step's name, as the search attribute `NodewrightPhase` and the CLI show it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Step::EnsureNic => "ensure-nic",
            Step::CreateVm => "create-vm",
            Step::ProvisionVm => "provision-vm",
            Step::RegisterNode => "register-node",
            Step::LabelNode => "label-node",
            Step::WaitReady => "wait-ready",
            Step::Compensate => "compensate",
            Step::Keep => "keep",
            Step::DeleteJoinToken => "delete-join-token",
            Step::Cordon => "cordon",
            Step::CheckOwner => "check-owner",
            Step::PreDrainHooks => "pre-drain-hooks",
            Step::Drain => "drain",
            Step::PreTerminateHooks => "pre-terminate-hooks",
            Step::SelectPods => "select-pods",
            Step::EvictPods => "evict-pods",
            Step::MoveVolumes => "move-volumes",
            Step::ForceDrain => "force-drain",
            Step::Uncordon => "uncordon",
            Step::DeleteVm => "delete-vm",
            Step::DeleteLeftovers => "delete-leftovers",
            Step::DeleteNode => "delete-node",
            Step::Restore => "restore",
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepState {
    /// Not reached yet.
    Pending,
    /// Under way.
    Running,
    /// Finished.
    Done,
    /// Ended the run's happy path.
    Failed,
}

/// One step of a run, for the `status` query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepProgress {
    /// Which step.
    pub step: Step,
    /// Where it is.
    pub state: StepState,
    /// When it started, RFC 3339 (workflow time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When it ended, RFC 3339 (workflow time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// What it found or did, in a few words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// How a run ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Still running.
    Running,
    /// Finished successfully.
    Succeeded,
    /// Failed (after compensation, for a create).
    Failed,
    /// Ended by a cancellation request, after the clean-up its runbook documents.
    Canceled,
}

/// The answer of the machine workflows' `status` query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// `create` or `delete`.
    pub operation: String,
    /// The machine.
    pub machine: String,
    /// Its pool, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// When the run started, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// Every step of the runbook, in order.
    pub steps: Vec<StepProgress>,
    /// How the run ended, or `running`.
    pub outcome: Outcome,
    /// Why it failed, in ARM or Kubernetes terms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// What a cancellation undid and kept, once the run was cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canceled: Option<crate::cancel::Canceled>,
    /// Facts gathered on the way (vm id, provider id, node, ...).
    #[serde(default)]
    pub facts: BTreeMap<String, String>,
    /// The delete hooks holding the run now, while they do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<HookHold>,
    /// The delete hooks `--skip-hooks` went past (they stay on the Node).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_hooks: Vec<String>,
    /// What went wrong without failing the run (an OS disk left untagged, a VM create sent
    /// again), for people, in the order it happened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Delete hooks holding a DeleteMachine (see [`crate::hooks`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookHold {
    /// Which point of the delete they hold.
    pub stage: crate::hooks::HookStage,
    /// The annotation keys, sorted, at most [`crate::hooks::MAX_HOOKS_KEPT`].
    pub hooks: Vec<String>,
    /// How many there are in all.
    pub total: usize,
    /// When the run found them, RFC 3339.
    pub since: String,
    /// When the hold times out and the delete fails, RFC 3339.
    pub until: String,
}

impl MachineStatus {
    /// A fresh status with every step of `steps` pending.
    pub fn new(operation: &str, machine: &str, pool: Option<&str>, steps: &[Step]) -> Self {
        Self {
            operation: operation.to_owned(),
            machine: machine.to_owned(),
            pool: pool.map(str::to_owned),
            started_at: None,
            steps: steps
                .iter()
                .map(|step| StepProgress {
                    step: *step,
                    state: StepState::Pending,
                    started_at: None,
                    finished_at: None,
                    detail: None,
                })
                .collect(),
            outcome: Outcome::Running,
            failure: None,
            canceled: None,
            facts: BTreeMap::new(),
            hold: None,
            skipped_hooks: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Marks `step` running at `now` (adding it when it is not in the list, e.g. compensation).
    pub fn start(&mut self, step: Step, now: &str) {
        let entry = self.entry(step);
        entry.state = StepState::Running;
        entry.started_at = Some(now.to_owned());
    }

    /// Marks `step` done at `now` with an optional detail.
    pub fn finish(&mut self, step: Step, now: &str, detail: Option<String>) {
        let entry = self.entry(step);
        entry.state = StepState::Done;
        entry.finished_at = Some(now.to_owned());
        if detail.is_some() {
            entry.detail = detail;
        }
    }

    /// Marks `step` failed at `now` with the reason.
    pub fn fail(&mut self, step: Step, now: &str, reason: &str) {
        let entry = self.entry(step);
        entry.state = StepState::Failed;
        entry.finished_at = Some(now.to_owned());
        entry.detail = Some(reason.to_owned());
    }

    /// The step currently running, if any.
    pub fn current(&self) -> Option<Step> {
        self.steps
            .iter()
            .find(|s| s.state == StepState::Running)
            .map(|s| s.step)
    }

    fn entry(&mut self, step: Step) -> &mut StepProgress {
        let index = match self.steps.iter().position(|s| s.step == step) {
            Some(index) => index,
            None => {
                self.steps.push(StepProgress {
                    step,
                    state: StepState::Pending,
                    started_at: None,
                    finished_at: None,
                    detail: None,
                });
                self.steps.len() - 1
            }
        };
        &mut self.steps[index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names_follow_the_machine() {
        assert_eq!(nic_name("web-b2c4d"), "web-b2c4d-nic");
        assert_eq!(os_disk_name("web-b2c4d"), "web-b2c4d-osdisk");
    }

    #[test]
    fn steps_move_from_pending_to_done_or_failed_and_compensation_is_appended() {
        let mut status = MachineStatus::new("create", "web-b2c4d", Some("web"), &Step::CREATE);
        assert!(status.steps.iter().all(|s| s.state == StepState::Pending));
        status.start(Step::EnsureNic, "t1");
        assert_eq!(status.current(), Some(Step::EnsureNic));
        status.finish(Step::EnsureNic, "t2", Some("created".to_owned()));
        status.start(Step::CreateVm, "t3");
        status.fail(Step::CreateVm, "t4", "AllocationFailed");
        status.start(Step::Compensate, "t5");
        assert_eq!(status.steps.len(), Step::CREATE.len() + 1);
        assert_eq!(status.current(), Some(Step::Compensate));
        let nic = &status.steps[0];
        assert_eq!(
            (nic.state, nic.detail.as_deref()),
            (StepState::Done, Some("created"))
        );
        assert_eq!(status.steps[1].state, StepState::Failed);
    }

    #[test]
    fn zones_are_chosen_stably_and_spread() {
        let zones: Vec<String> = ["1", "2", "3"].iter().map(|z| z.to_string()).collect();
        assert_eq!(zone_for("web-b2c4d", &[]), None);
        assert_eq!(zone_for("web-b2c4d", &zones), zone_for("web-b2c4d", &zones));
        let used: std::collections::HashSet<_> = [
            "web-b2c4d",
            "web-x7k2m",
            "web-qq9zz",
            "web-lmn45",
            "web-88t2v",
            "web-zz2b7",
        ]
        .iter()
        .filter_map(|m| zone_for(m, &zones))
        .collect();
        assert!(used.len() >= 2, "{used:?}");
    }

    #[test]
    fn step_names_are_distinct() {
        let all = Step::CREATE
            .iter()
            .chain(Step::DELETE_WITH_HOOKS.iter())
            .chain([Step::Compensate].iter())
            .map(|s| s.as_str())
            .collect::<std::collections::HashSet<_>>();
        assert_eq!(
            all.len(),
            Step::CREATE.len() + Step::DELETE_WITH_HOOKS.len() + 1
        );
    }
}
