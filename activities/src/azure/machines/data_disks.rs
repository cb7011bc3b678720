//! The Azure side of a drain: wait until moved volumes' disks are no longer `managedBy` the
//! drained VM, and, in force mode, force-detach every data disk of the VM.

use std::time::Duration;

use chrono::{DateTime, Utc};
use nodewright_model::ClusterName;
use nodewright_model::arm::poll_schedule::OperationKind;
use serde::{Deserialize, Serialize};
use temporalio_sdk::activities::ActivityContext;

use super::error::MachineError;
use super::wait::{heartbeat, sleep_heartbeating};
use super::{check_owned, is_gone};
use crate::azure::virtual_machines::{AttachDetachDataDisks, DataDiskToDetach, VirtualMachine};
use crate::azure::{ArmClient, OperationHandle, PollClock, Progress};

/// How often disks are read while waiting.
const DISK_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Wait until managed disks are no longer attached to a VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitDisksReleased {
    /// The VM the disks leave (ARM id).
    pub vm_id: String,
    /// The disks (ARM ids).
    pub disk_ids: Vec<String>,
    /// Give up at this instant (RFC 3339, workflow clock).
    pub deadline: chrono::DateTime<chrono::Utc>,
}

/// The disks still attached to the VM (empty: all released).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisksReleased {
    /// Disk ids still `managedBy` the VM at the deadline.
    pub pending: Vec<String>,
}

/// Force-detach every data disk of a machine's VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForceDetachDisks {
    /// The owning cluster: a VM without its tag is not touched.
    pub cluster: ClusterName,
    /// The machine (= VM name).
    pub machine: String,
}

/// How a force detach began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum ForceDetachStarted {
    /// The VM has no data disks.
    NothingAttached,
    /// There is no VM.
    VmAbsent,
    /// Asked ARM to force-detach `disks`; poll `operation` (when ARM gave one).
    Started {
        /// The disks (ARM ids).
        disks: Vec<String>,
        /// The async operation.
        operation: Option<OperationHandle>,
    },
}

/// Wait for a force detach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitForceDetach {
    /// The machine (= VM name).
    pub machine: String,
    /// The operation [`ForceDetachStarted::Started`] returned.
    pub operation: Option<OperationHandle>,
    /// Give up at this instant (RFC 3339, workflow clock).
    pub deadline: chrono::DateTime<chrono::Utc>,
}

/// Polls each disk until none is `managedBy` `vm_id` (a deleted disk counts as released), or
/// the deadline.
pub(super) async fn await_disks_released(
    client: &ArmClient,
    ctx: &ActivityContext,
    input: &AwaitDisksReleased,
) -> Result<DisksReleased, MachineError> {
    let deadline = input.deadline;
    loop {
        heartbeat(ctx).await;
        let mut pending = Vec::new();
        for disk_id in &input.disk_ids {
            match client.get_disk_by_id(disk_id).await {
                Ok(disk) => {
                    if disk
                        .managed_by()
                        .is_some_and(|owner| owner.eq_ignore_ascii_case(&input.vm_id))
                    {
                        pending.push(disk_id.clone());
                    }
                }
                Err(error) if is_gone(&error) => {}
                Err(error) => return Err(error.into()),
            }
        }
        if pending.is_empty() || Utc::now() >= deadline {
            return Ok(DisksReleased { pending });
        }
        sleep_before(deadline).await;
    }
}

/// Reads the VM and asks ARM to force-detach all its data disks (`attachDetachDataDisks` with
/// `detachOption: ForceDetach`).
pub(super) async fn force_detach(
    client: &ArmClient,
    input: &ForceDetachDisks,
) -> Result<ForceDetachStarted, MachineError> {
    let vm = match client.get_vm(&input.machine).await {
        Ok(vm) => vm,
        Err(error) if is_gone(&error) => return Ok(ForceDetachStarted::VmAbsent),
        Err(error) => return Err(error.into()),
    };
    check_owned(
        "VM",
        &input.machine,
        &vm.tags,
        &input.cluster,
        &input.machine,
    )?;
    let disks = data_disk_ids(&vm);
    if disks.is_empty() {
        return Ok(ForceDetachStarted::NothingAttached);
    }
    let change = AttachDetachDataDisks {
        data_disks_to_attach: Vec::new(),
        data_disks_to_detach: disks
            .iter()
            .map(|id| DataDiskToDetach {
                disk_id: id.clone(),
                detach_option: Some("ForceDetach".to_owned()),
            })
            .collect(),
    };
    let submitted = client
        .attach_detach_data_disks(&input.machine, &change)
        .await?;
    Ok(ForceDetachStarted::Started {
        disks,
        operation: submitted.operation,
    })
}

/// Polls the force detach's operation to its end, then reads the VM until it lists no data disk
/// (or is gone), or the deadline; returns the disks still listed.
pub(super) async fn await_force_detach(
    client: &ArmClient,
    ctx: &ActivityContext,
    input: &AwaitForceDetach,
) -> Result<DisksReleased, MachineError> {
    let deadline = input.deadline;
    if let Some(handle) = &input.operation {
        let mut clock = PollClock::new(OperationKind::VmAction, handle);
        loop {
            sleep_heartbeating(ctx, clock.next_delay(), Some(deadline)).await;
            heartbeat(ctx).await;
            match client.poll_once(handle).await {
                Ok(Progress::Succeeded { .. }) => break,
                Ok(running @ Progress::Running { .. }) => {
                    if Utc::now() >= deadline {
                        break;
                    }
                    clock.heard(&running);
                }
                Err(error) if is_gone(&error) => break,
                // A detach that ended `Failed` retryably: what the VM still holds is read below
                // and reported, not polled again from the same finished operation.
                Err(crate::azure::Error::OperationFailed { source, .. })
                    if source.disposition() == nodewright_model::arm::Disposition::Retryable =>
                {
                    break;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
    loop {
        heartbeat(ctx).await;
        let vm = match client.get_vm(&input.machine).await {
            Ok(vm) => vm,
            Err(error) if is_gone(&error) => return Ok(DisksReleased::default()),
            Err(error) => return Err(error.into()),
        };
        let pending = data_disk_ids(&vm);
        if pending.is_empty() || Utc::now() >= deadline {
            return Ok(DisksReleased { pending });
        }
        sleep_before(deadline).await;
    }
}

/// The ARM ids of the managed disks the VM lists as data disks.
fn data_disk_ids(vm: &VirtualMachine) -> Vec<String> {
    vm.properties
        .storage_profile
        .as_ref()
        .and_then(|profile| profile.data_disks.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|disk| disk.managed_disk.as_ref().and_then(|m| m.id.clone()))
        .collect()
}

async fn sleep_before(deadline: DateTime<Utc>) {
    let left = (deadline - Utc::now()).to_std().unwrap_or(Duration::ZERO);
    tokio::time::sleep(DISK_POLL_INTERVAL.min(left)).await;
}
