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
//! - `simulateEviction`: 204 at once; a `Preempt` Scheduled Event announces the eviction for the
//!   eviction notice (`scheduled_events.rs`; again while one is announced: the same event), and
//!   when it starts (at its NotBefore, or once acknowledged) the VM is evicted by its
//!   `evictionPolicy` (`platform.rs`): `Deallocate` (the default) deallocates it (provisioning
//!   `Updating`, power `deallocating`, then `deallocated`), `Delete` deletes it with the
//!   `deleteOption` cascade of a DELETE. The eviction is an operation like a DELETE's or a
//!   deallocate's, under the name `vm.simulateEviction` (fault rules and latency apply), whose
//!   polling URLs no client is given. A VM that is not Spot gets Azure's 409
//!   `OperationNotAllowed`, "Operation 'simulateEviction' is allowed only for Spot Virtual
//!   Machines".

use axum::body::Bytes;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::super::emulator::Emulator;
use super::super::engine::Core;
use super::super::error::ArmError;
use super::super::http::{Ctx, accepted};
use super::super::latency::Step;
use super::super::platform::{cycle_power, running, stage_start};
use super::super::scheduled_events;
use super::super::state::{Action, Kind, Resource, resource_id};
use super::{VmPath, reimage, spec, spot};

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

/// `POST …/simulateEviction`: 204, then the eviction runs as an operation.
pub(super) async fn simulate_eviction(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::Vm, &name);
    let event = em.write(|core, now| {
        let vm = idle_vm(core, &id)?;
        if !spot::is_spot(&vm.body) {
            return Err(ArmError::rejected(
                409,
                "OperationNotAllowed",
                "Operation 'simulateEviction' is allowed only for Spot Virtual Machines",
            ));
        }
        if !running(&vm) {
            return Err(not_running());
        }
        Ok(scheduled_events::evict(core, &id, now))
    })?;
    tracing::info!(vm = %name, event = %event.id, not_before = %event.not_before, "spot eviction announced");
    Ok(StatusCode::NO_CONTENT.into_response())
}
