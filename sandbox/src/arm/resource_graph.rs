//! Azure Resource Graph (`POST /providers/Microsoft.ResourceGraph/resources`): a query over the
//! emulator's virtual machines as Resource Graph rows, paged as Azure pages it, under Azure's
//! per-user quota.
//!
//! A row is what Resource Graph keeps of a VM: `id`, `name`, `type` and `resourceGroup` in lower
//! case, `subscriptionId`, `location`, `tags`, `zones`, and `properties` as GET shows them plus
//! `properties.extended.instanceView.powerState` (`code` `PowerState/running`, `displayStatus`),
//! the one place Azure gives a VM's power state in a list of a resource group's VMs. The emulator's
//! table holds VMs only; a query selects them with [`query`]'s subset of KQL.
//!
//! Paging (`options.$top`, at most 1000 and 100 by default; `options.$skip`;
//! `options.$skipToken` from the previous page) and the answer's envelope (`totalRecords`,
//! `count`, `data`, `facets`, `resultTruncated`, `$skipToken`) follow the 2021-03-01 and later
//! api-versions with `resultFormat: objectArray`. The quota is Azure's default, 15 queries per
//! 5-second window per caller (`Emulator::take_graph_quota`), told in `x-ms-user-quota-remaining` and
//! `x-ms-user-quota-resets-after` on every answer; over it, 429 `RateLimiting`.
//!
//! Azure's index trails the resources by a few seconds; the emulator's does not. A client must
//! not rely on either (nodewright reads a VM missing from the index with a GET before it acts on
//! its absence).

mod query;

use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State as AxState;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::emulator::Emulator;
use super::error::ArmError;
use super::http::parse_object;
use super::paths::RESOURCE_GRAPH;
use super::requests::RequestScope;
use super::state::{Kind, Resource};
use super::virtual_machines::{body::instance_view, render};

/// The most rows a page holds (`options.$top` above it is refused).
const MAX_TOP: usize = 1000;

/// Rows per page when `options.$top` is not given.
const DEFAULT_TOP: usize = 100;

/// The Resource Graph route.
pub fn routes() -> Router<Emulator> {
    Router::new().route(RESOURCE_GRAPH, post(resources))
}

/// The request body (`QueryRequest`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryRequest {
    /// The subscriptions to query; every one the caller may read when empty.
    #[serde(default)]
    subscriptions: Vec<String>,
    /// The KQL query.
    query: String,
    /// Paging and format.
    #[serde(default)]
    options: QueryOptions,
}

/// `QueryRequestOptions`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryOptions {
    #[serde(rename = "$top")]
    top: Option<usize>,
    #[serde(rename = "$skip")]
    skip: Option<usize>,
    #[serde(rename = "$skipToken")]
    skip_token: Option<String>,
    result_format: Option<String>,
}

async fn resources(AxState(em): AxState<Emulator>, body: Bytes) -> Response {
    let (mut answer, remaining, resets_after) = match em.take_graph_quota() {
        Ok((remaining, resets_after)) => {
            let answer = match answer(&em, &body) {
                Ok(page) => (StatusCode::OK, axum::Json(page)).into_response(),
                Err(error) => error.into_response(),
            };
            (answer, remaining, resets_after)
        }
        Err(resets_after) => (rate_limited(), 0, resets_after),
    };
    if let Some(scope) = subscriptions_named(&body) {
        answer.extensions_mut().insert(RequestScope(scope));
    }
    with_quota(answer, remaining, resets_after)
}

/// The subscriptions the request body names, comma-separated, for the request log.
fn subscriptions_named(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let named: Vec<&str> = value["subscriptions"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    (!named.is_empty()).then(|| named.join(","))
}

/// The page the request asks for.
fn answer(em: &Emulator, body: &[u8]) -> Result<Value, ArmError> {
    let request: QueryRequest = serde_json::from_value(parse_object(body)?)
        .map_err(|e| ArmError::InvalidRequestContent(format!("the query request: {e}")))?;
    if let Some(format) = &request.options.result_format
        && !format.eq_ignore_ascii_case("objectArray")
    {
        return Err(ArmError::invalid(
            "options.resultFormat",
            format!(
                "The emulator answers resultFormat 'objectArray' only, not '{format}' (Azure's \
                 default since api-version 2021-03-01)."
            ),
        ));
    }
    let top = request.options.top.unwrap_or(DEFAULT_TOP);
    if top == 0 || top > MAX_TOP {
        return Err(ArmError::invalid(
            "options.$top",
            format!("$top must be between 1 and {MAX_TOP}, not {top}."),
        ));
    }
    let skip = match &request.options.skip_token {
        Some(token) => parse_skip_token(token).ok_or_else(|| {
            ArmError::invalid("options.$skipToken", "The skip token is not valid.")
        })?,
        None => request.options.skip.unwrap_or(0),
    };
    let parsed = query::parse(&request.query).map_err(|e| {
        ArmError::rejected(
            400,
            "BadRequest",
            format!("Query is invalid. Please refer to the documentation for the Azure Resource Graph service and fix the query before retrying. {e}"),
        )
    })?;
    let now = Utc::now();
    let table: Vec<Value> = em.read(|core| {
        core.state
            .resources
            .values()
            .filter(|r| r.kind == Kind::Vm)
            .map(|vm| row(vm, now))
            .filter(|row| in_subscriptions(row, &request.subscriptions))
            .collect()
    });
    let rows = parsed.run(table);
    let total = rows.len();
    let data: Vec<Value> = rows.into_iter().skip(skip).take(top).collect();
    let mut page = json!({
        "totalRecords": total,
        "count": data.len(),
        "data": data,
        "facets": [],
        "resultTruncated": "false",
    });
    if skip + top < total {
        page["$skipToken"] = json!(skip_token(skip + top));
    }
    Ok(page)
}

/// Whether the row is of one of `subscriptions` (any when empty).
fn in_subscriptions(row: &Value, subscriptions: &[String]) -> bool {
    let of = row["subscriptionId"].as_str().unwrap_or_default();
    subscriptions.is_empty() || subscriptions.iter().any(|s| s.eq_ignore_ascii_case(of))
}

/// The Resource Graph row of a VM.
fn row(vm: &Resource, now: chrono::DateTime<Utc>) -> Value {
    let body = render(vm, now, false);
    let id = vm.id();
    let segment = |name: &str| {
        let mut segments = id.split('/');
        segments.find(|s| s.eq_ignore_ascii_case(name))?;
        segments.next()
    };
    let mut properties = body["properties"].clone();
    let view = instance_view(vm, now);
    let power = view["statuses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| {
            s["code"]
                .as_str()
                .is_some_and(|c| c.starts_with("PowerState/"))
        })
        .map(|s| json!({ "code": s["code"], "displayStatus": s["displayStatus"] }));
    if let (Some(object), Some(power)) = (properties.as_object_mut(), power) {
        object.insert(
            "extended".into(),
            json!({ "instanceView": { "powerState": power } }),
        );
    }
    json!({
        "id": id,
        "name": body["name"],
        "type": Kind::Vm.type_name().to_ascii_lowercase(),
        "kind": "",
        "location": body["location"],
        "resourceGroup": segment("resourceGroups").unwrap_or_default().to_ascii_lowercase(),
        "subscriptionId": segment("subscriptions").unwrap_or_default(),
        "managedBy": "",
        "sku": null,
        "plan": null,
        "properties": properties,
        "tags": body.get("tags").cloned().unwrap_or_else(|| json!({})),
        "identity": body.get("identity").cloned().unwrap_or(Value::Null),
        "zones": body.get("zones").cloned().unwrap_or(Value::Null),
        "extendedLocation": null,
    })
}

fn skip_token(skip: usize) -> String {
    format!("nw-graph-skip-{skip}")
}

fn parse_skip_token(token: &str) -> Option<usize> {
    token.strip_prefix("nw-graph-skip-")?.parse().ok()
}

/// 429 `RateLimiting`, in Azure's words.
fn rate_limited() -> Response {
    ArmError::rejected(
        429,
        "RateLimiting",
        "Client application has been throttled and should not attempt to repeat the request \
         until an amount of time has elapsed. Please see https://aka.ms/resourcegraph-throttling \
         for help.",
    )
    .into_response()
}

/// The answer with the quota headers.
fn with_quota(mut response: Response, remaining: usize, resets_after: Duration) -> Response {
    let headers = response.headers_mut();
    headers.insert("x-ms-user-quota-remaining", HeaderValue::from(remaining));
    let seconds = resets_after.as_secs();
    let resets = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if let Ok(value) = HeaderValue::from_str(&resets) {
        headers.insert("x-ms-user-quota-resets-after", value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_tokens_round_trip_and_foreign_ones_are_refused() {
        assert_eq!(parse_skip_token(&skip_token(1000)), Some(1000));
        assert_eq!(parse_skip_token("ew0KICAiJGlkIjogIjEiLA0K"), None);
    }

    #[test]
    fn rows_are_kept_by_subscription_case_insensitively() {
        let row = json!({ "subscriptionId": "SUB-1" });
        assert!(in_subscriptions(&row, &[]));
        assert!(in_subscriptions(&row, &["sub-1".to_owned()]));
        assert!(!in_subscriptions(&row, &["sub-2".to_owned()]));
    }
}
