//! The bounded, heartbeating waits of the machine activities.

use std::time::Duration;

use chrono::{DateTime, Utc};
use temporalio_sdk::activities::ActivityContext;

use super::error::MachineError;
use super::is_gone;
use super::types::{AwaitDeletion, AwaitVm, VmProvisioned};
use crate::azure::{ArmClient, Error as ArmError, OperationHandle, Progress};

/// How often a VM is polled when ARM gave no operation to poll.
const VM_POLL_INTERVAL: Duration = Duration::from_secs(3);
/// The longest sleep between heartbeats.
const MAX_SLEEP: Duration = Duration::from_secs(10);

/// Waits for the VM's provisioning to end or the deadline.
pub(super) async fn await_vm(
    client: &ArmClient,
    ctx: &ActivityContext,
    input: &AwaitVm,
) -> Result<VmProvisioned, MachineError> {
    let deadline = input.deadline;
    let mut operation = input.operation.clone();
    loop {
        heartbeat(ctx).await;
        let delay = match &operation {
            Some(handle) => match poll(client, handle, &input.machine).await? {
                Some(delay) => delay,
                // The operation ended well: confirm on the VM itself (it also gives the id).
                None => {
                    operation = None;
                    Duration::ZERO
                }
            },
            None => {
                let vm = client.get_vm_with_instance_view(&input.machine).await?;
                match vm.properties.provisioning_state.as_deref() {
                    Some("Succeeded") => {
                        let os_disk = vm
                            .properties
                            .storage_profile
                            .as_ref()
                            .and_then(|s| s.os_disk.as_ref())
                            .and_then(|d| d.name.clone());
                        let vm_id = vm.id.ok_or_else(|| {
                            MachineError::Unexpected(format!("VM {} has no id", input.machine))
                        })?;
                        return Ok(VmProvisioned::Succeeded { vm_id, os_disk });
                    }
                    Some("Failed") => return Err(provisioning_failed_from_vm(&input.machine, &vm)),
                    state => {
                        if Utc::now() >= deadline {
                            return Ok(VmProvisioned::TimedOut {
                                provisioning_state: state.map(str::to_owned),
                            });
                        }
                        VM_POLL_INTERVAL
                    }
                }
            }
        };
        sleep_until_next(delay, deadline).await;
        if Utc::now() >= deadline && operation.is_some() {
            return Ok(VmProvisioned::TimedOut {
                provisioning_state: None,
            });
        }
    }
}

/// One poll of a creation's operation: `Some(delay)` while it runs, `None` once it succeeded.
async fn poll(
    client: &ArmClient,
    handle: &OperationHandle,
    machine: &str,
) -> Result<Option<Duration>, MachineError> {
    match client.poll_once(handle).await {
        Ok(progress @ Progress::Running { .. }) => Ok(progress.delay()),
        Ok(Progress::Succeeded { .. }) => Ok(None),
        Err(ArmError::OperationFailed { source, .. }) => Err(MachineError::ProvisioningFailed {
            machine: machine.to_owned(),
            code: source.code,
            message: source.message,
        }),
        Err(other) => Err(other.into()),
    }
}

/// The failure recorded on a VM whose provisioning state is `Failed`: the instance view's
/// `ProvisioningState/failed/<code>` status when there is one.
fn provisioning_failed_from_vm(
    machine: &str,
    vm: &crate::azure::virtual_machines::VirtualMachine,
) -> MachineError {
    let statuses = vm
        .properties
        .instance_view
        .as_ref()
        .and_then(|view| view.statuses.clone())
        .unwrap_or_default();
    let failed = statuses.iter().find_map(|status| {
        let code = status.code.as_deref()?;
        let reason = code.strip_prefix("ProvisioningState/failed/")?;
        Some((
            reason.to_owned(),
            status.message.clone().unwrap_or_default(),
        ))
    });
    let (code, message) = failed.unwrap_or_else(|| {
        (
            "ProvisioningFailed".to_owned(),
            "the VM's provisioningState is Failed".to_owned(),
        )
    });
    MachineError::ProvisioningFailed {
        machine: machine.to_owned(),
        code,
        message,
    }
}

/// Waits until a VM deletion's operation ends, or the VM answers 404.
pub(super) async fn await_vm_deletion(
    client: &ArmClient,
    ctx: &ActivityContext,
    input: &AwaitDeletion,
) -> Result<(), MachineError> {
    if let Some(handle) = &input.operation {
        loop {
            heartbeat(ctx).await;
            match client.poll_once(handle).await? {
                progress @ Progress::Running { .. } => {
                    let delay = progress.delay().unwrap_or(VM_POLL_INTERVAL);
                    tokio::time::sleep(delay.min(MAX_SLEEP)).await;
                }
                Progress::Succeeded { .. } => break,
            }
        }
    }
    loop {
        heartbeat(ctx).await;
        match client.get_vm(&input.machine).await {
            Err(error) if is_gone(&error) => return Ok(()),
            Err(error) => return Err(error.into()),
            Ok(_) => tokio::time::sleep(VM_POLL_INTERVAL).await,
        }
    }
}

/// Sleeps `delay` (the server's `Retry-After`), but never past the deadline and never longer
/// than [`MAX_SLEEP`] without a heartbeat.
async fn sleep_until_next(delay: Duration, deadline: DateTime<Utc>) {
    let left = (deadline - Utc::now()).to_std().unwrap_or(Duration::ZERO);
    tokio::time::sleep(delay.min(left).min(MAX_SLEEP)).await;
}

/// Records a heartbeat; a failure to record one is not the activity's failure (the next one
/// may pass, and a lost worker is noticed by the heartbeat timeout anyway).
pub(super) async fn heartbeat(ctx: &ActivityContext) {
    crate::lifetime::beat(ctx).await;
}
