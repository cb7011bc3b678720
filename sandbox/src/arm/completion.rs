//! What happens to resources when an operation completes: its effects applied (created, updated,
//! deleted, powered), its outcome recorded, its resources freed; and when a VM DELETE preempts
//! the VM's create ([`cancel`]): the create ends `Canceled`, as if it had failed.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::data_disks;
use super::state::{Action, Kind, OpError, OpStatus, Operation, Power, State, after, key};
use super::virtual_machines::body::{cascade_delete, release_after_failed_create};
use super::virtual_machines::reimage;

/// Completes the operation: applies its effects, records its outcome, frees its resources.
pub fn complete(state: &mut State, op_id: &str, now: DateTime<Utc>, boot: Duration) {
    finish(state, op_id, now, boot, None);
}

/// Ends the operation in progress `op_id` now as `Canceled` with `error` (Azure's
/// `OperationPreempted` when a DELETE preempts a VM's create): undone as a failed one is, its
/// resources freed.
pub fn cancel(state: &mut State, op_id: &str, now: DateTime<Utc>, error: OpError) {
    finish(state, op_id, now, Duration::ZERO, Some(error));
}

fn finish(
    state: &mut State,
    op_id: &str,
    now: DateTime<Utc>,
    boot: Duration,
    canceled: Option<OpError>,
) {
    let Some(mut op) = state.operations.get(op_id).cloned() else {
        return;
    };
    if op.status != OpStatus::InProgress {
        return;
    }
    let outcome = if canceled.is_some() {
        OpStatus::Canceled
    } else if op.fail_with.is_some() {
        OpStatus::Failed
    } else {
        OpStatus::Succeeded
    };
    if canceled.is_some() {
        op.fail_with = canceled;
    }
    let touched = std::iter::once(&op.resource)
        .chain(&op.attach)
        .chain(&op.detach)
        .chain(&op.created);
    for id in touched {
        if let Some(r) = state.get_mut(id)
            && r.busy.as_deref() == Some(op_id)
        {
            r.busy = None;
        }
    }
    let succeeded = op.fail_with.is_none();
    let boot_at = after(now, boot);
    if op.kind == Kind::Vm {
        data_disks::finish(state, &op, succeeded);
    }
    if succeeded {
        succeed(state, &op, now, boot_at);
    } else if let Some(r) = state.get_mut(&op.resource) {
        r.set_provisioning_state(match outcome {
            OpStatus::Canceled => "Canceled",
            _ => "Failed",
        });
        r.last_error = op.fail_with.as_ref().map(|e| e.code.clone());
        r.last_error_message = op.fail_with.as_ref().map(|e| e.message.clone());
        r.provisioned_at = Some(now);
        r.power_stage = None;
        if let Some(power) = r.power {
            r.power = Some(match (op.action, power) {
                (Action::Create | Action::Start, _) => Power::Stopped,
                (Action::Restart | Action::Redeploy, _) => Power::Running,
                (Action::Reimage, Power::Starting) => Power::Running,
                (_, Power::Stopping | Power::Deallocating) => Power::Running,
                (_, other) => other,
            });
        }
    }
    if !succeeded {
        for id in &op.created {
            state.resources.remove(&key(id));
        }
        if op.kind == Kind::Vm
            && op.action == Action::Create
            && let Some(vm) = state.get(&op.resource)
        {
            let body = vm.body.clone();
            release_after_failed_create(state, &body, now);
        }
    }
    if let Some(record) = state.operations.get_mut(op_id) {
        record.status = outcome;
        record.error = op.fail_with.clone();
        record.end_time = Some(now);
    }
}

fn succeed(state: &mut State, op: &Operation, now: DateTime<Utc>, boot_at: DateTime<Utc>) {
    if op.action == Action::Delete {
        if let Some(gone) = state.resources.remove(&key(&op.resource))
            && gone.kind == Kind::Vm
        {
            cascade_delete(state, &gone.body, now);
        }
        return;
    }
    for id in &op.created {
        if let Some(disk) = state.get_mut(id) {
            disk.set_provisioning_state("Succeeded");
        }
    }
    let resource_key = key(&op.resource);
    // A reimage of a running VM reboots it onto the new OS disk; one of a stopped or
    // deallocated VM only replaces the disk.
    let reimaged_running = op.action == Action::Reimage
        && state
            .resources
            .get(&resource_key)
            .is_some_and(|r| matches!(r.power, Some(Power::Stopping | Power::Starting)));
    if op.action == Action::Reimage {
        reimage::replace_os_disk(state, &op.resource, now);
    }
    let boots = matches!(
        op.action,
        Action::Create | Action::Start | Action::Restart | Action::Redeploy
    ) || reimaged_running;
    if op.kind == Kind::Vm && boots {
        state.pending_boots.insert(resource_key.clone());
    }
    let Some(r) = state.resources.get_mut(&resource_key) else {
        return;
    };
    r.power_stage = None;
    r.provisioned_at = Some(now);
    // Another operation still runs on it (a force detach ended before the update it preempted):
    // the provisioning state stays non-terminal until that one ends.
    if r.busy.is_none() {
        r.set_provisioning_state("Succeeded");
    }
    r.last_error = None;
    r.last_error_message = None;
    let power = match op.action {
        _ if boots => {
            r.boot_at = Some(boot_at.max(now));
            r.boot_signalled = false;
            Some(Power::Running)
        }
        Action::Deallocate => Some(Power::Deallocated),
        Action::PowerOff => Some(Power::Stopped),
        Action::Create | Action::Start | Action::Restart | Action::Redeploy => Some(Power::Running),
        Action::Update | Action::Delete | Action::Reimage => r.power,
    };
    r.power = power;
}
