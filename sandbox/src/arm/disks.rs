//! `Microsoft.Compute/disks`: routes and handlers (GET, list, PUT, PATCH, DELETE). `diskState`
//! and `managedBy` are driven by the VMs the disk is attached to.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::emulator::Emulator;
use super::error::ArmError;
use super::http::{Ctx, accepted, json_response, list_response, parse_object};
use super::latency::Step;
use super::state::{
    Action, Collection, Kind, Power, Resource, State, key, props, required_location, resource_id,
    stamp_envelope, timestamp, written_body,
};

const DISKS: &str = "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/disks";

/// The subscription-level list (every resource group's).
const DISKS_ALL: &str = "/subscriptions/{sub}/providers/Microsoft.Compute/disks";

/// The disk routes.
pub fn routes() -> Router<Emulator> {
    Router::new()
        .route(DISKS, get(list))
        .route(DISKS_ALL, get(list_all))
        .route(
            &format!("{DISKS}/{{name}}"),
            get(read).put(put).patch(patch).delete(delete),
        )
}

type DiskPath = Path<(String, String, String)>;

/// The disk as GET returns it: `diskState` is `Reserved` while its VM is deallocated.
pub fn render(state: &State, disk: &Resource) -> Value {
    let mut body = disk.body.clone();
    let deallocated = body["managedBy"]
        .as_str()
        .and_then(|vm| state.get(vm))
        .is_some_and(|vm| vm.power == Some(Power::Deallocated));
    if deallocated && body["properties"]["diskState"] == "Attached" {
        body["properties"]["diskState"] = json!("Reserved");
    }
    body
}

async fn list(
    AxState(em): AxState<Emulator>,
    Path((sub, rg)): Path<(String, String)>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let collection = key(&format!(
        "/subscriptions/{sub}/resourceGroups/{rg}/providers/{}",
        Kind::Disk.type_name()
    ));
    list_response(&em, &ctx, &Collection::Group(collection), render)
}

/// The subscription-level list: the disks of every resource group, paged as ARM pages.
async fn list_all(
    AxState(em): AxState<Emulator>,
    Path(sub): Path<String>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let collection = Collection::Subscription {
        sub,
        type_name: Kind::Disk.type_name().to_owned(),
    };
    list_response(&em, &ctx, &collection, render)
}

async fn read(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): DiskPath,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::Disk, &name);
    let found = em.read(|core| {
        core.state
            .get(&id)
            .map(|d| (render(&core.state, d), d.etag().to_owned()))
    });
    let (body, etag) = found.ok_or(ArmError::ResourceNotFound(id))?;
    Ok(json_response(StatusCode::OK, body, Some(&etag)))
}

async fn put(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): DiskPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    write_disk(&em, &ctx, &sub, &rg, &name, &raw, false)
}

async fn patch(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): DiskPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    write_disk(&em, &ctx, &sub, &rg, &name, &raw, true)
}

/// Server-owned disk fields a request cannot set.
const SERVER_FIELDS: [&str; 5] = [
    "provisioningState",
    "diskState",
    "timeCreated",
    "uniqueId",
    "diskSizeBytes",
];

fn write_disk(
    em: &Emulator,
    ctx: &Ctx,
    sub: &str,
    rg: &str,
    name: &str,
    raw: &[u8],
    patch: bool,
) -> Result<Response, ArmError> {
    let mut request = parse_object(raw)?;
    if let Some(p) = request.get_mut("properties").and_then(Value::as_object_mut) {
        SERVER_FIELDS.iter().for_each(|f| {
            p.remove(*f);
        });
    }
    if let Some(obj) = request.as_object_mut() {
        for field in ["id", "name", "type", "etag", "managedBy"] {
            obj.remove(field);
        }
    }
    let id = resource_id(sub, rg, Kind::Disk, name);
    let (body, op) = em.write(|core, now| {
        let existing = core.state.get(&id).cloned();
        ctx.check_conditions(existing.as_ref())?;
        let (mut disk, action, step) = match existing {
            None if patch => return Err(ArmError::ResourceNotFound(id.clone())),
            None => {
                let location = required_location(&request)?;
                let create = request["properties"]["creationData"]["createOption"]
                    .as_str()
                    .unwrap_or("Empty");
                if create.eq_ignore_ascii_case("empty")
                    && request["properties"]["diskSizeGB"].as_u64().is_none()
                {
                    return Err(ArmError::invalid(
                        "properties.diskSizeGB",
                        "The 'diskSizeGB' property is required for createOption Empty.",
                    ));
                }
                let mut body = request.clone();
                stamp_envelope(&mut body, Kind::Disk, &id, name, &location);
                if body.get("sku").is_none() {
                    body["sku"] = json!({"name": "Standard_LRS"});
                }
                let p = props(&mut body);
                p.entry("creationData")
                    .or_insert_with(|| json!({"createOption": "Empty"}));
                p.insert("diskState".into(), json!("Unattached"));
                p.insert("timeCreated".into(), json!(timestamp(now)));
                p.insert("uniqueId".into(), json!(uuid::Uuid::new_v4().to_string()));
                (
                    Resource::new(Kind::Disk, body),
                    Action::Create,
                    Step::DiskCreate,
                )
            }
            Some(old) => {
                old.ensure_idle()?;
                let mut body = written_body(&old.body, &request, patch);
                for field in ["id", "name", "type", "location", "managedBy"] {
                    match old.body.get(field) {
                        Some(v) => body[field] = v.clone(),
                        None => {
                            if let Some(obj) = body.as_object_mut() {
                                obj.remove(field);
                            }
                        }
                    }
                }
                let p = props(&mut body);
                for field in SERVER_FIELDS {
                    if let Some(v) = old.body["properties"].get(field) {
                        p.insert(field.into(), v.clone());
                    }
                }
                let mut disk = old.clone();
                disk.body = body;
                (disk, Action::Update, Step::DiskUpdate)
            }
        };
        disk.set_provisioning_state(if action == Action::Create {
            "Creating"
        } else {
            "Updating"
        });
        let location = disk.location().to_owned();
        let rendered = render(&core.state, &disk);
        core.state.resources.insert(key(&id), disk);
        let spec = ctx.op_spec(sub, Kind::Disk, action, id.clone(), location, vec![step]);
        let op = core.begin(spec, now);
        Ok((rendered, op))
    })?;
    Ok(accepted(
        StatusCode::ACCEPTED,
        Some(body),
        &op.links(&ctx.base),
        true,
    ))
}

async fn delete(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, name)): DiskPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let id = resource_id(&sub, &rg, Kind::Disk, &name);
    let op = em.write(|core, now| {
        let existing = core.state.get(&id).cloned();
        ctx.check_conditions(existing.as_ref())?;
        let Some(disk) = existing else {
            return Ok(None);
        };
        if let Some(vm) = disk.body["managedBy"].as_str() {
            // Azure: 409 OperationNotAllowed (the contract page says "typically 409").
            return Err(ArmError::rejected(
                409,
                "OperationNotAllowed",
                format!("Disk {} is attached to VM {vm}.", disk.name()),
            ));
        }
        if let Some(busy) = disk
            .busy
            .as_ref()
            .and_then(|b| core.state.operations.get(b))
        {
            return match busy.action {
                Action::Delete => Ok(Some(busy.clone())),
                _ => Err(ArmError::Busy(disk.id().to_owned())),
            };
        }
        if let Some(r) = core.state.get_mut(&id) {
            r.set_provisioning_state("Deleting");
        }
        let spec = ctx.op_spec(
            &sub,
            Kind::Disk,
            Action::Delete,
            disk.id().to_owned(),
            disk.location().to_owned(),
            vec![Step::DiskDelete],
        );
        let op = core.begin(spec, now);
        Ok(Some(op))
    })?;
    Ok(match op {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(op) => accepted(StatusCode::ACCEPTED, None, &op.links(&ctx.base), true),
    })
}
