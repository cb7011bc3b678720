//! The admin API for Spot and Scheduled Events (beside `admin.rs`, behind the same token, neither
//! counted nor logged):
//!
//! - `POST /sandbox/scheduled-events` with `{"eventType", "resources": [VM ids, or names with
//!   "subscription" and "resourceGroup"], "notBeforeSeconds"?, "durationInSeconds"?,
//!   "description"?, "eventSource"?}` → 201 and the event with its history
//!   ([`ScheduledEvent::admin`](super::state::events::ScheduledEvent::admin)); defaults: Azure's
//!   minimum notice of the type (`scheduled_events::default_notice`), -1, the sandbox's
//!   description, `Platform`; an unknown VM or a bad field → 400 `InvalidParameter` naming it
//! - `GET /sandbox/scheduled-events` → `{"events": [...]}`, current and ended (an hour), oldest
//!   first; `GET /sandbox/scheduled-events/{id}` → one (404 if absent)
//! - `DELETE /sandbox/scheduled-events/{id}` cancels a scheduled event (204; 404 if absent, 409
//!   once started)
//! - `GET /sandbox/eviction-notice` → `{"seconds": 30}`; `PUT` the same sets it (for evictions
//!   announced from then on)
//! - `GET /sandbox/spot-prices` → `{"prices": [{"size", "spotSupported", "spotPrice"?,
//!   "onDemandPrice"}]}`; `PUT` with `{"prices": {"Standard_D4s_v5": 0.5, ...}}` sets Spot prices
//!   (the sizes named only) and answers `{"prices": [...], "evicted": n}`: every running Spot VM
//!   whose `maxPrice` is now below its size's price gets its eviction announced, as Azure evicts
//!   for price; `DELETE` goes back to the catalog's prices

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;

use super::config::MAX_EVICTION_NOTICE_SECONDS;
use super::emulator::{Emulator, notice};
use super::error::ArmError;
use super::scheduled_events::{self, CancelError, NewEvent};
use super::state::{Kind, resource_id};

/// The routes.
pub fn routes() -> Router<Emulator> {
    Router::new()
        .route(
            "/sandbox/scheduled-events",
            get(list_events).post(add_event),
        )
        .route(
            "/sandbox/scheduled-events/{id}",
            get(get_event).delete(cancel_event),
        )
        .route("/sandbox/eviction-notice", get(get_notice).put(put_notice))
        .route(
            "/sandbox/spot-prices",
            get(get_prices).put(put_prices).delete(reset_prices),
        )
}

fn parse<T: serde::de::DeserializeOwned>(raw: &[u8]) -> Result<T, ArmError> {
    serde_json::from_slice(raw).map_err(|e| ArmError::InvalidRequestContent(e.to_string()))
}

/// The body of `POST /sandbox/scheduled-events`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EventRequest {
    event_type: String,
    resources: Vec<String>,
    subscription: Option<String>,
    resource_group: Option<String>,
    not_before_seconds: Option<u64>,
    duration_in_seconds: Option<i64>,
    description: Option<String>,
    event_source: Option<String>,
}

impl EventRequest {
    /// The VM ids the request names.
    fn vm_ids(&self) -> Result<Vec<String>, ArmError> {
        if self.resources.is_empty() {
            return Err(ArmError::invalid(
                "resources",
                "resources must name at least one VM",
            ));
        }
        self.resources
            .iter()
            .enumerate()
            .map(|(i, vm)| {
                if vm.starts_with('/') {
                    return Ok(vm.clone());
                }
                match (&self.subscription, &self.resource_group) {
                    (Some(sub), Some(rg)) => Ok(resource_id(sub, rg, Kind::Vm, vm)),
                    _ => Err(ArmError::invalid(
                        &format!("resources[{i}]"),
                        format!(
                            "'{vm}' is a VM name: give subscription and resourceGroup, or the VM's id"
                        ),
                    )),
                }
            })
            .collect()
    }
}

async fn add_event(State(em): State<Emulator>, raw: Bytes) -> Result<Response, ArmError> {
    let request: EventRequest = parse(&raw)?;
    if request.event_type.trim().is_empty() {
        return Err(ArmError::invalid(
            "eventType",
            "eventType must not be empty",
        ));
    }
    let source = request.event_source.clone().unwrap_or("Platform".into());
    if !["Platform", "User"].contains(&source.as_str()) {
        return Err(ArmError::invalid(
            "eventSource",
            format!("eventSource must be Platform or User, not '{source}'"),
        ));
    }
    let duration = request.duration_in_seconds.unwrap_or(-1);
    if duration < -1 {
        return Err(ArmError::invalid(
            "durationInSeconds",
            "durationInSeconds must be -1 (unknown) or at least 0",
        ));
    }
    let vms = request.vm_ids()?;
    let event = em.write(|core, now| {
        for (i, vm) in vms.iter().enumerate() {
            if !scheduled_events::vm_exists(core, vm) {
                return Err(ArmError::invalid(
                    &format!("resources[{i}]"),
                    format!("no virtual machine {vm}"),
                ));
            }
        }
        let notice = request
            .not_before_seconds
            .map(notice)
            .unwrap_or_else(|| scheduled_events::default_notice(core, &request.event_type));
        let new = NewEvent {
            event_type: request.event_type.clone(),
            resources: vms.clone(),
            not_before: now
                .checked_add_signed(notice)
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC),
            duration_seconds: duration,
            description: request
                .description
                .clone()
                .unwrap_or_else(|| scheduled_events::default_description(&request.event_type)),
            event_source: source.clone(),
        };
        Ok(scheduled_events::schedule(core, new, now))
    })?;
    Ok((StatusCode::CREATED, axum::Json(event.admin())).into_response())
}

async fn list_events(State(em): State<Emulator>) -> Response {
    let events = em.read(|core| {
        let mut events: Vec<_> = core.state.scheduled_events.events.values().collect();
        events.sort_by_key(|e| e.scheduled_at);
        events.iter().map(|e| e.admin()).collect::<Vec<_>>()
    });
    axum::Json(json!({ "events": events })).into_response()
}

async fn get_event(
    State(em): State<Emulator>,
    Path(id): Path<String>,
) -> Result<Response, ArmError> {
    em.read(|core| {
        core.state
            .scheduled_events
            .events
            .get(&id)
            .map(|e| e.admin())
    })
    .map(|event| axum::Json(event).into_response())
    .ok_or_else(|| ArmError::ResourceNotFound(format!("/sandbox/scheduled-events/{id}")))
}

async fn cancel_event(
    State(em): State<Emulator>,
    Path(id): Path<String>,
) -> Result<StatusCode, ArmError> {
    em.write(|core, now| {
        scheduled_events::cancel(core, &id, now).map_err(|e| match e {
            CancelError::NotFound(_) => {
                ArmError::ResourceNotFound(format!("/sandbox/scheduled-events/{id}"))
            }
            CancelError::Started(_) => ArmError::rejected(409, "Conflict", e.to_string()),
        })
    })?;
    Ok(StatusCode::NO_CONTENT)
}

/// `{"seconds": n}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Notice {
    seconds: u64,
}

async fn get_notice(State(em): State<Emulator>) -> Response {
    let seconds = em.read(|core| core.eviction_notice.num_seconds());
    axum::Json(json!({ "seconds": seconds })).into_response()
}

async fn put_notice(State(em): State<Emulator>, raw: Bytes) -> Result<Response, ArmError> {
    let wanted: Notice = parse(&raw)?;
    if wanted.seconds > MAX_EVICTION_NOTICE_SECONDS {
        return Err(ArmError::invalid(
            "seconds",
            format!("the eviction notice is at most {MAX_EVICTION_NOTICE_SECONDS} seconds"),
        ));
    }
    em.write(|core, _| {
        core.eviction_notice = notice(wanted.seconds);
        Ok(())
    })?;
    Ok(axum::Json(json!({ "seconds": wanted.seconds })).into_response())
}

async fn get_prices(State(em): State<Emulator>) -> Response {
    let prices = em.read(|core| core.spot_prices.list());
    axum::Json(json!({ "prices": prices })).into_response()
}

/// `{"prices": {"Standard_D4s_v5": 0.5}}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceUpdate {
    prices: BTreeMap<String, f64>,
}

async fn put_prices(State(em): State<Emulator>, raw: Bytes) -> Result<Response, ArmError> {
    let update: PriceUpdate = parse(&raw)?;
    let (prices, evicted) = em.write(|core, now| {
        let mut prices = core.spot_prices.clone();
        for (size, price) in &update.prices {
            prices
                .set(size, *price)
                .map_err(|e| ArmError::invalid(&format!("prices.{size}"), e.to_string()))?;
        }
        core.spot_prices = prices;
        let evicted = scheduled_events::evict_priced_out(core, now);
        Ok((core.spot_prices.list(), evicted))
    })?;
    Ok(axum::Json(json!({ "prices": prices, "evicted": evicted })).into_response())
}

async fn reset_prices(State(em): State<Emulator>) -> Result<Response, ArmError> {
    let prices = em.write(|core, _| {
        core.spot_prices.reset();
        Ok(core.spot_prices.list())
    })?;
    Ok(axum::Json(json!({ "prices": prices })).into_response())
}
