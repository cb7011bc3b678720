//! The pods bound to a Node, as the drain's pure planner reads them: controller, mirror,
//! phase, priority, grace period, `emptyDir` volumes, each PersistentVolumeClaim resolved to
//! its volume, with what tells whether the volume attaches (its CSIDriver's `attachRequired`,
//! its in-tree source, a VolumeAttachment on the Node) and its access modes, and the labels of the
//! pod and of its namespace (what the drain rules select on).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, Pod,
};
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};
use kube::Api;
use kube::runtime::reflector::ObjectRef;
use nodewright_model::disruption::marking_annotation;
use nodewright_model::drain::{ANNOTATION_MIRROR_POD, PodFacts, VolumeFacts};

use super::listing::pods_on_node;
use super::node::node_health;
use super::volumes::list_attachments;
use super::{ListNodePods, NodePods};
use crate::kube::cache::ClusterCache;
use crate::kube::error::{Error, Result};

/// Lists every pod bound to the Node (`spec.nodeName`, all namespaces) with its volumes
/// resolved PVC → PV → CSI driver and handle, whether each attaches (each CSIDriver read once
/// per listing; the VolumeAttachments listed once, when any claim is bound) and its access
/// modes, and reads the Node's health.
///
/// A listing asked for `fromMirror` takes the Node, its pods and their Namespaces from the
/// worker's mirrors (`cache`) when they are in sync, and reads the apiserver otherwise; the
/// volumes are always read.
pub async fn list_node_pods(
    client: &kube::Client,
    cache: Option<&ClusterCache>,
    input: &ListNodePods,
) -> Result<NodePods> {
    let mirrored = cache
        .filter(|_| input.from_mirror)
        .and_then(|cache| mirrored(client, cache, &input.node));
    let (node, pods, namespace_labels) = match mirrored {
        Some(objects) => objects,
        None => read(client, &input.node).await?,
    };
    let mut volumes = VolumeResolver::new(client);
    let mut facts = Vec::with_capacity(pods.len());
    for pod in &pods {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut resolved = Vec::new();
        for claim in claim_names(pod) {
            resolved.push(volumes.resolve(namespace, &claim).await?);
        }
        let mut pod_facts = pod_facts(pod, resolved);
        if let Some(labels) = namespace_labels.get(namespace) {
            pod_facts.namespace_labels = labels.clone();
        }
        facts.push(pod_facts);
    }
    let bound = facts
        .iter()
        .flat_map(|pod| &pod.volumes)
        .any(|volume| volume.persistent_volume.is_some());
    if bound {
        let attachments = list_attachments(client).await?;
        for volume in facts.iter_mut().flat_map(|pod| pod.volumes.iter_mut()) {
            volume.attached_here = has_attachment(&attachments, &input.node, volume);
        }
    }
    Ok(NodePods {
        node_found: node.is_some(),
        health: node.as_ref().map(node_health).unwrap_or_default(),
        pods: facts,
    })
}

/// The Node (when it exists), its pods and the labels of their Namespaces.
type NodeObjects = (
    Option<Node>,
    Vec<Pod>,
    BTreeMap<String, BTreeMap<String, String>>,
);

/// The Node, its pods and their Namespaces' labels, read from the apiserver.
async fn read(client: &kube::Client, node: &str) -> Result<NodeObjects> {
    let nodes: Api<Node> = Api::all(client.clone());
    let found = nodes.get_opt(node).await.map_err(|source| Error::GetNode {
        name: node.to_owned(),
        source,
    })?;
    let pods = pods_on_node(client, node).await?;
    let labels = namespace_labels(client, &pods).await?;
    Ok((found, pods, labels))
}

/// The same from the worker's mirrors, when they are in sync and the Node is there.
fn mirrored(client: &kube::Client, cache: &ClusterCache, node: &str) -> Option<NodeObjects> {
    let (found, pods) = cache.node_and_pods(client, node)?;
    let namespaces = cache.namespaces(client)?;
    let mut labels = BTreeMap::new();
    for pod in &pods {
        let Some(name) = pod.metadata.namespace.as_deref() else {
            continue;
        };
        let read = namespaces
            .get(&ObjectRef::new(name))
            .and_then(|namespace| namespace.metadata.labels.clone())
            .unwrap_or_default();
        labels.insert(name.to_owned(), read);
    }
    Some((Some(found), pods, labels))
}

/// The labels of every namespace the `pods` are in, each read once (a namespace gone meanwhile
/// has none).
async fn namespace_labels(
    client: &kube::Client,
    pods: &[Pod],
) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut labels = BTreeMap::new();
    for pod in pods {
        let Some(name) = pod.metadata.namespace.as_deref() else {
            continue;
        };
        if labels.contains_key(name) {
            continue;
        }
        let namespace = api
            .get_opt(name)
            .await
            .map_err(|source| Error::GetNamespace {
                name: name.to_owned(),
                source,
            })?;
        let read = namespace
            .and_then(|n| n.metadata.labels)
            .unwrap_or_default();
        labels.insert(name.to_owned(), read);
    }
    Ok(labels)
}

/// Reads claims, volumes and CSIDrivers once per listing, however many pods share them.
struct VolumeResolver<'a> {
    client: &'a kube::Client,
    claims: BTreeMap<(String, String), VolumeFacts>,
    volumes: BTreeMap<String, Option<PersistentVolume>>,
    /// Whether each CSI driver seen needs an attach.
    drivers: BTreeMap<String, bool>,
}

impl<'a> VolumeResolver<'a> {
    fn new(client: &'a kube::Client) -> Self {
        Self {
            client,
            claims: BTreeMap::new(),
            volumes: BTreeMap::new(),
            drivers: BTreeMap::new(),
        }
    }

    /// The claim `namespace/claim` as far as it resolves; a missing claim or volume is not an
    /// error (its fields stay empty).
    async fn resolve(&mut self, namespace: &str, claim: &str) -> Result<VolumeFacts> {
        let key = (namespace.to_owned(), claim.to_owned());
        if let Some(known) = self.claims.get(&key) {
            return Ok(known.clone());
        }
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let found = claims
            .get_opt(claim)
            .await
            .map_err(|source| Error::GetClaim {
                claim: format!("{namespace}/{claim}"),
                source,
            })?;
        let volume = match found.as_ref().and_then(bound_volume) {
            Some(name) => self.volume(name).await?,
            None => None,
        };
        let mut facts = volume_facts(claim, found.as_ref(), volume.as_ref());
        if let Some(driver) = facts.driver.clone() {
            facts.attach_required = self.driver_attaches(&driver).await?;
        }
        self.claims.insert(key, facts.clone());
        Ok(facts)
    }

    /// Whether the CSI driver `name` needs an attach: its CSIDriver's `attachRequired`, true
    /// when it has no CSIDriver object (as the attach-detach controller assumes).
    async fn driver_attaches(&mut self, name: &str) -> Result<bool> {
        if let Some(known) = self.drivers.get(name) {
            return Ok(*known);
        }
        let api: Api<CSIDriver> = Api::all(self.client.clone());
        let found = api
            .get_opt(name)
            .await
            .map_err(|source| Error::GetCsiDriver {
                name: name.to_owned(),
                source,
            })?;
        let attaches = driver_attaches(found.as_ref());
        self.drivers.insert(name.to_owned(), attaches);
        Ok(attaches)
    }

    async fn volume(&mut self, name: &str) -> Result<Option<PersistentVolume>> {
        if let Some(known) = self.volumes.get(name) {
            return Ok(known.clone());
        }
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let found = api.get_opt(name).await.map_err(|source| Error::GetVolume {
            name: name.to_owned(),
            source,
        })?;
        self.volumes.insert(name.to_owned(), found.clone());
        Ok(found)
    }
}

/// The claims a pod's `persistentVolumeClaim` volumes name, in order, without repeats.
pub(super) fn claim_names(pod: &Pod) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    for volume in volumes.into_iter().flatten() {
        if let Some(claim) = &volume.persistent_volume_claim
            && !names.contains(&claim.claim_name)
        {
            names.push(claim.claim_name.clone());
        }
    }
    names
}

/// The names of a pod's `emptyDir` volumes (any medium), in order.
pub(super) fn empty_dir_names(pod: &Pod) -> Vec<String> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    volumes
        .into_iter()
        .flatten()
        .filter(|volume| volume.empty_dir.is_some())
        .map(|volume| volume.name.clone())
        .collect()
}

/// What the planner needs of `pod`, with its `volumes` already resolved.
pub(super) fn pod_facts(pod: &Pod, volumes: Vec<VolumeFacts>) -> PodFacts {
    let metadata = &pod.metadata;
    let spec = pod.spec.as_ref();
    let controller_kind = metadata
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.controller == Some(true))
        .map(|owner| owner.kind.clone());
    let mirror = metadata
        .annotations
        .as_ref()
        .is_some_and(|annotations| annotations.contains_key(ANNOTATION_MIRROR_POD));
    PodFacts {
        namespace: metadata.namespace.clone().unwrap_or_default(),
        name: metadata.name.clone().unwrap_or_default(),
        uid: metadata.uid.clone().unwrap_or_default(),
        controller_kind,
        mirror,
        phase: pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default(),
        terminating: metadata.deletion_timestamp.is_some(),
        priority: spec.and_then(|s| s.priority).unwrap_or(0),
        grace_period_seconds: spec
            .and_then(|s| s.termination_grace_period_seconds)
            .and_then(|seconds| u64::try_from(seconds).ok()),
        volumes,
        empty_dirs: empty_dir_names(pod),
        labels: metadata.labels.clone().unwrap_or_default(),
        namespace_labels: BTreeMap::new(),
        do_not_disrupt: metadata
            .annotations
            .as_ref()
            .and_then(marking_annotation)
            .map(str::to_owned),
    }
}

/// The volume a claim is bound to (`spec.volumeName`), when it names one.
fn bound_volume(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .filter(|name| !name.is_empty())
}

/// The claim `name` resolved as far as it goes. A missing claim, an unbound one, or one whose
/// volume is gone has no volume (nothing can be attached for it); a non-CSI volume has no
/// driver or handle. A CSI volume is taken to attach until its CSIDriver is read; an in-tree
/// one attaches unless its source never does ([`in_tree_attaches`]). The access modes are the
/// claim's, the volume's when the claim names none. `attached_here` is left for the caller.
pub(super) fn volume_facts(
    name: &str,
    claim: Option<&PersistentVolumeClaim>,
    volume: Option<&PersistentVolume>,
) -> VolumeFacts {
    let bound = claim.and_then(bound_volume);
    let spec = volume
        .filter(|_| bound.is_some())
        .and_then(|v| v.spec.as_ref());
    let csi = spec.and_then(|s| s.csi.as_ref());
    let claim_modes = claim
        .and_then(|c| c.spec.as_ref())
        .and_then(|s| s.access_modes.clone())
        .unwrap_or_default();
    let access_modes = if claim_modes.is_empty() {
        spec.and_then(|s| s.access_modes.clone())
            .unwrap_or_default()
    } else {
        claim_modes
    };
    VolumeFacts {
        claim: name.to_owned(),
        persistent_volume: bound.filter(|_| volume.is_some()).map(str::to_owned),
        driver: csi.map(|c| c.driver.clone()),
        volume_handle: csi.map(|c| c.volume_handle.clone()),
        attach_required: spec.is_none_or(|s| s.csi.is_some() || in_tree_attaches(s)),
        attached_here: false,
        access_modes: if spec.is_some() {
            access_modes
        } else {
            Vec::new()
        },
    }
}

/// Whether an in-tree (non-CSI) volume source attaches to a node: false for the sources that
/// never do (NFS, hostPath, local, Azure Files, CephFS, Glusterfs, Quobyte, Flocker); true for
/// the rest (Azure Disk, iSCSI, Fibre Channel, RBD, ...) and for one not recognised, so a volume
/// of unknown kind is waited on.
pub(super) fn in_tree_attaches(spec: &PersistentVolumeSpec) -> bool {
    let never_attaches = spec.nfs.is_some()
        || spec.host_path.is_some()
        || spec.local.is_some()
        || spec.azure_file.is_some()
        || spec.cephfs.is_some()
        || spec.glusterfs.is_some()
        || spec.quobyte.is_some()
        || spec.flocker.is_some();
    !never_attaches
}

/// Whether a CSI driver with this CSIDriver object (or none) needs an attach: `attachRequired`,
/// true when unset or when there is no object, as the attach-detach controller decides.
pub(super) fn driver_attaches(driver: Option<&CSIDriver>) -> bool {
    driver.and_then(|d| d.spec.attach_required).unwrap_or(true)
}

/// Whether a VolumeAttachment of `volume`'s PV on `node` exists (in any state).
pub(super) fn has_attachment(
    attachments: &[VolumeAttachment],
    node: &str,
    volume: &VolumeFacts,
) -> bool {
    volume.persistent_volume.as_deref().is_some_and(|pv| {
        attachments.iter().any(|attachment| {
            attachment.spec.node_name == node
                && attachment.spec.source.persistent_volume_name.as_deref() == Some(pv)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn from<T: serde::de::DeserializeOwned + Default>(value: serde_json::Value) -> T {
        serde_json::from_value(value).unwrap_or_default()
    }

    #[test]
    fn a_daemonset_pod_is_read_with_its_controller_priority_grace_and_claims() {
        let pod: Pod = from(json!({
            "metadata": {
                "name": "agent-x7k2p", "namespace": "monitoring", "uid": "u-1",
                "labels": { "app": "agent", "nodewright.io/drain": "skip" },
                "ownerReferences": [
                    { "apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "c" },
                    { "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "d",
                      "controller": true },
                ],
            },
            "spec": {
                "containers": [{ "name": "agent" }],
                "priority": 1000,
                "terminationGracePeriodSeconds": 45,
                "volumes": [
                    { "name": "cache", "emptyDir": {} },
                    { "name": "data", "persistentVolumeClaim": { "claimName": "data-0" } },
                    { "name": "again", "persistentVolumeClaim": { "claimName": "data-0" } },
                    { "name": "logs", "persistentVolumeClaim": { "claimName": "logs" } },
                    { "name": "shm", "emptyDir": { "medium": "Memory" } },
                ],
            },
            "status": { "phase": "Running" },
        }));
        assert_eq!(claim_names(&pod), vec!["data-0", "logs"]);
        let facts = pod_facts(&pod, vec![]);
        assert_eq!(
            facts,
            PodFacts {
                namespace: "monitoring".into(),
                name: "agent-x7k2p".into(),
                uid: "u-1".into(),
                controller_kind: Some("DaemonSet".into()),
                mirror: false,
                phase: "Running".into(),
                terminating: false,
                priority: 1000,
                grace_period_seconds: Some(45),
                volumes: vec![],
                empty_dirs: vec!["cache".into(), "shm".into()],
                labels: BTreeMap::from([
                    ("app".to_owned(), "agent".to_owned()),
                    ("nodewright.io/drain".to_owned(), "skip".to_owned()),
                ]),
                namespace_labels: BTreeMap::new(),
                do_not_disrupt: None,
            }
        );
    }

    #[test]
    fn a_terminating_mirror_pod_without_controller_is_read_as_such() {
        let pod: Pod = from(json!({
            "metadata": {
                "name": "kube-proxy-n1", "namespace": "kube-system", "uid": "u-2",
                "annotations": { "kubernetes.io/config.mirror": "abc" },
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [
                    { "apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "n",
                      "controller": false },
                ],
            },
            "spec": { "containers": [{ "name": "p" }] },
        }));
        let facts = pod_facts(&pod, vec![]);
        assert!(facts.mirror);
        assert!(facts.terminating);
        assert_eq!(facts.controller_kind, None);
        assert_eq!(facts.phase, "");
        assert_eq!(facts.priority, 0);
        assert_eq!(facts.grace_period_seconds, None);
        assert!(facts.empty_dirs.is_empty());
        assert!(claim_names(&pod).is_empty());
    }

    #[test]
    fn a_claim_resolves_as_far_as_its_objects_exist() {
        let claim: PersistentVolumeClaim = from(json!({
            "metadata": { "name": "data-0", "namespace": "shop" },
            "spec": { "volumeName": "pv-1", "accessModes": ["ReadWriteOnce"] },
        }));
        let no_modes: PersistentVolumeClaim = from(json!({
            "metadata": { "name": "data-0", "namespace": "shop" },
            "spec": { "volumeName": "pv-1" },
        }));
        let unbound: PersistentVolumeClaim = from(json!({
            "metadata": { "name": "data-0", "namespace": "shop" },
            "spec": {},
        }));
        let csi: PersistentVolume = from(json!({
            "metadata": { "name": "pv-1" },
            "spec": { "csi": { "driver": "disk.csi.azure.com", "volumeHandle": "/subscriptions/s/disks/d" } },
        }));
        let nfs: PersistentVolume = from(json!({
            "metadata": { "name": "pv-1" },
            "spec": { "nfs": { "server": "nfs", "path": "/" }, "accessModes": ["ReadWriteMany"] },
        }));
        let iscsi: PersistentVolume = from(json!({
            "metadata": { "name": "pv-1" },
            "spec": { "iscsi": { "targetPortal": "10.0.0.1:3260", "iqn": "iqn.x", "lun": 0 } },
        }));
        let facts = |pv: Option<&str>, driver: Option<&str>, handle: Option<&str>| VolumeFacts {
            claim: "data-0".into(),
            persistent_volume: pv.map(str::to_owned),
            driver: driver.map(str::to_owned),
            volume_handle: handle.map(str::to_owned),
            attach_required: true,
            attached_here: false,
            access_modes: if pv.is_some() {
                vec!["ReadWriteOnce".into()]
            } else {
                vec![]
            },
        };
        let mut nfs_facts = facts(Some("pv-1"), None, None);
        nfs_facts.attach_required = false;
        let mut nfs_pv_modes = nfs_facts.clone();
        nfs_pv_modes.access_modes = vec!["ReadWriteMany".into()];
        let table = [
            (
                "bound to a CSI volume: attaches until its CSIDriver says otherwise",
                Some(&claim),
                Some(&csi),
                facts(
                    Some("pv-1"),
                    Some("disk.csi.azure.com"),
                    Some("/subscriptions/s/disks/d"),
                ),
            ),
            (
                "bound to an NFS volume: never attaches, the claim's modes",
                Some(&claim),
                Some(&nfs),
                nfs_facts,
            ),
            (
                "a claim naming no modes takes the volume's",
                Some(&no_modes),
                Some(&nfs),
                nfs_pv_modes,
            ),
            (
                "bound to an iSCSI volume: an in-tree source that attaches",
                Some(&claim),
                Some(&iscsi),
                facts(Some("pv-1"), None, None),
            ),
            (
                "its volume is gone",
                Some(&claim),
                None,
                facts(None, None, None),
            ),
            (
                "not bound",
                Some(&unbound),
                Some(&csi),
                facts(None, None, None),
            ),
            ("no such claim", None, None, facts(None, None, None)),
        ];
        for (case, claim, volume, expected) in table {
            assert_eq!(volume_facts("data-0", claim, volume), expected, "{case}");
        }
    }

    #[test]
    fn a_driver_attaches_unless_its_csidriver_says_attach_required_false() {
        let driver = |spec: serde_json::Value| -> CSIDriver {
            from(json!({ "metadata": { "name": "file.csi.azure.com" }, "spec": spec }))
        };
        let table = [
            ("no CSIDriver object", None, true),
            (
                "attachRequired false",
                Some(driver(json!({ "attachRequired": false }))),
                false,
            ),
            (
                "attachRequired true",
                Some(driver(json!({ "attachRequired": true }))),
                true,
            ),
            ("attachRequired unset", Some(driver(json!({}))), true),
        ];
        for (case, object, expected) in table {
            assert_eq!(driver_attaches(object.as_ref()), expected, "{case}");
        }
    }

    #[test]
    fn an_attachment_on_this_node_marks_the_volume_attached_here() {
        let attachment = |node: &str, pv: &str| -> VolumeAttachment {
            from(json!({
                "metadata": { "name": format!("va-{node}-{pv}") },
                "spec": {
                    "attacher": "file.csi.azure.com",
                    "nodeName": node,
                    "source": { "persistentVolumeName": pv },
                },
            }))
        };
        let attachments = [attachment("old", "pv-1"), attachment("new", "pv-2")];
        let volume = |pv: Option<&str>| VolumeFacts {
            claim: "data".into(),
            persistent_volume: pv.map(str::to_owned),
            driver: None,
            volume_handle: None,
            attach_required: false,
            attached_here: false,
            access_modes: vec![],
        };
        assert!(has_attachment(&attachments, "old", &volume(Some("pv-1"))));
        assert!(!has_attachment(&attachments, "old", &volume(Some("pv-2"))));
        assert!(!has_attachment(&attachments, "new", &volume(Some("pv-1"))));
        assert!(!has_attachment(&attachments, "old", &volume(None)));
    }
}
