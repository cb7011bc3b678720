//! The seam between the ARM emulator and the sandbox's Kubernetes actors.
//!
//! The emulator (`crate::arm`) owns every VM, NIC and disk. The node joiner (`crate::joiner`) and
//! the disk attacher (`crate::attacher`) play the parts that, in Azure, happen *inside* a VM (a
//! kubelet registering its Node) or inside the Azure Disk CSI controller (attaching a managed
//! disk to a VM). They see the emulator only through [`Compute`], so neither depends on how the
//! emulator stores its state, and the emulator does not know Kubernetes exists.
//!
//! Requests made through this trait are not ARM requests: they are not counted by the stats
//! endpoint, but they do take the emulator's configured latencies and faults, and they make the VM
//! busy exactly as the equivalent ARM call would (a client's PUT during a CSI attach gets 409).

use std::collections::BTreeMap;
use std::future::Future;

/// What the guest inside an emulated VM is doing, as a kubelet would experience it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestState {
    /// Provisioning or starting: the guest has not booted yet.
    Booting,
    /// Provisioned, powered on, and the boot delay of the latency profile has passed: a kubelet
    /// would now register its Node and keep heartbeating.
    Running,
    /// Stopped, deallocated, failed or being deleted: no kubelet heartbeats.
    Down,
}

/// One emulated VM as the node joiner needs to see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineView {
    /// The VM's ARM resource id, with the casing it was created with.
    pub id: String,
    /// The VM's resource name.
    pub name: String,
    /// `osProfile.computerName`, or the resource name when absent: the Node's name.
    pub computer_name: String,
    /// Azure region, e.g. `westeurope`.
    pub location: String,
    /// The availability zone (`"1"`, `"2"`, ...) when the VM was created in one.
    pub zone: Option<String>,
    /// `hardwareProfile.vmSize`, e.g. `Standard_D4s_v5`.
    pub vm_size: String,
    /// The VM's Azure tags.
    pub tags: BTreeMap<String, String>,
    /// `osProfile.customData`, base64-decoded (lossy UTF-8), when given.
    pub custom_data: Option<String>,
    /// What the guest is doing.
    pub guest: GuestState,
    /// False when a fault rule says this VM's node never joins the cluster.
    pub joins_cluster: bool,
}

/// Why the emulator refused or failed a [`Compute`] request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComputeError {
    /// No VM with that id exists (retry will not help unless it is created).
    #[error("virtual machine {0} not found")]
    VmNotFound(String),
    /// No managed disk with that id exists.
    #[error("disk {0} not found")]
    DiskNotFound(String),
    /// The disk is attached to another VM; Azure refuses a second attachment (retry later).
    #[error("disk {disk} is attached to {managed_by}")]
    AttachedElsewhere {
        /// The disk's id.
        disk: String,
        /// The id of the VM the disk is attached to.
        managed_by: String,
    },
    /// The VM has another operation in progress (retry later).
    #[error("virtual machine {0} has another operation in progress")]
    Busy(String),
    /// A fault rule or the emulated platform failed the operation with this ARM error.
    #[error("{code}: {message}")]
    Failed {
        /// ARM error code, e.g. `AttachDiskWhileBeingDetached`.
        code: String,
        /// ARM error message.
        message: String,
    },
}

/// The emulator as seen by the node joiner and the disk attacher.
///
/// ARM ids are compared case-insensitively, as Azure does.
pub trait Compute: Send + Sync + 'static {
    /// Every VM that currently exists (deleted VMs are absent).
    fn machines(&self) -> Vec<MachineView>;

    /// The VMs whose guest is [`GuestState::Running`]: the only ones the node joiner registers
    /// Nodes for. The default filters [`Self::machines`]; the emulator builds views for those
    /// VMs only, so a pass stays cheap with thousands of VMs that never booted.
    fn running_machines(&self) -> Vec<MachineView> {
        self.machines()
            .into_iter()
            .filter(|machine| machine.guest == GuestState::Running)
            .collect()
    }

    /// A receiver that changes whenever a VM or disk changes, including when a time-based
    /// transition (a boot delay, an operation's latency) completes. Callers also re-check
    /// periodically, so a missed wake-up only delays them.
    fn changes(&self) -> tokio::sync::watch::Receiver<u64>;

    /// The id of the VM the disk is attached to (`managedBy`), or `None` when unattached.
    fn disk_managed_by(&self, disk_id: &str) -> Result<Option<String>, ComputeError>;

    /// Attaches the disk to the VM as a data disk (first free LUN, `deleteOption: Detach`) and
    /// resolves once the disk is `Attached` with `managedBy` = the VM, after the profile's attach
    /// latency. Succeeds at once when it is already attached to this VM.
    fn attach_disk(
        &self,
        vm_id: &str,
        disk_id: &str,
    ) -> impl Future<Output = Result<(), ComputeError>> + Send;

    /// Detaches the disk from the VM and resolves once it is `Unattached`, after the profile's
    /// detach latency (or, while a "detach hangs" fault rule applies, not until the disk is
    /// released some other way, e.g. force-detached through ARM). Resolves as soon as the disk is
    /// no longer attached to this VM, and at once when it is not attached to it to begin with.
    fn detach_disk(
        &self,
        vm_id: &str,
        disk_id: &str,
    ) -> impl Future<Output = Result<(), ComputeError>> + Send;
}
