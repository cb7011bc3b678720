//! The Kubernetes side of a drain: prepare the Node (cordon, taint, condition), list its pods
//! with their volumes, evict or delete pods, wait for them to go, wait for their volumes'
//! VolumeAttachments to go here and appear (attached) on another node, delete the node's
//! VolumeAttachments in force mode, and undo a maintenance drain.
//!
//! Every activity here is one call or one bounded, heartbeating wait; the decisions (which pod,
//! in what order, when to force) are `nodewright_model::drain`'s.

mod evict;
mod listing;
mod node;
mod pods;
mod volumes;
mod wait;

use nodewright_model::drain::{NodeHealth, PdbFacts, PodFacts, PodRef};
use serde::{Deserialize, Serialize};

pub use evict::{delete_pod, evict_pod};
pub(crate) use listing::pods_on_node;
pub use node::{
    FIELD_MANAGER, TERMINATING_MESSAGE, TERMINATING_REASON, node_health, prepare_node,
    restore_node, uncordon_node,
};
pub use pods::list_node_pods;
pub use volumes::{
    await_volumes_detached, await_volumes_reattached, delete_node_volume_attachments,
};
pub use wait::{Heartbeat, POLL_INTERVAL, await_pods_gone};

/// Prepare a machine's Node for a drain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrepareDrain {
    /// The Node (= machine) name.
    pub node: String,
    /// The VM's ARM id; the Node's providerID must name it, and the Node must carry the label
    /// `nodewright.io/machine=<node>`.
    pub vm_id: String,
    /// Also set the `Terminating` condition (the machine is deleted next).
    pub terminating: bool,
}

/// What preparing found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum PreparedNode {
    /// No Node of that name.
    Absent,
    /// A Node of that name that is not this machine's: left alone.
    NotOurs {
        /// Its providerID.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_id: Option<String>,
    },
    /// Cordoned, tainted `nodewright.io/draining:NoSchedule` (and marked `Terminating`).
    Prepared {
        /// The Node's `nodewright.io/drain-policy` annotation, when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy_annotation: Option<String>,
        /// The Node's `nodewright.io/drain-policy-stamp` annotation (what nodewright last wrote
        /// into the other), when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy_stamp: Option<String>,
        /// Its Ready and ReadonlyFilesystem conditions.
        health: NodeHealth,
        /// Whether it was cordoned before, by someone else than a drain (a cancelled drain
        /// leaves it cordoned).
        #[serde(default)]
        cordoned_before: bool,
    },
}

/// Undo a drain's preparation of a machine's Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreNode {
    /// The Node (= machine) name.
    pub node: String,
    /// The VM's ARM id, as for [`PrepareDrain`].
    pub vm_id: String,
    /// Leave `spec.unschedulable` as it is (the Node was cordoned before the drain).
    pub keep_cordoned: bool,
}

/// The pods on a Node, and the Node's health.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePods {
    /// Whether the Node still exists.
    pub node_found: bool,
    /// Its health (default when gone).
    pub health: NodeHealth,
    /// Every pod bound to it (`spec.nodeName`), with PVC → PV → CSI driver and handle resolved.
    pub pods: Vec<PodFacts>,
}

/// List the pods of a Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListNodePods {
    /// The Node.
    pub node: String,
    /// Whether the worker's mirrors may answer (the looks between eviction rounds); the plan
    /// and the last look read the apiserver.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_mirror: bool,
}

/// Evict (or delete) one pod, by UID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAction {
    /// The pod (the UID is a precondition: a new pod of the same name is never hit).
    pub pod: PodRef,
    /// An eviction's grace period instead of the pod's own: the time left until the drain's
    /// hard deadline, when that is shorter (see `model::drain::trimmed_grace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<u64>,
    /// The Node the pod is drained from, whose mirror a refused eviction reads the pod in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// How an eviction request ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Eviction {
    /// Accepted (201): the pod is terminating with its grace period.
    Accepted,
    /// The pod (with that UID) is already gone.
    Gone,
    /// Refused with 429: a PodDisruptionBudget allows no disruption now.
    Blocked {
        /// The budget that selects the pod, when one was found.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pdb: Option<PdbFacts>,
        /// The apiserver's message.
        message: String,
    },
    /// Refused otherwise, or not answered: the drain reads it (`model::drain::refusal_of`).
    Refused {
        /// The HTTP code (`model::drain::NO_ANSWER` when no answer came).
        code: u16,
        /// The status reason (`NamespaceTerminating`, `InternalError`, ...).
        #[serde(default)]
        reason: String,
        /// The apiserver's message, or the transport error.
        message: String,
        /// The PodDisruptionBudgets (`namespace/name`) selecting the pod, when several do.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        budgets: Vec<String>,
    },
}

/// How a force deletion ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PodDeletion {
    /// Deleted with grace period 0.
    Deleted,
    /// Already gone.
    Gone,
}

/// Wait until pods are gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitPodsGone {
    /// The pods (a pod counts as gone when absent or when its UID changed).
    pub pods: Vec<PodRef>,
    /// The Node they are bound to: the Node's pods are followed through one watch. Absent in
    /// waits scheduled before it existed, which read each pod every second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Give up at this instant (RFC 3339, workflow clock).
    pub deadline: chrono::DateTime<chrono::Utc>,
}

/// Wait for volumes of a Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitVolumes {
    /// The Node the volumes leave.
    pub node: String,
    /// The PersistentVolumes.
    pub persistent_volumes: Vec<String>,
    /// Give up at this instant (RFC 3339, workflow clock).
    pub deadline: chrono::DateTime<chrono::Utc>,
}

/// How a wait ended: what is still pending (empty: all done).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    /// What did not reach the state in time (pod keys, PV names, disk ids).
    pub pending: Vec<String>,
}

impl Pending {
    /// Whether everything reached the state.
    pub fn is_done(&self) -> bool {
        self.pending.is_empty()
    }
}

/// Where moved volumes attached.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reattached {
    /// PV → the node its attached VolumeAttachment names.
    pub attached: Vec<(String, String)>,
    /// PVs not attached elsewhere by the deadline.
    pub pending: Vec<String>,
}

/// A Node's VolumeAttachments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAttachments {
    /// The Node.
    pub node: String,
}
