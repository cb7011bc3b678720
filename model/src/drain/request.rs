//! The input and result of DrainNode, and the drain settings a Node carries.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ClusterName;
use crate::pool::DrainPolicy;

/// Why a node is drained, which decides what the drain leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DrainPurpose {
    /// Maintenance: the node stays cordoned (and tainted) until `machine uncordon`; the VM stays.
    Maintenance,
    /// The machine is deleted next (DeleteMachine): also marks the Node `Terminating`.
    Deletion,
}

/// The input of DrainNode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainRequest {
    /// The cluster that owns the machine.
    pub cluster: ClusterName,
    /// The Node (= machine) to drain.
    pub node: String,
    /// Why.
    pub purpose: DrainPurpose,
    /// Settings to use instead of the ones the Node carries (its pool's), e.g. from CLI flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<DrainPolicy>,
    /// Start in force mode (`--force`).
    #[serde(default)]
    pub force: bool,
    /// Set when a long drain continued as a new run: where the previous run left off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<DrainResume>,
}

/// What a drain carries into its next run when it continues as new (its history grew long
/// while a PodDisruptionBudget or a stuck volume kept it waiting).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainResume {
    /// When the drain started, RFC 3339.
    pub started_at: String,
    /// The deadline (extensions included), RFC 3339.
    pub deadline: String,
    /// Whether force was requested.
    pub force_requested: bool,
    /// The settings in use.
    pub policy: DrainPolicy,
    /// What the drain did so far.
    pub done_so_far: DrainedNode,
    /// Which run of the drain this is (1 for the first continuation).
    pub continuation: u32,
}

/// What DrainNode returns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainedNode {
    /// The Node.
    pub node: String,
    /// False when there was no Node of ours to drain.
    pub node_found: bool,
    /// Pods evicted (namespace/name).
    pub evicted: Vec<String>,
    /// Pods deleted with grace period 0 in force mode.
    pub force_deleted: Vec<String>,
    /// Persistent volumes that moved to another node (PV name → new node).
    pub volumes_moved: Vec<(String, String)>,
    /// Set when the drain ended in force mode, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced: Option<String>,
    /// Things that went wrong without failing the drain (e.g. a reattach timeout).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Whether the Node was cordoned before the drain began, by someone else: a cancelled drain
    /// (or a delete cancelled after its drain) leaves it cordoned.
    #[serde(default)]
    pub cordoned_before: bool,
}

impl Default for DrainPolicy {
    /// machine-controller-manager's defaults: drain timeout 2h, PDB retry 20s, detach 2m,
    /// reattach 90s, force after 5m unhealthy.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(2 * 3600),
            pdb_retry_interval: Duration::from_secs(20),
            volume_detach_timeout: Duration::from_secs(120),
            volume_attach_timeout: Duration::from_secs(90),
            force_after_unhealthy: Duration::from_secs(300),
        }
    }
}

/// The drain settings as the Node annotation [`super::ANNOTATION_DRAIN_POLICY`] holds them:
/// JSON with whole seconds, e.g. `{"timeout":7200,"pdbRetryInterval":20,...}`.
pub fn policy_to_annotation(policy: &DrainPolicy) -> String {
    let seconds = AnnotatedPolicy {
        timeout: policy.timeout.as_secs(),
        pdb_retry_interval: policy.pdb_retry_interval.as_secs(),
        volume_detach_timeout: policy.volume_detach_timeout.as_secs(),
        volume_attach_timeout: policy.volume_attach_timeout.as_secs(),
        force_after_unhealthy: policy.force_after_unhealthy.as_secs(),
    };
    serde_json::to_string(&seconds).unwrap_or_default()
}

/// Reads [`policy_to_annotation`]'s text back; `None` when it is not that (an edited or foreign
/// annotation is ignored rather than trusted), or a value is zero.
pub fn policy_from_annotation(text: &str) -> Option<DrainPolicy> {
    let seconds: AnnotatedPolicy = serde_json::from_str(text).ok()?;
    let all = [
        seconds.timeout,
        seconds.pdb_retry_interval,
        seconds.volume_detach_timeout,
        seconds.volume_attach_timeout,
        seconds.force_after_unhealthy,
    ];
    if all.contains(&0) {
        return None;
    }
    Some(DrainPolicy {
        timeout: Duration::from_secs(seconds.timeout),
        pdb_retry_interval: Duration::from_secs(seconds.pdb_retry_interval),
        volume_detach_timeout: Duration::from_secs(seconds.volume_detach_timeout),
        volume_attach_timeout: Duration::from_secs(seconds.volume_attach_timeout),
        force_after_unhealthy: Duration::from_secs(seconds.force_after_unhealthy),
    })
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AnnotatedPolicy {
    timeout: u64,
    pdb_retry_interval: u64,
    volume_detach_timeout: u64,
    volume_attach_timeout: u64,
    force_after_unhealthy: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_default_is_machine_controller_managers() {
        let policy = DrainPolicy::default();
        assert_eq!(policy.timeout, Duration::from_secs(7200));
        assert_eq!(policy.pdb_retry_interval, Duration::from_secs(20));
        assert_eq!(policy.volume_detach_timeout, Duration::from_secs(120));
        assert_eq!(policy.volume_attach_timeout, Duration::from_secs(90));
        assert_eq!(policy.force_after_unhealthy, Duration::from_secs(300));
        assert_eq!(
            policy_to_annotation(&policy),
            r#"{"timeout":7200,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300}"#
        );
    }

    #[test]
    fn refuses_annotations_it_did_not_write() {
        for text in [
            "",
            "2h",
            "{}",
            r#"{"timeout":0,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300}"#,
            r#"{"timeout":1,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300,"extra":1}"#,
            r#"{"timeout":-1,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300}"#,
        ] {
            assert_eq!(policy_from_annotation(text), None, "{text}");
        }
    }

    proptest! {
        #[test]
        fn a_policy_survives_its_annotation(
            secs in proptest::array::uniform5(1u64..=86_400),
        ) {
            let policy = DrainPolicy {
                timeout: Duration::from_secs(secs[0]),
                pdb_retry_interval: Duration::from_secs(secs[1]),
                volume_detach_timeout: Duration::from_secs(secs[2]),
                volume_attach_timeout: Duration::from_secs(secs[3]),
                force_after_unhealthy: Duration::from_secs(secs[4]),
            };
            prop_assert_eq!(policy_from_annotation(&policy_to_annotation(&policy)), Some(policy));
        }
    }
}
