//! `Microsoft.Network/networkInterfaces`: routes and handlers (GET, list, PUT, DELETE).
//! `properties.virtualMachine.id` is set while a VM uses the NIC, which then cannot be deleted;
//! nor can it while it is reserved for a VM (`NicReservedForAnotherVm`, see
//! [`Reservation`](super::state::Reservation)). An IP configuration in a subnet the emulator
//! holds gets its private address there (see `nic_addresses.rs`); one naming a subnet of a network
//! it does not hold is accepted without one (the sandbox's leniency).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::emulator::Emulator;
use super::engine::OpSpec;
use super::error::ArmError;
use super::http::{Ctx, accepted, json_response, list_response, parse_object};
use super::latency::Step;
use super::nic_addresses;
use super::state::{
    Action, Collection, Kind, Resource, key, props, required_location, resource_id, stamp_envelope,
};

const NICS: &str =
    "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces";

/// The subscription-level list (every resource group's).
const NICS_ALL: &str = "/subscriptions/{sub}/providers/Microsoft.Network/networkInterfaces";

/// The NIC routes.
pub fn routes() -> Router<Emulator> {
    Router::new()
        .route(NICS, get(list))
        .route(NICS_ALL, get(list_all))
        .route(
            &format!("{NICS}/{{name}}"),
            get(read).put(put).delete(delete),
        )
}

type NicPath = Path<(String, String, String)>;

async fn list(
    AxState(em): AxState<Emulator>,
    Path((sub, rg)): Path<(String, String)>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let collection = key(&format!(
        "/subscriptions/{sub}/resourceGroups/{rg}/providers/{}",
        Kind::Nic.type_name()
    ));
    list_response(&em, &ctx, &Collection::Group(collection), |_, r| {
        r.body.clone()
    })
}

/// The subscription-level list: the networkInterfaces of every resource group, paged as ARM pages.
async fn list_all(
    AxState(em): AxState<Emulator>,
    Path(sub): Path<String>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let collection = Collection::Subscription {
        sub,
        type_name: Kind::Nic.type_name().to_owned(),
    };
    list_response(&em, &ctx, &collection, |_, r| r.body.clone())
}

async fn read(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): NicPath,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::Nic, &name);
    let found = em.read(|core| {
        core.state
            .get(&id)
            .map(|n| (n.body.clone(), n.etag().to_owned()))
    });
    let (body, etag) = found.ok_or(ArmError::ResourceNotFound(id))?;
    Ok(json_response(StatusCode::OK, body, Some(&etag)))
}

fn spec<'a>(
    ctx: &'a Ctx,
    sub: &'a str,
    id: &str,
    location: String,
    action: Action,
    step: Step,
) -> OpSpec<'a> {
    ctx.op_spec(sub, Kind::Nic, action, id.to_owned(), location, vec![step])
}

async fn put(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): NicPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    let mut request = parse_object(&raw)?;
    if let Some(p) = request.get_mut("properties").and_then(Value::as_object_mut) {
        for field in ["provisioningState", "virtualMachine", "resourceGuid"] {
            p.remove(field);
        }
    }
    let id = resource_id(&sub, &rg, Kind::Nic, &name);
    let (status, body, op) = em.write(|core, now| {
        let existing = core.state.get(&id).cloned();
        ctx.check_conditions(existing.as_ref())?;
        if let Some(old) = &existing {
            old.ensure_idle()?;
        }
        let location = match &existing {
            Some(old) => old.location().to_owned(),
            None => required_location(&request)?,
        };
        let mut body = request.clone();
        stamp_envelope(&mut body, Kind::Nic, &id, &name, &location);
        let p = props(&mut body);
        let old_props = existing
            .as_ref()
            .map(|o| o.body["properties"].clone())
            .unwrap_or(Value::Null);
        for field in ["virtualMachine", "resourceGuid"] {
            if let Some(v) = old_props.get(field) {
                p.insert(field.into(), v.clone());
            }
        }
        p.entry("resourceGuid")
            .or_insert_with(|| json!(uuid::Uuid::new_v4().to_string()));
        nic_addresses::assign(
            &mut core.state,
            &id,
            existing.as_ref().map(|o| &o.body),
            &mut body,
        )?;
        let mut nic = existing
            .clone()
            .unwrap_or_else(|| Resource::new(Kind::Nic, Value::Null));
        nic.body = body;
        nic.set_provisioning_state("Updating");
        let rendered = nic.body.clone();
        core.state.resources.insert(key(&id), nic);
        let (status, action) = match existing {
            None => (StatusCode::CREATED, Action::Create),
            Some(_) => (StatusCode::OK, Action::Update),
        };
        let op = core.begin(
            spec(&ctx, &sub, &id, location, action, Step::NicCreate),
            now,
        );
        Ok((status, rendered, op))
    })?;
    Ok(accepted(status, Some(body), &op.links(&ctx.base), false))
}

async fn delete(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): NicPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::Nic, &name);
    let op = em.write(|core, now| {
        let existing = core.state.get(&id).cloned();
        ctx.check_conditions(existing.as_ref())?;
        let Some(nic) = existing else {
            return Ok(None);
        };
        if let Some(vm) = nic.body["properties"]["virtualMachine"]["id"].as_str() {
            return Err(ArmError::rejected(
                400,
                "NicInUse",
                format!(
                    "Network Interface {} is used by existing resource {vm}. In order to delete the network interface, it must be dissociated from the resource.",
                    nic.id()
                ),
            ));
        }
        if let Some(held) = nic.reserved.as_ref().filter(|r| r.holds(now, core.nic_reservation)) {
            return Err(ArmError::nic_reserved(&held.vm, core.nic_reservation.num_seconds()));
        }
        if let Some(busy) = nic.busy.as_ref().and_then(|b| core.state.operations.get(b)) {
            return match busy.action {
                Action::Delete => Ok(Some(busy.clone())),
                _ => Err(ArmError::Busy(nic.id().to_owned())),
            };
        }
        if let Some(r) = core.state.get_mut(&id) {
            r.set_provisioning_state("Deleting");
        }
        let s = spec(&ctx, &sub, nic.id(), nic.location().to_owned(), Action::Delete, Step::NicDelete);
        Ok(Some(core.begin(s, now)))
    })?;
    Ok(match op {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(op) => accepted(StatusCode::ACCEPTED, None, &op.links(&ctx.base), true),
    })
}
