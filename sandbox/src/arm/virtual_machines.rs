//! `Microsoft.Compute/virtualMachines`: routes and handlers (GET, list, PUT, PATCH, DELETE,
//! instanceView, attachDetachDataDisks, deallocate, start, powerOff, restart; redeploy, reimage
//! and simulateEviction in [`actions`]). A DELETE preempts the VM's
//! create in progress; a PUT naming a NIC reserved for another VM is refused.

mod actions;
pub(super) mod body;
mod capacity;
mod list_query;
mod refusals;
pub(super) mod reimage;
pub(super) mod spot;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

pub use body::render;

use super::completion;
use super::data_disks::{self, entry_disk};
use super::emulator::Emulator;
use super::engine::{Core, OpSpec};
use super::error::ArmError;
use super::force_detach;
use super::http::{Ctx, accepted, json_response, list_response_where, parse_object};
use super::latency::Step;
use super::state::{
    Action, Collection, Kind, OpError, Operation, Power, Resource, key, name_of, resource_id,
};

const VMS: &str =
    "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines";

/// The subscription-level list (every resource group's).
const VMS_ALL: &str = "/subscriptions/{sub}/providers/Microsoft.Compute/virtualMachines";

/// The VM routes.
pub fn routes() -> Router<Emulator> {
    Router::new()
        .route(VMS, get(list))
        .route(VMS_ALL, get(list_all))
        .route(
            &format!("{VMS}/{{name}}"),
            get(read).put(put).patch(patch).delete(delete),
        )
        .route(&format!("{VMS}/{{name}}/instanceView"), get(instance_view))
        .route(
            &format!("{VMS}/{{name}}/attachDetachDataDisks"),
            post(attach_detach),
        )
        .route(&format!("{VMS}/{{name}}/deallocate"), post(deallocate))
        .route(&format!("{VMS}/{{name}}/start"), post(start))
        .route(&format!("{VMS}/{{name}}/powerOff"), post(power_off))
        .route(&format!("{VMS}/{{name}}/restart"), post(restart))
        .route(&format!("{VMS}/{{name}}/redeploy"), post(actions::redeploy))
        .route(&format!("{VMS}/{{name}}/reimage"), post(actions::reimage))
        .route(
            &format!("{VMS}/{{name}}/simulateEviction"),
            post(actions::simulate_eviction),
        )
}

type VmPath = Path<(String, String, String)>;

async fn list(
    AxState(em): AxState<Emulator>,
    Path((sub, rg)): Path<(String, String)>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let collection = key(&format!(
        "/subscriptions/{sub}/resourceGroups/{rg}/providers/{}",
        Kind::Vm.type_name()
    ));
    list_vms(&em, &ctx, &Collection::Group(collection))
}

/// ARM's `statusOnly=true` on a VM list: each VM with its instance view (power and provisioning
/// statuses) inline.
fn status_only(ctx: &Ctx) -> bool {
    ctx.flag("statusOnly")
}

/// The subscription-level list: the virtualMachines of every resource group, paged as ARM pages.
async fn list_all(
    AxState(em): AxState<Emulator>,
    Path(sub): Path<String>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let collection = Collection::Subscription {
        sub,
        type_name: Kind::Vm.type_name().to_owned(),
    };
    list_vms(&em, &ctx, &collection)
}

/// A page of VMs, with the list's `statusOnly`, `$filter` and `$expand`.
fn list_vms(em: &Emulator, ctx: &Ctx, collection: &Collection) -> Result<Response, ArmError> {
    let query = list_query::ListQuery::parse(
        ctx.query.get("$filter").map(String::as_str),
        ctx.query.get("$expand").map(String::as_str),
    )?;
    let now = Utc::now();
    let inline = status_only(ctx) || query.instance_view;
    list_response_where(
        em,
        ctx,
        collection,
        |vm| query.keeps(vm),
        |_, r| render(r, now, inline),
    )
}

async fn read(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::Vm, &name);
    let expand = ctx
        .query
        .get("$expand")
        .is_some_and(|e| e.to_ascii_lowercase().contains("instanceview"));
    let now = Utc::now();
    let found = em.read(|core| {
        core.state
            .get(&id)
            .map(|vm| (render(vm, now, expand), vm.etag().to_owned()))
    });
    let (body, etag) = found.ok_or(ArmError::ResourceNotFound(id))?;
    Ok(json_response(StatusCode::OK, body, Some(&etag)))
}

async fn instance_view(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::Vm, &name);
    let now = Utc::now();
    let view = em.read(|core| core.state.get(&id).map(|vm| body::instance_view(vm, now)));
    Ok(json_response(
        StatusCode::OK,
        view.ok_or(ArmError::ResourceNotFound(id))?,
        None,
    ))
}

fn fingerprint(ctx: &Ctx, body: &[u8]) -> String {
    format!(
        "{} {} {}",
        ctx.method,
        ctx.path.to_ascii_lowercase(),
        String::from_utf8_lossy(body)
    )
}

/// Whether `vm` is a VM whose create ended `Failed`: idle, `Failed`, never started, its OS disk
/// gone with the failure. A PUT to it creates it again, as Azure runs a failed create again.
fn create_failed(state: &super::state::State, vm: &Resource) -> bool {
    let failed = vm.body["properties"]["provisioningState"]
        .as_str()
        .is_some_and(|s| s.eq_ignore_ascii_case("Failed"));
    let os_disk = vm.body["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"].as_str();
    vm.busy.is_none()
        && failed
        && vm.power == Some(Power::Stopped)
        && os_disk.is_some_and(|id| state.get(id).is_none())
}

/// The operation already running on a busy resource when the request repeats it, else 409.
fn repeated(
    core: &Core,
    resource: &Resource,
    fingerprint: Option<&str>,
) -> Result<Operation, ArmError> {
    let op = resource
        .busy
        .as_ref()
        .and_then(|id| core.state.operations.get(id));
    match op {
        Some(op) if fingerprint.is_some() && op.fingerprint.as_deref() == fingerprint => {
            Ok(op.clone())
        }
        _ => Err(ArmError::Busy(resource.id().to_owned())),
    }
}

/// 400 `NicReservedForAnotherVm` when one of `nics` is reserved for a VM other than `vm_id`.
fn check_nic_reservations(
    core: &Core,
    nics: &[String],
    vm_id: &str,
    now: DateTime<Utc>,
) -> Result<(), ArmError> {
    for nic in nics {
        if let Some(holder) =
            body::reserved_for_another(&core.state, nic, vm_id, now, core.nic_reservation)
        {
            return Err(ArmError::nic_reserved(
                &holder,
                core.nic_reservation.num_seconds(),
            ));
        }
    }
    Ok(())
}

/// The disks a request to a busy VM force-detaches, when that is all it does (then it is
/// accepted as a force detach rather than refused with 409): its explicit
/// `storageProfile.dataDisks` marks disks `toBeDetached` with `detachOption: ForceDetach`, keeps
/// every other disk as it is, and nothing else in the body changes.
fn forced_while_busy(
    vm: &Resource,
    request: &Value,
    patch: bool,
) -> Result<Option<Vec<String>>, ArmError> {
    let Some(requested) = request["properties"]["storageProfile"]["dataDisks"].as_array() else {
        return Ok(None);
    };
    let Some(forced) =
        force_detach::only_force_detaches(&data_disks::entries_of(&vm.body), requested)
    else {
        return Ok(None);
    };
    let wanted = body::merged(vm, request.clone(), patch)?;
    Ok(body::only_data_disks_differ(&vm.body, &wanted).then_some(forced))
}

fn spec<'a>(
    ctx: &'a Ctx,
    sub: &'a str,
    vm: &Resource,
    action: Action,
    steps: Vec<Step>,
) -> OpSpec<'a> {
    ctx.op_spec(
        sub,
        Kind::Vm,
        action,
        vm.id().to_owned(),
        vm.location().to_owned(),
        steps,
    )
}

/// The steps an update takes: its disk work, or a plain update.
fn update_steps(attach: &[String], detach: &[String]) -> Vec<Step> {
    let mut steps = Vec::new();
    if !attach.is_empty() {
        steps.push(Step::DiskAttach);
    }
    if !detach.is_empty() {
        steps.push(Step::DiskDetach);
    }
    if steps.is_empty() {
        steps.push(Step::VmUpdate);
    }
    steps
}

async fn put(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    write_vm(&em, &ctx, &sub, &rg, &name, &raw, false)
}

async fn patch(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    write_vm(&em, &ctx, &sub, &rg, &name, &raw, true)
}

fn write_vm(
    em: &Emulator,
    ctx: &Ctx,
    sub: &str,
    rg: &str,
    name: &str,
    raw: &[u8],
    patch: bool,
) -> Result<Response, ArmError> {
    let request = parse_object(raw)?;
    let fp = fingerprint(ctx, raw);
    let id = resource_id(sub, rg, Kind::Vm, name);
    let (status, body, op) = em.write(|core, now| {
        let existing = core.state.get(&id).cloned();
        ctx.check_conditions(existing.as_ref())?;
        // Azure: a PUT to a VM whose create ended Failed runs the create again.
        let existing = existing.filter(|vm| patch || !create_failed(&core.state, vm));
        let Some(old) = existing else {
            if patch {
                return Err(ArmError::ResourceNotFound(id.clone()));
            }
            let mut change = body::create(&core.state, sub, rg, name, request, now)?;
            spot::check_create(&core.spot_prices, &change.body)?;
            capacity::check_create(core, sub, &id, &change.body)?;
            spot::stamp_defaults(&mut change.body);
            check_nic_reservations(core, &change.nics, &id, now)?;
            let mut vm = Resource::new(Kind::Vm, change.body.clone());
            vm.power = Some(Power::Starting);
            vm.new_etag();
            let rendered = render(&vm, now, false);
            let mut s = spec(ctx, sub, &vm, Action::Create, vec![Step::VmCreate]);
            s.vm = Some(name);
            s.attach = change.disks.attach.clone();
            s.created = change.os_disk.iter().map(|d| d.id().to_owned()).collect();
            s.fingerprint = Some(fp.clone());
            body::apply(&mut core.state, vm, change);
            let op = core.begin(s, now);
            return Ok((StatusCode::CREATED, rendered, op));
        };
        if old.busy.is_some() {
            let op = match repeated(core, &old, Some(&fp)) {
                Ok(op) => op,
                Err(busy) => {
                    let Some(forced) = forced_while_busy(&old, &request, patch)? else {
                        return Err(busy);
                    };
                    let mut s = spec(ctx, sub, &old, Action::Update, vec![Step::DiskDetach]);
                    s.vm = Some(name);
                    s.fingerprint = Some(fp.clone());
                    force_detach::start_while_busy(core, s, &forced, now)?
                }
            };
            let status = if op.action == Action::Create {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            let body = core
                .state
                .get(&id)
                .map(|vm| render(vm, now, false))
                .unwrap_or(Value::Null);
            return Ok((status, body, op));
        }
        let change = body::update(&core.state, &old, request, patch)?;
        capacity::check_update(core, sub, &old, &change.body)?;
        check_nic_reservations(core, &change.nics, &id, now)?;
        let mut vm = old.clone();
        vm.body = change.body.clone();
        vm.new_etag();
        let rendered = render(&vm, now, false);
        let mut s = spec(
            ctx,
            sub,
            &vm,
            Action::Update,
            update_steps(&change.disks.attach, &change.disks.detach),
        );
        s.vm = Some(name);
        s.attach = change.disks.attach.clone();
        s.detach = change.disks.detach.clone();
        s.force_detach = change.disks.force_detach.clone();
        s.fingerprint = Some(fp.clone());
        body::apply(&mut core.state, vm, change);
        let op = core.begin(s, now);
        Ok((StatusCode::OK, rendered, op))
    })?;
    let etag = body["etag"].as_str().map(str::to_owned);
    let mut response = accepted(status, Some(body), &op.links(&ctx.base), false);
    if let Some(tag) = etag.and_then(|t| t.parse().ok()) {
        response.headers_mut().insert(axum::http::header::ETAG, tag);
    }
    Ok(response)
}

async fn delete(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::Vm, &name);
    let op = em.write(|core, now| {
        let existing = core.state.get(&id).cloned();
        ctx.check_conditions(existing.as_ref())?;
        let Some(vm) = existing else {
            return Ok(None);
        };
        if let Some(busy) = vm.busy.as_ref().and_then(|b| core.state.operations.get(b)) {
            match busy.action {
                Action::Delete => return Ok(Some(busy.clone())),
                // As Azure does, a DELETE preempts the VM's create: the create ends `Canceled`
                // (`OperationPreempted`) and the DELETE proceeds.
                Action::Create if key(&busy.resource) == key(&id) => {
                    let create = busy.id.clone();
                    completion::cancel(&mut core.state, &create, now, preempted());
                    tracing::info!(vm = %name, operation = %create, "a delete preempted the vm's create");
                }
                _ => return Err(ArmError::Busy(vm.id().to_owned())),
            }
        }
        if let Some(r) = core.state.get_mut(&id) {
            r.set_provisioning_state("Deleting");
        }
        // forceDeletion=true is accepted; the emulator deletes at the same pace either way.
        tracing::debug!(force = ctx.flag("forceDeletion"), vm = %name, "deleting vm");
        let mut s = spec(&ctx, &sub, &vm, Action::Delete, vec![Step::VmDelete]);
        s.vm = Some(&name);
        Ok(Some(core.begin(s, now)))
    })?;
    Ok(match op {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(op) => accepted(StatusCode::ACCEPTED, None, &op.links(&ctx.base), true),
    })
}

/// The error a VM create preempted by a DELETE ends with (Azure's code and message).
fn preempted() -> OpError {
    OpError {
        code: "OperationPreempted".into(),
        message: "Operation execution has been preempted by a more recent operation.".into(),
        status: 409,
    }
}

async fn attach_detach(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    let request = parse_object(&raw)?;
    let to_attach = list_field(&request, "dataDisksToAttach")?;
    let to_detach = list_field(&request, "dataDisksToDetach")?;
    if to_attach.is_empty() && to_detach.is_empty() {
        return Err(ArmError::invalid(
            "dataDisksToAttach",
            "Either dataDisksToAttach or dataDisksToDetach must be given.",
        ));
    }
    let id = resource_id(&sub, &rg, Kind::Vm, &name);
    let op = em.write(|core, now| {
        let vm = core
            .state
            .get(&id)
            .cloned()
            .ok_or_else(|| ArmError::ResourceNotFound(id.clone()))?;
        if vm.busy.is_some() {
            let forced_only = to_attach.is_empty()
                && to_detach
                    .iter()
                    .all(|item| data_disks::is_force_detach(&item["detachOption"]));
            if !forced_only {
                return Err(ArmError::Busy(vm.id().to_owned()));
            }
            let entries = data_disks::entries_of(&vm.body);
            let mut forced = Vec::new();
            for (i, item) in to_detach.iter().enumerate() {
                let disk = disk_id(item, "dataDisksToDetach", i)?;
                if !entries
                    .iter()
                    .any(|e| entry_disk(e).is_some_and(|d| key(d) == key(&disk)))
                {
                    return Err(ArmError::invalid(
                        &format!("dataDisksToDetach[{i}].diskId"),
                        format!("Disk {disk} is not attached to VM {name}."),
                    ));
                }
                forced.push(disk);
            }
            let mut s = spec(&ctx, &sub, &vm, Action::Update, vec![Step::DiskDetach]);
            s.vm = Some(&name);
            return force_detach::start_while_busy(core, s, &forced, now);
        }
        let mut entries = data_disks::entries_of(&vm.body);
        for (i, item) in to_detach.iter().enumerate() {
            let disk = disk_id(item, "dataDisksToDetach", i)?;
            let entry = entries
                .iter_mut()
                .find(|e| entry_disk(e).is_some_and(|d| key(d) == key(&disk)))
                .ok_or_else(|| {
                    ArmError::invalid(
                        &format!("dataDisksToDetach[{i}].diskId"),
                        format!("Disk {disk} is not attached to VM {name}."),
                    )
                })?;
            entry["toBeDetached"] = json!(true);
            if let Some(option) = item.get("detachOption") {
                entry["detachOption"] = option.clone();
            }
        }
        for (i, item) in to_attach.iter().enumerate() {
            let disk = disk_id(item, "dataDisksToAttach", i)?;
            let mut entry = json!({"createOption": "Attach", "managedDisk": {"id": disk}});
            for field in ["lun", "caching", "deleteOption", "writeAcceleratorEnabled"] {
                if let Some(v) = item.get(field) {
                    entry[field] = v.clone();
                }
            }
            entries.push(entry);
        }
        let plan = data_disks::plan(
            &core.state,
            vm.id(),
            &data_disks::entries_of(&vm.body),
            entries,
        )?;
        let mut s = spec(
            &ctx,
            &sub,
            &vm,
            Action::Update,
            update_steps(&plan.attach, &plan.detach),
        );
        s.vm = Some(&name);
        s.attach = plan.attach.clone();
        s.detach = plan.detach.clone();
        s.force_detach = plan.force_detach.clone();
        data_disks::commit(&mut core.state, vm.id(), &plan);
        if let Some(r) = core.state.get_mut(&id) {
            super::state::obj_at(&mut r.body["properties"], "storageProfile")
                .insert("dataDisks".into(), json!(plan.entries));
            r.set_provisioning_state("Updating");
        }
        Ok(core.begin(s, now))
    })?;
    Ok(accepted(
        StatusCode::ACCEPTED,
        None,
        &op.links(&ctx.base),
        true,
    ))
}

fn list_field(request: &Value, field: &str) -> Result<Vec<Value>, ArmError> {
    match request.get(field) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(_) => Err(ArmError::invalid(
            field,
            format!("'{field}' must be an array"),
        )),
    }
}

fn disk_id(item: &Value, field: &str, i: usize) -> Result<String, ArmError> {
    item["diskId"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| ArmError::invalid(&format!("{field}[{i}].diskId"), "diskId is required"))
}

async fn deallocate(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    power(&em, &ctx, &sub, &rg, &name, Action::Deallocate)
}

async fn start(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    power(&em, &ctx, &sub, &rg, &name, Action::Start)
}

async fn power_off(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    power(&em, &ctx, &sub, &rg, &name, Action::PowerOff)
}

/// Restarts a running VM: 202 with an async operation; the power state is `starting` until the
/// guest is back (`running`), and the guest boots again. A VM that is not running is refused
/// as Azure refuses it (409 `OperationNotAllowed`).
async fn restart(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VmPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    power(&em, &ctx, &sub, &rg, &name, Action::Restart)
}

fn power(
    em: &Emulator,
    ctx: &Ctx,
    sub: &str,
    rg: &str,
    name: &str,
    action: Action,
) -> Result<Response, ArmError> {
    let id = resource_id(sub, rg, Kind::Vm, name);
    let op = em.write(|core, now| {
        let vm = core
            .state
            .get(&id)
            .cloned()
            .ok_or_else(|| ArmError::ResourceNotFound(id.clone()))?;
        vm.ensure_idle()?;
        let running = matches!(vm.power, None | Some(Power::Running));
        if action == Action::Restart && !running {
            return Err(ArmError::rejected(
                409,
                "OperationNotAllowed",
                "The operation requires the VM to be running (or set to run).".to_owned(),
            ));
        }
        let transitional = match action {
            Action::Deallocate => Power::Deallocating,
            Action::PowerOff => Power::Stopping,
            _ => Power::Starting,
        };
        if let Some(r) = core.state.get_mut(&id) {
            r.power = Some(transitional);
            if matches!(action, Action::Start | Action::Restart) {
                r.boot_at = None;
                r.boot_signalled = false;
            }
            r.set_provisioning_state("Updating");
        }
        let mut s = spec(ctx, sub, &vm, action, vec![Step::VmPower]);
        s.vm = Some(name);
        Ok(core.begin(s, now))
    })?;
    tracing::debug!(vm = name_of(&id), ?action, "power action");
    Ok(accepted(
        StatusCode::ACCEPTED,
        None,
        &op.links(&ctx.base),
        true,
    ))
}
