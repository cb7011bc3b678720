//! `Microsoft.Network/virtualNetworks`: routes and handlers (GET, list per resource group and
//! per subscription, PUT, DELETE, and `GET …/usages`). A network holds its subnets inline
//! (`properties.subnets[]`, see `networks.rs`); a PUT replaces them, and one that drops a
//! subnet in use, or a DELETE while a subnet is in use, is refused 400
//! `InUseSubnetCannotBeDeleted`, as Azure refuses them. PUT and DELETE are asynchronous as the
//! network provider's are (201/200 or 202 with `Azure-AsyncOperation`).

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
use super::networks;
use super::state::{
    Action, Collection, Kind, Resource, key, props, required_location, resource_id, stamp_envelope,
};

const VNETS: &str =
    "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks";

/// The subscription-level list (every resource group's).
const VNETS_ALL: &str = "/subscriptions/{sub}/providers/Microsoft.Network/virtualNetworks";

/// The virtual network routes.
pub fn routes() -> Router<Emulator> {
    Router::new()
        .route(VNETS, get(list))
        .route(VNETS_ALL, get(list_all))
        .route(
            &format!("{VNETS}/{{name}}"),
            get(read).put(put).delete(delete),
        )
        .route(&format!("{VNETS}/{{name}}/usages"), get(usages))
}

type VnetPath = Path<(String, String, String)>;

async fn list(
    AxState(em): AxState<Emulator>,
    Path((sub, rg)): Path<(String, String)>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let collection = key(&format!(
        "/subscriptions/{sub}/resourceGroups/{rg}/providers/{}",
        Kind::VirtualNetwork.type_name()
    ));
    list_response(&em, &ctx, &Collection::Group(collection), networks::render)
}

/// The subscription-level list: the networks of every resource group, paged as ARM pages.
async fn list_all(
    AxState(em): AxState<Emulator>,
    Path(sub): Path<String>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let collection = Collection::Subscription {
        sub,
        type_name: Kind::VirtualNetwork.type_name().to_owned(),
    };
    list_response(&em, &ctx, &collection, networks::render)
}

async fn read(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VnetPath,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::VirtualNetwork, &name);
    let found = em.read(|core| {
        core.state
            .get(&id)
            .map(|v| (networks::render(&core.state, v), v.etag().to_owned()))
    });
    let (body, etag) = found.ok_or(ArmError::ResourceNotFound(id))?;
    Ok(json_response(StatusCode::OK, body, Some(&etag)))
}

async fn usages(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VnetPath,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::VirtualNetwork, &name);
    let found = em.read(|core| {
        core.state
            .get(&id)
            .map(|v| networks::usages(&core.state, v))
    });
    let value = found.ok_or(ArmError::ResourceNotFound(id))?;
    Ok(json_response(
        StatusCode::OK,
        json!({ "value": value }),
        None,
    ))
}

/// What a request starts on the network `id` (subnet requests too: their operation is the
/// network's).
pub(super) fn spec<'a>(
    ctx: &'a Ctx,
    sub: &'a str,
    id: &str,
    location: String,
    action: Action,
) -> OpSpec<'a> {
    let step = match action {
        Action::Delete => Step::NicDelete,
        _ => Step::NicCreate,
    };
    ctx.op_spec(
        sub,
        Kind::VirtualNetwork,
        action,
        id.to_owned(),
        location,
        vec![step],
    )
}

async fn put(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VnetPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    let mut request = parse_object(&raw)?;
    if let Some(p) = request.get_mut("properties").and_then(Value::as_object_mut) {
        for field in ["provisioningState", "resourceGuid"] {
            p.remove(field);
        }
    }
    let id = resource_id(&sub, &rg, Kind::VirtualNetwork, &name);
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
        stamp_envelope(&mut body, Kind::VirtualNetwork, &id, &name, &location);
        networks::stamp_subnets(&mut body, &id)?;
        networks::validate(&body)?;
        let mut vnet = existing
            .clone()
            .unwrap_or_else(|| Resource::new(Kind::VirtualNetwork, Value::Null));
        let dropped: Vec<String> = networks::subnets(&vnet.body)
            .iter()
            .filter_map(|s| s["name"].as_str())
            .filter(|n| networks::find_subnet(&body, n).is_none())
            .map(str::to_owned)
            .collect();
        for subnet in &dropped {
            networks::refuse_if_in_use(&core.state, &vnet, subnet)?;
        }
        for subnet in &dropped {
            vnet.addresses.remove(subnet);
        }
        let guid = existing
            .as_ref()
            .and_then(|o| {
                o.body["properties"]["resourceGuid"]
                    .as_str()
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let p = props(&mut body);
        p.insert("resourceGuid".into(), json!(guid));
        p.entry("virtualNetworkPeerings")
            .or_insert_with(|| json!([]));
        p.entry("enableDdosProtection")
            .or_insert_with(|| json!(false));
        vnet.body = body;
        vnet.set_provisioning_state("Updating");
        let rendered = networks::render(&core.state, &vnet);
        core.state.resources.insert(key(&id), vnet);
        let (status, action) = match existing {
            None => (StatusCode::CREATED, Action::Create),
            Some(_) => (StatusCode::OK, Action::Update),
        };
        let op = core.begin(spec(&ctx, &sub, &id, location, action), now);
        Ok((status, rendered, op))
    })?;
    Ok(accepted(status, Some(body), &op.links(&ctx.base), false))
}

async fn delete(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): VnetPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::VirtualNetwork, &name);
    let op = em.write(|core, now| {
        let existing = core.state.get(&id).cloned();
        ctx.check_conditions(existing.as_ref())?;
        let Some(vnet) = existing else {
            return Ok(None);
        };
        for subnet in networks::subnets(&vnet.body) {
            let subnet = subnet["name"].as_str().unwrap_or_default();
            networks::refuse_if_in_use(&core.state, &vnet, subnet)?;
        }
        if let Some(busy) = vnet
            .busy
            .as_ref()
            .and_then(|b| core.state.operations.get(b))
        {
            return match busy.action {
                Action::Delete => Ok(Some(busy.clone())),
                _ => Err(ArmError::Busy(vnet.id().to_owned())),
            };
        }
        if let Some(r) = core.state.get_mut(&id) {
            r.set_provisioning_state("Deleting");
        }
        let s = spec(
            &ctx,
            &sub,
            vnet.id(),
            vnet.location().to_owned(),
            Action::Delete,
        );
        Ok(Some(core.begin(s, now)))
    })?;
    Ok(match op {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(op) => accepted(StatusCode::ACCEPTED, None, &op.links(&ctx.base), true),
    })
}
