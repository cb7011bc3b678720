//! Which of a pod's volumes a drain waits on: only a volume that attaches to this node alone.
//!
//! A drain moves a pod with a volume that attaches (an Azure disk: detach here, attach on the
//! pod's new node) alone and waits for the move; a pod whose volumes need no attach (an Azure
//! Files share, NFS, a blob container: CSIDriver `attachRequired: false`, no VolumeAttachment ever
//! exists) or are used from other nodes too (`ReadWriteMany`, `ReadOnlyMany`) is evicted in the
//! parallel lane like a pod without volumes: there is nothing to wait for.

use serde::{Deserialize, Serialize};

/// The access modes that let pods on several nodes use a volume at once.
const MULTI_NODE_MODES: [&str; 2] = ["ReadWriteMany", "ReadOnlyMany"];

/// The access modes that tie a volume to one node.
const SINGLE_NODE_MODES: [&str; 2] = ["ReadWriteOnce", "ReadWriteOncePod"];

/// What tells whether a pod's volume attaches, as the pod listing recorded it (see
/// `VolumeFacts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachFacts<'a> {
    /// Whether the claim is bound to an existing PersistentVolume.
    pub bound: bool,
    /// Whether its driver needs an attach (CSIDriver `attachRequired`, in-tree source).
    pub attach_required: bool,
    /// Whether a VolumeAttachment of it on the node existed when the pods were listed.
    pub attached_here: bool,
    /// The claim's access modes.
    pub access_modes: &'a [String],
}

/// What a drain does about one volume of a pod it moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VolumeWait {
    /// It attaches to this node and only this pod of the node uses it: the drain waits until it
    /// detached here and attached elsewhere.
    Waited,
    /// Bound to nothing: nothing to wait for, but the pod is still moved alone (as before the
    /// attach facts were read).
    Unbound,
    /// It attaches, but another pod of the node uses it too: it cannot detach while that one
    /// runs (MCM's `filterSharedPVs`); the pod is still moved alone.
    SharedOnNode,
    /// It needs no attach: its CSIDriver says `attachRequired: false`, or it is an in-tree
    /// source that never attaches (NFS, hostPath, local, ...), and no VolumeAttachment held it
    /// on the node.
    NeedsNoAttach,
    /// `ReadWriteMany` or `ReadOnlyMany`: pods on other nodes use it too, so it never moves.
    UsedFromOtherNodes,
}

impl VolumeWait {
    /// Whether the drain waits for this volume to detach here and attach elsewhere.
    pub const fn is_waited(self) -> bool {
        matches!(self, VolumeWait::Waited)
    }

    /// Whether the pod using it is moved alone, in the serial lane: a volume that attaches
    /// (waited on or not) or whose attach is unknown keeps it there; a pod whose every volume
    /// needs no attach or is used from other nodes goes with the pods without volumes.
    pub const fn moves_pod_alone(self) -> bool {
        matches!(
            self,
            VolumeWait::Waited | VolumeWait::Unbound | VolumeWait::SharedOnNode
        )
    }

    /// Why a volume is not waited on, in words for the status (empty for [`VolumeWait::Waited`]).
    pub const fn reason(self) -> &'static str {
        match self {
            VolumeWait::Waited => "",
            VolumeWait::Unbound => "not bound",
            VolumeWait::SharedOnNode => "shared with another pod of the node",
            VolumeWait::NeedsNoAttach => "needs no attach",
            VolumeWait::UsedFromOtherNodes => {
                "used from other nodes too (ReadWriteMany/ReadOnlyMany)"
            }
        }
    }
}

/// What the drain does about `volume`, which `users_on_node` pods of the node use (counting the
/// pod itself).
///
/// In order: an unbound claim is [`VolumeWait::Unbound`]; a claim that asks for
/// `ReadWriteMany`/`ReadOnlyMany` and for no single-node mode is
/// [`VolumeWait::UsedFromOtherNodes`], whatever attaches; a volume whose driver needs no attach
/// and that has no VolumeAttachment on the node is [`VolumeWait::NeedsNoAttach`] (a
/// VolumeAttachment present means it attaches, whatever the CSIDriver says); one more user on
/// the node makes it [`VolumeWait::SharedOnNode`]; else it is [`VolumeWait::Waited`]. Facts from
/// before the attach fields existed read as attaching, single-node: waited on, as then (see
/// `VolumeFacts`' serde defaults).
pub fn volume_wait(volume: AttachFacts<'_>, users_on_node: usize) -> VolumeWait {
    if !volume.bound {
        return VolumeWait::Unbound;
    }
    let modes = volume.access_modes;
    let multi_node = modes.iter().any(|m| MULTI_NODE_MODES.contains(&m.as_str()));
    let single_node = modes
        .iter()
        .any(|m| SINGLE_NODE_MODES.contains(&m.as_str()));
    if multi_node && !single_node {
        VolumeWait::UsedFromOtherNodes
    } else if !volume.attach_required && !volume.attached_here {
        VolumeWait::NeedsNoAttach
    } else if users_on_node > 1 {
        VolumeWait::SharedOnNode
    } else {
        VolumeWait::Waited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A volume's facts: bound, attach required, attached here, access modes.
    type Facts = (bool, bool, bool, Vec<String>);

    /// A row: the case as a sentence, the facts, the pods of the node using it, the answer.
    type Case<'a> = (&'a str, Facts, usize, VolumeWait);

    /// A bound volume with these attach facts.
    fn volume(
        attach_required: bool,
        attached_here: bool,
        modes: &[&str],
    ) -> (bool, bool, bool, Vec<String>) {
        (
            true,
            attach_required,
            attached_here,
            modes.iter().map(|m| (*m).to_owned()).collect(),
        )
    }

    fn check(case: &str, volume: &Facts, users: usize, expected: VolumeWait) {
        let (bound, attach_required, attached_here, modes) = volume;
        let facts = AttachFacts {
            bound: *bound,
            attach_required: *attach_required,
            attached_here: *attached_here,
            access_modes: modes,
        };
        assert_eq!(volume_wait(facts, users), expected, "{case}");
    }

    #[test]
    fn only_a_volume_that_attaches_to_this_node_alone_is_waited_on() {
        use VolumeWait::*;
        let rwo = ["ReadWriteOnce"];
        let mut unbound = volume(true, false, &rwo);
        unbound.0 = false;
        #[rustfmt::skip]
        let table: Vec<Case> = vec![
            ("an Azure disk (attach required, ReadWriteOnce) is waited on", volume(true, true, &rwo), 1, Waited),
            ("a driver without a CSIDriver object attaches: waited on", volume(true, false, &rwo), 1, Waited),
            ("a ReadWriteOncePod disk is waited on", volume(true, true, &["ReadWriteOncePod"]), 1, Waited),
            ("an Azure Files share (attachRequired false, no attachment) needs no attach", volume(false, false, &rwo), 1, NeedsNoAttach),
            ("an NFS volume (in-tree, never attaches) needs no attach", volume(false, false, &[]), 1, NeedsNoAttach),
            ("a VolumeAttachment on the node means it attaches, whatever the CSIDriver says", volume(false, true, &rwo), 1, Waited),
            ("a ReadWriteMany share is used from other nodes", volume(false, false, &["ReadWriteMany"]), 1, UsedFromOtherNodes),
            ("a ReadWriteMany disk is never waited on, attachment or not", volume(true, true, &["ReadWriteMany"]), 1, UsedFromOtherNodes),
            ("a ReadOnlyMany disk is never waited on", volume(true, true, &["ReadOnlyMany"]), 1, UsedFromOtherNodes),
            ("ReadWriteOnce with ReadOnlyMany ties the volume to one node: waited on", volume(true, true, &["ReadWriteOnce", "ReadOnlyMany"]), 1, Waited),
            ("a disk two pods of the node use is shared on the node", volume(true, true, &rwo), 2, SharedOnNode),
            ("a share two pods of the node use still needs no attach", volume(false, false, &rwo), 2, NeedsNoAttach),
            ("an unbound claim is unbound", unbound, 1, Unbound),
        ];
        for (case, volume, users, expected) in table {
            check(case, &volume, users, expected);
        }
    }

    #[test]
    fn only_attaching_or_unknown_volumes_move_a_pod_alone() {
        use VolumeWait::*;
        let table = [
            (Waited, true, true),
            (Unbound, false, true),
            (SharedOnNode, false, true),
            (NeedsNoAttach, false, false),
            (UsedFromOtherNodes, false, false),
        ];
        for (wait, waited, alone) in table {
            assert_eq!(
                (wait.is_waited(), wait.moves_pod_alone()),
                (waited, alone),
                "{wait:?}"
            );
        }
    }
}
