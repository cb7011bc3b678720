//! Async operations: the records behind `Azure-AsyncOperation` and `Location` URLs, the two
//! polling endpoints, and what happens to resources when an operation completes.

use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::error::ArmError;
use super::http::{Ctx, Links, accepted, json_response};
use super::state::{Kind, Power, State, after, key, timestamp};
use super::{Emulator, data_disks, disks, virtual_machines};

/// An operation's status as the operation resource reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpStatus {
    /// Still running.
    InProgress,
    /// Done.
    Succeeded,
    /// Done, with `error`.
    Failed,
    /// Cancelled (the emulator never cancels, but clients must handle it).
    Canceled,
}

/// What an operation does to its resource when it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// A PUT that created the resource.
    Create,
    /// A PUT, PATCH or data-disk change on an existing resource.
    Update,
    /// A DELETE.
    Delete,
    /// VM deallocate.
    Deallocate,
    /// VM powerOff.
    PowerOff,
    /// VM start.
    Start,
}

/// An ARM error an operation ended with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpError {
    /// ARM code, e.g. `AllocationFailed`.
    pub code: String,
    /// ARM message.
    pub message: String,
    /// Status of the `Location` result.
    pub status: u16,
}

/// One operation record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Operation {
    /// Operation id (a UUID).
    pub id: String,
    /// Operation name, e.g. `vm.put`, `csi.attach`.
    pub name: String,
    /// The kind of the resource it works on.
    pub kind: Kind,
    /// What completion does.
    pub action: Action,
    /// The resource id.
    pub resource: String,
    /// Subscription, for the polling URLs.
    pub subscription: String,
    /// Region, for the polling URLs.
    pub location: String,
    /// api-version the client used.
    pub api_version: String,
    /// Current status.
    pub status: OpStatus,
    /// When it started.
    pub start_time: DateTime<Utc>,
    /// When it ended.
    pub end_time: Option<DateTime<Utc>>,
    /// When it is due to complete.
    pub due: DateTime<Utc>,
    /// The error it ended with.
    pub error: Option<OpError>,
    /// The error it will end with (a `fail_operation` fault).
    pub fail_with: Option<OpError>,
    /// A `hang_detach` rule holding it while that rule exists.
    pub hang_rule: Option<u64>,
    /// Disks (ids) it attaches to the VM.
    pub attach: Vec<String>,
    /// Disks (ids) it detaches from the VM.
    pub detach: Vec<String>,
    /// The disks of `detach` it detaches with `detachOption: ForceDetach` (never held by a
    /// `hang_detach` rule).
    #[serde(default)]
    pub force_detach: Vec<String>,
    /// Operations it waits for: it does not complete while one of them is in progress (an
    /// operation whose disk a force detach took over ends with that force detach).
    #[serde(default)]
    pub waits_for: Vec<String>,
    /// Resources (ids) created along with the resource (a VM's OS disk).
    pub created: Vec<String>,
    /// Identifies the request, so an identical repeated PUT gets the same operation.
    pub fingerprint: Option<String>,
    /// `Retry-After` seconds for polls.
    pub retry_after: u64,
}

impl Operation {
    /// The polling URLs of this operation, absolute under `base` (`http://host`).
    pub fn links(&self, base: &str) -> Links {
        let prefix = format!(
            "{base}/subscriptions/{}/providers/{}/locations/{}",
            self.subscription,
            self.kind.provider(),
            self.location
        );
        Links {
            async_operation: format!(
                "{prefix}/operations/{}?api-version={}",
                self.id, self.api_version
            ),
            location: format!(
                "{prefix}/operationResults/{}?api-version={}",
                self.id, self.api_version
            ),
            retry_after: self.retry_after,
        }
    }

    /// The operation resource body.
    pub fn body(&self) -> serde_json::Value {
        let mut body = json!({
            "name": self.id,
            "status": self.status,
            "startTime": timestamp(self.start_time),
        });
        if let Some(end) = self.end_time {
            body["endTime"] = json!(timestamp(end));
        }
        if let Some(error) = &self.error {
            body["error"] = json!({ "code": error.code, "message": error.message });
        }
        body
    }
}

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
    if op.status == OpStatus::InProgress {
        response
            .headers_mut()
            .insert("retry-after", op.retry_after.into());
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
        OpStatus::InProgress => Ok(accepted(
            StatusCode::ACCEPTED,
            None,
            &op.links(&ctx.base),
            false,
        )),
        OpStatus::Failed | OpStatus::Canceled => {
            let error = op.error.unwrap_or(OpError {
                code: "Canceled".into(),
                message: "The operation was canceled.".into(),
                status: 409,
            });
            Err(ArmError::rejected(error.status, &error.code, error.message))
        }
        OpStatus::Succeeded => match (op.action, body) {
            (Action::Delete | Action::Deallocate | Action::PowerOff | Action::Start, _)
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
        Kind::Nic => resource.body.clone(),
    }
}

/// Completes the operation: applies its effects, records its outcome, frees its resources.
pub fn complete(state: &mut State, op_id: &str, now: DateTime<Utc>, boot: Duration) {
    let Some(op) = state.operations.get(op_id).cloned() else {
        return;
    };
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
        r.set_provisioning_state("Failed");
        r.last_error = op.fail_with.as_ref().map(|e| e.code.clone());
        if let Some(power) = r.power {
            r.power = Some(match (op.action, power) {
                (Action::Create | Action::Start, _) => Power::Stopped,
                (_, Power::Stopping | Power::Deallocating) => Power::Running,
                (_, other) => other,
            });
        }
    }
    if !succeeded {
        for id in &op.created {
            state.resources.remove(&key(id));
        }
    }
    if let Some(record) = state.operations.get_mut(op_id) {
        record.status = if succeeded {
            OpStatus::Succeeded
        } else {
            OpStatus::Failed
        };
        record.error = op.fail_with.clone();
        record.end_time = Some(now);
    }
}

fn succeed(state: &mut State, op: &Operation, now: DateTime<Utc>, boot_at: DateTime<Utc>) {
    if op.action == Action::Delete {
        if let Some(gone) = state.resources.remove(&key(&op.resource))
            && gone.kind == Kind::Vm
        {
            virtual_machines::cascade_delete(state, &gone.body);
        }
        return;
    }
    for id in &op.created {
        if let Some(disk) = state.get_mut(id) {
            disk.set_provisioning_state("Succeeded");
        }
    }
    let resource_key = key(&op.resource);
    if op.kind == Kind::Vm && matches!(op.action, Action::Create | Action::Start) {
        state.pending_boots.insert(resource_key.clone());
    }
    let Some(r) = state.resources.get_mut(&resource_key) else {
        return;
    };
    // Another operation still runs on it (a force detach ended before the update it preempted):
    // the provisioning state stays non-terminal until that one ends.
    if r.busy.is_none() {
        r.set_provisioning_state("Succeeded");
    }
    r.last_error = None;
    let power = match op.action {
        Action::Create | Action::Start => {
            r.boot_at = Some(boot_at.max(now));
            r.boot_signalled = false;
            Some(Power::Running)
        }
        Action::Deallocate => Some(Power::Deallocated),
        Action::PowerOff => Some(Power::Stopped),
        Action::Update | Action::Delete => r.power,
    };
    r.power = power;
}
