//! What DrainNode's `status` query answers: the mode and deadline, every pod still to move, the
//! PodDisruptionBudgets blocking, the volumes waited on.

use serde::{Deserialize, Serialize};

pub use super::entries::{PodProgress, PodState, VolumeProgress, VolumeState};
use super::local_data::LocalDataPod;
use crate::machine::MachineStatus;

/// Graceful or forced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "mode")]
pub enum DrainMode {
    /// Evictions honouring PodDisruptionBudgets, waiting for volumes.
    Graceful,
    /// Pods deleted with grace 0, VolumeAttachments deleted, data disks force-detached.
    Force {
        /// Why.
        reason: String,
    },
}

/// A PodDisruptionBudget that refused an eviction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PdbBlock {
    /// `namespace/name`.
    pub pdb: String,
    /// The pods it blocks.
    pub pods: Vec<String>,
    /// All its pods are healthy and it still allows no disruption: waiting cannot help.
    pub misconfigured: bool,
    /// `status.disruptionsAllowed` when last seen.
    pub disruptions_allowed: i32,
}

/// The answer of DrainNode's `status` query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainStatus {
    /// Steps, facts, outcome (shared shape with the machine workflows).
    pub run: MachineStatus,
    /// Graceful or forced.
    pub mode: DrainMode,
    /// When the drain switches to force mode, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// Every pod found on the node.
    #[serde(default)]
    pub pods: Vec<PodProgress>,
    /// PodDisruptionBudgets blocking evictions now.
    #[serde(default)]
    pub pdbs_blocking: Vec<PdbBlock>,
    /// Volumes waited on, then those of evicted pods not waited on
    /// ([`VolumeState::NotWaitedOn`]).
    #[serde(default)]
    pub volumes: Vec<VolumeProgress>,
    /// Warnings (reattach timeouts, ...).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Pods evicted or force-deleted with their data (`emptyDir` volumes, no controller), and
    /// what each lost.
    #[serde(default)]
    pub local_data_lost: Vec<LocalDataPod>,
    /// The hard deadline (`terminationGracePeriod` from the drain's start), RFC 3339, when the
    /// drain's settings have one: the deadline never moves past it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_deadline: Option<String>,
    /// Pods marked do-not-disrupt that the drain evicted or deleted anyway, each with its
    /// annotation and why (as [`super::DrainedNode::overridden`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overridden: Vec<String>,
}

impl DrainStatus {
    /// A fresh status for `run`, graceful.
    pub fn new(run: MachineStatus) -> Self {
        Self {
            run,
            mode: DrainMode::Graceful,
            deadline: None,
            pods: Vec::new(),
            pdbs_blocking: Vec::new(),
            volumes: Vec::new(),
            warnings: Vec::new(),
            local_data_lost: Vec::new(),
            hard_deadline: None,
            overridden: Vec::new(),
        }
    }

    /// Names a do-not-disrupt mark the drain went past (once).
    pub fn note_overridden(&mut self, text: &str) {
        if !self.overridden.iter().any(|known| known == text) {
            self.overridden.push(text.to_owned());
        }
    }

    /// The pods still on the node (not gone, not force-deleted, not skipped).
    pub fn pods_left(&self) -> impl Iterator<Item = &PodProgress> {
        self.pods.iter().filter(|p| {
            !matches!(
                p.state,
                PodState::Gone | PodState::ForceDeleted | PodState::Skipped | PodState::Completed
            )
        })
    }

    /// Sets `pod`'s state (adding it when unknown).
    pub fn set_pod(&mut self, pod: &str, state: PodState, detail: Option<String>) {
        match self.pods.iter_mut().find(|p| p.pod == pod) {
            Some(entry) => {
                entry.state = state;
                if detail.is_some() {
                    entry.detail = detail;
                }
            }
            None => self.pods.push(PodProgress {
                pod: pod.to_owned(),
                state,
                with_volumes: false,
                evictions: 0,
                detail,
                rule: None,
                tier: None,
            }),
        }
    }

    /// Records that `pod` was evicted or force-deleted with its local data (once per pod).
    pub fn note_local_data_lost(&mut self, pod: &LocalDataPod) {
        if !self.local_data_lost.iter().any(|p| p.pod == pod.pod) {
            self.local_data_lost.push(pod.clone());
        }
    }

    /// Counts one more eviction of `pod`.
    pub fn count_eviction(&mut self, pod: &str) {
        if let Some(entry) = self.pods.iter_mut().find(|p| p.pod == pod) {
            entry.evictions = entry.evictions.saturating_add(1);
        }
    }

    /// Sets `pv`'s state and, when known, its new node.
    pub fn set_volume(&mut self, pv: &str, state: VolumeState, new_node: Option<String>) {
        if let Some(entry) = self.volumes.iter_mut().find(|v| v.persistent_volume == pv) {
            entry.state = state;
            if new_node.is_some() {
                entry.new_node = new_node;
            }
        }
    }

    /// Records that `pdb` blocks `pod` (or clears the block of `pod` with `None`).
    pub fn set_block(&mut self, pod: &str, block: Option<(String, bool, i32)>) {
        for entry in &mut self.pdbs_blocking {
            entry.pods.retain(|p| p != pod);
        }
        if let Some((pdb, misconfigured, disruptions_allowed)) = block {
            match self.pdbs_blocking.iter_mut().find(|b| b.pdb == pdb) {
                Some(entry) => {
                    entry.pods.push(pod.to_owned());
                    entry.misconfigured = misconfigured;
                    entry.disruptions_allowed = disruptions_allowed;
                }
                None => self.pdbs_blocking.push(PdbBlock {
                    pdb,
                    pods: vec![pod.to_owned()],
                    misconfigured,
                    disruptions_allowed,
                }),
            }
        }
        self.pdbs_blocking.retain(|b| !b.pods.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Step;

    fn status() -> DrainStatus {
        DrainStatus::new(MachineStatus::new("drain", "web-abcde", None, &Step::DRAIN))
    }

    #[test]
    fn pod_and_volume_states_read_as_their_serialized_words() {
        let pods = [
            PodState::Waiting,
            PodState::Evicting,
            PodState::Blocked,
            PodState::Terminating,
            PodState::Gone,
            PodState::ForceDeleted,
            PodState::Skipped,
        ];
        for state in pods {
            assert_eq!(
                serde_json::to_value(state).ok(),
                Some(serde_json::Value::from(state.as_str()))
            );
        }
        let volumes = [
            VolumeState::Attached,
            VolumeState::Detaching,
            VolumeState::DetachTimedOut,
            VolumeState::Reattaching,
            VolumeState::Reattached,
            VolumeState::ReattachTimedOut,
            VolumeState::ForceDetached,
            VolumeState::NotWaitedOn,
        ];
        for state in volumes {
            assert_eq!(
                serde_json::to_value(state).ok(),
                Some(serde_json::Value::from(state.as_str()))
            );
        }
    }

    #[test]
    fn tracks_pods_blocks_and_volumes() {
        let mut s = status();
        s.set_pod("a/web-1", PodState::Evicting, None);
        s.set_pod("a/db-0", PodState::Waiting, None);
        s.set_pod("a/ds", PodState::Skipped, Some("DaemonSet pod".into()));
        s.count_eviction("a/web-1");
        s.set_block("a/web-1", Some(("a/web-pdb".into(), true, 0)));
        s.set_block("a/web-2", Some(("a/web-pdb".into(), true, 0)));
        assert_eq!(s.pdbs_blocking.len(), 1);
        assert_eq!(s.pdbs_blocking[0].pods, vec!["a/web-1", "a/web-2"]);
        s.set_block("a/web-1", None);
        s.set_block("a/web-2", None);
        assert!(s.pdbs_blocking.is_empty());
        s.set_pod("a/web-1", PodState::Gone, None);
        let left: Vec<&str> = s.pods_left().map(|p| p.pod.as_str()).collect();
        assert_eq!(left, vec!["a/db-0"]);
        assert_eq!(s.pods[0].evictions, 1);
        s.volumes.push(VolumeProgress {
            persistent_volume: "pv-0".into(),
            pod: "a/db-0".into(),
            disk_id: None,
            state: VolumeState::Attached,
            new_node: None,
            detail: None,
        });
        s.set_volume("pv-0", VolumeState::Reattached, Some("web-fghij".into()));
        assert_eq!(s.volumes[0].state, VolumeState::Reattached);
        assert_eq!(s.volumes[0].new_node.as_deref(), Some("web-fghij"));
    }

    #[test]
    fn the_mode_serializes_with_its_reason() {
        let json = serde_json::to_string(&DrainMode::Force {
            reason: "force was requested".into(),
        })
        .unwrap_or_default();
        assert_eq!(json, r#"{"mode":"force","reason":"force was requested"}"#);
    }
}
