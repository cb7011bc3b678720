//! The admin API (`/sandbox/*`): fault rules, latency profile, request statistics, request log.
//! It requires the bearer token when one is configured, and is neither counted in the statistics
//! nor logged.
//!
//! - `GET /sandbox/faults` → `{"rules":[{"id":1,"fired":0,"matched":0,"kind":"throttle",...}]}`
//! - `PUT /sandbox/faults` with `{"rules":[rule...]}` (or a bare array) replaces every rule
//! - `POST /sandbox/faults` with one rule → 201 and the rule with its `id`; an invalid rule
//!   (see [`FaultRule::validate`]) → 400 `InvalidParameter` naming the field
//! - `DELETE /sandbox/faults` clears; `DELETE /sandbox/faults/{id}` removes one (404 if absent)
//! - `GET /sandbox/latency` → `{"profile":"short","scale":1.0}`; `PUT` the same (fields optional)
//! - `GET /sandbox/stats` → [`super::Stats`]; `DELETE /sandbox/stats` or
//!   `POST /sandbox/stats/reset` resets
//! - `GET /sandbox/requests[?contains=…&since=…]` → `{"requests":[`[`super::RequestRecord`]`...]}`;
//!   `DELETE /sandbox/requests` empties the log
//! - `POST /sandbox/seed` with
//!   `{"subscriptionId"?,"resourceGroup"?,"location"?,"resources"?:[{"type":"vm|nic|disk","name",
//!   "tags"?,"attachedTo"?,"diskSizeGB"?}...],"generate"?:[{"type","prefix","count","tags"?,
//!   "attachedTo"?,"diskSizeGB"?}...]}` → `{"seeded":n}`: test fixtures written straight into the
//!   state in steady state, replacing resources of the same name (see [`super::seed`]); generated
//!   names are `<prefix><index>` with 5 digits from `00000`; the scope defaults to the local
//!   stack's (`00000000-0000-0000-0000-000000000000`, `nodewright-local`, `westeurope`); an
//!   invalid field (unknown type, empty name, `count` over 100000, ...) → 400 `InvalidParameter`
//!   naming it (e.g. `generate[0].count`); a resource to replace that is busy → 409
//! - `GET /sandbox/quota` → the quota limits and size restrictions in force (the `[quota]`
//!   section as JSON, see [`super::QuotaConfig`]); `PUT /sandbox/quota` with the same shape
//!   replaces them (absent fields: their defaults) and answers them; an unknown family, size or
//!   zone → 400 `InvalidParameter` naming the field (e.g. `restrictions[0].size`)
//! - `DELETE /sandbox/seed?prefix=<p>` → `{"removed":n}`: removes every VM, NIC and disk whose name
//!   starts with `p` (case-insensitively, in any scope) straight from the state, without
//!   operations; a missing or empty `prefix` → 400 `InvalidParameter` naming `prefix`

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;
use serde_json::json;

use super::emulator::Emulator;
use super::error::ArmError;
use super::faults::FaultRule;
use super::http::query_map;
use super::latency::{Latency, LatencyProfile};
use super::quota::QuotaConfig;
use super::requests::RequestFilter;
use super::seed::{self, SeedRequest};

/// The admin routes.
pub fn routes() -> Router<Emulator> {
    Router::new()
        .route(
            "/sandbox/faults",
            get(list_faults)
                .put(replace_faults)
                .post(add_fault)
                .delete(clear_faults),
        )
        .route("/sandbox/faults/{id}", delete(remove_fault))
        .route("/sandbox/latency", get(get_latency).put(put_latency))
        .route("/sandbox/stats", get(get_stats).delete(reset_stats))
        .route("/sandbox/stats/reset", post(reset_stats))
        .route(
            "/sandbox/requests",
            get(list_requests).delete(clear_requests),
        )
        .route("/sandbox/seed", post(seed_resources).delete(remove_seeded))
        .route("/sandbox/quota", get(get_quota).put(put_quota))
}

async fn get_quota(State(em): State<Emulator>) -> Response {
    axum::Json(em.read(|core| core.quota.clone())).into_response()
}

/// Replaces the quota limits and restrictions: later creates and resizes are checked against
/// them (VMs already there stay, even beyond a lowered limit).
async fn put_quota(State(em): State<Emulator>, raw: Bytes) -> Result<Response, ArmError> {
    let quota: QuotaConfig = parse(&raw)?;
    quota
        .validate()
        .map_err(|e| ArmError::invalid(&e.field, e.message))?;
    em.write(|core, _| {
        core.quota = quota.clone();
        Ok(())
    })?;
    Ok(axum::Json(quota).into_response())
}

fn parse<T: serde::de::DeserializeOwned>(raw: &[u8]) -> Result<T, ArmError> {
    serde_json::from_slice(raw).map_err(|e| ArmError::InvalidRequestContent(e.to_string()))
}

async fn list_faults(State(em): State<Emulator>) -> Response {
    axum::Json(json!({ "rules": em.faults() })).into_response()
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RuleList {
    Wrapped { rules: Vec<FaultRule> },
    Bare(Vec<FaultRule>),
}

async fn replace_faults(State(em): State<Emulator>, raw: Bytes) -> Result<Response, ArmError> {
    let rules = match parse::<RuleList>(&raw)? {
        RuleList::Wrapped { rules } | RuleList::Bare(rules) => rules,
    };
    for (i, rule) in rules.iter().enumerate() {
        rule.validate()
            .map_err(|e| ArmError::invalid(&format!("rules[{i}].{}", e.field), e.message))?;
    }
    Ok(axum::Json(json!({ "rules": em.set_faults(rules) })).into_response())
}

async fn add_fault(State(em): State<Emulator>, raw: Bytes) -> Result<Response, ArmError> {
    let rule: FaultRule = parse(&raw)?;
    rule.validate()
        .map_err(|e| ArmError::invalid(e.field, e.message))?;
    Ok((StatusCode::CREATED, axum::Json(em.add_fault(rule))).into_response())
}

async fn clear_faults(State(em): State<Emulator>) -> StatusCode {
    em.clear_faults();
    StatusCode::NO_CONTENT
}

async fn remove_fault(
    State(em): State<Emulator>,
    Path(id): Path<u64>,
) -> Result<StatusCode, ArmError> {
    if em.remove_fault(id) {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ArmError::ResourceNotFound(format!("/sandbox/faults/{id}")))
    }
}

async fn get_latency(State(em): State<Emulator>) -> Response {
    axum::Json(em.latency()).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LatencyUpdate {
    profile: Option<LatencyProfile>,
    scale: Option<f64>,
}

async fn put_latency(State(em): State<Emulator>, raw: Bytes) -> Result<Response, ArmError> {
    let update: LatencyUpdate = parse(&raw)?;
    let current = em.latency();
    let scale = update.scale.unwrap_or(current.scale);
    if !scale.is_finite() || scale < 0.0 {
        return Err(ArmError::invalid(
            "scale",
            "scale must be a finite number >= 0",
        ));
    }
    let latency = Latency {
        profile: update.profile.unwrap_or(current.profile),
        scale,
    };
    em.set_latency(latency);
    Ok(axum::Json(latency).into_response())
}

async fn get_stats(State(em): State<Emulator>) -> Response {
    axum::Json(em.stats()).into_response()
}

async fn reset_stats(State(em): State<Emulator>) -> StatusCode {
    em.reset_stats();
    StatusCode::NO_CONTENT
}

async fn list_requests(
    State(em): State<Emulator>,
    RawQuery(query): RawQuery,
) -> Result<Response, ArmError> {
    let mut filter = RequestFilter::default();
    for (name, value) in query_map(query.as_deref()) {
        match name.as_str() {
            "contains" => filter.contains = Some(value),
            "since" => {
                let since = value.parse().map_err(|_| {
                    ArmError::invalid(
                        "since",
                        format!("since must be a sequence number, not '{value}'"),
                    )
                })?;
                filter.since = Some(since);
            }
            _ => {
                return Err(ArmError::invalid(
                    &name,
                    format!("unknown query parameter '{name}': use contains and since"),
                ));
            }
        }
    }
    Ok(axum::Json(json!({ "requests": em.requests(&filter) })).into_response())
}

async fn clear_requests(State(em): State<Emulator>) -> StatusCode {
    em.clear_requests();
    StatusCode::NO_CONTENT
}

async fn seed_resources(State(em): State<Emulator>, raw: Bytes) -> Result<Response, ArmError> {
    let plan = parse::<SeedRequest>(&raw)?.plan()?;
    let seeded = em.write(|core, now| seed::apply(core, &plan, now))?;
    Ok(axum::Json(json!({ "seeded": seeded })).into_response())
}

async fn remove_seeded(
    State(em): State<Emulator>,
    RawQuery(query): RawQuery,
) -> Result<Response, ArmError> {
    let mut prefix = None;
    for (name, value) in query_map(query.as_deref()) {
        match name.as_str() {
            "prefix" => prefix = Some(value),
            _ => {
                return Err(ArmError::invalid(
                    &name,
                    format!("unknown query parameter '{name}': use prefix"),
                ));
            }
        }
    }
    let prefix = prefix.filter(|p| !p.is_empty()).ok_or_else(|| {
        ArmError::invalid(
            "prefix",
            "prefix is required and must not be empty: DELETE /sandbox/seed?prefix=<p>",
        )
    })?;
    let removed = em.write(|core, _| Ok(seed::remove(core, &prefix)))?;
    Ok(axum::Json(json!({ "removed": removed })).into_response())
}
