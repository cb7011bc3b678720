//! The bounded, heartbeating waits of the machine activities.

use std::time::Duration;

use chrono::{DateTime, Utc};
use nodewright_model::arm::poll_schedule::OperationKind;
use nodewright_model::arm::{Disposition, operation_code_disposition};
use nodewright_model::machine::os_disk_name;
use temporalio_sdk::activities::ActivityContext;

use super::error::MachineError;
use super::is_gone;
use super::types::{AwaitDeletion, AwaitVm, VmProvisioned};
use crate::azure::{ArmClient, Error as ArmError, OperationHandle, PollClock, Progress};

/// How often a VM is read when ARM gave no operation to poll (an adopted VM, a delete without
/// an operation).
const VM_POLL_INTERVAL: Duration = Duration::from_secs(3);
/// The longest sleep between heartbeats.
const MAX_SLEEP: Duration = Duration::from_secs(10);

/// Waits for the VM's provisioning to end or the deadline: polls the create's operation when
/// [`PollClock`] says (Azure's `Retry-After`, else near a create's usual duration, then within
/// the latency bound); without an operation (an adopted VM) reads the VM every few seconds.
pub(super) async fn await_vm(
    client: &ArmClient,
    ctx: &ActivityContext,
    input: &AwaitVm,
) -> Result<VmProvisioned, MachineError> {
    let deadline = input.deadline;
    if let Some(handle) = &input.operation {
        let mut clock = PollClock::new(OperationKind::VmCreate, handle);
        loop {
            sleep_heartbeating(ctx, clock.next_delay(), Some(deadline)).await;
            if Utc::now() >= deadline {
                return Ok(VmProvisioned::TimedOut {
                    provisioning_state: None,
                });
            }
            heartbeat(ctx).await;
            match poll(client, handle, &input.machine).await {
                Ok(Poll::Running(progress)) => clock.heard(&progress),
                // The create ended well: the VM is the body that was PUT, its OS disk named as
                // the body names it, its id this worker's scope's (ARM ids compare
                // case-insensitively), so no GET is needed to confirm.
                Ok(Poll::Succeeded) => {
                    return Ok(VmProvisioned::Succeeded {
                        vm_id: client.vm_id(&input.machine),
                        os_disk: Some(os_disk_name(&input.machine)),
                    });
                }
                Err(error) => return retryable_failure(error),
            }
        }
    }
    // No operation (an adopted VM): the VM itself says.
    loop {
        heartbeat(ctx).await;
        let vm = client.get_vm_with_instance_view(&input.machine).await?;
        match vm.properties.provisioning_state.as_deref() {
            state if is_succeeded(state) => {
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
            state if is_failed(state) => {
                return retryable_failure(provisioning_failed_from_vm(&input.machine, &vm));
            }
            state => {
                if Utc::now() >= deadline {
                    return Ok(VmProvisioned::TimedOut {
                        provisioning_state: state.map(str::to_owned),
                    });
                }
            }
        }
        sleep_until_next(VM_POLL_INTERVAL, deadline).await;
    }
}

/// What one poll of a creation's operation found.
enum Poll {
    /// It runs: what the poll answered, for the clock.
    Running(Progress),
    /// It ended well.
    Succeeded,
}

/// A provisioning failure whose code Azure means as "try again" becomes the activity's result
/// ([`VmProvisioned::Failed`]): the workflow decides whether to send the PUT again. Any other
/// failure stays the activity's failure.
fn retryable_failure(error: MachineError) -> Result<VmProvisioned, MachineError> {
    let retryable = matches!(
        &error,
        MachineError::ProvisioningFailed { code, .. }
            if operation_code_disposition(code) == Disposition::Retryable
    );
    if !retryable {
        return Err(error);
    }
    let reason = error.to_string();
    match error {
        MachineError::ProvisioningFailed { code, message, .. } => Ok(VmProvisioned::Failed {
            code,
            message,
            reason,
        }),
        other => Err(other),
    }
}

/// One poll of a creation's operation.
async fn poll(
    client: &ArmClient,
    handle: &OperationHandle,
    machine: &str,
) -> Result<Poll, MachineError> {
    match client.poll_once(handle).await {
        Ok(progress @ Progress::Running { .. }) => Ok(Poll::Running(progress)),
        Ok(Progress::Succeeded { .. }) => Ok(Poll::Succeeded),
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

/// Waits until a VM deletion's operation ends (polled when [`PollClock`] says), or, without
/// an operation, until the VM answers 404.
pub(super) async fn await_vm_deletion(
    client: &ArmClient,
    ctx: &ActivityContext,
    input: &AwaitDeletion,
) -> Result<(), MachineError> {
    if let Some(handle) = &input.operation {
        let mut clock = PollClock::new(OperationKind::VmDelete, handle);
        loop {
            sleep_heartbeating(ctx, clock.next_delay(), None).await;
            heartbeat(ctx).await;
            match client.poll_once(handle).await {
                Ok(progress @ Progress::Running { .. }) => clock.heard(&progress),
                // Azure ends a VM's DELETE `Succeeded` once the VM is gone: no GET to confirm.
                Ok(Progress::Succeeded { .. }) => return Ok(()),
                Err(ArmError::OperationFailed { source, .. })
                    if operation_code_disposition(&source.code) == Disposition::Retryable =>
                {
                    return Err(MachineError::DeleteToResend {
                        machine: input.machine.clone(),
                        code: source.code,
                        message: source.message,
                    });
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
    loop {
        heartbeat(ctx).await;
        match client.get_vm(&input.machine).await {
            Err(error) if is_gone(&error) => return Ok(()),
            Err(error) => return Err(error.into()),
            // A DELETE that failed leaves the VM `Failed`: it needs another DELETE.
            Ok(vm) if is_failed(vm.properties.provisioning_state.as_deref()) => {
                return Err(MachineError::DeleteToResend {
                    machine: input.machine.clone(),
                    code: "ProvisioningStateFailed".to_owned(),
                    message: "the VM's provisioningState is Failed after its DELETE".to_owned(),
                });
            }
            Ok(_) => tokio::time::sleep(VM_POLL_INTERVAL).await,
        }
    }
}

/// Whether a provisioning state is `Failed`, compared case-insensitively as ARM's states are.
fn is_failed(state: Option<&str>) -> bool {
    state.is_some_and(|state| state.trim().eq_ignore_ascii_case("Failed"))
}

/// Whether a provisioning state is `Succeeded`, compared case-insensitively.
fn is_succeeded(state: Option<&str>) -> bool {
    state.is_some_and(|state| state.trim().eq_ignore_ascii_case("Succeeded"))
}

/// Sleeps `delay`, but never past the deadline and never longer than [`MAX_SLEEP`] without a
/// heartbeat.
async fn sleep_until_next(delay: Duration, deadline: DateTime<Utc>) {
    let left = (deadline - Utc::now()).to_std().unwrap_or(Duration::ZERO);
    tokio::time::sleep(delay.min(left).min(MAX_SLEEP)).await;
}

/// Sleeps `delay` (until the next poll of an operation) in pieces of at most [`MAX_SLEEP`],
/// heartbeating between them, and never past `deadline` when there is one.
pub(super) async fn sleep_heartbeating(
    ctx: &ActivityContext,
    delay: Duration,
    deadline: Option<DateTime<Utc>>,
) {
    let wake = tokio::time::Instant::now() + delay;
    loop {
        let mut left = wake.saturating_duration_since(tokio::time::Instant::now());
        if let Some(deadline) = deadline {
            left = left.min((deadline - Utc::now()).to_std().unwrap_or(Duration::ZERO));
        }
        if left.is_zero() {
            return;
        }
        tokio::time::sleep(left.min(MAX_SLEEP)).await;
        heartbeat(ctx).await;
    }
}

/// Records a heartbeat; a failure to record one is not the activity's failure (the next one
/// may pass, and a lost worker is noticed by the heartbeat timeout anyway).
pub(super) async fn heartbeat(ctx: &ActivityContext) {
    crate::lifetime::beat(ctx).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisioning_states_are_compared_case_insensitively() {
        let table = [
            (Some("Failed"), true, false),
            (Some("failed"), true, false),
            (Some("Succeeded"), false, true),
            (Some("SUCCEEDED"), false, true),
            (Some("Deleting"), false, false),
            (None, false, false),
        ];
        for (state, failed, succeeded) in table {
            assert_eq!(is_failed(state), failed, "{state:?}");
            assert_eq!(is_succeeded(state), succeeded, "{state:?}");
        }
    }
}
