//! The VM actions that move a VM through several power states: `redeploy`, `reimage` and
//! `simulateEviction` (Spot VMs), answered as Azure answers them.
//!
//! - `redeploy`: 202 with `Location` and `Azure-AsyncOperation`; provisioning `Updating`, power
//!   `stopping` for the first half of the operation and `starting` for the second, then
//!   `running`, and the guest boots again. A stopped or deallocated VM is started on its new
//!   host (`starting`, then `running`): redeploy "powers it back on".
//! - `reimage`: 202 likewise; a running VM goes `stopping` then `starting` onto its new OS disk
//!   and boots again; a stopped or deallocated one keeps its power state and only gets the new
//!   disk. What Azure refuses: [`reimage::check`].
//! - `simulateEviction`: 204 at once; the VM is then evicted by its `evictionPolicy`:
//!   `Deallocate` (the default) deallocates it (provisioning `Updating`, power `deallocating`,
//!   then `deallocated`), `Delete` deletes it with the `deleteOption` cascade of a DELETE. The
//!   eviction is an operation like a DELETE's or a deallocate's, under the name
//!   `vm.simulateEviction` (fault rules and latency apply), whose polling URLs no client is
//!   given. A VM that is not Spot gets Azure's 409 `OperationNotAllowed`, "Operation
//!   'simulateEviction' is allowed only for Spot Virtual Machines".

use axum::body::Bytes;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::super::emulator::Emulator;
use super::super::engine::Core;
use super::super::error::ArmError;
use super::super::http::{Ctx, accepted};
use super::super::latency::Step;
use super::super::state::{Action, Kind, Power, Resource, resource_id};
use super::reimage;
use super::{VmPath, spec};

/// Azure's answer to an action that needs the VM running (or set to run).
fn not_running() -> ArmError {
    ArmError::rejected(
        409,
        "OperationNotAllowed",
        "The operation requires the VM to be running (or set to run).",
    )
}

/// The VM `id`, idle, or ARM's 404 / 409.
fn idle_vm(core: &Core, id: &str) -> Result<Resource, ArmError> {
    let vm = core
        .state
        .get(id)
        .cloned()
        .ok_or_else(|| ArmError::ResourceNotFound(id.to_owned()))?;
    vm.ensure_idle()?;
    Ok(vm)
}

fn running(vm: &Resource) -> bool {
    matches!(vm.power, None | Some(Power::Running))
}

/// Halfway between `start` and `due`: when a staged `stopping` turns `starting`.
fn halfway(start: DateTime<Utc>, due: DateTime<Utc>) -> DateTime<Utc> {
    start + (due - start) / 2
}

/// Marks `id` as going through a reboot-like action: `stopping` now and `starting` halfway to
/// `due` when it `was_running` (else `starting` now), provisioning `Updating`, the guest to
/// boot again.
fn cycle_power(core: &mut Core, id: &str, was_running: bool) {
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

/// Stages `starting` halfway through `op` on a VM that was running.
fn stage_start(core: &mut Core, id: &str, start: DateTime<Utc>, due: DateTime<Utc>) {
    if let Some(r) = core.state.get_mut(id)
        && r.power == Some(Power::Stopping)
    {
        r.power_stage = Some((halfway(start, due), Power::Starting));
    }
}

/// `POST …/redeploy`.
pub(super) async fn redeploy(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::Vm, &name);
    let op = em.write(|core, now| {
        let vm = idle_vm(core, &id)?;
        cycle_power(core, &id, running(&vm));
        let mut s = spec(&ctx, &sub, &vm, Action::Redeploy, vec![Step::VmPower]);
        s.vm = Some(&name);
        let op = core.begin(s, now);
        stage_start(core, &id, op.start_time, op.due);
        Ok(op)
    })?;
    tracing::debug!(vm = %name, "redeploy");
    Ok(accepted(
        StatusCode::ACCEPTED,
        None,
        &op.links(&ctx.base),
        true,
    ))
}

/// `POST …/reimage` (body optional).
pub(super) async fn reimage(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    let request = reimage::parse(&raw)?;
    let id = resource_id(&sub, &rg, Kind::Vm, &name);
    let op = em.write(|core, now| {
        let vm = idle_vm(core, &id)?;
        reimage::check(&vm, &request)?;
        let was_running = running(&vm);
        if let Some(r) = core.state.get_mut(&id) {
            reimage::apply_request(r, &request);
        }
        if was_running {
            cycle_power(core, &id, true);
        } else if let Some(r) = core.state.get_mut(&id) {
            r.set_provisioning_state("Updating");
        }
        let mut s = spec(&ctx, &sub, &vm, Action::Reimage, vec![Step::VmCreate]);
        s.vm = Some(&name);
        let op = core.begin(s, now);
        stage_start(core, &id, op.start_time, op.due);
        Ok(op)
    })?;
    tracing::debug!(vm = %name, "reimage");
    Ok(accepted(
        StatusCode::ACCEPTED,
        None,
        &op.links(&ctx.base),
        true,
    ))
}

/// Whether the VM body is a Spot VM (`priority` `Spot`, or its older name `Low`).
fn spot(body: &Value) -> bool {
    body["properties"]["priority"]
        .as_str()
        .is_some_and(|p| p.eq_ignore_ascii_case("Spot") || p.eq_ignore_ascii_case("Low"))
}

/// Whether a Spot VM's eviction deletes it (`evictionPolicy: Delete`; `Deallocate` otherwise).
fn evicted_by_deletion(body: &Value) -> bool {
    body["properties"]["evictionPolicy"]
        .as_str()
        .is_some_and(|p| p.eq_ignore_ascii_case("Delete"))
}

/// `POST …/simulateEviction`: 204, then the eviction runs as an operation.
pub(super) async fn simulate_eviction(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::Vm, &name);
    em.write(|core, now| {
        let vm = idle_vm(core, &id)?;
        if !spot(&vm.body) {
            return Err(ArmError::rejected(
                409,
                "OperationNotAllowed",
                "Operation 'simulateEviction' is allowed only for Spot Virtual Machines",
            ));
        }
        if !running(&vm) {
            return Err(not_running());
        }
        let delete = evicted_by_deletion(&vm.body);
        let (action, step) = if delete {
            (Action::Delete, Step::VmDelete)
        } else {
            (Action::Deallocate, Step::VmPower)
        };
        if let Some(r) = core.state.get_mut(&id) {
            if delete {
                r.set_provisioning_state("Deleting");
            } else {
                r.power = Some(Power::Deallocating);
                r.set_provisioning_state("Updating");
            }
        }
        let mut s = spec(&ctx, &sub, &vm, action, vec![step]);
        s.vm = Some(&name);
        core.begin(s, now);
        Ok(())
    })?;
    tracing::info!(vm = %name, "spot eviction simulated");
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn spot_vms_are_spot_or_low_priority_and_evicted_by_deallocation_unless_told_to_delete() {
        assert!(spot(&json!({"properties": {"priority": "Spot"}})));
        assert!(spot(&json!({"properties": {"priority": "low"}})));
        assert!(!spot(&json!({"properties": {"priority": "Regular"}})));
        assert!(!spot(&json!({"properties": {}})));
        assert!(evicted_by_deletion(
            &json!({"properties": {"evictionPolicy": "Delete"}})
        ));
        assert!(!evicted_by_deletion(&json!({"properties": {}})));
    }

    #[test]
    fn a_staged_start_comes_halfway_through() {
        let start = DateTime::<Utc>::UNIX_EPOCH;
        let due = start + chrono::Duration::seconds(10);
        assert_eq!(halfway(start, due), start + chrono::Duration::seconds(5));
    }
}
