//! Workloads for the drain and volume tests, each test in a fresh namespace: Deployments,
//! DaemonSets, bare pods (no controller), pods with `emptyDir` volumes, StatefulSets whose pods
//! each own one `ReadWriteOnce` CSI volume backed by a managed disk in the sandbox, volumes that
//! never attach (an Azure Files share of a CSIDriver with `attachRequired: false`, an NFS export)
//! for pods that name their claims, PodDisruptionBudgets and PriorityClasses; waits on their pods;
//! cordon, eviction; and a cleanup that never fails the test.
//!
//! # What the platform needs for volumes to follow pods
//!
//! Found on the local stack (kube-controller-manager v1.36 with every controller, kwok, the
//! sandbox's joiner and attacher):
//!
//! - The attach-detach controller creates a VolumeAttachment for a pod's CSI volume as soon as
//!   the pod is scheduled on a Node with the `controller-managed-attach-detach` annotation (the
//!   joiner sets it). No CSIDriver object is needed (without one, the CSI plugin assumes
//!   `attachRequired: true`), no CSINode (only in-tree migration and the scheduler's volume limits
//!   read it) and no StorageClass. [`ensure_csi_driver`] still creates the CSIDriver AKS has
//!   (`attachRequired: true`, which changes nothing for the controllers) so that code reading it
//!   finds it.
//! - A CSI volume whose driver's CSIDriver says `attachRequired: false` ([`FILE_CSI_DRIVER`],
//!   made by [`ensure_file_csi_driver`]) gets no VolumeAttachment: the attach-detach controller
//!   treats it as not attachable, as it does an in-tree NFS volume. Nothing on the stack serves
//!   that driver (the sandbox's attacher serves [`CSI_DRIVER`] only), as nothing needs to.
//! - The PersistentVolume is static (`storageClassName: ""`), pre-bound through `claimRef`, and
//!   the claim names it in `volumeName`: the PV controller binds both at once. The StatefulSet's
//!   `volumeClaimTemplates` produce the same claim names (`data-<set>-<ordinal>`), so the
//!   controller adopts the claims made beforehand.
//! - Nodes of pools made by [`crate::machines::write_pool_file`] carry the taint
//!   `dedicated=e2e:NoSchedule`: [`Placement::pool`] tolerates it (and only it, so a cordon still
//!   keeps pods away).
//! - kwok marks a pod Running as soon as it is bound to a Node, without waiting for its volumes:
//!   on this stack "Running" does not imply "attached" (a kubelet would wait); wait for the
//!   VolumeAttachment as well.
//! - Several volumes attaching to one VM at once take turns: the emulated VM refuses a second
//!   operation while one runs ("has another operation in progress", as Azure does), and the
//!   controller and attacher retry with doubling delays, so the last of three attaches lands 2-7 s
//!   after the first. One volume at a time attaches in 0.3-0.6 s.
//! - After an accepted eviction the PodDisruptionBudget's `status.disruptedPods` holds the pod's
//!   name; a StatefulSet's replacement has the same name, and when the disruption controller next
//!   syncs after it exists (kwok removes the old pod within ~10 ms, so this happens now and then),
//!   the replacement counts as "being disrupted" and further evictions get 429 until the entry
//!   expires, 2 minutes after the eviction ([`Workloads::budgets_summary`] shows it).
//! - The attach-detach controller takes a volume it records as attached for mounted until a Node
//!   update shows it missing from `status.volumesInUse`. kwok Nodes never list any, and the
//!   controller's own `status.volumesAttached` update of the Node brings that update at once, so
//!   the detach starts 10-400 ms after the pod is gone ("Verified volume is safe to detach"). But
//!   when kube-controller-manager (re)starts and finds a VolumeAttachment of a Node that no longer
//!   exists, no update ever comes and the detach waits `maxWaitForUnmountDuration`, 6 minutes
//!   (seen in the stack's log after a restart). [`Workloads::clean_up`] waits for the
//!   VolumeAttachments to go before the test deletes its machines, so it leaves none behind.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::future::try_join_all;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};
use kube::Api;
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use nodewright_activities::azure::disks::Disk;
use nodewright_activities::azure::{ArmClient, Deletion};
use nodewright_model::arm::poll_schedule::OperationKind;
use nodewright_model::ownership::LABEL_POOL;
use serde_json::{Value, json};

use crate::eventually;
use crate::kube_objects::{create_namespace, unique_suffix};
use crate::stack::Stack;

/// The Azure Disk CSI driver's name, which the sandbox's attacher serves.
pub const CSI_DRIVER: &str = "disk.csi.azure.com";
/// The label every object of these helpers carries, for finding leftovers.
pub const TEST_LABEL: (&str, &str) = ("nodewright.io/test", "e2e");
/// The label naming the namespace a cluster-scoped PersistentVolume was made for.
pub const NAMESPACE_LABEL: &str = "nodewright.io/test-namespace";
/// The taint key of the pools [`crate::machines::write_pool_file`] writes.
pub const POOL_TAINT_KEY: &str = "dedicated";
/// The Azure Files CSI driver's name. Its CSIDriver (as AKS has it) says `attachRequired: false`:
/// a share is mounted over SMB/NFS, never attached to a VM.
pub const FILE_CSI_DRIVER: &str = "file.csi.azure.com";
/// The name of the volume (and claim template) in every StatefulSet pod.
pub const VOLUME_NAME: &str = "data";

const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(200);
const ARM_WAIT: Duration = Duration::from_secs(60);

/// Where a workload's pods may run: a node selector and tolerations.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// `spec.nodeSelector` of the pods.
    pub node_selector: BTreeMap<String, String>,
    /// `spec.tolerations` of the pods, as JSON objects.
    pub tolerations: Vec<Value>,
}

impl Placement {
    /// The nodes of a nodewright pool: `nodewright.io/pool=<pool>`, tolerating the pool's
    /// `dedicated` taint (only that one: cordoned nodes stay excluded).
    pub fn pool(pool: &str) -> Self {
        Self {
            node_selector: BTreeMap::from([(LABEL_POOL.to_owned(), pool.to_owned())]),
            tolerations: Vec::new(),
        }
        .tolerate(POOL_TAINT_KEY)
    }

    /// One node, by its `kubernetes.io/hostname` label, tolerating the pool taint.
    pub fn node(node: &str) -> Self {
        Self {
            node_selector: BTreeMap::from([("kubernetes.io/hostname".to_owned(), node.to_owned())]),
            tolerations: Vec::new(),
        }
        .tolerate(POOL_TAINT_KEY)
    }

    /// Adds a toleration of any `NoSchedule` taint with this key.
    pub fn tolerate(mut self, key: &str) -> Self {
        self.tolerations
            .push(json!({ "key": key, "operator": "Exists", "effect": "NoSchedule" }));
        self
    }
}

/// A Deployment, DaemonSet or StatefulSet to create: pods labelled `app=<name>`, one container
/// of an image kwok never pulls.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The object's name and its pods' `app` label.
    pub name: String,
    /// Replicas (ignored for a DaemonSet).
    pub replicas: i32,
    /// Where the pods may run.
    pub placement: Placement,
    /// `spec.priorityClassName` of the pods, e.g. from [`ensure_priority_class`].
    pub priority_class: Option<String>,
    /// `spec.terminationGracePeriodSeconds` of the pods (default 1).
    pub termination_grace_seconds: i64,
    /// StatefulSets only: `podManagementPolicy: Parallel` instead of `OrderedReady`.
    pub parallel: bool,
    /// StatefulSets only: the size of each pod's disk in GiB (default 4).
    pub volume_size_gb: i64,
    /// `emptyDir` volumes of the pods, by name (mounted under `/<name>`).
    pub empty_dirs: Vec<String>,
    /// Claims the pods mount (a volume of the claim's name, under `/<claim>`), e.g. from
    /// [`Workloads::file_share`] or [`Workloads::nfs_volume`]. Not for StatefulSets, whose
    /// claims come from their template.
    pub claims: Vec<String>,
    /// Annotations of the pods (e.g. `nodewright.io/do-not-disrupt: "true"`).
    pub annotations: BTreeMap<String, String>,
}

impl Workload {
    /// `replicas` pods named after `name`, placed by `placement`, grace period 1 s.
    pub fn new(name: &str, replicas: i32, placement: Placement) -> Self {
        Self {
            name: name.to_owned(),
            replicas,
            placement,
            priority_class: None,
            termination_grace_seconds: 1,
            parallel: false,
            volume_size_gb: 4,
            empty_dirs: Vec::new(),
            claims: Vec::new(),
            annotations: BTreeMap::new(),
        }
    }

    /// Annotates the pods with `key: value`.
    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Makes the pods mount the claim `claim` (which all replicas share).
    pub fn claim(mut self, claim: &str) -> Self {
        self.claims.push(claim.to_owned());
        self
    }

    /// Gives the pods an `emptyDir` volume named `name` (local data an eviction loses).
    pub fn empty_dir(mut self, name: &str) -> Self {
        self.empty_dirs.push(name.to_owned());
        self
    }

    /// Sets the pods' priority class.
    pub fn priority_class(mut self, name: &str) -> Self {
        self.priority_class = Some(name.to_owned());
        self
    }

    /// Makes a StatefulSet create and delete its pods in parallel.
    pub fn parallel(mut self) -> Self {
        self.parallel = true;
        self
    }

    fn labels(&self) -> Value {
        json!({ "app": self.name, TEST_LABEL.0: TEST_LABEL.1 })
    }

    /// The pod template; with a volume mount of [`VOLUME_NAME`] when `with_volume`.
    fn pod_template(&self, with_volume: bool) -> Value {
        let mut container = json!({
            "name": self.name, "image": format!("registry.invalid/{}:1", self.name),
        });
        let mut mounts = Vec::new();
        if with_volume {
            mounts.push(json!({ "name": VOLUME_NAME, "mountPath": "/data" }));
        }
        for name in self.empty_dirs.iter().chain(&self.claims) {
            mounts.push(json!({ "name": name, "mountPath": format!("/{name}") }));
        }
        if !mounts.is_empty() {
            container["volumeMounts"] = json!(mounts);
        }
        let mut spec = json!({
            "nodeSelector": self.placement.node_selector,
            "tolerations": self.placement.tolerations,
            "terminationGracePeriodSeconds": self.termination_grace_seconds,
            "containers": [container],
        });
        if let Some(class) = &self.priority_class {
            spec["priorityClassName"] = json!(class);
        }
        if !self.empty_dirs.is_empty() || !self.claims.is_empty() {
            let volumes: Vec<Value> = self
                .empty_dirs
                .iter()
                .map(|name| json!({ "name": name, "emptyDir": {} }))
                .chain(self.claims.iter().map(|claim| {
                    json!({ "name": claim, "persistentVolumeClaim": { "claimName": claim } })
                }))
                .collect();
            spec["volumes"] = json!(volumes);
        }
        let mut metadata = json!({ "labels": self.labels() });
        if !self.annotations.is_empty() {
            metadata["annotations"] = json!(self.annotations);
        }
        json!({ "metadata": metadata, "spec": spec })
    }
}

/// One StatefulSet pod's volume: the claim, the PersistentVolume and the managed disk behind it
/// (the PersistentVolume and the disk share one name, as with the Azure Disk CSI driver).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    /// The pod that uses it, `<set>-<ordinal>`.
    pub pod: String,
    /// The claim, `data-<set>-<ordinal>`.
    pub claim: String,
    /// The PersistentVolume's name, which is also the disk's name.
    pub name: String,
    /// The disk's ARM id (the volume handle).
    pub disk_id: String,
}

/// A volume that never attaches (an Azure Files share, an NFS export): its claim and its
/// PersistentVolume, which no disk backs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedVolume {
    /// The claim, in the test's namespace.
    pub claim: String,
    /// The PersistentVolume, `pvc-<namespace>-<claim>`.
    pub name: String,
}

/// What an eviction request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eviction {
    /// Accepted (201): the pod is being deleted.
    Evicted,
    /// Refused with 429: a PodDisruptionBudget does not allow it; the API server's message.
    Blocked(String),
    /// The pod did not exist (404).
    Gone,
}

/// A fresh namespace and what the test made in it and for it (PersistentVolumes, disks), with
/// the clients to make more and to remove it all.
pub struct Workloads {
    client: kube::Client,
    arm: ArmClient,
    location: String,
    namespace: String,
    volumes: Vec<Volume>,
    /// The PersistentVolumes of [`SharedVolume`]s made so far.
    shared: Vec<String>,
}

impl Workloads {
    /// Creates the namespace `<prefix>-<8 hex>` (and waits for its default ServiceAccount), and
    /// makes sure the cluster has the CSIDriver.
    pub async fn create(stack: &Stack, prefix: &str) -> Result<Self> {
        let client = stack.kube_client().await?;
        let namespace = format!("{prefix}-{}", unique_suffix());
        ensure_csi_driver(&client).await?;
        create_namespace(&client, &namespace).await?;
        Ok(Self {
            client,
            arm: stack.arm_client()?,
            location: stack.arm.location.clone(),
            namespace,
            volumes: Vec::new(),
            shared: Vec::new(),
        })
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The Kubernetes client (admin).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The ARM client of the sandbox.
    pub fn arm(&self) -> &ArmClient {
        &self.arm
    }

    /// Every StatefulSet volume made so far.
    pub fn volumes(&self) -> &[Volume] {
        &self.volumes
    }

    /// The prefix of every PersistentVolume (and disk) name of this namespace: `pvc-<namespace>-`.
    pub fn volume_prefix(&self) -> String {
        format!("pvc-{}-", self.namespace)
    }

    fn pods_api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Creates a Deployment of `workload.replicas` pods without volumes.
    pub async fn deployment(&self, workload: &Workload) -> Result<()> {
        let object: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": workload.name, "labels": workload.labels() },
            "spec": {
                "replicas": workload.replicas,
                "selector": { "matchLabels": { "app": workload.name } },
                "template": workload.pod_template(false),
            },
        }))?;
        Api::<Deployment>::namespaced(self.client.clone(), &self.namespace)
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating Deployment {}", workload.name))?;
        Ok(())
    }

    /// Creates one bare pod named `workload.name` (no owner, so no controller recreates it:
    /// `kubectl drain` needs `--force` for it); `replicas` is ignored.
    pub async fn bare_pod(&self, workload: &Workload) -> Result<()> {
        let mut object = workload.pod_template(false);
        object["apiVersion"] = json!("v1");
        object["kind"] = json!("Pod");
        object["metadata"]["name"] = json!(workload.name);
        let pod: Pod = serde_json::from_value(object)?;
        self.pods_api()
            .create(&PostParams::default(), &pod)
            .await
            .with_context(|| format!("creating pod {}", workload.name))?;
        Ok(())
    }

    /// Creates a DaemonSet (its controller adds the toleration of cordoned nodes itself).
    pub async fn daemon_set(&self, workload: &Workload) -> Result<()> {
        let object: DaemonSet = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": { "name": workload.name, "labels": workload.labels() },
            "spec": {
                "selector": { "matchLabels": { "app": workload.name } },
                "template": workload.pod_template(false),
            },
        }))?;
        Api::<DaemonSet>::namespaced(self.client.clone(), &self.namespace)
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating DaemonSet {}", workload.name))?;
        Ok(())
    }

    /// Creates a StatefulSet whose every pod has one `ReadWriteOnce` volume: for each ordinal a
    /// managed disk in the sandbox (tagged as the Azure Disk CSI driver tags its disks), a static
    /// CSI PersistentVolume of it and the claim `data-<set>-<ordinal>`, bound before the set is
    /// created. Returns the volumes, ordinal by ordinal.
    pub async fn stateful_set(&mut self, workload: &Workload) -> Result<Vec<Volume>> {
        let ordinals = 0..workload.replicas;
        let volumes: Vec<Volume> = ordinals
            .map(|ordinal| {
                let pod = format!("{}-{ordinal}", workload.name);
                Volume {
                    claim: format!("{VOLUME_NAME}-{pod}"),
                    name: format!("{}{pod}", self.volume_prefix()),
                    disk_id: self.arm.disk_id(&format!("{}{pod}", self.volume_prefix())),
                    pod,
                }
            })
            .collect();
        // Recorded before anything is made, so that a failure half-way is cleaned up.
        self.volumes.extend(volumes.iter().cloned());
        try_join_all(
            volumes
                .iter()
                .map(|volume| self.create_volume(volume, workload.volume_size_gb)),
        )
        .await?;

        let object: StatefulSet = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": { "name": workload.name, "labels": workload.labels() },
            "spec": {
                "replicas": workload.replicas,
                "serviceName": workload.name,
                "podManagementPolicy": if workload.parallel { "Parallel" } else { "OrderedReady" },
                "selector": { "matchLabels": { "app": workload.name } },
                "template": workload.pod_template(true),
                "volumeClaimTemplates": [{
                    "metadata": { "name": VOLUME_NAME },
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "",
                        "resources": { "requests": { "storage": format!("{}Gi", workload.volume_size_gb) } },
                    },
                }],
            },
        }))?;
        Api::<StatefulSet>::namespaced(self.client.clone(), &self.namespace)
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating StatefulSet {}", workload.name))?;
        Ok(volumes)
    }

    /// The disk, the PersistentVolume and the claim of one volume; waits until the claim is
    /// `Bound`.
    async fn create_volume(&self, volume: &Volume, size_gb: i64) -> Result<()> {
        create_csi_disk(
            &self.arm,
            &self.location,
            &volume.name,
            size_gb,
            &volume.claim,
            &self.namespace,
        )
        .await?;
        let size = format!("{size_gb}Gi");
        let persistent_volume: PersistentVolume = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {
                "name": volume.name,
                "labels": { TEST_LABEL.0: TEST_LABEL.1, NAMESPACE_LABEL: self.namespace },
            },
            "spec": {
                "capacity": { "storage": size },
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "volumeMode": "Filesystem",
                "claimRef": {
                    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "namespace": self.namespace, "name": volume.claim,
                },
                "csi": {
                    "driver": CSI_DRIVER,
                    "volumeHandle": volume.disk_id,
                    "fsType": "ext4",
                    "volumeAttributes": {
                        "csi.storage.k8s.io/pv/name": volume.name,
                        "csi.storage.k8s.io/pvc/name": volume.claim,
                        "csi.storage.k8s.io/pvc/namespace": self.namespace,
                        "requestedsizegib": size_gb.to_string(),
                    },
                },
            },
        }))?;
        Api::<PersistentVolume>::all(self.client.clone())
            .create(&PostParams::default(), &persistent_volume)
            .await
            .with_context(|| format!("creating PersistentVolume {}", volume.name))?;
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": { "name": volume.claim, "labels": { TEST_LABEL.0: TEST_LABEL.1 } },
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": volume.name,
                "resources": { "requests": { "storage": size } },
            },
        }))?;
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &self.namespace);
        claims
            .create(&PostParams::default(), &claim)
            .await
            .with_context(|| format!("creating claim {}", volume.claim))?;
        eventually(
            &format!("claim {} to bind to {}", volume.claim, volume.name),
            WAIT,
            POLL,
            || async {
                let claim = claims.get(&volume.claim).await?;
                let phase = claim.status.and_then(|s| s.phase).unwrap_or_default();
                Ok((phase == "Bound").then_some(()))
            },
        )
        .await
    }

    /// An Azure Files share for the claim `claim` asking for `access_mode` (`ReadWriteMany` as
    /// usual, or `ReadWriteOnce`): a static PersistentVolume of [`FILE_CSI_DRIVER`] (whose
    /// CSIDriver, made here when absent, says `attachRequired: false`) and the claim bound to
    /// it. No VolumeAttachment ever exists for it.
    pub async fn file_share(&mut self, claim: &str, access_mode: &str) -> Result<SharedVolume> {
        ensure_file_csi_driver(&self.client).await?;
        let name = format!("{}{claim}", self.volume_prefix());
        let source = json!({ "csi": {
            "driver": FILE_CSI_DRIVER,
            "volumeHandle": format!("nodewright-e2e#{}#{claim}#", self.namespace),
            "volumeAttributes": { "shareName": claim },
        } });
        self.shared_volume(claim, &name, access_mode, source).await
    }

    /// An NFS export for the claim `claim` (`ReadWriteOnce`): a static in-tree NFS
    /// PersistentVolume, which never attaches, and the claim bound to it.
    pub async fn nfs_volume(&mut self, claim: &str) -> Result<SharedVolume> {
        let name = format!("{}{claim}", self.volume_prefix());
        let source = json!({ "nfs": { "server": "nfs.nodewright-e2e.invalid", "path": format!("/exports/{claim}") } });
        self.shared_volume(claim, &name, "ReadWriteOnce", source)
            .await
    }

    /// The PersistentVolume `name` with `source` (its `csi` or `nfs` field) and `access_mode`,
    /// pre-bound to the claim `claim`, and the claim; waits until the claim is `Bound`.
    async fn shared_volume(
        &mut self,
        claim: &str,
        name: &str,
        access_mode: &str,
        source: Value,
    ) -> Result<SharedVolume> {
        // Recorded before it is made, so that a failure half-way is cleaned up.
        self.shared.push(name.to_owned());
        let mut spec = json!({
            "capacity": { "storage": "1Gi" },
            "accessModes": [access_mode],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "volumeMode": "Filesystem",
            "claimRef": {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": self.namespace, "name": claim,
            },
        });
        if let (Some(spec), Some(source)) = (spec.as_object_mut(), source.as_object()) {
            spec.extend(source.clone());
        }
        let persistent_volume: PersistentVolume = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "labels": { TEST_LABEL.0: TEST_LABEL.1, NAMESPACE_LABEL: self.namespace },
            },
            "spec": spec,
        }))?;
        Api::<PersistentVolume>::all(self.client.clone())
            .create(&PostParams::default(), &persistent_volume)
            .await
            .with_context(|| format!("creating PersistentVolume {name}"))?;
        let object: PersistentVolumeClaim = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": { "name": claim, "labels": { TEST_LABEL.0: TEST_LABEL.1 } },
            "spec": {
                "accessModes": [access_mode],
                "storageClassName": "",
                "volumeName": name,
                "resources": { "requests": { "storage": "1Gi" } },
            },
        }))?;
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &self.namespace);
        claims
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating claim {claim}"))?;
        eventually(
            &format!("claim {claim} to bind to {name}"),
            WAIT,
            POLL,
            || async {
                let found = claims.get(claim).await?;
                let phase = found.status.and_then(|s| s.phase).unwrap_or_default();
                Ok((phase == "Bound").then_some(()))
            },
        )
        .await?;
        Ok(SharedVolume {
            claim: claim.to_owned(),
            name: name.to_owned(),
        })
    }

    /// Creates a PodDisruptionBudget over the pods labelled `app=<app>` and waits until the
    /// disruption controller has processed it (before that, every eviction is refused).
    pub async fn pod_disruption_budget(
        &self,
        name: &str,
        app: &str,
        min_available: i32,
    ) -> Result<()> {
        let budget: PodDisruptionBudget = serde_json::from_value(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": { "name": name, "labels": { TEST_LABEL.0: TEST_LABEL.1 } },
            "spec": { "minAvailable": min_available, "selector": { "matchLabels": { "app": app } } },
        }))?;
        let budgets: Api<PodDisruptionBudget> =
            Api::namespaced(self.client.clone(), &self.namespace);
        budgets
            .create(&PostParams::default(), &budget)
            .await
            .with_context(|| format!("creating PodDisruptionBudget {name}"))?;
        eventually(
            &format!("PodDisruptionBudget {name} to be observed by the disruption controller"),
            WAIT,
            POLL,
            || async {
                let budget = budgets.get(name).await?;
                let generation = budget.metadata.generation.unwrap_or_default();
                let observed = budget
                    .status
                    .and_then(|s| s.observed_generation)
                    .unwrap_or_default();
                Ok((observed >= generation).then_some(()))
            },
        )
        .await
    }

    /// Changes a PodDisruptionBudget's `minAvailable` and waits until the disruption controller
    /// has processed the change.
    pub async fn set_min_available(&self, name: &str, min_available: i32) -> Result<()> {
        let budgets: Api<PodDisruptionBudget> =
            Api::namespaced(self.client.clone(), &self.namespace);
        let patch = json!({ "spec": { "minAvailable": min_available } });
        let patched = budgets
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("patching PodDisruptionBudget {name}"))?;
        let generation = patched.metadata.generation.unwrap_or_default();
        eventually(
            &format!("PodDisruptionBudget {name} generation {generation} to be observed"),
            WAIT,
            POLL,
            || async {
                let budget = budgets.get(name).await?;
                let observed = budget
                    .status
                    .and_then(|s| s.observed_generation)
                    .unwrap_or_default();
                Ok((observed >= generation).then_some(()))
            },
        )
        .await
    }

    /// The status of every PodDisruptionBudget of the namespace, one line each, for failure
    /// messages: healthy/desired/expected pods, disruptions allowed, and the pods the eviction
    /// API recorded as being disrupted (`disruptedPods`, keyed by pod name).
    pub async fn budgets_summary(&self) -> String {
        let budgets: Api<PodDisruptionBudget> =
            Api::namespaced(self.client.clone(), &self.namespace);
        match budgets.list(&ListParams::default()).await {
            Ok(list) => list
                .items
                .iter()
                .map(|budget| {
                    let status = budget.status.clone().unwrap_or_default();
                    format!(
                        "{}: healthy {:?}/{:?} (expected {:?}), allowed {:?}, disruptedPods {:?}",
                        budget.metadata.name.as_deref().unwrap_or_default(),
                        status.current_healthy,
                        status.desired_healthy,
                        status.expected_pods,
                        status.disruptions_allowed,
                        status.disrupted_pods.unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
            Err(error) => format!("(listing PodDisruptionBudgets failed: {error})"),
        }
    }

    /// The namespace's pods.
    pub async fn pods(&self) -> Result<Vec<Pod>> {
        Ok(self.pods_api().list(&ListParams::default()).await?.items)
    }

    /// The namespace's pods bound to `node`.
    pub async fn pods_on(&self, node: &str) -> Result<Vec<Pod>> {
        let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
        Ok(self.pods_api().list(&params).await?.items)
    }

    /// Waits up to `timeout` until `done` holds for the namespace's pods; returns them. The
    /// error names `what`.
    pub async fn wait_pods(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&[Pod]) -> bool,
    ) -> Result<Vec<Pod>> {
        eventually(what, timeout, POLL, || async {
            let pods = self.pods().await?;
            Ok(done(&pods).then_some(pods))
        })
        .await
    }

    /// Waits until exactly `count` pods labelled `app=<app>` exist, all Running and none being
    /// deleted, on `node` when given; returns them sorted by name.
    pub async fn wait_app_running(
        &self,
        app: &str,
        count: usize,
        node: Option<&str>,
        timeout: Duration,
    ) -> Result<Vec<Pod>> {
        let pods = self.pods_api();
        let params = ListParams::default().labels(&format!("app={app}"));
        let place = node.map(|n| format!(" on {n}")).unwrap_or_default();
        eventually(
            &format!("{count} pods of {app} Running{place}"),
            timeout,
            POLL,
            || async {
                let mut listed = pods.list(&params).await?.items;
                let all_there = listed.len() == count
                    && listed.iter().all(|pod| {
                        is_running(pod)
                            && pod.metadata.deletion_timestamp.is_none()
                            && node.is_none_or(|n| node_of(pod) == Some(n))
                    });
                listed.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
                Ok(all_there.then_some(listed))
            },
        )
        .await
    }

    /// Waits until the namespace holds exactly `count` pods, all Running on `node` and none
    /// being deleted.
    pub async fn wait_all_running_on(
        &self,
        node: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<Pod>> {
        eventually(
            &format!(
                "all {count} pods of namespace {} Running on {node}",
                self.namespace
            ),
            timeout,
            POLL,
            || async {
                let pods = self.pods().await?;
                let done = pods.len() == count
                    && pods.iter().all(|pod| {
                        is_running(pod)
                            && pod.metadata.deletion_timestamp.is_none()
                            && node_of(pod) == Some(node)
                    });
                Ok(done.then_some(pods))
            },
        )
        .await
    }

    /// Deletes a pod (as `kubectl delete pod`, which ignores PodDisruptionBudgets).
    pub async fn delete_pod(&self, pod: &str) -> Result<()> {
        self.pods_api()
            .delete(pod, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting pod {pod}"))?;
        Ok(())
    }

    /// Asks the eviction API to evict a pod (as `kubectl drain` does).
    pub async fn evict(&self, pod: &str) -> Result<Eviction> {
        evict(&self.client, &self.namespace, pod).await
    }

    /// Evicts a pod, retrying every `interval` while a PodDisruptionBudget refuses (429), for
    /// up to `timeout`; returns how long it was refused and how many times.
    pub async fn evict_when_allowed(
        &self,
        pod: &str,
        timeout: Duration,
        interval: Duration,
    ) -> Result<(Duration, u32)> {
        let started = tokio::time::Instant::now();
        let mut refusals = 0;
        loop {
            match self.evict(pod).await? {
                Eviction::Evicted => return Ok((started.elapsed(), refusals)),
                Eviction::Gone => bail!("evicting pod {pod}: it does not exist"),
                Eviction::Blocked(message) => {
                    refusals += 1;
                    if started.elapsed() >= timeout {
                        bail!(
                            "evicting pod {pod}: refused {refusals} times in {timeout:?}: {message}; budgets: {}",
                            self.budgets_summary().await
                        );
                    }
                }
            }
            tokio::time::sleep(interval).await;
        }
    }

    /// Removes everything: the namespace (its pods, so that the attach-detach controller detaches
    /// their volumes), then — once their VolumeAttachments are gone, or after deleting those left
    /// after a minute — the PersistentVolumes and the disks. Reports problems on stderr and never
    /// fails; call it before deleting the machines the pods ran on.
    pub async fn clean_up(&self) {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        if let Err(error) = namespaces
            .delete(&self.namespace, &DeleteParams::default())
            .await
        {
            eprintln!("cleanup: deleting namespace {}: {error}", self.namespace);
        }
        let names: Vec<String> = self.volumes.iter().map(|v| v.name.clone()).collect();
        if !names.is_empty() {
            self.remove_attachments(&names).await;
        }
        let persistent_volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        for name in &names {
            match persistent_volumes
                .delete(name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => eprintln!("cleanup: deleting PersistentVolume {name}: {error}"),
            }
        }
        for name in &names {
            if let Err(error) = delete_disk(&self.arm, name).await {
                eprintln!("cleanup: deleting disk {name}: {error:#}");
            }
        }
        for name in &self.shared {
            match persistent_volumes
                .delete(name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => eprintln!("cleanup: deleting PersistentVolume {name}: {error}"),
            }
        }
    }

    /// Waits for the VolumeAttachments of `volumes` to go; deletes those still there after a
    /// minute (the attacher then detaches their disks) and waits again.
    async fn remove_attachments(&self, volumes: &[String]) {
        let attachments: Api<VolumeAttachment> = Api::all(self.client.clone());
        let remaining = || async {
            let all = attachments.list(&ListParams::default()).await?.items;
            Ok::<_, anyhow::Error>(
                all.into_iter()
                    .filter(|va| {
                        va.spec
                            .source
                            .persistent_volume_name
                            .as_ref()
                            .is_some_and(|pv| volumes.contains(pv))
                    })
                    .collect::<Vec<_>>(),
            )
        };
        let gone = eventually(
            "the test's VolumeAttachments to be detached and gone",
            Duration::from_secs(60),
            Duration::from_millis(500),
            || async { Ok(remaining().await?.is_empty().then_some(())) },
        )
        .await;
        if gone.is_ok() {
            return;
        }
        let left = remaining().await.unwrap_or_default();
        for attachment in &left {
            let name = attachment.metadata.name.clone().unwrap_or_default();
            eprintln!(
                "cleanup: VolumeAttachment {name} ({:?} on {}) is still there after a minute; deleting it",
                attachment.spec.source.persistent_volume_name, attachment.spec.node_name
            );
            if let Err(error) = attachments.delete(&name, &DeleteParams::default()).await {
                eprintln!("cleanup: deleting VolumeAttachment {name}: {error}");
            }
        }
        if let Err(error) = eventually(
            "the deleted VolumeAttachments to go",
            Duration::from_secs(30),
            Duration::from_millis(500),
            || async { Ok(remaining().await?.is_empty().then_some(())) },
        )
        .await
        {
            eprintln!("cleanup: {error}");
        }
    }
}

/// Creates (or finds) the CSIDriver object of [`CSI_DRIVER`] as AKS has it. Cluster-scoped and
/// shared by every test; creating it when it exists is a quiet success.
pub async fn ensure_csi_driver(client: &kube::Client) -> Result<()> {
    let driver: CSIDriver = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": { "name": CSI_DRIVER },
        "spec": { "attachRequired": true, "podInfoOnMount": false, "fsGroupPolicy": "File" },
    }))?;
    create_if_absent(&Api::<CSIDriver>::all(client.clone()), &driver, CSI_DRIVER).await
}

/// Creates (or finds) the CSIDriver object of [`FILE_CSI_DRIVER`] as AKS has it:
/// `attachRequired: false`. Cluster-scoped and shared by every test; creating it when it exists
/// is a quiet success, and one that says otherwise is an error (its `attachRequired` cannot
/// change).
pub async fn ensure_file_csi_driver(client: &kube::Client) -> Result<()> {
    let api = Api::<CSIDriver>::all(client.clone());
    let driver: CSIDriver = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": { "name": FILE_CSI_DRIVER },
        "spec": { "attachRequired": false, "podInfoOnMount": true, "fsGroupPolicy": "ReadWriteOnceWithFSType" },
    }))?;
    create_if_absent(&api, &driver, FILE_CSI_DRIVER).await?;
    let found = api.get(FILE_CSI_DRIVER).await?;
    if found.spec.attach_required != Some(false) {
        bail!(
            "CSIDriver {FILE_CSI_DRIVER} exists with attachRequired {:?}; the file-share tests need false (delete it)",
            found.spec.attach_required
        );
    }
    Ok(())
}

/// Creates (or finds) the PriorityClass `nodewright-e2e-<value>` and returns its name.
/// Cluster-scoped and shared by every test (a PriorityClass's value cannot change, hence the
/// value in the name).
pub async fn ensure_priority_class(client: &kube::Client, value: i32) -> Result<String> {
    let name = format!("nodewright-e2e-{value}");
    let class: PriorityClass = serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": { "name": name, "labels": { TEST_LABEL.0: TEST_LABEL.1 } },
        "value": value,
        "globalDefault": false,
        "description": "nodewright end-to-end tests",
    }))?;
    create_if_absent(&Api::<PriorityClass>::all(client.clone()), &class, &name).await?;
    Ok(name)
}

async fn create_if_absent<K>(api: &Api<K>, object: &K, name: &str) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error).with_context(|| format!("creating {name}")),
    }
}

/// Creates an empty managed disk in the sandbox and waits for its operation, tagged as the
/// Azure Disk CSI driver tags the disks it provisions (never with nodewright's ownership tags);
/// returns its ARM id. Retries what ARM says is retryable.
pub async fn create_csi_disk(
    arm: &ArmClient,
    location: &str,
    name: &str,
    size_gb: i64,
    claim: &str,
    namespace: &str,
) -> Result<String> {
    let disk: Disk = serde_json::from_value(json!({
        "location": location,
        "sku": { "name": "Premium_LRS" },
        "tags": {
            "k8s-azure-created-by": "kubernetes-azure-dd",
            "kubernetes.io-created-for-pv-name": name,
            "kubernetes.io-created-for-pvc-name": claim,
            "kubernetes.io-created-for-pvc-namespace": namespace,
        },
        "properties": { "creationData": { "createOption": "Empty" }, "diskSizeGB": size_gb },
    }))?;
    let mut attempts = 0;
    loop {
        attempts += 1;
        match arm.put_disk(name, &disk).await {
            Ok(submitted) => {
                if let Some(operation) = submitted.operation {
                    arm.wait(&operation, OperationKind::Disk, ARM_WAIT).await?;
                }
                break;
            }
            Err(error)
                if attempts < 5
                    && error.disposition() == nodewright_model::arm::Disposition::Retryable =>
            {
                let delay = error.retry_after().unwrap_or(Duration::from_secs(1));
                tokio::time::sleep(delay.min(Duration::from_secs(5))).await;
            }
            Err(error) => return Err(error).with_context(|| format!("creating disk {name}")),
        }
    }
    let created = arm.get_disk(name).await?;
    created.id.with_context(|| format!("disk {name} has no id"))
}

/// Deletes a disk, retrying for a minute while it is still attached (`OperationNotAllowed`)
/// or ARM answers something retryable; a missing disk is a success.
pub async fn delete_disk(arm: &ArmClient, name: &str) -> Result<()> {
    eventually(
        &format!("disk {name} to be deleted"),
        ARM_WAIT,
        Duration::from_millis(500),
        || async {
            match arm.delete_disk(name).await {
                Ok(Deletion::Started(operation)) => {
                    arm.wait(&operation, OperationKind::Disk, ARM_WAIT).await?;
                    Ok(Some(()))
                }
                Ok(Deletion::Deleted | Deletion::AlreadyGone) => Ok(Some(())),
                Err(_) => Ok(None),
            }
        },
    )
    .await
}

/// The name of the VM a disk is attached to (the last segment of `managedBy`, lower-cased), or
/// `None` when it is not attached.
pub async fn disk_managed_by(arm: &ArmClient, disk: &str) -> Result<Option<String>> {
    Ok(arm.get_disk(disk).await?.managed_by().map(vm_name_of))
}

/// The lower-cased last segment of an ARM id: a VM's name from its id.
pub fn vm_name_of(id: &str) -> String {
    id.rsplit('/').next().unwrap_or(id).to_lowercase()
}

/// Marks a node unschedulable (`kubectl cordon`) or schedulable again (`kubectl uncordon`).
pub async fn set_unschedulable(
    client: &kube::Client,
    node: &str,
    unschedulable: bool,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({ "spec": { "unschedulable": unschedulable } });
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("setting unschedulable={unschedulable} on node {node}"))?;
    Ok(())
}

/// Evicts a pod through the eviction API (`kubectl drain`'s call).
pub async fn evict(client: &kube::Client, namespace: &str, pod: &str) -> Result<Eviction> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    match pods.evict(pod, &EvictParams::default()).await {
        Ok(_) => Ok(Eviction::Evicted),
        Err(kube::Error::Api(status)) if status.code == 429 => {
            Ok(Eviction::Blocked(status.message.clone()))
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Eviction::Gone),
        Err(error) => Err(error).with_context(|| format!("evicting pod {namespace}/{pod}")),
    }
}

/// Every pod bound to `node`, in all namespaces.
pub async fn pods_on_node(client: &kube::Client, node: &str) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::all(client.clone());
    let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    Ok(pods.list(&params).await?.items)
}

/// The VolumeAttachments of the PersistentVolume `volume`, on any node.
pub async fn attachments_of(client: &kube::Client, volume: &str) -> Result<Vec<VolumeAttachment>> {
    let attachments: Api<VolumeAttachment> = Api::all(client.clone());
    let all = attachments.list(&ListParams::default()).await?.items;
    Ok(all
        .into_iter()
        .filter(|va| va.spec.source.persistent_volume_name.as_deref() == Some(volume))
        .collect())
}

/// Waits until the VolumeAttachment of `volume` on `node` reports `attached: true`.
pub async fn wait_attached(
    client: &kube::Client,
    volume: &str,
    node: &str,
    timeout: Duration,
) -> Result<VolumeAttachment> {
    eventually(
        &format!("the VolumeAttachment of {volume} on {node} to be attached"),
        timeout,
        POLL,
        || async {
            let found = attachments_of(client, volume).await?;
            Ok(found
                .into_iter()
                .find(|va| va.spec.node_name == node && is_attached(va)))
        },
    )
    .await
}

/// Whether a VolumeAttachment's `status.attached` is true.
pub fn is_attached(attachment: &VolumeAttachment) -> bool {
    attachment.status.as_ref().is_some_and(|s| s.attached)
}

/// Whether a pod's phase is `Running`.
pub fn is_running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// The node a pod is bound to.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

/// Fails unless every pod in `pods` is on `node`, naming those that are not.
pub fn ensure_all_on(pods: &[Pod], node: &str) -> Result<()> {
    let elsewhere: Vec<String> = pods
        .iter()
        .filter(|pod| node_of(pod) != Some(node))
        .map(|pod| format!("{:?} on {:?}", pod.metadata.name, node_of(pod)))
        .collect();
    if !elsewhere.is_empty() {
        bail!("pods not on {node}: {elsewhere:?}");
    }
    Ok(())
}
