//! Which pods a drain moves, which it leaves, and in what order.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::AZURE_DISK_CSI_DRIVER;
use super::attach::{AttachFacts, VolumeWait, volume_wait};
use super::local_data::{LocalDataPod, LocalDataPolicy};

/// Seconds Kubernetes gives a pod that names no termination grace period.
const DEFAULT_GRACE_SECONDS: u64 = 30;

/// What the drain needs to know about one pod on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodFacts {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID: an eviction or deletion names it, so a new pod of the same name is never hit.
    pub uid: String,
    /// The kind of the controlling owner (`ReplicaSet`, `StatefulSet`, `DaemonSet`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_kind: Option<String>,
    /// Whether it is the mirror of a static pod (annotation `kubernetes.io/config.mirror`).
    #[serde(default)]
    pub mirror: bool,
    /// `status.phase`.
    pub phase: String,
    /// Whether it already has a deletion timestamp.
    #[serde(default)]
    pub terminating: bool,
    /// `spec.priority` (0 when unset).
    #[serde(default)]
    pub priority: i32,
    /// `spec.terminationGracePeriodSeconds`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<u64>,
    /// The PersistentVolumeClaims its volumes name, resolved as far as they go.
    #[serde(default)]
    pub volumes: Vec<VolumeFacts>,
    /// The names of its `emptyDir` volumes (any medium): data an eviction loses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub empty_dirs: Vec<String>,
    /// Its labels (what the drain rules' `podSelector` and the `nodewright.io/drain` label
    /// read); empty in facts listed before the rules existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The labels of its namespace (what the drain rules' `namespaceSelector` reads).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub namespace_labels: BTreeMap<String, String>,
    /// The do-not-disrupt annotation it carries with the value `"true"`
    /// (`nodewright.io/do-not-disrupt` or `karpenter.sh/do-not-disrupt`, see
    /// [`crate::disruption`]); `None` in facts listed before the marks were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub do_not_disrupt: Option<String>,
}

/// One PersistentVolumeClaim of a pod and what it is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeFacts {
    /// The claim's name (in the pod's namespace).
    pub claim: String,
    /// The bound PersistentVolume, when the claim is bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume: Option<String>,
    /// The PV's CSI driver, when it is a CSI volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The PV's CSI volume handle, when it is a CSI volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_handle: Option<String>,
    /// Whether the volume attaches to a node: its CSI driver's CSIDriver `attachRequired` (true
    /// when the driver has no CSIDriver object, as the attach-detach controller assumes), false
    /// for an in-tree source that never attaches (NFS, hostPath, local, ...). True when not
    /// recorded (facts from before this field), so such a volume is waited on as then.
    #[serde(default = "attaches_unless_told")]
    pub attach_required: bool,
    /// Whether a VolumeAttachment of the PV on this Node existed when the pods were listed: then
    /// it attaches, whatever its CSIDriver says.
    #[serde(default)]
    pub attached_here: bool,
    /// The access modes the claim asks for (the PV's when the claim names none):
    /// `ReadWriteOnce`, `ReadWriteOncePod`, `ReadWriteMany`, `ReadOnlyMany`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_modes: Vec<String>,
}

/// A volume attaches unless its facts say otherwise.
const fn attaches_unless_told() -> bool {
    true
}

impl VolumeFacts {
    /// What tells whether it attaches, for [`volume_wait`].
    pub fn attach_facts(&self) -> AttachFacts<'_> {
        AttachFacts {
            bound: self.persistent_volume.is_some(),
            attach_required: self.attach_required,
            attached_here: self.attached_here,
            access_modes: &self.access_modes,
        }
    }
}

impl PodFacts {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The pod's grace period (Kubernetes' 30 s when unset).
    pub fn grace_period(&self) -> Duration {
        Duration::from_secs(self.grace_period_seconds.unwrap_or(DEFAULT_GRACE_SECONDS))
    }

    /// Whether any volume is a PersistentVolumeClaim (MCM's "pod with PV").
    pub fn has_persistent_volumes(&self) -> bool {
        !self.volumes.is_empty()
    }

    fn reference(&self) -> PodRef {
        PodRef {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            grace_period_seconds: self.grace_period().as_secs(),
        }
    }
}

/// A pod the drain acts on or waits for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Its grace period in seconds.
    pub grace_period_seconds: u64,
}

impl PodRef {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Why a pod stays on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// A static pod's mirror: the kubelet owns it.
    Mirror,
    /// A DaemonSet's pod: it belongs on every node and would be recreated here.
    DaemonSet,
    /// Succeeded or Failed: nothing runs.
    Finished,
    /// A drain rule (`Skip`) or the pod's `nodewright.io/drain: skip` label.
    Rule,
}

impl SkipReason {
    /// In words, for the status and the CLI.
    pub const fn as_str(self) -> &'static str {
        match self {
            SkipReason::Mirror => "mirror pod",
            SkipReason::DaemonSet => "DaemonSet pod",
            SkipReason::Finished => "finished",
            SkipReason::Rule => "skipped by a drain rule",
        }
    }
}

/// A pod left alone, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedPod {
    /// `namespace/name`.
    pub pod: String,
    /// Why.
    pub reason: SkipReason,
    /// For [`SkipReason::Rule`]: which (`spec.drain.rules[1]`, `label nodewright.io/drain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// A persistent volume whose move the drain waits for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrackedVolume {
    /// The PersistentVolume.
    pub persistent_volume: String,
    /// The Azure managed disk's ARM id, when the PV is an Azure Disk CSI volume; the drain then
    /// also waits until the disk is no longer `managedBy` the node's VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_id: Option<String>,
}

/// A pod with persistent volumes, moved on its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumePod {
    /// The pod.
    pub pod: PodRef,
    /// Its priority.
    pub priority: i32,
    /// The volumes waited on (detach here, attach elsewhere).
    pub tracked: Vec<TrackedVolume>,
    /// Volumes not waited on: shared with another pod of the node, not bound, needing no
    /// attach, or used from other nodes too.
    pub untracked: Vec<String>,
}

/// A volume of a pod the drain evicts that it does not wait on because the volume never leaves
/// this node alone: it needs no attach, or pods on other nodes use it too.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnwaitedVolume {
    /// The PersistentVolume.
    pub persistent_volume: String,
    /// The pod using it (`namespace/name`); the first by name when several do.
    pub pod: String,
    /// Why it is not waited on ([`VolumeWait::NeedsNoAttach`] or
    /// [`VolumeWait::UsedFromOtherNodes`]).
    pub why: VolumeWait,
}

/// What a drain does with the pods it found on the node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainPlan {
    /// Pods left on the node.
    pub skipped: Vec<SkippedPod>,
    /// Pods already terminating: waited for, not evicted.
    pub terminating: Vec<PodRef>,
    /// Pods without persistent volumes, or whose volumes need no attach or are used from
    /// other nodes too: evicted all at once.
    pub without_volumes: Vec<PodRef>,
    /// Pods with persistent volumes that attach: evicted one at a time in this order (priority,
    /// highest first; then namespace and name, so the order is stable).
    pub with_volumes: Vec<VolumePod>,
    /// The volumes of the evicted pods the drain does not wait on because they never leave
    /// this node alone (see [`super::attach`]), each once, by PV name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_waited_on: Vec<UnwaitedVolume>,
    /// Pods of the two lanes above whose eviction loses data (`emptyDir` volumes, no
    /// controller): allowed by [`LocalDataPolicy::Evict`], named in the drain's `localDataLost`
    /// once evicted or force-deleted.
    #[serde(default)]
    pub local_data: Vec<LocalDataPod>,
    /// Pods with local data that [`LocalDataPolicy::Refuse`] keeps out of every lane: never
    /// evicted, never deleted; the drain stops before its first eviction.
    #[serde(default)]
    pub refused: Vec<LocalDataPod>,
}

impl DrainPlan {
    /// Every pod the drain evicts or waits for.
    pub fn moving(&self) -> impl Iterator<Item = &PodRef> {
        self.terminating
            .iter()
            .chain(&self.without_volumes)
            .chain(self.with_volumes.iter().map(|p| &p.pod))
    }

    /// Whether nothing has to leave.
    pub fn is_empty(&self) -> bool {
        self.moving().next().is_none()
    }

    /// What an eviction of `pod` (`namespace/name`) loses, when the plan evicts it with local
    /// data.
    pub fn local_data_of(&self, pod: &str) -> Option<&LocalDataPod> {
        self.local_data.iter().find(|p| p.pod == pod)
    }
}

/// Sorts the pods of a node into what a drain does with them.
///
/// Mirror, DaemonSet and finished pods stay. Pods already terminating are waited for. A pod
/// whose eviction loses data (`emptyDir` volumes, or no controller; see
/// [`super::local_data`]) is `refused` under [`LocalDataPolicy::Refuse`] and evicted like the
/// others under [`LocalDataPolicy::Evict`] (and listed in `local_data`). The others are evicted:
/// those without PersistentVolumeClaims in parallel, those with one at a time, highest priority
/// first. A volume used by several pods of the node is not waited on (it will not detach while
/// another of them runs), as MCM's `filterSharedPVs` does.
pub fn plan_drain(pods: &[PodFacts], local_data: LocalDataPolicy) -> DrainPlan {
    let mut plan = DrainPlan::default();
    let mut users: BTreeMap<&str, usize> = BTreeMap::new();
    for pod in pods {
        let mut own: Vec<&str> = pod
            .volumes
            .iter()
            .filter_map(|v| v.persistent_volume.as_deref())
            .collect();
        own.sort_unstable();
        own.dedup();
        for pv in own {
            *users.entry(pv).or_default() += 1;
        }
    }
    let mut with_volumes = Vec::new();
    for pod in pods {
        if let Some(reason) = skip_reason(pod) {
            plan.skipped.push(SkippedPod {
                pod: pod.key(),
                reason,
                rule: None,
            });
        } else if pod.terminating {
            plan.terminating.push(pod.reference());
        } else {
            if let Some(lost) = local_data_of(pod) {
                if local_data == LocalDataPolicy::Refuse {
                    plan.refused.push(lost);
                    continue;
                }
                plan.local_data.push(lost);
            }
            let waits = volume_waits(pod, &users);
            for (volume, wait) in &waits {
                if let (Some(pv), false) = (&volume.persistent_volume, wait.moves_pod_alone()) {
                    plan.not_waited_on.push(UnwaitedVolume {
                        persistent_volume: pv.clone(),
                        pod: pod.key(),
                        why: *wait,
                    });
                }
            }
            if waits.iter().any(|(_, wait)| wait.moves_pod_alone()) {
                with_volumes.push(volume_pod(pod, &waits));
            } else {
                plan.without_volumes.push(pod.reference());
            }
        }
    }
    with_volumes.sort_by(|a: &VolumePod, b: &VolumePod| {
        b.priority
            .cmp(&a.priority)
            .then_with(|| a.pod.namespace.cmp(&b.pod.namespace))
            .then_with(|| a.pod.name.cmp(&b.pod.name))
    });
    plan.with_volumes = with_volumes;
    plan.skipped.sort_by(|a, b| a.pod.cmp(&b.pod));
    plan.terminating.sort();
    plan.without_volumes.sort();
    plan.local_data.sort();
    plan.refused.sort();
    plan.not_waited_on.sort();
    plan.not_waited_on
        .dedup_by(|b, a| a.persistent_volume == b.persistent_volume);
    plan
}

fn skip_reason(pod: &PodFacts) -> Option<SkipReason> {
    if pod.mirror {
        Some(SkipReason::Mirror)
    } else if pod.controller_kind.as_deref() == Some("DaemonSet") {
        Some(SkipReason::DaemonSet)
    } else if matches!(pod.phase.as_str(), "Succeeded" | "Failed") {
        Some(SkipReason::Finished)
    } else {
        None
    }
}

/// What the drain does about each volume of `pod`, given how many pods of the node use each PV.
fn volume_waits<'a>(
    pod: &'a PodFacts,
    users: &BTreeMap<&str, usize>,
) -> Vec<(&'a VolumeFacts, VolumeWait)> {
    pod.volumes
        .iter()
        .map(|volume| {
            let users_on_node = volume
                .persistent_volume
                .as_deref()
                .and_then(|pv| users.get(pv).copied())
                .unwrap_or(0);
            (volume, volume_wait(volume.attach_facts(), users_on_node))
        })
        .collect()
}

fn volume_pod(pod: &PodFacts, waits: &[(&VolumeFacts, VolumeWait)]) -> VolumePod {
    let mut tracked = Vec::new();
    let mut untracked = Vec::new();
    for (volume, wait) in waits {
        match (volume.persistent_volume.as_deref(), wait) {
            (Some(pv), VolumeWait::Waited) => {
                let disk_id = (volume.driver.as_deref() == Some(AZURE_DISK_CSI_DRIVER))
                    .then(|| volume.volume_handle.clone())
                    .flatten();
                tracked.push(TrackedVolume {
                    persistent_volume: pv.to_owned(),
                    disk_id,
                });
            }
            (Some(pv), _) => untracked.push(pv.to_owned()),
            (None, _) => untracked.push(format!("claim {} (not bound)", volume.claim)),
        }
    }
    tracked.sort();
    tracked.dedup();
    untracked.sort();
    untracked.dedup();
    VolumePod {
        pod: pod.reference(),
        priority: pod.priority,
        tracked,
        untracked,
    }
}

/// How long to wait for an evicted pod to disappear: its grace period, at most the drain's
/// `timeout`, plus 30 s (MCM: `min(grace, drainTimeout) + 30s`); saturating, as a pod's grace
/// period is whatever its spec says.
pub fn pod_disappearance_budget(grace: Duration, timeout: Duration) -> Duration {
    grace.min(timeout).saturating_add(Duration::from_secs(30))
}

/// How long to wait for a moved pod's volumes to detach: its grace period plus the detach
/// timeout (MCM: `terminationGracePeriodSeconds + PvDetachTimeout`); saturating.
pub fn detach_budget(grace: Duration, detach_timeout: Duration) -> Duration {
    grace.saturating_add(detach_timeout)
}

/// The local data an eviction of `pod` loses, if any. Only asked of pods the drain would evict:
/// mirror, DaemonSet, finished and terminating pods are sorted out before.
pub fn local_data_of(pod: &PodFacts) -> Option<LocalDataPod> {
    let no_controller = pod.controller_kind.is_none();
    if pod.empty_dirs.is_empty() && !no_controller {
        return None;
    }
    let mut empty_dirs = pod.empty_dirs.clone();
    empty_dirs.sort();
    empty_dirs.dedup();
    Some(LocalDataPod {
        pod: pod.key(),
        empty_dirs,
        no_controller,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pod(name: &str) -> PodFacts {
        PodFacts {
            namespace: "shop".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller_kind: Some("ReplicaSet".into()),
            mirror: false,
            phase: "Running".into(),
            terminating: false,
            priority: 0,
            grace_period_seconds: Some(10),
            volumes: vec![],
            empty_dirs: vec![],
            labels: BTreeMap::new(),
            namespace_labels: BTreeMap::new(),
            do_not_disrupt: None,
        }
    }

    fn with_pv(mut pod: PodFacts, pv: &str, priority: i32) -> PodFacts {
        pod.controller_kind = Some("StatefulSet".into());
        pod.priority = priority;
        pod.volumes.push(VolumeFacts {
            claim: format!("data-{}", pod.name),
            persistent_volume: Some(pv.into()),
            driver: Some(AZURE_DISK_CSI_DRIVER.into()),
            volume_handle: Some(format!("/subscriptions/s/disks/{pv}")),
            attach_required: true,
            attached_here: true,
            access_modes: vec!["ReadWriteOnce".into()],
        });
        pod
    }

    /// `pod` with a volume `pv` of `driver` that needs no attach, with these access modes.
    fn with_share(mut pod: PodFacts, pv: &str, driver: Option<&str>, modes: &[&str]) -> PodFacts {
        pod.volumes.push(VolumeFacts {
            claim: format!("share-{}", pod.name),
            persistent_volume: Some(pv.into()),
            driver: driver.map(str::to_owned),
            volume_handle: driver.map(|_| format!("rg#account#{pv}")),
            attach_required: false,
            attached_here: false,
            access_modes: modes.iter().map(|m| (*m).to_owned()).collect(),
        });
        pod
    }

    #[test]
    fn sorts_each_pod_into_its_lane() {
        let mut mirror = pod("kube-proxy");
        mirror.mirror = true;
        let mut daemon = pod("node-exporter");
        daemon.controller_kind = Some("DaemonSet".into());
        let mut done = pod("job-1");
        done.phase = "Succeeded".into();
        let mut failed = pod("job-2");
        failed.phase = "Failed".into();
        let mut leaving = pod("web-old");
        leaving.terminating = true;
        let mut bare = pod("debug");
        bare.controller_kind = None;
        let pods = vec![
            mirror,
            daemon,
            done,
            failed,
            leaving,
            bare,
            pod("web-1"),
            with_pv(pod("db-0"), "pv-0", 0),
        ];
        let plan = plan_drain(&pods, LocalDataPolicy::Evict);
        let skipped: Vec<(&str, SkipReason)> = plan
            .skipped
            .iter()
            .map(|s| (s.pod.as_str(), s.reason))
            .collect();
        assert_eq!(
            skipped,
            vec![
                ("shop/job-1", SkipReason::Finished),
                ("shop/job-2", SkipReason::Finished),
                ("shop/kube-proxy", SkipReason::Mirror),
                ("shop/node-exporter", SkipReason::DaemonSet),
            ]
        );
        let keys = |pods: &[PodRef]| pods.iter().map(PodRef::key).collect::<Vec<_>>();
        assert_eq!(keys(&plan.terminating), vec!["shop/web-old"]);
        assert_eq!(
            keys(&plan.without_volumes),
            vec!["shop/debug", "shop/web-1"]
        );
        assert_eq!(plan.with_volumes.len(), 1);
        assert_eq!(
            plan.with_volumes[0].tracked,
            vec![TrackedVolume {
                persistent_volume: "pv-0".into(),
                disk_id: Some("/subscriptions/s/disks/pv-0".into()),
            }]
        );
    }

    #[test]
    fn volume_pods_go_highest_priority_first_then_by_name() {
        let pods = vec![
            with_pv(pod("db-2"), "pv-2", 0),
            with_pv(pod("db-0"), "pv-0", 0),
            with_pv(pod("cache-0"), "pv-c", 1000),
            with_pv(pod("db-1"), "pv-1", 0),
            with_pv(pod("low-0"), "pv-l", -5),
        ];
        let order: Vec<String> = plan_drain(&pods, LocalDataPolicy::Refuse)
            .with_volumes
            .iter()
            .map(|p| p.pod.name.clone())
            .collect();
        assert_eq!(order, vec!["cache-0", "db-0", "db-1", "db-2", "low-0"]);
    }

    #[test]
    fn shared_unbound_and_foreign_volumes_are_not_waited_on() {
        let a = with_pv(pod("a"), "shared", 0);
        let b = with_pv(pod("b"), "shared", 0);
        let mut c = with_pv(pod("c"), "nfs-pv", 0);
        c.volumes[0].driver = Some("nfs.csi.k8s.io".into());
        let mut d = pod("d");
        d.volumes.push(VolumeFacts {
            claim: "pending".into(),
            persistent_volume: None,
            driver: None,
            volume_handle: None,
            attach_required: true,
            attached_here: false,
            access_modes: vec![],
        });
        let plan = plan_drain(&[a, b, c, d], LocalDataPolicy::Refuse);
        let by_name: BTreeMap<&str, &VolumePod> = plan
            .with_volumes
            .iter()
            .map(|p| (p.pod.name.as_str(), p))
            .collect();
        assert!(by_name["a"].tracked.is_empty());
        assert_eq!(by_name["a"].untracked, vec!["shared"]);
        assert!(by_name["b"].tracked.is_empty());
        // Another driver's volume is still tracked (its VolumeAttachment), without a disk.
        assert_eq!(
            by_name["c"].tracked,
            vec![TrackedVolume {
                persistent_volume: "nfs-pv".into(),
                disk_id: None
            }]
        );
        assert_eq!(by_name["d"].untracked, vec!["claim pending (not bound)"]);
    }

    #[test]
    fn a_fact_from_before_the_attach_fields_is_waited_on_as_then() {
        let old: Result<VolumeFacts, _> = serde_json::from_str(
            r#"{"claim":"data-db-0","persistentVolume":"pv-0","driver":"file.csi.azure.com","volumeHandle":"h"}"#,
        );
        let old = old.unwrap_or_else(|e| panic!("an old fact reads: {e}"));
        assert!(old.attach_required);
        assert!(!old.attached_here);
        assert!(old.access_modes.is_empty());
        assert_eq!(volume_wait(old.attach_facts(), 1), VolumeWait::Waited);
        assert_eq!(volume_wait(old.attach_facts(), 2), VolumeWait::SharedOnNode);
    }

    #[test]
    fn a_node_with_a_disk_a_share_and_nfs_waits_on_the_disk_alone() {
        let disk = with_pv(pod("db-0"), "pv-disk", 0);
        let share = with_share(
            pod("files"),
            "pv-share",
            Some("file.csi.azure.com"),
            &["ReadWriteMany"],
        );
        let nfs = with_share(pod("nfs"), "pv-nfs", None, &["ReadWriteOnce"]);
        let mut both = with_share(
            pod("both"),
            "pv-share",
            Some("file.csi.azure.com"),
            &["ReadWriteMany"],
        );
        both = with_pv(both, "pv-own", 0);
        let plan = plan_drain(
            &[disk, share, nfs, both, pod("web")],
            LocalDataPolicy::Evict,
        );
        let keys = |pods: &[PodRef]| pods.iter().map(PodRef::key).collect::<Vec<_>>();
        assert_eq!(
            keys(&plan.without_volumes),
            vec!["shop/files", "shop/nfs", "shop/web"]
        );
        let serial: Vec<(&str, Vec<&str>, Vec<&str>)> = plan
            .with_volumes
            .iter()
            .map(|p| {
                (
                    p.pod.name.as_str(),
                    p.tracked
                        .iter()
                        .map(|t| t.persistent_volume.as_str())
                        .collect(),
                    p.untracked.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            serial,
            vec![
                ("both", vec!["pv-own"], vec!["pv-share"]),
                ("db-0", vec!["pv-disk"], vec![]),
            ]
        );
        let unwaited: Vec<(&str, &str, VolumeWait)> = plan
            .not_waited_on
            .iter()
            .map(|v| (v.persistent_volume.as_str(), v.pod.as_str(), v.why))
            .collect();
        assert_eq!(
            unwaited,
            vec![
                ("pv-nfs", "shop/nfs", VolumeWait::NeedsNoAttach),
                ("pv-share", "shop/both", VolumeWait::UsedFromOtherNodes),
            ]
        );
    }

    #[test]
    fn budgets_follow_mcm() {
        let s = Duration::from_secs;
        assert_eq!(pod_disappearance_budget(s(30), s(7200)), s(60));
        assert_eq!(pod_disappearance_budget(s(600), s(60)), s(90));
        assert_eq!(detach_budget(s(30), s(120)), s(150));
        assert_eq!(pod("x").grace_period(), s(10));
        let mut unset = pod("y");
        unset.grace_period_seconds = None;
        assert_eq!(unset.grace_period(), s(30));
        assert_eq!(
            pod_disappearance_budget(Duration::MAX, Duration::MAX),
            Duration::MAX
        );
        assert_eq!(detach_budget(s(u64::MAX), s(120)), Duration::MAX);
    }

    proptest! {
        #[test]
        fn budgets_never_panic_and_never_undercut_their_parts(
            grace in any::<u64>(),
            timeout in any::<u64>(),
            nanos in 0u32..1_000_000_000,
        ) {
            let grace = Duration::new(grace, nanos);
            let timeout = Duration::from_secs(timeout);
            let gone = pod_disappearance_budget(grace, timeout);
            prop_assert!(gone >= grace.min(timeout));
            let detach = detach_budget(grace, timeout);
            prop_assert!(detach >= grace && detach >= timeout);
        }
    }

    fn any_pod() -> impl Strategy<Value = PodFacts> {
        (
            0u8..6,
            proptest::option::of(prop_oneof![
                Just("ReplicaSet"),
                Just("StatefulSet"),
                Just("DaemonSet"),
                Just("Job"),
            ]),
            any::<bool>(),
            prop_oneof![
                Just("Running"),
                Just("Pending"),
                Just("Succeeded"),
                Just("Failed")
            ],
            any::<bool>(),
            -10i32..10,
            proptest::collection::vec(0u8..4, 0..3),
            proptest::collection::vec(prop_oneof![Just("cache"), Just("tmp")], 0..3),
        )
            .prop_map(
                |(n, kind, mirror, phase, terminating, priority, pvs, empty_dirs)| PodFacts {
                    namespace: "ns".into(),
                    name: format!("p{n}"),
                    uid: format!("u{n}"),
                    controller_kind: kind.map(str::to_owned),
                    mirror,
                    phase: phase.into(),
                    terminating,
                    priority,
                    grace_period_seconds: None,
                    volumes: pvs
                        .into_iter()
                        .map(|v| VolumeFacts {
                            claim: format!("c{v}"),
                            persistent_volume: Some(format!("pv{v}")),
                            driver: Some(AZURE_DISK_CSI_DRIVER.into()),
                            volume_handle: Some(format!("d{v}")),
                            // pv0, pv1: disks; pv2: a share; pv3: a ReadWriteMany disk.
                            attach_required: v != 2,
                            attached_here: v < 2,
                            access_modes: vec![
                                if v == 3 {
                                    "ReadWriteMany"
                                } else {
                                    "ReadWriteOnce"
                                }
                                .into(),
                            ],
                        })
                        .collect(),
                    empty_dirs: empty_dirs.into_iter().map(str::to_owned).collect(),
                    labels: BTreeMap::new(),
                    namespace_labels: BTreeMap::new(),
                    do_not_disrupt: None,
                },
            )
    }

    fn any_policy() -> impl Strategy<Value = LocalDataPolicy> {
        prop_oneof![Just(LocalDataPolicy::Evict), Just(LocalDataPolicy::Refuse)]
    }

    proptest! {
        #[test]
        fn every_pod_lands_in_exactly_one_lane_and_no_shared_volume_is_tracked(
            pods in proptest::collection::vec(any_pod(), 0..12),
            policy in any_policy(),
        ) {
            let plan = plan_drain(&pods, policy);
            let lanes = plan.skipped.len() + plan.terminating.len() + plan.without_volumes.len()
                + plan.with_volumes.len() + plan.refused.len();
            prop_assert_eq!(lanes, pods.len());
            for p in &pods {
                let skipped = plan.skipped.iter().any(|s| s.pod == p.key());
                if p.mirror || p.controller_kind.as_deref() == Some("DaemonSet") {
                    prop_assert!(skipped);
                }
            }
            let mut seen: BTreeMap<&str, std::collections::BTreeSet<String>> = BTreeMap::new();
            for p in &pods {
                for v in &p.volumes {
                    if let Some(pv) = &v.persistent_volume {
                        seen.entry(pv).or_default().insert(p.uid.clone());
                    }
                }
            }
            for vp in &plan.with_volumes {
                for t in &vp.tracked {
                    prop_assert_eq!(seen[t.persistent_volume.as_str()].len(), 1);
                    // Only attaching, single-node volumes are waited on.
                    prop_assert!(t.persistent_volume == "pv0" || t.persistent_volume == "pv1");
                }
                // A pod moves alone only for a volume that attaches (the generator may repeat
                // a UID, so any pod of it).
                let attaches = |v: &VolumeFacts| {
                    v.persistent_volume.as_deref().is_some_and(|pv| pv == "pv0" || pv == "pv1")
                };
                prop_assert!(pods
                    .iter()
                    .filter(|p| p.uid == vp.pod.uid)
                    .any(|p| p.volumes.iter().any(attaches)));
            }
            for unwaited in &plan.not_waited_on {
                prop_assert!(unwaited.persistent_volume == "pv2" || unwaited.persistent_volume == "pv3");
            }
            for pair in plan.with_volumes.windows(2) {
                prop_assert!(pair[0].priority >= pair[1].priority);
            }
        }
    }

    /// The lane of `pod` in `plan`, and what the plan says it loses.
    fn lane_of(plan: &DrainPlan, pod: &str) -> (&'static str, Option<LocalDataPod>) {
        let lane = if plan.skipped.iter().any(|s| s.pod == pod) {
            "skipped"
        } else if plan.terminating.iter().any(|p| p.key() == pod) {
            "terminating"
        } else if plan.refused.iter().any(|p| p.pod == pod) {
            "refused"
        } else if plan.without_volumes.iter().any(|p| p.key() == pod) {
            "without-volumes"
        } else if plan.with_volumes.iter().any(|p| p.pod.key() == pod) {
            "with-volumes"
        } else {
            "nowhere"
        };
        let lost = plan
            .refused
            .iter()
            .chain(&plan.local_data)
            .find(|p| p.pod == pod)
            .cloned();
        (lane, lost)
    }

    /// One pod alone on the node, planned under `policy`: its lane and the local data named.
    fn check(name: &str, pod: PodFacts, policy: LocalDataPolicy, lane: &str, lost: Lost<'_>) {
        let key = pod.key();
        let plan = plan_drain(&[pod], policy);
        let expected = lost.map(|(empty_dirs, no_controller)| LocalDataPod {
            pod: key.clone(),
            empty_dirs: empty_dirs.iter().map(|d| (*d).to_owned()).collect(),
            no_controller,
        });
        assert_eq!(lane_of(&plan, &key), (lane, expected), "{name}");
    }

    /// `pods` without repeated UIDs (the generator may draw one name twice).
    fn distinct(mut pods: Vec<PodFacts>) -> Vec<PodFacts> {
        let mut seen = std::collections::BTreeSet::new();
        pods.retain(|p| seen.insert(p.uid.clone()));
        pods
    }

    /// What a row of [`local_data_is_evicted_or_refused_as_the_policy_says`] loses: its
    /// `emptyDir` volumes and whether it has no controller; `None` for nothing.
    type Lost<'a> = Option<(&'a [&'a str], bool)>;

    /// A row: the case as a sentence, the pod, the policy, the lane expected, what it loses.
    type LocalDataCase<'a> = (&'a str, PodFacts, LocalDataPolicy, &'a str, Lost<'a>);

    #[test]
    fn local_data_is_evicted_or_refused_as_the_policy_says() {
        use LocalDataPolicy::{Evict, Refuse};
        let bare = |mut p: PodFacts| {
            p.controller_kind = None;
            p
        };
        let empty_dir = |mut p: PodFacts, dirs: &[&str]| {
            p.empty_dirs = dirs.iter().map(|d| (*d).to_owned()).collect();
            p
        };
        let phase = |mut p: PodFacts, phase: &str| {
            p.phase = phase.into();
            p
        };
        let leaving = |mut p: PodFacts| {
            p.terminating = true;
            p
        };
        let mirror = |mut p: PodFacts| {
            p.mirror = true;
            p
        };
        let daemon = |mut p: PodFacts| {
            p.controller_kind = Some("DaemonSet".into());
            p
        };
        let none: Lost<'_> = None;
        #[rustfmt::skip]
        let table: Vec<LocalDataCase> = vec![
            ("a replica without local data is evicted under evict", pod("web"), Evict, "without-volumes", none),
            ("a replica without local data is evicted under refuse", pod("web"), Refuse, "without-volumes", none),
            ("a bare pod is evicted and named under evict", bare(pod("debug")), Evict, "without-volumes", Some((&[], true))),
            ("a bare pod is refused under refuse", bare(pod("debug")), Refuse, "refused", Some((&[], true))),
            ("an emptyDir pod is evicted and named under evict", empty_dir(pod("cache"), &["tmp", "scratch"]), Evict, "without-volumes", Some((&["scratch", "tmp"], false))),
            ("an emptyDir pod is refused under refuse", empty_dir(pod("cache"), &["scratch"]), Refuse, "refused", Some((&["scratch"], false))),
            ("a bare emptyDir pod names both under evict", empty_dir(bare(pod("x")), &["s"]), Evict, "without-volumes", Some((&["s"], true))),
            ("a bare emptyDir pod is refused under refuse", empty_dir(bare(pod("x")), &["s"]), Refuse, "refused", Some((&["s"], true))),
            ("a volume pod with an emptyDir moves with its volume under evict", empty_dir(with_pv(pod("db-0"), "pv-0", 0), &["wal"]), Evict, "with-volumes", Some((&["wal"], false))),
            ("a volume pod with an emptyDir is refused under refuse", empty_dir(with_pv(pod("db-0"), "pv-0", 0), &["wal"]), Refuse, "refused", Some((&["wal"], false))),
            ("a finished bare pod is left, not refused", phase(bare(pod("job")), "Succeeded"), Refuse, "skipped", none),
            ("a failed emptyDir pod is left, not refused", phase(empty_dir(pod("job"), &["s"]), "Failed"), Refuse, "skipped", none),
            ("a mirror pod (no controller) is left, not refused", mirror(bare(pod("kube-proxy"))), Refuse, "skipped", none),
            ("a DaemonSet pod with an emptyDir is left, not refused", empty_dir(daemon(pod("agent")), &["s"]), Refuse, "skipped", none),
            ("a terminating bare pod is waited for, not refused", leaving(bare(pod("old"))), Refuse, "terminating", none),
            ("a terminating emptyDir pod is waited for under evict, not named", leaving(empty_dir(pod("old"), &["s"])), Evict, "terminating", none),
        ];
        for (name, pod, policy, lane, lost) in table {
            check(name, pod, policy, lane, lost);
        }
    }

    #[test]
    fn a_refused_pod_still_holds_its_shared_volume() {
        let mut bare = with_pv(pod("a"), "shared", 0);
        bare.controller_kind = None;
        let other = with_pv(pod("b"), "shared", 0);
        let plan = plan_drain(&[bare, other], LocalDataPolicy::Refuse);
        assert_eq!(plan.refused.len(), 1);
        assert_eq!(plan.with_volumes.len(), 1);
        assert!(plan.with_volumes[0].tracked.is_empty());
        assert_eq!(plan.with_volumes[0].untracked, vec!["shared"]);
    }

    proptest! {
        #[test]
        fn no_pod_with_local_data_is_ever_evicted_or_deleted_under_refuse(
            pods in proptest::collection::vec(any_pod(), 0..12),
        ) {
            let pods = distinct(pods);
            let plan = plan_drain(&pods, LocalDataPolicy::Refuse);
            prop_assert!(plan.local_data.is_empty());
            for moving in plan.moving() {
                let facts = pods.iter().find(|p| p.uid == moving.uid);
                prop_assert!(facts.is_some());
                if let Some(facts) = facts {
                    // Only pods already terminating (someone else's deletion) may have local data.
                    prop_assert!(facts.terminating || local_data_of(facts).is_none(), "{:?}", facts);
                }
            }
            for refused in &plan.refused {
                prop_assert!(!plan.moving().any(|p| p.key() == refused.pod));
            }
        }

        #[test]
        fn under_evict_every_evicted_pod_with_local_data_is_named(
            pods in proptest::collection::vec(any_pod(), 0..12),
        ) {
            let pods = distinct(pods);
            let plan = plan_drain(&pods, LocalDataPolicy::Evict);
            prop_assert!(plan.refused.is_empty());
            let evicted = plan
                .without_volumes
                .iter()
                .chain(plan.with_volumes.iter().map(|p| &p.pod));
            for pod in evicted {
                let facts = pods.iter().find(|p| p.uid == pod.uid);
                let lost = facts.and_then(local_data_of);
                prop_assert_eq!(lost.as_ref(), plan.local_data_of(&pod.key()));
            }
        }
    }
}
