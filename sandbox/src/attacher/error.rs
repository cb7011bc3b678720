//! Errors of the disk attacher.

use std::time::Duration;

use crate::compute::ComputeError;

/// A step of the disk attacher that failed.
///
/// Every variant is retryable: the attacher records it in the VolumeAttachment's `attachError` or
/// `detachError` where it concerns the disk, and reconciles the object again after a doubling
/// delay. [`ComputeError::AttachedElsewhere`], [`ComputeError::Busy`] and an
/// `AttachDiskWhileBeingDetached` failure are the expected waits (Multi-Attach, a VM operation in
/// progress, a detach from the other VM in progress).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the VolumeAttachment's PersistentVolume failed.
    #[error("reading persistent volume {volume}")]
    GetPersistentVolume {
        /// The PersistentVolume's name.
        volume: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// The VolumeAttachment's source names no CSI volume handle (no such PersistentVolume, not a
    /// CSI volume, or neither `persistentVolumeName` nor `inlineVolumeSpec`).
    #[error("finding the disk of the attachment: {reason}")]
    ResolveDisk {
        /// What is missing.
        reason: String,
    },
    /// Reading the VolumeAttachment's Node failed.
    #[error("reading node {node}")]
    GetNode {
        /// The Node's name.
        node: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// The Node is missing or has no Azure providerID, so there is no VM to attach to.
    #[error("finding the virtual machine of node {node}: {reason}")]
    ResolveVm {
        /// The Node's name.
        node: String,
        /// What is missing.
        reason: String,
    },
    /// Adding the finalizer (and the resolved ids) to the VolumeAttachment failed.
    #[error("adding the finalizer to volume attachment {attachment}")]
    AddFinalizer {
        /// The VolumeAttachment's name.
        attachment: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// Removing the finalizer from the VolumeAttachment failed.
    #[error("removing the finalizer from volume attachment {attachment}")]
    RemoveFinalizer {
        /// The VolumeAttachment's name.
        attachment: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// Writing the VolumeAttachment's status failed.
    #[error("writing the status of volume attachment {attachment}")]
    WriteStatus {
        /// The VolumeAttachment's name.
        attachment: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// The emulator refused or failed the attach.
    #[error("attaching disk {disk} to {vm}")]
    AttachDisk {
        /// The disk's id.
        disk: String,
        /// The VM's id.
        vm: String,
        /// The emulator's answer.
        #[source]
        source: ComputeError,
    },
    /// The emulator refused or failed the detach.
    #[error("detaching disk {disk} from {vm}")]
    DetachDisk {
        /// The disk's id.
        disk: String,
        /// The VM's id.
        vm: String,
        /// The emulator's answer.
        #[source]
        source: ComputeError,
    },
    /// The attach or detach did not finish within the operation timeout.
    #[error(
        "{operation} of disk {disk} on {vm} did not finish within {}",
        humantime::format_duration(*timeout)
    )]
    TimedOut {
        /// `attach` or `detach`.
        operation: &'static str,
        /// The disk's id.
        disk: String,
        /// The VM's id.
        vm: String,
        /// The timeout.
        timeout: Duration,
    },
}

impl Error {
    /// Whether this is an expected wait (Multi-Attach, VM busy, the disk still being detached
    /// from another VM) rather than a fault worth a warning.
    pub fn is_expected_wait(&self) -> bool {
        match self {
            Self::AttachDisk { source, .. } => match source {
                ComputeError::AttachedElsewhere { .. } | ComputeError::Busy(_) => true,
                ComputeError::Failed { code, .. } => code == "AttachDiskWhileBeingDetached",
                ComputeError::VmNotFound(_) | ComputeError::DiskNotFound(_) => false,
            },
            _ => false,
        }
    }
}

/// The disk attacher's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
