//! The entries of a drain's status for one pod and one volume, and their states: a leaf the
//! status and a continued run's input (`request::DrainResume`) both use.

use serde::{Deserialize, Serialize};

/// Where a pod is in the drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PodState {
    /// Not evicted yet (a volume pod waiting for its turn).
    Waiting,
    /// Eviction asked for; waiting for the pod to go.
    Evicting,
    /// The eviction was refused (429): a PodDisruptionBudget blocks it; retried.
    Blocked,
    /// Was already terminating; waiting for it to go.
    Terminating,
    /// Gone from the node.
    Gone,
    /// Deleted with grace period 0 (force mode).
    ForceDeleted,
    /// Left on the node (DaemonSet, mirror or finished pod).
    Skipped,
    /// Not evicted: it would lose its data (`emptyDir`, no controller) and the drain's
    /// `localData` policy is `refuse`; the drain stops before its first eviction.
    Refused,
    /// Not evicted (a `WaitCompleted` rule or label): waited for until it completes.
    AwaitingCompletion,
    /// Completed (Succeeded or Failed) while the drain waited for it.
    Completed,
    /// Not evicted: marked do-not-disrupt in a voluntary drain; waited for until it completes
    /// or goes, or until force mode overrides the mark (the hard deadline).
    Held,
}

impl PodState {
    /// The word the CLI shows and the query answer carries: `evicting`, `force-deleted`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PodState::Waiting => "waiting",
            PodState::Evicting => "evicting",
            PodState::Blocked => "blocked",
            PodState::Terminating => "terminating",
            PodState::Gone => "gone",
            PodState::ForceDeleted => "force-deleted",
            PodState::Skipped => "skipped",
            PodState::Refused => "refused",
            PodState::AwaitingCompletion => "awaiting-completion",
            PodState::Completed => "completed",
            PodState::Held => "held",
        }
    }
}

/// One pod of the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodProgress {
    /// `namespace/name`.
    pub pod: String,
    /// Where it is.
    pub state: PodState,
    /// Whether it has persistent volumes (moved one at a time).
    #[serde(default)]
    pub with_volumes: bool,
    /// Evictions asked for so far.
    #[serde(default)]
    pub evictions: u32,
    /// More, e.g. why it is skipped or which PDB blocks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The drain rule or label that decided its behaviour, when one did (e.g.
    /// `WaitCompleted by spec.drain.rules[1]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Its tier (the rule's `order`), when the drain has more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<i32>,
}

/// Where a persistent volume is in its move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VolumeState {
    /// Still attached to this node; its pod has not been evicted yet.
    Attached,
    /// Its pod was evicted; waiting for the VolumeAttachment to go and the disk to be released.
    Detaching,
    /// Detach did not finish in time.
    DetachTimedOut,
    /// Detached here; waiting for it to attach on another node.
    Reattaching,
    /// Attached on another node.
    Reattached,
    /// Did not attach elsewhere in time (a warning, not a failure).
    ReattachTimedOut,
    /// Released by force (VolumeAttachment deleted, disk force-detached).
    ForceDetached,
    /// Not waited on: it needs no attach (Azure Files, NFS, ...) or pods on other nodes use it
    /// too (`ReadWriteMany`, `ReadOnlyMany`); its pod left with the pods without volumes. The
    /// entry's `detail` says which.
    NotWaitedOn,
}

impl VolumeState {
    /// The word the CLI shows and the query answer carries: `detaching`, `detach-timed-out`.
    pub const fn as_str(self) -> &'static str {
        match self {
            VolumeState::Attached => "attached",
            VolumeState::Detaching => "detaching",
            VolumeState::DetachTimedOut => "detach-timed-out",
            VolumeState::Reattaching => "reattaching",
            VolumeState::Reattached => "reattached",
            VolumeState::ReattachTimedOut => "reattach-timed-out",
            VolumeState::ForceDetached => "force-detached",
            VolumeState::NotWaitedOn => "not-waited-on",
        }
    }
}

/// One persistent volume the drain waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeProgress {
    /// The PersistentVolume.
    pub persistent_volume: String,
    /// The pod using it (`namespace/name`).
    pub pod: String,
    /// The Azure disk id, when an Azure Disk CSI volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_id: Option<String>,
    /// Where it is.
    pub state: VolumeState,
    /// The node it attached to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_node: Option<String>,
    /// Why it is not waited on, for [`VolumeState::NotWaitedOn`]: `needs no attach`, `used from
    /// other nodes too (...)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
