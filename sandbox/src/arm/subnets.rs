//! `Microsoft.Network/virtualNetworks/{vnet}/subnets`: routes and handlers (GET, list, PUT,
//! DELETE). A subnet lives inside its network's body (see `networks.rs`): a PUT or DELETE
//! changes the network and starts an operation on it (201/200 or 202 with
//! `Azure-AsyncOperation`); the subnet's provisioning state is the network's. A DELETE of a
//! subnet an IP configuration is in is refused 400 `InUseSubnetCannotBeDeleted`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::emulator::Emulator;
use super::error::ArmError;
use super::http::{Ctx, accepted, json_response, parse_object};
use super::networks;
use super::state::{Action, Kind, obj_at, resource_id};
use super::virtual_networks::spec;

const SUBNETS: &str = "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{name}/subnets";

/// The subnet routes.
pub fn routes() -> Router<Emulator> {
    Router::new().route(SUBNETS, get(list)).route(
        &format!("{SUBNETS}/{{subnet}}"),
        get(read).put(put).delete(delete),
    )
}

type SubnetPath = Path<(String, String, String, String)>;

/// Azure's 404 for a child resource that does not exist.
fn not_found(id: &str) -> ArmError {
    ArmError::rejected(404, "NotFound", format!("Resource {id} not found."))
}

/// Every subnet of the network, in one page.
async fn list(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, vnet)): Path<(String, String, String)>,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::VirtualNetwork, &vnet);
    let found = em.read(|core| {
        core.state.get(&id).map(|v| {
            networks::subnets(&v.body)
                .iter()
                .map(|s| networks::render_subnet(&core.state, v, s))
                .collect::<Vec<Value>>()
        })
    });
    let value = found.ok_or(ArmError::ResourceNotFound(id))?;
    Ok(json_response(
        StatusCode::OK,
        json!({ "value": value }),
        None,
    ))
}

async fn read(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, vnet, name)): SubnetPath,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let vnet_id = resource_id(&sub, &rg, Kind::VirtualNetwork, &vnet);
    let id = networks::subnet_id(&vnet_id, &name);
    let found = em.read(|core| {
        let v = core.state.get(&vnet_id)?;
        let subnet = networks::find_subnet(&v.body, &name)?;
        Some(networks::render_subnet(&core.state, v, subnet))
    });
    let body = found.ok_or_else(|| not_found(&id))?;
    let etag = body["etag"].as_str().map(str::to_owned);
    Ok(json_response(StatusCode::OK, body, etag.as_deref()))
}

async fn put(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, vnet, name)): SubnetPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    let request = parse_object(&raw)?;
    let vnet_id = resource_id(&sub, &rg, Kind::VirtualNetwork, &vnet);
    let (status, body, op) = em.write(|core, now| {
        let mut network = core
            .state
            .get(&vnet_id)
            .cloned()
            .ok_or_else(|| ArmError::ResourceNotFound(vnet_id.clone()))?;
        network.ensure_idle()?;
        let stored_name = networks::find_subnet(&network.body, &name)
            .and_then(|s| s["name"].as_str().map(str::to_owned));
        let subnet = networks::stamp_subnet(
            request.clone(),
            network.id(),
            stored_name.as_deref().unwrap_or(&name),
        );
        let mut body = network.body.clone();
        let list = obj_at(&mut body, "properties")
            .entry("subnets")
            .or_insert_with(|| json!([]));
        if !list.is_array() {
            *list = json!([]);
        }
        if let Some(items) = list.as_array_mut() {
            match items.iter_mut().find(|s| {
                s["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case(&name))
            }) {
                Some(slot) => *slot = subnet.clone(),
                None => items.push(subnet.clone()),
            }
        }
        networks::validate(&body)?;
        network.body = body;
        network.set_provisioning_state("Updating");
        let rendered = networks::render_subnet(&core.state, &network, &subnet);
        let location = network.location().to_owned();
        let id = network.id().to_owned();
        core.state.resources.insert(super::state::key(&id), network);
        let status = match stored_name {
            None => StatusCode::CREATED,
            Some(_) => StatusCode::OK,
        };
        let op = core.begin(spec(&ctx, &sub, &id, location, Action::Update), now);
        Ok((status, rendered, op))
    })?;
    Ok(accepted(status, Some(body), &op.links(&ctx.base), false))
}

async fn delete(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, vnet, name)): SubnetPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let vnet_id = resource_id(&sub, &rg, Kind::VirtualNetwork, &vnet);
    let op = em.write(|core, now| {
        let Some(mut network) = core.state.get(&vnet_id).cloned() else {
            return Ok(None);
        };
        if networks::find_subnet(&network.body, &name).is_none() {
            return Ok(None);
        }
        networks::refuse_if_in_use(&core.state, &network, &name)?;
        network.ensure_idle()?;
        if let Some(items) = network.body["properties"]["subnets"].as_array_mut() {
            items.retain(|s| {
                !s["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case(&name))
            });
        }
        network.addresses.remove(&name);
        network.set_provisioning_state("Updating");
        let location = network.location().to_owned();
        let id = network.id().to_owned();
        core.state.resources.insert(super::state::key(&id), network);
        Ok(Some(core.begin(
            spec(&ctx, &sub, &id, location, Action::Update),
            now,
        )))
    })?;
    Ok(match op {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(op) => accepted(StatusCode::ACCEPTED, None, &op.links(&ctx.base), true),
    })
}
