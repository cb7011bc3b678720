//! The two polling endpoints of async operations: the `Azure-AsyncOperation` status and the
//! `Location` result (the records are `state::operation`, their completion `completion.rs`).

use axum::Router;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};

use super::emulator::Emulator;
use super::error::ArmError;
use super::http::{Ctx, accepted, json_response};
use super::state::{Action, Kind, Links, OpError, OpStatus, State};
use super::{disks, networks, virtual_machines};

/// The polling routes.
pub fn routes() -> Router<Emulator> {
    Router::new()
        .route(
            "/subscriptions/{sub}/providers/{provider}/locations/{location}/operations/{id}",
            get(status),
        )
        .route(
            "/subscriptions/{sub}/providers/{provider}/locations/{location}/operationResults/{id}",
            get(result),
        )
}

type OpPath = Path<(String, String, String, String)>;

async fn status(
    AxState(em): AxState<Emulator>,
    Path((_, _, _, id)): OpPath,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let op = em.read(|core| core.state.operations.get(&id).cloned());
    let op = op.ok_or_else(|| ArmError::ResourceNotFound(format!("operations/{id}")))?;
    let mut response = json_response(StatusCode::OK, op.body(), None);
    if op.status == OpStatus::InProgress
        && let Some(seconds) = op.poll_retry_after
    {
        response.headers_mut().insert("retry-after", seconds.into());
    }
    Ok(response)
}

async fn result(
    AxState(em): AxState<Emulator>,
    Path((_, _, _, id)): OpPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let now = Utc::now();
    let found = em.read(|core| {
        let op = core.state.operations.get(&id).cloned()?;
        let body = core
            .state
            .get(&op.resource)
            .map(|r| render(&core.state, r, now));
        Some((op, body))
    });
    let (op, body) =
        found.ok_or_else(|| ArmError::ResourceNotFound(format!("operationResults/{id}")))?;
    match op.status {
        OpStatus::InProgress => {
            let links = Links {
                retry_after: op.poll_retry_after,
                ..op.links(&ctx.base)
            };
            Ok(accepted(StatusCode::ACCEPTED, None, &links, false))
        }
        OpStatus::Failed | OpStatus::Canceled => {
            let error = op.error.unwrap_or(OpError {
                code: "Canceled".into(),
                message: "The operation was canceled.".into(),
                status: 409,
            });
            Err(ArmError::rejected(error.status, &error.code, error.message))
        }
        OpStatus::Succeeded => match (op.action, body) {
            (
                Action::Delete
                | Action::Deallocate
                | Action::PowerOff
                | Action::Start
                | Action::Restart
                | Action::Redeploy
                | Action::Reimage,
                _,
            )
            | (_, None) => Ok(StatusCode::NO_CONTENT.into_response()),
            (_, Some(body)) if op.name == "vm.attachDetachDataDisks" => Ok(json_response(
                StatusCode::OK,
                body["properties"]["storageProfile"].clone(),
                None,
            )),
            (_, Some(body)) => Ok(json_response(StatusCode::OK, body, None)),
        },
    }
}

/// The resource's body as GET returns it (without `$expand`).
pub fn render(
    state: &State,
    resource: &super::state::Resource,
    now: DateTime<Utc>,
) -> serde_json::Value {
    match resource.kind {
        Kind::Vm => virtual_machines::render(resource, now, false),
        Kind::Disk => disks::render(state, resource),
        Kind::Nic | Kind::Gallery | Kind::GalleryImage | Kind::GalleryImageVersion => {
            resource.body.clone()
        }
        Kind::VirtualNetwork => networks::render(state, resource),
    }
}
