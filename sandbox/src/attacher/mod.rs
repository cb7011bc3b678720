//! The disk attacher: plays the CSI external-attacher sidecar and the Azure Disk CSI controller
//! for VolumeAttachments whose `spec.attacher` is the sandbox's driver name, backed by the
//! emulator's disk state.
//!
//! # Expected Flow
//!
//! 1. A VolumeAttachment appears (the attach-detach controller creates one when a pod using a CSI
//!    volume is scheduled on a Node). The attacher resolves the disk id (the PersistentVolume's
//!    `spec.csi.volumeHandle`, or the inline volume spec's) and the VM id (the Node's
//!    `spec.providerID` without `azure://`).
//! 2. It adds the finalizer `external-attacher/<driver with . → ->` together with two sandbox-only
//!    annotations recording those ids ([`DISK_ID_ANNOTATION`], [`VM_ID_ANNOTATION`]), then asks the
//!    emulator to attach the disk, which takes the profile's attach latency.
//! 3. Only once the disk is attached does it set `status.attached = true` (clearing
//!    `attachError`).
//! 4. When the VolumeAttachment is deleted, it detaches the disk, sets `status.attached = false`
//!    and removes the finalizer, so the object goes.
//!
//! # Guarantees
//!
//! - `status.attached` is `true` only after the emulator reported the disk attached to that VM.
//! - A disk attached to another VM is not attached a second time: the attach fails with a
//!   Multi-Attach style `attachError` naming the VM that holds the disk, and is retried after a
//!   doubling delay until the other attachment has been detached.
//! - Each VolumeAttachment is reconciled by its own task, so a slow or hanging detach holds back
//!   only its own object. Calls to the emulator give up after
//!   [`AttacherSettings::operation_timeout`] with a `DeadlineExceeded` error, and are retried.
//! - A detach whose VM or disk no longer exists, or whose Node is gone without a recorded VM id,
//!   counts as done: in Azure, deleting a VM releases its data disks.
//! - A detach that hangs (a `hang_detach` fault rule) ends as soon as the disk is no longer
//!   attached to the VM, e.g. once it was force-detached through ARM ([`Compute::detach_disk`]
//!   re-checks the disk on every change), and the VolumeAttachment loses its finalizer then.
//!
//! # Caveats
//!
//! - Unlike the real external-attacher, no finalizer is put on the PersistentVolume; the disk id
//!   annotation lets a detach proceed when the PersistentVolume was deleted first.
//! - `status.attachmentMetadata` is not set: [`Compute`] does not report the LUN.
//! - Updates are merge patches; finalizer changes carry the `resourceVersion`, so a concurrent
//!   change makes them fail with 409 and the object is reconciled again.

mod decide;
mod error;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::json;

pub use decide::{
    AttachmentStep, DISK_ID_ANNOTATION, VM_ID_ANNOTATION, attach_error_message, decide_attachment,
    detach_error_message, finalizer_name, retry_delay, vm_id_from_provider_id, volume_handle,
};
pub use error::{Error, Result};

use crate::compute::{Compute, ComputeError};
use crate::joiner::error_chain;

/// How the disk attacher behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttacherSettings {
    /// The CSI driver name whose VolumeAttachments the attacher handles. Default
    /// `disk.csi.azure.com`.
    pub driver_name: String,
    /// The delay before the first retry of a failed attach or detach; it doubles on every further
    /// failure. Default 500 ms.
    pub retry_initial: Duration,
    /// The longest delay between retries. Default 10 s.
    pub retry_max: Duration,
    /// How long one attach or detach may take before it counts as failed and is retried (the
    /// `detachError` then reads `context deadline exceeded`). Default 120 s.
    pub operation_timeout: Duration,
}

impl Default for AttacherSettings {
    fn default() -> Self {
        Self {
            driver_name: "disk.csi.azure.com".to_owned(),
            retry_initial: Duration::from_millis(500),
            retry_max: Duration::from_secs(10),
            operation_timeout: Duration::from_secs(120),
        }
    }
}

/// Runs the disk attacher until the returned future is dropped (which cancels the attaches and
/// detaches in flight).
pub fn run<C: Compute>(
    client: kube::Client,
    compute: Arc<C>,
    settings: AttacherSettings,
) -> impl Future<Output = ()> + Send + 'static {
    let attachments: Api<VolumeAttachment> = Api::all(client.clone());
    let context = Arc::new(DiskAttacher {
        attachments: attachments.clone(),
        volumes: Api::all(client.clone()),
        nodes: Api::all(client),
        compute,
        settings,
        failures: Mutex::new(HashMap::new()),
    });
    async move {
        tracing::info!(driver = %context.settings.driver_name, "disk attacher started");
        Controller::new(attachments, watcher::Config::default())
            .run(reconcile::<C>, error_policy::<C>, context)
            .for_each(|result| async move {
                if let Err(error) = result {
                    tracing::debug!(error = %error_chain(&error), "volume attachment reconcile");
                }
            })
            .await;
    }
}

/// The attacher's clients, the emulator, the settings and the failure count of each attachment.
struct DiskAttacher<C> {
    attachments: Api<VolumeAttachment>,
    volumes: Api<PersistentVolume>,
    nodes: Api<Node>,
    compute: Arc<C>,
    settings: AttacherSettings,
    failures: Mutex<HashMap<String, u32>>,
}

/// Where a disk is (to be) attached.
struct Target {
    disk: String,
    vm: String,
}

async fn reconcile<C: Compute>(
    attachment: Arc<VolumeAttachment>,
    attacher: Arc<DiskAttacher<C>>,
) -> Result<Action> {
    let step = decide_attachment(&attachment, &attacher.settings.driver_name);
    match step {
        AttachmentStep::Ignore => {}
        AttachmentStep::Attach { add_finalizer } => {
            attacher.attach(&attachment, add_finalizer).await?;
        }
        AttachmentStep::Detach => attacher.detach(&attachment).await?,
    }
    attacher.forget_failures(&attachment.name_any());
    Ok(Action::await_change())
}

fn error_policy<C: Compute>(
    attachment: Arc<VolumeAttachment>,
    error: &Error,
    attacher: Arc<DiskAttacher<C>>,
) -> Action {
    let name = attachment.name_any();
    let failures = {
        let mut failures = attacher
            .failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let count = failures.entry(name.clone()).or_insert(0);
        *count = count.saturating_add(1);
        *count
    };
    let delay = retry_delay(
        failures,
        attacher.settings.retry_initial,
        attacher.settings.retry_max,
    );
    let chain = error_chain(error);
    if error.is_expected_wait() {
        tracing::debug!(attachment = %name, error = %chain, ?delay, failures, "waiting; retrying");
    } else {
        tracing::warn!(attachment = %name, error = %chain, ?delay, failures, "retrying");
    }
    Action::requeue(delay)
}

impl<C: Compute> DiskAttacher<C> {
    async fn attach(&self, attachment: &VolumeAttachment, add_finalizer: bool) -> Result<()> {
        let name = attachment.name_any();
        let target = Target {
            disk: self.resolve_disk(attachment).await?,
            vm: self
                .resolve_vm(&attachment.spec.node_name)
                .await?
                .ok_or_else(|| Error::ResolveVm {
                    node: attachment.spec.node_name.clone(),
                    reason: "no such node".to_owned(),
                })?,
        };
        if add_finalizer {
            self.add_finalizer(attachment, &target).await?;
        }
        let outcome = tokio::time::timeout(
            self.settings.operation_timeout,
            self.compute.attach_disk(&target.vm, &target.disk),
        )
        .await;
        let failure = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(source)) => Some((
                attach_error_message(&target.disk, &target.vm, &source),
                Error::AttachDisk {
                    disk: target.disk.clone(),
                    vm: target.vm.clone(),
                    source,
                },
            )),
            Err(_) => Some((decide::timeout_message(), self.timed_out("attach", &target))),
        };
        if let Some((message, error)) = failure {
            self.record_error(attachment, "attachError", &message)
                .await?;
            return Err(error);
        }
        let patch = json!({ "status": { "attached": true, "attachError": null } });
        self.write_status(&name, &patch).await?;
        tracing::info!(attachment = %name, disk = %target.disk, vm = %target.vm, "disk attached");
        Ok(())
    }

    async fn detach(&self, attachment: &VolumeAttachment) -> Result<()> {
        let name = attachment.name_any();
        if let Some(target) = self.detach_target(attachment).await? {
            let outcome = tokio::time::timeout(
                self.settings.operation_timeout,
                self.compute.detach_disk(&target.vm, &target.disk),
            )
            .await;
            let failure = match outcome {
                Ok(Ok(()) | Err(ComputeError::VmNotFound(_) | ComputeError::DiskNotFound(_))) => {
                    None
                }
                Ok(Err(source)) => Some((
                    detach_error_message(&target.disk, &target.vm, &source),
                    Error::DetachDisk {
                        disk: target.disk.clone(),
                        vm: target.vm.clone(),
                        source,
                    },
                )),
                Err(_) => Some((decide::timeout_message(), self.timed_out("detach", &target))),
            };
            if let Some((message, error)) = failure {
                self.record_error(attachment, "detachError", &message)
                    .await?;
                return Err(error);
            }
            tracing::info!(attachment = %name, disk = %target.disk, vm = %target.vm, "disk detached");
        } else {
            tracing::info!(attachment = %name, "node and VM gone; disk counts as detached");
        }
        let patch = json!({ "status": { "attached": false, "detachError": null } });
        let written = self.write_status(&name, &patch).await?;
        // The status write changed the resourceVersion: the finalizer patch carries the new one
        // (the old one would always conflict and cost a retry).
        self.remove_finalizer(&written).await
    }

    /// The disk and VM to detach, from the recorded annotations or else resolved again; `None`
    /// when the VM cannot be found (the Node is gone), which counts as detached.
    async fn detach_target(&self, attachment: &VolumeAttachment) -> Result<Option<Target>> {
        let annotations = attachment.annotations();
        let vm = match annotations.get(VM_ID_ANNOTATION) {
            Some(vm) => Some(vm.clone()),
            None => self.resolve_vm(&attachment.spec.node_name).await?,
        };
        let Some(vm) = vm else {
            return Ok(None);
        };
        let disk = match annotations.get(DISK_ID_ANNOTATION) {
            Some(disk) => disk.clone(),
            None => self.resolve_disk(attachment).await?,
        };
        Ok(Some(Target { disk, vm }))
    }

    async fn resolve_disk(&self, attachment: &VolumeAttachment) -> Result<String> {
        let source = &attachment.spec.source;
        if let Some(volume) = &source.persistent_volume_name {
            let persistent_volume = self.volumes.get_opt(volume).await.map_err(|source| {
                Error::GetPersistentVolume {
                    volume: volume.clone(),
                    source,
                }
            })?;
            let persistent_volume = persistent_volume.ok_or_else(|| Error::ResolveDisk {
                reason: format!("persistent volume {volume} not found"),
            })?;
            return persistent_volume
                .spec
                .as_ref()
                .and_then(volume_handle)
                .map(str::to_owned)
                .ok_or_else(|| Error::ResolveDisk {
                    reason: format!("persistent volume {volume} has no CSI volume handle"),
                });
        }
        source
            .inline_volume_spec
            .as_ref()
            .and_then(volume_handle)
            .map(str::to_owned)
            .ok_or_else(|| Error::ResolveDisk {
                reason: "the source has neither a persistent volume nor an inline CSI volume"
                    .to_owned(),
            })
    }

    /// The VM id of a Node, or `None` when the Node does not exist.
    async fn resolve_vm(&self, node: &str) -> Result<Option<String>> {
        let found = self
            .nodes
            .get_opt(node)
            .await
            .map_err(|source| Error::GetNode {
                node: node.to_owned(),
                source,
            })?;
        let Some(found) = found else {
            return Ok(None);
        };
        let provider_id = found
            .spec
            .as_ref()
            .and_then(|spec| spec.provider_id.as_deref())
            .unwrap_or_default();
        vm_id_from_provider_id(provider_id)
            .map(Some)
            .ok_or_else(|| Error::ResolveVm {
                node: node.to_owned(),
                reason: if provider_id.is_empty() {
                    "it has no providerID".to_owned()
                } else {
                    format!("providerID \"{provider_id}\" is not an Azure VM")
                },
            })
    }

    async fn add_finalizer(&self, attachment: &VolumeAttachment, target: &Target) -> Result<()> {
        let finalizer = finalizer_name(&self.settings.driver_name);
        let mut finalizers = attachment.finalizers().to_vec();
        if !finalizers.contains(&finalizer) {
            finalizers.push(finalizer);
        }
        let annotations = BTreeMap::from([
            (DISK_ID_ANNOTATION, target.disk.as_str()),
            (VM_ID_ANNOTATION, target.vm.as_str()),
        ]);
        let patch = json!({ "metadata": {
            "finalizers": finalizers,
            "annotations": annotations,
            "resourceVersion": attachment.resource_version(),
        } });
        let name = attachment.name_any();
        self.attachments
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| Error::AddFinalizer {
                attachment: name.clone(),
                source,
            })?;
        Ok(())
    }

    async fn remove_finalizer(&self, attachment: &VolumeAttachment) -> Result<()> {
        let finalizer = finalizer_name(&self.settings.driver_name);
        let finalizers: Vec<&String> = attachment
            .finalizers()
            .iter()
            .filter(|present| **present != finalizer)
            .collect();
        let patch = json!({ "metadata": {
            "finalizers": finalizers,
            "resourceVersion": attachment.resource_version(),
        } });
        let name = attachment.name_any();
        match self
            .attachments
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(source) => Err(Error::RemoveFinalizer {
                attachment: name,
                source,
            }),
        }
    }

    /// Writes `attachError` or `detachError`, unless it already holds this message (so a retried
    /// failure does not retrigger the watch and defeat the retry delay).
    async fn record_error(
        &self,
        attachment: &VolumeAttachment,
        field: &str,
        message: &str,
    ) -> Result<()> {
        let status = attachment.status.as_ref();
        let current = match field {
            "attachError" => status.and_then(|status| status.attach_error.as_ref()),
            _ => status.and_then(|status| status.detach_error.as_ref()),
        };
        if current.and_then(|error| error.message.as_deref()) == Some(message) {
            return Ok(());
        }
        let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let patch = json!({ "status": { field: { "time": time, "message": message } } });
        self.write_status(&attachment.name_any(), &patch).await?;
        Ok(())
    }

    /// Merge-patches the status; returns the object as written.
    async fn write_status(
        &self,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<VolumeAttachment> {
        match self
            .attachments
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(written) => Ok(written),
            Err(source) => Err(Error::WriteStatus {
                attachment: name.to_owned(),
                source,
            }),
        }
    }

    fn timed_out(&self, operation: &'static str, target: &Target) -> Error {
        Error::TimedOut {
            operation,
            disk: target.disk.clone(),
            vm: target.vm.clone(),
            timeout: self.settings.operation_timeout,
        }
    }

    fn forget_failures(&self, attachment: &str) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(attachment);
    }
}
