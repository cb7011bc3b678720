//! What to do with a VolumeAttachment, and the small pure pieces around it: the finalizer name,
//! the VM id behind a providerID, CSI-style error messages and the retry delay.

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeSpec;
use k8s_openapi::api::storage::v1::VolumeAttachment;

use crate::compute::ComputeError;

/// The annotation recording the disk id the attacher resolved, so a detach still knows the disk
/// when the PersistentVolume is gone. Sandbox-only: nothing outside the sandbox may rely on it.
pub const DISK_ID_ANNOTATION: &str = "attacher.sandbox.nodewright.io/disk-id";
/// The annotation recording the VM id the attacher resolved, so a detach still reaches the VM when
/// the Node is gone (the Azure Disk CSI driver finds the VM by node name). Sandbox-only.
pub const VM_ID_ANNOTATION: &str = "attacher.sandbox.nodewright.io/vm-id";

/// The next step for one VolumeAttachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachmentStep {
    /// Another driver's attachment, an attached one, or a deleted one we hold no finalizer on.
    Ignore,
    /// Attach the disk, adding the finalizer first when it is missing.
    Attach {
        /// Whether the finalizer (and the resolved ids) must be added before attaching.
        add_finalizer: bool,
    },
    /// The attachment is being deleted and holds our finalizer: detach, then let it go.
    Detach,
}

/// Decides the next step for a VolumeAttachment handled by `driver_name`, as the CSI
/// external-attacher does.
pub fn decide_attachment(attachment: &VolumeAttachment, driver_name: &str) -> AttachmentStep {
    if attachment.spec.attacher != driver_name {
        return AttachmentStep::Ignore;
    }
    let finalizer = finalizer_name(driver_name);
    let has_finalizer = attachment
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|finalizers| finalizers.contains(&finalizer));
    let attached = attachment
        .status
        .as_ref()
        .is_some_and(|status| status.attached);
    match (
        attachment.metadata.deletion_timestamp.is_some(),
        has_finalizer,
    ) {
        (true, true) => AttachmentStep::Detach,
        (true, false) => AttachmentStep::Ignore,
        (false, false) => AttachmentStep::Attach {
            add_finalizer: true,
        },
        (false, true) if attached => AttachmentStep::Ignore,
        (false, true) => AttachmentStep::Attach {
            add_finalizer: false,
        },
    }
}

/// The external-attacher's finalizer: `external-attacher/` + the driver name with `.` → `-`.
pub fn finalizer_name(driver_name: &str) -> String {
    format!("external-attacher/{}", driver_name.replace('.', "-"))
}

/// The VM's ARM id in an Azure Node providerID (`azure://` + id), or `None` for other providers.
pub fn vm_id_from_provider_id(provider_id: &str) -> Option<String> {
    let scheme = "azure://";
    let head = provider_id.get(..scheme.len())?;
    let id = &provider_id[scheme.len()..];
    let looks_like_arm = id
        .get(..15)
        .is_some_and(|start| start.eq_ignore_ascii_case("/subscriptions/"));
    (head.eq_ignore_ascii_case(scheme) && looks_like_arm).then(|| id.to_owned())
}

/// The CSI volume handle (the disk's ARM id) of a PersistentVolume spec.
pub fn volume_handle(spec: &PersistentVolumeSpec) -> Option<&str> {
    spec.csi
        .as_ref()
        .map(|csi| csi.volume_handle.as_str())
        .filter(|handle| !handle.is_empty())
}

/// The VM's name: the last segment of its ARM id.
pub fn vm_name(vm_id: &str) -> &str {
    vm_id.rsplit('/').next().unwrap_or(vm_id)
}

/// `status.attachError.message` as the Azure Disk CSI controller reports a failed attach.
pub fn attach_error_message(disk_id: &str, vm_id: &str, error: &ComputeError) -> String {
    format!(
        "rpc error: code = {} desc = Attach volume {disk_id} to instance {} failed with {error}",
        grpc_code(error),
        vm_name(vm_id)
    )
}

/// `status.detachError.message` as the Azure Disk CSI controller reports a failed detach.
pub fn detach_error_message(disk_id: &str, vm_id: &str, error: &ComputeError) -> String {
    format!(
        "rpc error: code = {} desc = Detach volume {disk_id} from instance {} failed with {error}",
        grpc_code(error),
        vm_name(vm_id)
    )
}

/// The message the external-attacher records when the CSI call outlives its timeout.
pub fn timeout_message() -> String {
    "rpc error: code = DeadlineExceeded desc = context deadline exceeded".to_owned()
}

/// The delay before retry number `failures` (1 for the first retry): doubling from `initial`,
/// capped at `max`.
pub fn retry_delay(failures: u32, initial: Duration, max: Duration) -> Duration {
    let factor = 2u32.saturating_pow(failures.saturating_sub(1));
    initial.saturating_mul(factor).min(max)
}

fn grpc_code(error: &ComputeError) -> &'static str {
    match error {
        ComputeError::VmNotFound(_) | ComputeError::DiskNotFound(_) => "NotFound",
        ComputeError::AttachedElsewhere { .. } | ComputeError::Busy(_) => "Internal",
        ComputeError::Failed { .. } => "Internal",
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::CSIPersistentVolumeSource;
    use k8s_openapi::api::storage::v1::VolumeAttachmentStatus;
    use serde_json::json;

    use super::*;

    const DRIVER: &str = "disk.csi.azure.com";

    fn attachment(
        attacher: &str,
        deleting: bool,
        finalized: bool,
        attached: bool,
    ) -> VolumeAttachment {
        let mut attachment: VolumeAttachment = serde_json::from_value(json!({
            "metadata": { "name": "csi-1" },
            "spec": {
                "attacher": attacher,
                "nodeName": "web-a",
                "source": { "persistentVolumeName": "pv-1" },
            },
        }))
        .unwrap();
        if deleting {
            attachment.metadata.deletion_timestamp =
                serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap();
        }
        if finalized {
            attachment.metadata.finalizers = Some(vec![finalizer_name(DRIVER)]);
        }
        attachment.status = Some(VolumeAttachmentStatus {
            attached,
            ..VolumeAttachmentStatus::default()
        });
        attachment
    }

    #[test]
    fn decides_like_the_external_attacher() {
        use AttachmentStep::*;
        let cases = [
            (
                "another driver's attachment is ignored",
                "other.csi",
                false,
                false,
                false,
                Ignore,
            ),
            (
                "a new attachment gets the finalizer and is attached",
                DRIVER,
                false,
                false,
                false,
                Attach {
                    add_finalizer: true,
                },
            ),
            (
                "a finalized unattached attachment is attached",
                DRIVER,
                false,
                true,
                false,
                Attach {
                    add_finalizer: false,
                },
            ),
            (
                "an attached attachment is left alone",
                DRIVER,
                false,
                true,
                true,
                Ignore,
            ),
            (
                "a deleted attachment with our finalizer is detached",
                DRIVER,
                true,
                true,
                true,
                Detach,
            ),
            (
                "a deleted attachment never attached is still detached",
                DRIVER,
                true,
                true,
                false,
                Detach,
            ),
            (
                "a deleted attachment without our finalizer is ignored",
                DRIVER,
                true,
                false,
                false,
                Ignore,
            ),
        ];
        for (case, attacher, deleting, finalized, attached, expected) in cases {
            let observed = attachment(attacher, deleting, finalized, attached);
            assert_eq!(decide_attachment(&observed, DRIVER), expected, "{case}");
        }
    }

    #[test]
    fn finalizer_replaces_dots_with_dashes() {
        assert_eq!(
            finalizer_name(DRIVER),
            "external-attacher/disk-csi-azure-com"
        );
    }

    #[test]
    fn vm_id_is_the_provider_id_without_the_azure_scheme() {
        let cases = [
            (
                "azure:///subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/a",
                Some(
                    "/subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/a",
                ),
            ),
            ("AZURE:///Subscriptions/s/x", Some("/Subscriptions/s/x")),
            ("kwok://node-a", None),
            ("azure://", None),
            ("", None),
        ];
        for (provider_id, expected) in cases {
            assert_eq!(
                vm_id_from_provider_id(provider_id).as_deref(),
                expected,
                "{provider_id}"
            );
        }
    }

    #[test]
    fn volume_handle_requires_a_csi_source() {
        let mut spec = PersistentVolumeSpec::default();
        assert_eq!(volume_handle(&spec), None);
        spec.csi = Some(CSIPersistentVolumeSource {
            driver: DRIVER.to_owned(),
            volume_handle: "/subscriptions/s/disks/d".to_owned(),
            ..CSIPersistentVolumeSource::default()
        });
        assert_eq!(volume_handle(&spec), Some("/subscriptions/s/disks/d"));
    }

    #[test]
    fn attach_error_names_the_vm_holding_the_disk() {
        let error = ComputeError::AttachedElsewhere {
            disk: "/s/disks/d".to_owned(),
            managed_by: "/s/virtualMachines/web-a".to_owned(),
        };
        let message = attach_error_message("/s/disks/d", "/s/virtualMachines/web-b", &error);
        assert_eq!(
            message,
            "rpc error: code = Internal desc = Attach volume /s/disks/d to instance web-b failed with disk /s/disks/d is attached to /s/virtualMachines/web-a"
        );
    }

    #[test]
    fn retry_delay_doubles_up_to_the_cap() {
        let (initial, max) = (Duration::from_millis(500), Duration::from_secs(10));
        let delays: Vec<u64> = (1..=7)
            .map(|failures| retry_delay(failures, initial, max).as_millis() as u64)
            .collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 8000, 10000, 10000]);
        assert_eq!(retry_delay(u32::MAX, initial, max), max);
    }
}
