//! What an orphan sweep looks at: the resource group's VMs, NICs and disks, the cluster's Nodes,
//! the disks PersistentVolumes use, and the nodewright workflows still running — each reduced to
//! the facts the classifier needs (times as Unix seconds: this crate has no clock).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// The kinds of Azure resource a sweep lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceKind {
    /// `Microsoft.Compute/virtualMachines`.
    Vm,
    /// `Microsoft.Network/networkInterfaces`.
    Nic,
    /// `Microsoft.Compute/disks`.
    Disk,
}

impl ResourceKind {
    /// Every kind, in the order a sweep lists and reports them.
    pub const ALL: [ResourceKind; 3] = [ResourceKind::Vm, ResourceKind::Nic, ResourceKind::Disk];

    /// The word the audit uses: `vm`, `nic`, `disk`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Vm => "vm",
            ResourceKind::Nic => "nic",
            ResourceKind::Disk => "disk",
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One VM, NIC or disk as a list page returned it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArmResource {
    /// VM, NIC or disk.
    pub kind: ResourceKind,
    /// The resource's name.
    pub name: String,
    /// Its `nodewright.io-*` tags (other tags are dropped when listing: they never decide).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// `properties.provisioningState` (empty when absent).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provisioning_state: String,
    /// The VM it is attached to (a NIC's `virtualMachine.id`, a disk's `managedBy`), by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_to: Option<String>,
    /// The `nodewright.io-created` tag as Unix seconds, when present and readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// The `nodewright.io-creation-deadline` tag as Unix seconds, when present and readable:
    /// until then the create that made it may still be running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_deadline: Option<i64>,
    /// The `nodewright.io-creation-ended` tag as Unix seconds, when present and readable: the
    /// create that made it has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_ended: Option<i64>,
}

/// Whether a Node's kubelet reports it Ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum NodeReadiness {
    /// The `Ready` condition is `True`.
    Ready,
    /// `Ready` is `False` or `Unknown`, or missing.
    #[serde(rename_all = "camelCase")]
    NotReady {
        /// When `Ready` last changed (Unix seconds; the Node's creation when unknown).
        since: i64,
        /// The kubelet's last heartbeat in the `Ready` condition (Unix seconds; the Node's
        /// creation when unknown).
        last_heartbeat: i64,
    },
}

/// One Node, as the sweep needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`: a deletion is made conditional on it.
    pub uid: String,
    /// `spec.providerID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// The `nodewright.io/machine` label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The `nodewright.io/pool` label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// `metadata.creationTimestamp`, Unix seconds.
    pub created_at: i64,
    /// The `Ready` condition.
    pub readiness: NodeReadiness,
    /// Whether it carries the `nodewright.io/outdated` taint a rollout puts on the machines it
    /// replaces.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tainted_outdated: bool,
}

/// A nodewright workflow still running in this cluster, as visibility lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunningWorkflow {
    /// Its workflow ID (`create/<cluster>/<machine>`...).
    pub workflow_id: String,
    /// Its `NodewrightOperation`.
    #[serde(default)]
    pub operation: String,
    /// Its `NodewrightMachine`, when it works on one machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Its `NodewrightPool`, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

/// Everything one sweep saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    /// The resource group's VMs, NICs and disks (every page).
    pub resources: Vec<ArmResource>,
    /// The cluster's Nodes.
    pub nodes: Vec<NodeRecord>,
    /// Names of the Azure disks PersistentVolumes refer to, lower-cased.
    pub volume_disks: BTreeSet<String>,
    /// nodewright workflows running in this cluster (the sweep itself excluded).
    pub running: Vec<RunningWorkflow>,
}

/// The last segment of an ARM id (`…/virtualMachines/web-a1b2c` → `web-a1b2c`).
pub fn name_from_id(id: &str) -> &str {
    id.trim_end_matches('/').rsplit('/').next().unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_last_segment_of_an_id() {
        assert_eq!(
            name_from_id(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web-a1b2c"
            ),
            "web-a1b2c"
        );
        assert_eq!(name_from_id("web-a1b2c/"), "web-a1b2c");
        assert_eq!(name_from_id("plain"), "plain");
    }

    #[test]
    fn readiness_reads_back_as_written() {
        let not_ready = NodeReadiness::NotReady {
            since: 10,
            last_heartbeat: 5,
        };
        let text = serde_json::to_string(&not_ready).unwrap();
        assert_eq!(
            text,
            r#"{"state":"not-ready","since":10,"lastHeartbeat":5}"#
        );
        assert_eq!(
            serde_json::from_str::<NodeReadiness>(&text).unwrap(),
            not_ready
        );
    }
}
