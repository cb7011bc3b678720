//! What the platform does to a VM on its own, as a started Scheduled Event asks
//! (`scheduled_events.rs`): evict it (`Preempt`), redeploy it (`Redeploy`), restart it
//! (`Reboot`) or delete it (`Terminate`), each as the operation the equivalent ARM request
//! starts (named `vm.simulateEviction`, `vm.redeploy`, `vm.restart`, `vm.delete`: latency and
//! fault rules apply), whose polling URLs no client is given. Also the power-state staging the
//! redeploy and reimage actions share.

use chrono::{DateTime, Utc};

use super::engine::{Core, OpSpec};
use super::latency::Step;
use super::state::{Action, Kind, Power, Resource};
use super::virtual_machines::spot::evicted_by_deletion;

/// The api-version the platform's operations record (their polling URLs are never given out).
const PLATFORM_API_VERSION: &str = "2024-07-01";

/// What carrying out an event on one VM came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Carried {
    /// An operation started (its id).
    Started(String),
    /// The VM is busy with another operation: try again later.
    Busy,
    /// Nothing to do (an unknown event type, a VM not running for a reboot or eviction, a VM
    /// that is gone).
    Nothing,
}

/// Whether the VM is running (or has no power state: set to run).
pub(crate) fn running(vm: &Resource) -> bool {
    matches!(vm.power, None | Some(Power::Running))
}

/// Halfway between `start` and `due`: when a staged `stopping` turns `starting`.
fn halfway(start: DateTime<Utc>, due: DateTime<Utc>) -> DateTime<Utc> {
    start + (due - start) / 2
}

/// Marks `id` as going through a reboot-like action: `stopping` now and `starting` halfway to
/// the operation's end when it `was_running` (else `starting` now), provisioning `Updating`,
/// the guest to boot again.
pub(crate) fn cycle_power(core: &mut Core, id: &str, was_running: bool) {
    if let Some(r) = core.state.get_mut(id) {
        r.power = Some(if was_running {
            Power::Stopping
        } else {
            Power::Starting
        });
        r.boot_at = None;
        r.boot_signalled = false;
        r.set_provisioning_state("Updating");
    }
}

/// Stages `starting` halfway through an operation from `start` to `due` on a VM that was
/// running.
pub(crate) fn stage_start(core: &mut Core, id: &str, start: DateTime<Utc>, due: DateTime<Utc>) {
    if let Some(r) = core.state.get_mut(id)
        && r.power == Some(Power::Stopping)
    {
        r.power_stage = Some((halfway(start, due), Power::Starting));
    }
}

/// Carries out an event of `event_type` on the VM `vm_id` now.
pub(crate) fn carry_out(
    core: &mut Core,
    event_type: &str,
    vm_id: &str,
    now: DateTime<Utc>,
) -> Carried {
    let Some(vm) = core.state.get(vm_id).cloned() else {
        return Carried::Nothing;
    };
    if vm.busy.is_some() {
        return Carried::Busy;
    }
    let kind = event_type.to_ascii_lowercase();
    match kind.as_str() {
        "preempt" if running(&vm) => Carried::Started(evict(core, &vm, now)),
        "reboot" if running(&vm) => Carried::Started(restart(core, &vm, now)),
        "redeploy" => Carried::Started(redeploy(core, &vm, now)),
        "terminate" => Carried::Started(delete(core, &vm, now)),
        _ => Carried::Nothing,
    }
}

/// Starts the operation `name` (`vm.restart`) on `vm`, as its ARM request `method` would.
fn begin(
    core: &mut Core,
    vm: &Resource,
    name: &str,
    method: &str,
    action: Action,
    step: Step,
    now: DateTime<Utc>,
) -> (String, DateTime<Utc>, DateTime<Utc>) {
    let id = vm.id().to_owned();
    let suffix = name.strip_prefix("vm.").unwrap_or(name);
    let path = if method == "DELETE" {
        id.clone()
    } else {
        format!("{id}/{suffix}")
    };
    let subscription = id.split('/').nth(2).unwrap_or_default().to_owned();
    let vm_name = vm.name().to_owned();
    let spec = OpSpec {
        name,
        method,
        path: &path,
        vm: Some(&vm_name),
        kind: Kind::Vm,
        action,
        resource: id.clone(),
        subscription: &subscription,
        location: vm.location().to_owned(),
        api_version: PLATFORM_API_VERSION,
        steps: vec![step],
        attach: Vec::new(),
        detach: Vec::new(),
        force_detach: Vec::new(),
        created: Vec::new(),
        fingerprint: None,
    };
    let op = core.begin(spec, now);
    (op.id, op.start_time, op.due)
}

/// The eviction of a Spot VM by its `evictionPolicy`: `Deallocate` (provisioning `Updating`,
/// power `deallocating`, then `deallocated`) or `Delete` (the `deleteOption` cascade of a
/// DELETE). The guest stops now.
fn evict(core: &mut Core, vm: &Resource, now: DateTime<Utc>) -> String {
    let delete = evicted_by_deletion(&vm.body);
    let (action, step) = if delete {
        (Action::Delete, Step::VmDelete)
    } else {
        (Action::Deallocate, Step::VmPower)
    };
    if let Some(r) = core.state.get_mut(vm.id()) {
        if delete {
            r.set_provisioning_state("Deleting");
        } else {
            r.power = Some(Power::Deallocating);
            r.set_provisioning_state("Updating");
        }
    }
    tracing::info!(vm = %vm.name(), "spot eviction starts");
    begin(core, vm, "vm.simulateEviction", "POST", action, step, now).0
}

/// A restart of a running VM: `starting` until the guest is back.
fn restart(core: &mut Core, vm: &Resource, now: DateTime<Utc>) -> String {
    if let Some(r) = core.state.get_mut(vm.id()) {
        r.power = Some(Power::Starting);
        r.boot_at = None;
        r.boot_signalled = false;
        r.set_provisioning_state("Updating");
    }
    begin(
        core,
        vm,
        "vm.restart",
        "POST",
        Action::Restart,
        Step::VmPower,
        now,
    )
    .0
}

/// A redeploy: `stopping`, then `starting` on the new host, then `running`.
fn redeploy(core: &mut Core, vm: &Resource, now: DateTime<Utc>) -> String {
    cycle_power(core, vm.id(), running(vm));
    let (op, start, due) = begin(
        core,
        vm,
        "vm.redeploy",
        "POST",
        Action::Redeploy,
        Step::VmPower,
        now,
    );
    stage_start(core, vm.id(), start, due);
    op
}

/// A delete with the `deleteOption` cascade.
fn delete(core: &mut Core, vm: &Resource, now: DateTime<Utc>) -> String {
    if let Some(r) = core.state.get_mut(vm.id()) {
        r.set_provisioning_state("Deleting");
    }
    begin(
        core,
        vm,
        "vm.delete",
        "DELETE",
        Action::Delete,
        Step::VmDelete,
        now,
    )
    .0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staged_start_comes_halfway_through() {
        let start = DateTime::<Utc>::UNIX_EPOCH;
        let due = start + chrono::Duration::seconds(10);
        assert_eq!(halfway(start, due), start + chrono::Duration::seconds(5));
    }
}
