//! The sweep's one decision: for every resource and Node seen, keep it (and why), delete it (and
//! by which rule), or report/replace an unhealthy machine (architecture §3, OrphanSweep).
//!
//! The rules, in the order they are tried (the first that applies decides):
//! - a VM, NIC or disk without exactly this cluster's `nodewright.io-cluster` tag is **not ours**;
//! - a VM, NIC or disk carrying the `nodewright.io-kept` marker (a machine a failed create kept
//!   for debugging) is **kept**, whatever else holds, and so is every other resource and the
//!   Node of its machine, until the tag is removed from all of them;
//! - a disk a PersistentVolume uses, or any disk that is not a machine's OS disk as nodewright
//!   names and tags it, was **not created by nodewright** and is never deleted;
//! - a VM, NIC, disk or Node whose **name does not follow nodewright's pattern** for the machine
//!   its tags or labels name (VM and Node: the machine's name, a valid machine name; NIC
//!   `<machine>-nic`; disk `<machine>-osdisk`) was not made by nodewright, whatever its tags say
//!   (tags alone can be written by anyone with tag rights on a foreign resource): kept;
//! - a NIC or disk attached to a VM is kept (the VM decides);
//! - anything of a machine with a **running nodewright workflow** is kept;
//! - a resource whose ARM operation is still running is kept (the next sweep looks again);
//! - without a creation time it is kept; its age counts from the end of its create
//!   (`nodewright.io-creation-ended`) when that is recorded, else from its creation
//!   (`nodewright.io-created`): younger than the grace period, it is kept (**inside grace**);
//! - while its create **may still be running** it is kept: before its
//!   `nodewright.io-creation-deadline` (the create's start plus its creation timeout), or,
//!   without that tag, before its creation plus the longest creation timeout there is
//!   ([`limits::MAX_CREATION_TIMEOUT`]);
//! - a VM with no Node, a NIC or a disk with no VM, past grace, is an **orphan**: deleted;
//! - a Node labelled by nodewright whose VM is not in the resource group, not Ready, and silent
//!   longer than grace, is an **orphan Node**: deleted;
//! - a machine whose Node is NotReady longer than the health timeout is **unhealthy**: reported,
//!   or replaced when the sweep remediates (unless its pool's rollout is running: it replaces
//!   broken machines itself).
//!
//! Beside removals, one action changes a Node without removing anything: a Node of a machine
//! (its VM exists with this cluster's tag, no workflow works on it) labelled `nodewright.io/pool=<pool>` that carries
//! the `nodewright.io/outdated` taint while no rollout of that pool runs has a **stale outdated
//! taint**: the taint means "the running rollout replaces this machine", and a rollout that was
//! terminated or failed left it with nobody to remove it. The sweep removes that taint only
//! (other taints stay); it is not a deletion, so it is outside the brake and `max_deletions`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::inventory::{
    ArmResource, Inventory, NodeReadiness, NodeRecord, ResourceKind, name_from_id,
};
use crate::ClusterName;
use crate::MachineName;
use crate::limits;
use crate::machine::{nic_name, os_disk_name};
use crate::names::Operation;
use crate::ownership::{TAG_CLUSTER, TAG_KEPT, TAG_MACHINE, TAG_POOL, is_owned_by, kept};
use crate::rollout::TAINT_OUTDATED;
use crate::time::deadline_after;

/// What a sweep decides about: a VM, NIC, disk or Node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SubjectKind {
    /// A VM (and, for remediation, the machine it is).
    Vm,
    /// A network interface.
    Nic,
    /// A managed disk.
    Disk,
    /// A Kubernetes Node object.
    Node,
}

impl SubjectKind {
    /// The word the audit prints.
    pub const fn as_str(self) -> &'static str {
        match self {
            SubjectKind::Vm => "vm",
            SubjectKind::Nic => "nic",
            SubjectKind::Disk => "disk",
            SubjectKind::Node => "node",
        }
    }
}

impl fmt::Display for SubjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ResourceKind> for SubjectKind {
    fn from(kind: ResourceKind) -> Self {
        match kind {
            ResourceKind::Vm => SubjectKind::Vm,
            ResourceKind::Nic => SubjectKind::Nic,
            ResourceKind::Disk => SubjectKind::Disk,
        }
    }
}

/// The rule that decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// No exact `nodewright.io-cluster=<cluster>` tag: another cluster's or nobody's.
    NotOurs,
    /// Kept for debugging: it carries the `nodewright.io-kept` marker, or another resource of
    /// its machine does (for a Node: a resource of its machine).
    Kept,
    /// A disk a PersistentVolume refers to.
    BacksVolume,
    /// A disk that is not a nodewright machine's OS disk (name and machine tag).
    NotCreatedByNodewright,
    /// A VM whose `nodewright.io-machine` tag is not its name: nodewright never makes one.
    TagsDisagree,
    /// A name nodewright never gives: a VM or Node whose name is not a valid machine name, a
    /// NIC not named `<machine>-nic`, a Node not named as its machine and VM.
    NameNotOurs,
    /// A NIC or disk attached to a VM.
    Attached,
    /// A nodewright workflow for its machine is running.
    WorkflowRunning,
    /// Its ARM provisioning is still in progress (`Creating`, `Updating`, `Deleting`).
    Busy,
    /// No readable `nodewright.io-created` tag: its age is unknown.
    NoCreationTime,
    /// Created, or its create ended, less than the grace period ago.
    InsideGrace,
    /// Its create may still be running: its creation deadline has not passed.
    CreateMayRun,
    /// A VM with its Node Ready.
    Healthy,
    /// A VM whose Node is NotReady, for less than the health timeout.
    NotReadyWithinTimeout,
    /// A VM whose Node is NotReady longer than the health timeout, or a Node carrying the
    /// outdated taint, while its pool's rollout runs.
    RolloutRunning,
    /// A VM whose Node is NotReady longer than the health timeout, in a pool whose controller
    /// runs: the controller remediates it, within its pool's maxUnhealthy and maxInFlight.
    ControllerRunning,
    /// A VM whose Node is NotReady longer than the health timeout.
    Unhealthy,
    /// A Node nodewright did not register (no `nodewright.io/machine` label, or a providerID
    /// outside this resource group).
    NodeNotManaged,
    /// A Node whose VM exists.
    VmExists,
    /// A Node whose VM is not listed but that is Ready, or heard from within the grace period.
    NodeStillAlive,
    /// A VM past grace with no Node and no workflow.
    OrphanVm,
    /// A NIC past grace attached to no VM.
    OrphanNic,
    /// A nodewright OS disk past grace attached to no VM.
    OrphanDisk,
    /// A nodewright Node whose VM is gone, silent longer than grace.
    OrphanNode,
    /// A pool's Node carrying the `nodewright.io/outdated` taint while no rollout of the pool
    /// runs: the taint is removed.
    StaleOutdatedTaint,
}

impl Rule {
    /// The rule's name as the audit prints it (`orphan-vm`, `inside-grace`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::NotOurs => "not-ours",
            Rule::Kept => "kept",
            Rule::BacksVolume => "backs-volume",
            Rule::NotCreatedByNodewright => "not-created-by-nodewright",
            Rule::TagsDisagree => "tags-disagree",
            Rule::NameNotOurs => "name-not-ours",
            Rule::Attached => "attached",
            Rule::WorkflowRunning => "workflow-running",
            Rule::Busy => "busy",
            Rule::NoCreationTime => "no-creation-time",
            Rule::InsideGrace => "inside-grace",
            Rule::CreateMayRun => "create-may-run",
            Rule::Healthy => "healthy",
            Rule::NotReadyWithinTimeout => "not-ready-within-timeout",
            Rule::RolloutRunning => "rollout-running",
            Rule::ControllerRunning => "controller-running",
            Rule::Unhealthy => "unhealthy",
            Rule::NodeNotManaged => "node-not-managed",
            Rule::VmExists => "vm-exists",
            Rule::NodeStillAlive => "node-still-alive",
            Rule::OrphanVm => "orphan-vm",
            Rule::OrphanNic => "orphan-nic",
            Rule::OrphanDisk => "orphan-disk",
            Rule::OrphanNode => "orphan-node",
            Rule::StaleOutdatedTaint => "stale-outdated-taint",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the sweep does about a subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Leaves it alone.
    Keep,
    /// Deletes it (a VM with its NIC and OS disk).
    Delete,
    /// Reports it (an unhealthy machine when the sweep does not remediate).
    Report,
    /// Replaces the machine: DeleteMachine, and CreateMachine when it belongs to a pool.
    Replace,
    /// Removes the `nodewright.io/outdated` taint from a Node (nothing else of it changes).
    Untaint,
}

impl Action {
    /// The word the audit prints.
    pub const fn as_str(self) -> &'static str {
        match self {
            Action::Keep => "keep",
            Action::Delete => "delete",
            Action::Report => "report",
            Action::Replace => "replace",
            Action::Untaint => "untaint",
        }
    }

    /// Whether the action removes something (what `max_deletions` counts).
    pub const fn removes(self) -> bool {
        matches!(self, Action::Delete | Action::Replace)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The decision about one subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// VM, NIC, disk or Node.
    pub kind: SubjectKind,
    /// Its name.
    pub name: String,
    /// The rule that decided.
    pub rule: Rule,
    /// What the sweep does.
    pub action: Action,
    /// The facts behind the rule, for people: `created 2h 3m ago (grace 20m)`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The machine's pool (a VM's `nodewright.io-pool` tag), for a replacement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// A Node's uid: its deletion is conditional on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// What a sweep's decisions depend on besides the inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepPolicy {
    /// The cluster whose tag marks ownership.
    pub cluster: ClusterName,
    /// The ARM id prefix of this resource group's VMs
    /// (`/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/`):
    /// a Node whose providerID is elsewhere is not ours.
    pub vm_id_prefix: String,
    /// Nothing younger than this is an orphan.
    pub grace: Duration,
    /// A Node NotReady this long makes its machine unhealthy.
    pub health_timeout: Duration,
    /// Whether unhealthy machines are replaced (otherwise reported).
    pub remediate: bool,
    /// The sweep's time, Unix seconds.
    pub now: i64,
    /// Whether names must follow nodewright's pattern as well as the tags ([`Rule::NameNotOurs`]);
    /// off only for sweeps an older worker started (they replay their old decisions).
    pub check_names: bool,
    /// Whether a pool's Node carrying the outdated taint while no rollout of the pool runs is
    /// untainted ([`Rule::StaleOutdatedTaint`]); off for sweeps an older worker started.
    pub clear_stale_taints: bool,
}

/// Classifies everything in `inventory`: VMs, NICs and disks in their listed order, then Nodes.
pub fn classify(inventory: &Inventory, policy: &SweepPolicy) -> Vec<Decision> {
    let context = Context::new(inventory, policy);
    let mut decisions: Vec<Decision> = inventory
        .resources
        .iter()
        .map(|resource| context.resource(resource))
        .collect();
    decisions.extend(inventory.nodes.iter().map(|node| context.node(node)));
    decisions
}

/// The inventory indexed for lookups.
struct Context<'a> {
    policy: &'a SweepPolicy,
    volume_disks: &'a BTreeSet<String>,
    /// Machine → the workflow running for it.
    machine_workflows: BTreeMap<&'a str, &'a str>,
    /// Pool → its running rollout.
    pool_rollouts: BTreeMap<&'a str, &'a str>,
    /// Pool → its running controller.
    pool_controllers: BTreeMap<&'a str, &'a str>,
    /// Every VM listed, by name (whoever owns it).
    vms: BTreeSet<&'a str>,
    /// The VMs listed with this cluster's tag, by name.
    our_vms: BTreeSet<&'a str>,
    /// Machines kept for debugging: the machine tag (and a VM's name) of every resource of this
    /// cluster carrying the kept marker.
    kept_machines: BTreeSet<&'a str>,
    /// VM name → the Node registered for it (by providerID in this resource group).
    node_of_vm: BTreeMap<String, &'a NodeRecord>,
}

impl<'a> Context<'a> {
    fn new(inventory: &'a Inventory, policy: &'a SweepPolicy) -> Self {
        let mut machine_workflows = BTreeMap::new();
        let mut pool_rollouts = BTreeMap::new();
        let mut pool_controllers = BTreeMap::new();
        for workflow in &inventory.running {
            if workflow.operation == Operation::Pool.as_str()
                && let Some(pool) = &workflow.pool
            {
                pool_controllers.insert(pool.as_str(), workflow.workflow_id.as_str());
            }
            if let Some(machine) = &workflow.machine {
                machine_workflows.insert(machine.as_str(), workflow.workflow_id.as_str());
            }
            if workflow.operation == Operation::Rollout.as_str()
                && let Some(pool) = &workflow.pool
            {
                pool_rollouts.insert(pool.as_str(), workflow.workflow_id.as_str());
            }
        }
        let vms = inventory
            .resources
            .iter()
            .filter(|resource| resource.kind == ResourceKind::Vm)
            .map(|resource| resource.name.as_str())
            .collect();
        let our_vms = inventory
            .resources
            .iter()
            .filter(|resource| resource.kind == ResourceKind::Vm)
            .filter(|resource| is_owned_by(&resource.tags, &policy.cluster))
            .map(|resource| resource.name.as_str())
            .collect();
        let mut kept_machines = BTreeSet::new();
        for resource in &inventory.resources {
            if is_owned_by(&resource.tags, &policy.cluster) && kept(&resource.tags).is_some() {
                kept_machines.extend(resource.tags.get(TAG_MACHINE).map(String::as_str));
                if resource.kind == ResourceKind::Vm {
                    kept_machines.insert(resource.name.as_str());
                }
            }
        }
        let mut context = Self {
            policy,
            volume_disks: &inventory.volume_disks,
            machine_workflows,
            pool_rollouts,
            pool_controllers,
            vms,
            our_vms,
            kept_machines,
            node_of_vm: BTreeMap::new(),
        };
        for node in &inventory.nodes {
            if let Some(vm) = context.vm_of_node(node) {
                context.node_of_vm.insert(vm.to_owned(), node);
            }
        }
        context
    }

    /// The VM (by name) a Node's providerID names, when it is in this resource group.
    fn vm_of_node<'n>(&self, node: &'n NodeRecord) -> Option<&'n str> {
        let id = node.provider_id.as_deref()?.strip_prefix("azure://")?;
        let prefix = self.policy.vm_id_prefix.as_str();
        let in_group = id.len() > prefix.len()
            && id.is_char_boundary(prefix.len())
            && id[..prefix.len()].eq_ignore_ascii_case(prefix);
        in_group.then(|| name_from_id(id))
    }

    fn resource(&self, resource: &ArmResource) -> Decision {
        let decide = |rule: Rule, action: Action, detail: String| Decision {
            kind: resource.kind.into(),
            name: resource.name.clone(),
            rule,
            action,
            detail,
            pool: resource.tags.get(TAG_POOL).cloned(),
            uid: None,
        };
        let keep = |rule: Rule, detail: String| decide(rule, Action::Keep, detail);
        if !is_owned_by(&resource.tags, &self.policy.cluster) {
            // The detail is the cluster tag found (empty: none); the audit groups by it.
            let found = resource.tags.get(TAG_CLUSTER).cloned().unwrap_or_default();
            return keep(Rule::NotOurs, found);
        }
        let machine = resource.tags.get(TAG_MACHINE).map(String::as_str);
        if let Some(marker) = kept(&resource.tags) {
            return keep(Rule::Kept, format!("kept for debugging: {marker}"));
        }
        if let Some(machine) = machine.filter(|machine| self.kept_machines.contains(machine)) {
            return keep(Rule::Kept, kept_machine(machine));
        }
        if resource.kind == ResourceKind::Disk {
            if self
                .volume_disks
                .contains(&resource.name.to_ascii_lowercase())
            {
                return keep(Rule::BacksVolume, "a PersistentVolume uses it".to_owned());
            }
            if machine.is_none_or(|machine| resource.name != os_disk_name(machine)) {
                return keep(
                    Rule::NotCreatedByNodewright,
                    "not a machine's OS disk (<machine>-osdisk with its nodewright.io-machine tag)"
                        .to_owned(),
                );
            }
        }
        if resource.kind == ResourceKind::Vm && machine != Some(resource.name.as_str()) {
            return keep(
                Rule::TagsDisagree,
                match machine {
                    Some(machine) => format!(
                        "nodewright.io-machine tag is {}, not its name",
                        crate::text::quoted(machine)
                    ),
                    None => "no nodewright.io-machine tag".to_owned(),
                },
            );
        }
        if self.policy.check_names
            && let Some(problem) = resource_name_problem(resource.kind, &resource.name, machine)
        {
            return keep(Rule::NameNotOurs, problem);
        }
        if let Some(vm) = &resource.attached_to {
            return keep(Rule::Attached, format!("attached to VM {vm}"));
        }
        if let Some(workflow) = machine.and_then(|machine| self.machine_workflows.get(machine)) {
            return keep(Rule::WorkflowRunning, format!("{workflow} is running"));
        }
        if resource.kind == ResourceKind::Vm
            && let Some(node) = self.node_of_vm.get(resource.name.as_str())
        {
            return self.machine_health(resource, node, decide);
        }
        if is_busy(&resource.provisioning_state) {
            return keep(
                Rule::Busy,
                format!("provisioning state {}", resource.provisioning_state),
            );
        }
        let Some(created_at) = resource.created_at else {
            return keep(
                Rule::NoCreationTime,
                "no readable nodewright.io-created tag".to_owned(),
            );
        };
        // The age counts from the create's end when it is recorded (an end before the
        // creation is no end), else from the creation.
        let (since, since_what) = match resource.creation_ended.filter(|end| *end >= created_at) {
            Some(ended) => (ended, "its create ended"),
            None => (created_at, "created"),
        };
        let now = self.policy.now;
        let age = age(now, since);
        if now < since || age < self.policy.grace {
            return keep(
                Rule::InsideGrace,
                format!(
                    "{since_what} {} ago (grace {})",
                    human(age),
                    human(self.policy.grace)
                ),
            );
        }
        if let Some(detail) = create_may_run(resource, created_at, now) {
            return keep(Rule::CreateMayRun, detail);
        }
        let (rule, what) = match resource.kind {
            ResourceKind::Vm => (Rule::OrphanVm, "no Node, no workflow"),
            ResourceKind::Nic => (Rule::OrphanNic, "attached to no VM"),
            ResourceKind::Disk => (Rule::OrphanDisk, "attached to no VM"),
        };
        decide(
            rule,
            Action::Delete,
            format!("{what}, {since_what} {} ago", human(age)),
        )
    }

    /// A VM with its Node: healthy, NotReady for a while, or unhealthy.
    fn machine_health(
        &self,
        vm: &ArmResource,
        node: &NodeRecord,
        decide: impl Fn(Rule, Action, String) -> Decision,
    ) -> Decision {
        let NodeReadiness::NotReady { since, .. } = node.readiness else {
            return decide(
                Rule::Healthy,
                Action::Keep,
                format!("Node {} Ready", node.name),
            );
        };
        let not_ready_for = age(self.policy.now, since);
        let detail = format!(
            "Node {} NotReady for {} (health timeout {})",
            node.name,
            human(not_ready_for),
            human(self.policy.health_timeout)
        );
        if not_ready_for < self.policy.health_timeout {
            return decide(Rule::NotReadyWithinTimeout, Action::Keep, detail);
        }
        let pool = vm.tags.get(TAG_POOL).map(String::as_str);
        if let Some(rollout) = pool.and_then(|pool| self.pool_rollouts.get(pool)) {
            return decide(
                Rule::RolloutRunning,
                Action::Keep,
                format!("{detail}; {rollout} is running and replaces it"),
            );
        }
        if let Some(controller) = pool.and_then(|pool| self.pool_controllers.get(pool)) {
            return decide(
                Rule::ControllerRunning,
                Action::Keep,
                format!("{detail}; {controller} is running and remediates it"),
            );
        }
        let action = if self.policy.remediate {
            Action::Replace
        } else {
            Action::Report
        };
        decide(Rule::Unhealthy, action, detail)
    }

    fn node(&self, node: &NodeRecord) -> Decision {
        let decide = |rule: Rule, action: Action, detail: String| Decision {
            kind: SubjectKind::Node,
            name: node.name.clone(),
            rule,
            action,
            detail,
            pool: node.pool.clone(),
            uid: Some(node.uid.clone()),
        };
        let keep = |rule: Rule, detail: String| decide(rule, Action::Keep, detail);
        let (Some(machine), Some(vm)) = (node.machine.as_deref(), self.vm_of_node(node)) else {
            return keep(
                Rule::NodeNotManaged,
                "no nodewright.io/machine label or a providerID outside this resource group"
                    .to_owned(),
            );
        };
        if self.policy.check_names
            && let Some(problem) = node_name_problem(&node.name, machine, vm)
        {
            return keep(Rule::NameNotOurs, problem);
        }
        if let Some(kept) = [machine, vm]
            .into_iter()
            .find(|name| self.kept_machines.contains(name))
        {
            return keep(Rule::Kept, kept_machine(kept));
        }
        if let Some(workflow) = [machine, vm]
            .iter()
            .find_map(|name| self.machine_workflows.get(name))
        {
            return keep(Rule::WorkflowRunning, format!("{workflow} is running"));
        }
        if self.vms.contains(vm) {
            if let Some(decision) = self.outdated_taint(node, vm, decide) {
                return decision;
            }
            return keep(Rule::VmExists, format!("VM {vm} exists"));
        }
        let NodeReadiness::NotReady { last_heartbeat, .. } = node.readiness else {
            return keep(
                Rule::NodeStillAlive,
                format!("VM {vm} is not listed, but the Node is Ready"),
            );
        };
        let silent_for = age(self.policy.now, last_heartbeat);
        if silent_for < self.policy.grace {
            return keep(
                Rule::NodeStillAlive,
                format!(
                    "VM {vm} is not listed; last heartbeat {} ago (grace {})",
                    human(silent_for),
                    human(self.policy.grace)
                ),
            );
        }
        decide(
            Rule::OrphanNode,
            Action::Delete,
            format!(
                "VM {vm} does not exist; last heartbeat {} ago",
                human(silent_for)
            ),
        )
    }
}

impl Context<'_> {
    /// What to do about the outdated taint of a machine's Node (its VM `vm`): nothing without
    /// the taint, a pool label or a VM of this cluster (another cluster's rollouts are not
    /// listed); kept while a rollout of its pool runs (it put the taint, and removes it); else
    /// the taint is stale and removed.
    fn outdated_taint(
        &self,
        node: &NodeRecord,
        vm: &str,
        decide: impl Fn(Rule, Action, String) -> Decision,
    ) -> Option<Decision> {
        if !self.policy.clear_stale_taints || !node.tainted_outdated || !self.our_vms.contains(vm) {
            return None;
        }
        let pool = node.pool.as_deref()?;
        Some(match self.pool_rollouts.get(pool) {
            Some(rollout) => decide(
                Rule::RolloutRunning,
                Action::Keep,
                format!("carries {TAINT_OUTDATED}; {rollout} is running and owns it"),
            ),
            None => decide(
                Rule::StaleOutdatedTaint,
                Action::Untaint,
                format!("carries {TAINT_OUTDATED} while no rollout of pool {pool} runs"),
            ),
        })
    }
}

/// Why a VM's, NIC's or disk's name is not one nodewright gives the machine its
/// `nodewright.io-machine` tag names, or `None` when it is. (A VM whose tag is not its name, and
/// a disk that is not `<machine>-osdisk`, were decided before, by their own rules.)
fn resource_name_problem(kind: ResourceKind, name: &str, machine: Option<&str>) -> Option<String> {
    let Some(machine) = machine else {
        return Some("no nodewright.io-machine tag".to_owned());
    };
    if MachineName::parse("nodewright.io-machine", machine).is_err() {
        return Some(format!(
            "its nodewright.io-machine tag {} is not a machine name nodewright gives",
            crate::text::quoted(machine)
        ));
    }
    let expected = match kind {
        ResourceKind::Vm => machine.to_owned(),
        ResourceKind::Nic => nic_name(machine),
        ResourceKind::Disk => os_disk_name(machine),
    };
    (name != expected).then(|| {
        format!(
            "named {}, not {} as nodewright names the {kind} of machine {machine}",
            crate::text::quoted(name),
            crate::text::quoted(&expected)
        )
    })
}

/// Why a Node labelled as machine `machine` whose providerID names VM `vm` is not one nodewright
/// registered (its name, the machine's and the VM's are one), or `None` when it is.
fn node_name_problem(name: &str, machine: &str, vm: &str) -> Option<String> {
    if MachineName::parse("Node name", name).is_err() {
        return Some(format!(
            "{} is not a machine name nodewright gives",
            crate::text::quoted(name)
        ));
    }
    (name != machine || !name.eq_ignore_ascii_case(vm)).then(|| {
        format!(
            "its nodewright.io/machine label ({}) and its VM ({}) are not its name, as nodewright registers its Nodes",
            crate::text::quoted(machine),
            crate::text::quoted(vm)
        )
    })
}

/// The detail of a subject kept because another resource of its machine carries the marker.
fn kept_machine(machine: &str) -> String {
    format!("machine {machine} is kept for debugging ({TAG_KEPT} on its resources)")
}

/// Why the create that made `resource` (created at `created_at`) may still be running at `now`,
/// or `None` once its deadline has passed: the `nodewright.io-creation-deadline` tag, or without
/// a readable one (or one before the creation), the creation plus the longest creation timeout.
fn create_may_run(resource: &ArmResource, created_at: i64, now: i64) -> Option<String> {
    let tagged = resource
        .creation_deadline
        .filter(|deadline| *deadline >= created_at);
    let deadline =
        tagged.unwrap_or_else(|| deadline_after(created_at, limits::MAX_CREATION_TIMEOUT));
    if now >= deadline {
        return None;
    }
    let left = human(age(deadline, now));
    Some(match tagged {
        Some(_) => format!("its create may still be running: its deadline is {left} from now"),
        None => format!(
            "its create may still be running: without a creation-deadline tag, until the longest creation timeout ({}) after its creation, {left} from now",
            human(limits::MAX_CREATION_TIMEOUT)
        ),
    })
}

/// Whether an ARM provisioning state means an operation is still running.
fn is_busy(state: &str) -> bool {
    ["Creating", "Updating", "Deleting", "Migrating"]
        .iter()
        .any(|busy| state.eq_ignore_ascii_case(busy))
}

/// How long ago `then` was at `now` (zero for the future).
fn age(now: i64, then: i64) -> Duration {
    Duration::from_secs(u64::try_from(now.saturating_sub(then)).unwrap_or(0))
}

/// A duration for people: `2h 3m`, `45s`.
pub fn human(duration: Duration) -> String {
    humantime::format_duration(Duration::from_secs(duration.as_secs())).to_string()
}
