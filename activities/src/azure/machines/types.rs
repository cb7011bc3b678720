//! Inputs and outputs of the machine activities (serialized into workflow history).

use std::collections::BTreeMap;

use nodewright_model::ClusterName;
use nodewright_model::pool::MachineTemplate;
use serde::{Deserialize, Serialize};

use crate::azure::OperationHandle;

/// Create (or adopt) a machine's NIC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnsureNic {
    /// The owning cluster (a NIC of the same name without its tag is refused).
    pub cluster: ClusterName,
    /// The machine.
    pub machine: String,
    /// The subnet's ARM id.
    pub subnet_id: String,
    /// Every tag, ownership included.
    pub tags: BTreeMap<String, String>,
}

/// The NIC, ready for the VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NicReady {
    /// Its ARM id.
    pub id: String,
    /// False when it already existed (an earlier attempt made it).
    pub created: bool,
}

/// Start (or adopt) the creation of a machine's VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BeginVmCreate {
    /// The owning cluster.
    pub cluster: ClusterName,
    /// The machine (= VM name).
    pub machine: String,
    /// What to build.
    pub template: MachineTemplate,
    /// The NIC's ARM id.
    pub nic_id: String,
    /// The availability zone, if the pool uses zones.
    pub zone: Option<String>,
    /// Every tag, ownership included.
    pub tags: BTreeMap<String, String>,
    /// Spot or on-demand; absent, the template's preferred type (runs recorded before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<nodewright_model::pool::CapacityType>,
    /// Send the PUT again (the same body) when the VM exists, is this machine's and its create
    /// ended `Failed`: the create is being sent again after a retryable failure. Without it
    /// such a VM is adopted as found.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resend: bool,
}

/// How a VM creation began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum VmCreateStarted {
    /// This attempt sent the PUT; poll `operation` (or the VM when ARM gave none).
    Started {
        /// The async operation, when ARM returned one.
        operation: Option<OperationHandle>,
    },
    /// The VM already existed with this cluster's tag (an earlier attempt created it).
    Adopted {
        /// Its provisioning state when found.
        provisioning_state: Option<String>,
    },
}

/// Wait until a VM's provisioning ends, or a deadline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitVm {
    /// The machine (= VM name).
    pub machine: String,
    /// The operation to poll; without one the VM itself is polled.
    pub operation: Option<OperationHandle>,
    /// Give up at this instant (RFC 3339, from the workflow's clock).
    pub deadline: chrono::DateTime<chrono::Utc>,
}

/// How a wait for a VM ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum VmProvisioned {
    /// `provisioningState: Succeeded`.
    Succeeded {
        /// The VM's ARM id.
        vm_id: String,
        /// The OS disk's name, if ARM reported it.
        os_disk: Option<String>,
    },
    /// The deadline passed first.
    TimedOut {
        /// The last provisioning state seen.
        provisioning_state: Option<String>,
    },
    /// The create ended `Failed` with a code Azure means as "try again" (`InternalExecutionError`,
    /// `OperationPreempted`, ...): the workflow decides whether to send the PUT again
    /// (`model::machine::create::decide_vm_create_failed`). A final code fails the activity
    /// (`ProvisioningFailed`) as before.
    Failed {
        /// The ARM error code.
        code: String,
        /// ARM's message.
        message: String,
        /// The failure as people read it: `VM <machine> failed to provision: <code>: <message>`.
        reason: String,
    },
}

/// Tag the OS disk the VM created (Azure does not copy the VM's tags onto it), so the disk can
/// be proven nodewright's after the VM is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagOsDisk {
    /// The disk's name.
    pub disk: String,
    /// The tags to merge in.
    pub tags: BTreeMap<String, String>,
}

/// Delete a machine's VM (its NIC and OS disk go with it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BeginVmDelete {
    /// The owning cluster: a VM without its tag is not touched.
    pub cluster: ClusterName,
    /// The machine.
    pub machine: String,
}

/// How a VM deletion began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum VmDeleteStarted {
    /// Deleted at once, or under way.
    Started {
        /// The async operation, when ARM returned one.
        operation: Option<OperationHandle>,
        /// The VM's OS disk (`<machine>-osdisk`) when it was attached to the VM (which carried
        /// this cluster's tag) as the DELETE was sent: the removal deletes it after the VM even
        /// without tags (a create whose tagging failed leaves it untagged).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        os_disk_under_vm: Option<String>,
    },
    /// There was no such VM.
    AlreadyGone,
    /// A VM of that name exists without this cluster's and machine's tags: left alone.
    NotOwned {
        /// Its `nodewright.io-cluster` tag, if any.
        found: Option<String>,
    },
}

/// Wait for a deletion's operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitDeletion {
    /// The machine.
    pub machine: String,
    /// The operation, when there is one; without one the VM is polled until it is gone.
    pub operation: Option<OperationHandle>,
}

/// Look for a machine's NICs and disks that outlived its VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FindLeftovers {
    /// The owning cluster.
    pub cluster: ClusterName,
    /// The machine.
    pub machine: String,
    /// The OS disk seen attached to the machine's VM (which carried this cluster's tag) when
    /// its DELETE was sent: found as a leftover even without tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_disk_under_vm: Option<String>,
}

/// What kind of resource a leftover is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeftoverKind {
    /// A network interface.
    Nic,
    /// A managed disk.
    Disk,
}

/// A NIC or disk of the machine, tagged for this cluster, with no VM using it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Leftover {
    /// NIC or disk.
    pub kind: LeftoverKind,
    /// Its name.
    pub name: String,
}

/// Delete one leftover (after checking again that it is this cluster's and unattached).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteLeftover {
    /// The owning cluster.
    pub cluster: ClusterName,
    /// What to delete.
    pub leftover: Leftover,
    /// The machine whose removal deletes it, when it is a removal's (DeleteMachine, a create's
    /// compensation; the orphan sweep sends none): its OS disk is judged by
    /// `model::machine::leftovers`, else by the sweep's recheck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The OS disk seen attached to the machine's VM, which carried this cluster's tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_disk_under_vm: Option<String>,
}

/// How a leftover deletion ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeftoverDeleted {
    /// Deleted.
    Deleted,
    /// It was already gone.
    AlreadyGone,
    /// It is attached again or no longer ours: left alone.
    LeftAlone,
}

/// Where this worker's machines live in Azure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArmScope {
    /// The subscription.
    pub subscription_id: String,
    /// The resource group.
    pub resource_group: String,
}

impl ArmScope {
    /// The ARM id of VM `name` in this scope.
    pub fn vm_id(&self, name: &str) -> String {
        nodewright_model::ownership::vm_id(&self.subscription_id, &self.resource_group, name)
    }
}

/// Merge tags into a machine's VM, NIC and OS disk (a failed create that keeps its machine:
/// the kept marker and the create's end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagMachine {
    /// The owning cluster: a resource without its tag (and the machine's) is left alone.
    pub cluster: ClusterName,
    /// The machine (= VM name; NIC `<machine>-nic`, OS disk `<machine>-osdisk`).
    pub machine: String,
    /// The tags to merge in (a tag of the same name is overwritten, the others are kept).
    pub tags: BTreeMap<String, String>,
}

/// Set the `nodewright.io-drain` tag of machines' VMs to the pool's drain settings (a rollout
/// that changed only them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetagDrain {
    /// The owning cluster: a VM without its tag (and the machine's) is left alone.
    pub cluster: ClusterName,
    /// The machines (= VM names).
    pub machines: Vec<String>,
    /// The tag's value (`model::drain::policy_to_tag`).
    pub value: String,
}

/// What `azure.retag_drain` found, by machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainRetagged {
    /// VMs that carry the value now (written by this call or already so).
    pub tagged: Vec<String>,
    /// No such VM.
    pub absent: Vec<String>,
    /// VMs without this cluster's and machine's tags: left alone.
    pub not_ours: Vec<String>,
}

/// What `azure.tag_machine` found, by resource (`VM web-a1b2c`, `NIC web-a1b2c-nic`, `disk
/// web-a1b2c-osdisk`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineTagged {
    /// Tagged now, or already carrying the tags.
    pub tagged: Vec<String>,
    /// Not there.
    pub absent: Vec<String>,
    /// There, but without this cluster's and machine's tags: left alone.
    pub not_ours: Vec<String>,
}

impl MachineTagged {
    /// In words: `VM web-a1b2c, NIC web-a1b2c-nic marked; disk web-a1b2c-osdisk absent`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.tagged.is_empty() {
            parts.push("nothing marked".to_owned());
        } else {
            parts.push(format!("{} marked", self.tagged.join(", ")));
        }
        if !self.absent.is_empty() {
            parts.push(format!("{} absent", self.absent.join(", ")));
        }
        if !self.not_ours.is_empty() {
            parts.push(format!(
                "{} not this cluster's machine's, left alone",
                self.not_ours.join(", ")
            ));
        }
        parts.join("; ")
    }
}

/// Read the trusted drain settings of a machine: its VM's `nodewright.io-drain` tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadDrainTag {
    /// The owning cluster: a VM without its exact tag is not trusted.
    pub cluster: ClusterName,
    /// The machine (= VM name).
    pub machine: String,
}

/// What the machine's VM says of its drain settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum DrainTag {
    /// The VM's `nodewright.io-drain` tag, as written (at most 256 characters).
    Tagged {
        /// Its value.
        value: String,
    },
    /// The VM is this cluster's machine but has no such tag (created before the tag existed).
    Untagged,
    /// No VM of that name.
    NoVm,
    /// A VM of that name without this cluster's and machine's tags: its tags are not trusted.
    NotOwned,
}

/// Read the ownership tags of a machine's VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadVmOwner {
    /// The machine (= VM name).
    pub machine: String,
}
