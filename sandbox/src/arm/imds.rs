//! The Instance Metadata Service's Scheduled Events, one service per VM: what a VM's agent reads
//! at `http://169.254.169.254/metadata/scheduledevents`, served under
//! `/imds/subscriptions/{sub}/resourceGroups/{rg}/virtualMachines/{vm}` (the VM's id without
//! `providers/Microsoft.Compute`, which is accepted too; any casing).
//!
//! - `GET …/metadata/scheduledevents?api-version=2020-07-01` with `Metadata: true` →
//!   `{"DocumentIncarnation", "Events": [...]}` (`state/events.rs`);
//! - `POST` the same with `{"StartRequests": [{"EventId": "…"}]}` approves events (200, even
//!   when approved already or gone; see `scheduled_events::acknowledge`).
//!
//! Refusals as IMDS words them: no `Metadata: true` header, 400 `{"error": "Bad request.
//! Required metadata header not specified"}`; a missing or unknown api-version, 400 with
//! `newest-versions`; a malformed POST body, 400; a VM that does not exist, 404 (the sandbox's
//! choice: a real VM's metadata service always answers). These are not ARM requests: no bearer
//! token, no ARM fault rules; they are counted in the stats and the request log as `imds.get`
//! and `imds.post`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;

use super::emulator::Emulator;
use super::http::query_map;
use super::requests::RequestRecord;
use super::scheduled_events;
use super::state::{Kind, resource_id};

/// Where the metadata services are served.
pub const PREFIX: &str = "/imds";

/// The api-versions Scheduled Events accepts (Microsoft Learn, *Scheduled Events*), newest
/// first; every one gets the same body.
pub const API_VERSIONS: [&str; 7] = [
    "2020-07-01",
    "2019-08-01",
    "2019-04-01",
    "2019-01-01",
    "2017-11-01",
    "2017-08-01",
    "2017-03-01",
];

/// The routes, behind their own counting layer.
pub fn routes(emulator: Emulator) -> Router<Emulator> {
    Router::new()
        .route(
            &format!("{PREFIX}/{{*rest}}"),
            get(read_events).post(start_events),
        )
        .layer(axum::middleware::from_fn_with_state(emulator, layer))
}

/// Counts the request as `imds.get` / `imds.post` in the stats and the request log.
async fn layer(State(em): State<Emulator>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let operation = if method == Method::POST {
        "imds.post"
    } else {
        "imds.get"
    };
    let response = next.run(request).await;
    em.record(RequestRecord {
        seq: 0,
        time: Utc::now(),
        method: method.as_str().to_owned(),
        path,
        operation: operation.to_owned(),
        status: response.status().as_u16(),
        retry_after: None,
        code: None,
        scope: None,
    });
    response
}

/// An IMDS refusal: its status and body (`{"error": "…"}`).
struct Refusal {
    status: StatusCode,
    body: serde_json::Value,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}

fn refusal(status: StatusCode, body: serde_json::Value) -> Refusal {
    Refusal { status, body }
}

fn bad_request(message: &str) -> Refusal {
    refusal(StatusCode::BAD_REQUEST, json!({ "error": message }))
}

/// The VM id a path after `/imds/` names, when it is a Scheduled Events path.
fn vm_of(rest: &str) -> Option<String> {
    let segments: Vec<&str> = rest.trim_matches('/').split('/').collect();
    let is = |i: usize, word: &str| {
        segments
            .get(i)
            .is_some_and(|s| s.eq_ignore_ascii_case(word))
    };
    let tail = if is(4, "providers") && is(5, "Microsoft.Compute") {
        6
    } else {
        4
    };
    let shape = segments.len() == tail + 4
        && is(0, "subscriptions")
        && is(2, "resourceGroups")
        && is(tail, "virtualMachines")
        && is(tail + 2, "metadata")
        && is(tail + 3, "scheduledevents");
    shape.then(|| resource_id(segments[1], segments[3], Kind::Vm, segments[tail + 1]))
}

/// The VM the request's path names, after IMDS's header and api-version checks.
fn checked_vm(rest: &str, headers: &HeaderMap, uri: &Uri) -> Result<String, Refusal> {
    let vm = vm_of(rest)
        .ok_or_else(|| refusal(StatusCode::NOT_FOUND, json!({ "error": "Not found" })))?;
    let metadata = headers
        .get("metadata")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if !metadata {
        return Err(bad_request(
            "Bad request. Required metadata header not specified",
        ));
    }
    let newest = &API_VERSIONS[..3];
    match query_map(uri.query()).get("api-version") {
        None => Err(refusal(
            StatusCode::BAD_REQUEST,
            json!({
                "error": "Bad request. api-version was not specified in the request. For more information refer to aka.ms/azureimds",
                "newest-versions": newest,
            }),
        )),
        Some(version) if !API_VERSIONS.contains(&version.as_str()) => Err(refusal(
            StatusCode::BAD_REQUEST,
            json!({
                "error": "Bad request. api-version is invalid or was not specified in the proper format. For more information refer to aka.ms/azureimds",
                "newest-versions": newest,
            }),
        )),
        Some(_) => Ok(vm),
    }
}

/// The 404 for a VM that does not exist.
fn no_vm() -> Refusal {
    refusal(StatusCode::NOT_FOUND, json!({ "error": "Not found" }))
}

/// `GET …/metadata/scheduledevents`: the VM's document.
async fn read_events(
    State(em): State<Emulator>,
    Path(rest): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, Refusal> {
    let vm = checked_vm(&rest, &headers, &uri)?;
    let document = em.read(|core| {
        scheduled_events::vm_exists(core, &vm).then(|| core.state.scheduled_events.document(&vm))
    });
    match document {
        Some(document) => Ok((StatusCode::OK, axum::Json(document)).into_response()),
        None => Err(no_vm()),
    }
}

/// `{"StartRequests": [{"EventId": "…"}]}`.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StartRequests {
    start_requests: Vec<StartRequest>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StartRequest {
    event_id: String,
}

/// `POST …/metadata/scheduledevents`: approves events.
async fn start_events(
    State(em): State<Emulator>,
    Path(rest): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Result<Response, Refusal> {
    let vm = checked_vm(&rest, &headers, &uri)?;
    let Ok(requests) = serde_json::from_slice::<StartRequests>(&body) else {
        return Err(bad_request(
            "Bad request. The body must be {\"StartRequests\": [{\"EventId\": \"<id>\"}]}",
        ));
    };
    let ids: Vec<String> = requests
        .start_requests
        .into_iter()
        .map(|r| r.event_id)
        .collect();
    let result = em.write(|core, now| {
        if !scheduled_events::vm_exists(core, &vm) {
            return Err(super::error::ArmError::ResourceNotFound(vm.clone()));
        }
        scheduled_events::acknowledge(core, &vm, &ids, now);
        Ok(())
    });
    match result {
        Ok(()) => Ok(StatusCode::OK.into_response()),
        Err(_) => Err(no_vm()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vm_comes_from_the_path_in_either_form_and_any_casing() {
        let id =
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-1";
        assert_eq!(
            vm_of(
                "subscriptions/s/resourceGroups/rg/virtualMachines/vm-1/metadata/scheduledevents"
            )
            .as_deref(),
            Some(id)
        );
        assert_eq!(
            vm_of("subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm-1/metadata/scheduledevents")
                .as_deref(),
            Some(id)
        );
        assert_eq!(
            vm_of("subscriptions/s/resourceGroups/rg/virtualMachines/vm-1/metadata"),
            None
        );
        assert_eq!(vm_of("metadata/scheduledevents"), None);
    }
}
