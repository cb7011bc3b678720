//! HTTP plumbing shared by the resource modules: the per-request context extractor, response
//! builders, conditional-request checks, body parsing, and the middleware that authenticates,
//! checks api-versions, injects request faults, stamps request ids, counts and logs requests.

use std::collections::HashMap;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::api_versions::check_api_version;
use super::emulator::Emulator;
use super::engine::OpSpec;
use super::error::ArmError;
use super::faults::{Concerns, Target};
use super::latency::Step;
use super::paths::vm_in_path;
use super::requests::RequestRecord;
use super::state::{
    Action, Collection, Kind, Links, Resource, State as EmState, page_token, page_where,
    parse_page_token, strip_nulls,
};
use super::stats::operation_name;

/// What every handler needs to know about its request.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// `http://{Host}`: the base of absolute URLs in the answer.
    pub base: String,
    /// The request path.
    pub path: String,
    /// The request method.
    pub method: Method,
    /// The operation name, e.g. `vm.put`.
    pub operation: String,
    /// The api-version query parameter.
    pub api_version: String,
    /// Query parameters, keys lower-cased.
    pub query: HashMap<String, String>,
    /// `If-Match`.
    pub if_match: Option<String>,
    /// `If-None-Match`.
    pub if_none_match: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for Ctx {
    type Rejection = ArmError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ArmError> {
        let query = query_map(parts.uri.query());
        let header = |name: header::HeaderName| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Ok(Self {
            base: base_url(&parts.headers),
            path: parts.uri.path().to_owned(),
            method: parts.method.clone(),
            operation: operation_name(&parts.method, parts.uri.path()),
            api_version: query.get("api-version").cloned().unwrap_or_default(),
            if_match: header(header::IF_MATCH),
            if_none_match: header(header::IF_NONE_MATCH),
            query,
        })
    }
}

impl Ctx {
    /// Whether the query parameter is `true` (case-insensitive).
    pub fn flag(&self, name: &str) -> bool {
        self.query
            .get(&name.to_ascii_lowercase())
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// Checks `If-Match` / `If-None-Match` against the resource (absent = `None`).
    pub fn check_conditions(&self, existing: Option<&Resource>) -> Result<(), ArmError> {
        let etag = existing.map(|r| normalize_etag(r.etag()));
        if let Some(wanted) = &self.if_match {
            let ok = match &etag {
                None => false,
                Some(_) if wanted.trim() == "*" => true,
                Some(tag) => wanted.split(',').any(|w| normalize_etag(w) == *tag),
            };
            if !ok {
                return Err(ArmError::PreconditionFailed);
            }
        }
        if let Some(unwanted) = &self.if_none_match {
            let clash = match &etag {
                None => false,
                Some(_) if unwanted.trim() == "*" => true,
                Some(tag) => unwanted.split(',').any(|w| normalize_etag(w) == *tag),
            };
            if clash {
                return Err(ArmError::PreconditionFailed);
            }
        }
        Ok(())
    }
}

fn normalize_etag(tag: &str) -> String {
    tag.trim()
        .trim_start_matches("W/")
        .trim_matches('"')
        .to_owned()
}

/// Query parameters with lower-cased keys.
pub fn query_map(query: Option<&str>) -> HashMap<String, String> {
    url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.to_ascii_lowercase(), v.into_owned()))
        .collect()
}

/// `http://{Host}`, or `http://localhost` without a Host header.
pub fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// Parses a request body as a JSON object, dropping `null` members.
pub fn parse_object(body: &[u8]) -> Result<Value, ArmError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ArmError::InvalidRequestContent(
            "the request body is empty".into(),
        ));
    }
    let mut value: Value =
        serde_json::from_slice(body).map_err(|e| ArmError::InvalidRequestContent(e.to_string()))?;
    if !value.is_object() {
        return Err(ArmError::InvalidRequestContent(
            "the request body must be a JSON object".into(),
        ));
    }
    strip_nulls(&mut value);
    for field in ["properties", "tags"] {
        if value.get(field).is_some_and(|v| !v.is_object()) {
            return Err(ArmError::invalid(
                field,
                format!("'{field}' must be an object"),
            ));
        }
    }
    check_tag_names(&value)?;
    Ok(value)
}

/// Characters Azure refuses in tag names (besides control characters).
const RESERVED_TAG_CHARACTERS: &[char] = &['<', '>', '%', '&', '\\', '?', '/'];

/// Refuses tag names Azure refuses, with its error code and message.
pub(super) fn check_tag_names(body: &Value) -> Result<(), ArmError> {
    let Some(tags) = body.get("tags").and_then(Value::as_object) else {
        return Ok(());
    };
    let refused: Vec<&str> = tags
        .keys()
        .map(String::as_str)
        .filter(|name| {
            name.chars()
                .any(|c| RESERVED_TAG_CHARACTERS.contains(&c) || c.is_control())
        })
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    Err(ArmError::rejected(
        400,
        "InvalidTagNameCharacters",
        format!(
            "The tag names '{}' have reserved characters '<,>,%,&,\\,?,/' or control characters.",
            refused.join(",")
        ),
    ))
}

impl Ctx {
    /// What this request starts on `resource`: no VM name filter, no disk work, no
    /// fingerprint (callers set those fields when they apply). `force_detach` lists the disks of
    /// `detach` detached with `detachOption: ForceDetach`.
    pub fn op_spec<'a>(
        &'a self,
        subscription: &'a str,
        kind: Kind,
        action: Action,
        resource: String,
        location: String,
        steps: Vec<Step>,
    ) -> OpSpec<'a> {
        OpSpec {
            name: &self.operation,
            method: self.method.as_str(),
            path: &self.path,
            vm: None,
            kind,
            action,
            resource,
            subscription,
            location,
            api_version: &self.api_version,
            steps,
            attach: Vec::new(),
            detach: Vec::new(),
            force_detach: Vec::new(),
            created: Vec::new(),
            fingerprint: None,
        }
    }
}

/// A JSON answer, with an `ETag` header when given.
pub fn json_response(status: StatusCode, body: Value, etag: Option<&str>) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(tag) = etag.and_then(|t| HeaderValue::from_str(t).ok()) {
        response.headers_mut().insert(header::ETAG, tag);
    }
    response
}

/// An answer to a request that started an operation: `Azure-AsyncOperation`, `Retry-After`,
/// and `Location` when `location` is set.
pub fn accepted(
    status: StatusCode,
    body: Option<Value>,
    links: &Links,
    location: bool,
) -> Response {
    let mut response = match body {
        Some(body) => (status, axum::Json(body)).into_response(),
        None => status.into_response(),
    };
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&links.async_operation) {
        headers.insert("azure-asyncoperation", v);
    }
    if location && let Ok(v) = HeaderValue::from_str(&links.location) {
        headers.insert(header::LOCATION, v);
    }
    if let Some(seconds) = links.retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// The largest request body the middleware reads to find what a write concerns (ARM's own
/// limit).
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// What the VM (or disk) a request concerns is, for fault rules with `zone`, `size` or
/// `priority`: each read from a PUT's or PATCH's body (`zones[0]`, `hardwareProfile.vmSize`,
/// `priority`, `Regular` for a VM body without one), else from the stored resource (for an
/// operation poll, the operation's resource). The request comes back whole, its body read into
/// memory when it was a PUT or PATCH.
async fn request_concerns(
    em: &Emulator,
    method: &Method,
    path: &str,
    request: Request,
) -> Result<(Request, Concerns), ArmError> {
    let (request, in_body) = if method == Method::PUT || method == Method::PATCH {
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
            .await
            .map_err(|_| {
                ArmError::rejected(
                    413,
                    "RequestEntityTooLarge",
                    format!("The request body is larger than {MAX_BODY_BYTES} bytes."),
                )
            })?;
        let concerns = serde_json::from_slice::<Value>(&bytes)
            .map(|body| Concerns::of(&body))
            .unwrap_or_default();
        (
            Request::from_parts(parts, axum::body::Body::from(bytes)),
            concerns,
        )
    } else {
        (request, Concerns::default())
    };
    if in_body.zone.is_some() && in_body.size.is_some() && in_body.priority.is_some() {
        return Ok((request, in_body));
    }
    let operation_id = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    let stored = em.read(|core| {
        const VMS: &str = "/virtualmachines/";
        let vm_at = path.to_ascii_lowercase().find(VMS);
        let resource = match (vm_at, vm_in_path(path)) {
            (Some(at), Some(name)) => core.state.get(&path[..at + VMS.len() + name.len()]),
            _ => core.state.get(path).or_else(|| {
                core.state
                    .operations
                    .get(operation_id)
                    .and_then(|op| core.state.get(&op.resource))
            }),
        };
        resource.map(|r| Concerns::of(&r.body)).unwrap_or_default()
    });
    Ok((request, in_body.or(stored)))
}

/// The middleware around every route.
pub async fn layer(State(em): State<Emulator>, request: Request, next: Next) -> Response {
    let request_id = uuid::Uuid::new_v4().to_string();
    let correlation = request
        .headers()
        .get("x-ms-correlation-request-id")
        .cloned()
        .unwrap_or_else(|| {
            HeaderValue::from_str(&request_id).unwrap_or(HeaderValue::from_static("-"))
        });
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let is_arm = path.starts_with("/subscriptions/") || path.starts_with("/providers/");
    let needs_auth = is_arm || path.starts_with("/sandbox");
    let operation = operation_name(&method, &path);
    let authorized = !needs_auth || em.authorized(request.headers().get(header::AUTHORIZATION));

    let mut response = if !authorized {
        ArmError::AuthenticationFailed.into_response()
    } else if is_arm {
        let query = query_map(request.uri().query());
        // An operation's polling URL names only the operation: a rule on a VM also holds the
        // polls of that VM's operations.
        let operation_vm = matches!(operation.as_str(), "operation.status" | "operation.result")
            .then(|| em.operation_vm(&path))
            .flatten();
        let (request, concerns) = match request_concerns(&em, &method, &path, request).await {
            Ok(read) => read,
            Err(e) => return e.into_response(),
        };
        let target = Target {
            operation: &operation,
            method: method.as_str(),
            path: &path,
            vm: vm_in_path(&path).or(operation_vm.as_deref()),
            zone: concerns.zone.as_deref(),
            size: concerns.size.as_deref(),
            priority: concerns.priority.as_deref(),
        };
        if let Some(hold) = em.stall(target) {
            let gave_up = GaveUp {
                emulator: em.clone(),
                record: Some(RequestRecord {
                    seq: 0,
                    time: chrono::Utc::now(),
                    method: method.as_str().to_owned(),
                    path: path.clone(),
                    operation: operation.clone(),
                    status: CLIENT_CLOSED_REQUEST,
                    retry_after: None,
                    code: None,
                    scope: None,
                }),
            };
            tokio::time::sleep(hold).await;
            gave_up.answered();
        }
        match check_api_version(&path, query.get("api-version").map(String::as_str)) {
            Err(e) => e.into_response(),
            Ok(()) => match em.request_fault(target) {
                Some(e) => e.into_response(),
                None => next.run(request).await,
            },
        }
    } else {
        next.run(request).await
    };

    let status = response.status();
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        headers.insert("x-ms-request-id", v);
    }
    headers.insert("x-ms-correlation-request-id", correlation);
    let throttled = status == StatusCode::TOO_MANY_REQUESTS;
    let (reads, writes) = match (throttled, method == Method::GET) {
        (true, true) => (0u32, 1199),
        (true, false) => (11999, 0),
        (false, _) => (11999, 1199),
    };
    headers.insert("x-ms-ratelimit-remaining-subscription-reads", reads.into());
    headers.insert(
        "x-ms-ratelimit-remaining-subscription-writes",
        writes.into(),
    );
    if is_arm {
        tracing::debug!(%method, %path, status = status.as_u16(), %operation, "arm request");
        let retry_after = headers
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let code = headers
            .get("x-ms-error-code")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        em.record(RequestRecord {
            seq: 0,
            time: chrono::Utc::now(),
            method: method.as_str().to_owned(),
            path,
            operation,
            status: status.as_u16(),
            retry_after,
            code,
            scope: response
                .extensions()
                .get::<super::requests::RequestScope>()
                .map(|scope| scope.0.clone()),
        });
    }
    response
}

/// The status the request log gives a request whose client gave up before its answer (nginx's
/// "client closed request"; never sent, since nobody is listening).
pub const CLIENT_CLOSED_REQUEST: u16 = 499;

/// Records a stalled request as given up (status 499) when its handler is dropped before the
/// stall ends: the client closed the connection.
struct GaveUp {
    emulator: Emulator,
    record: Option<RequestRecord>,
}

impl GaveUp {
    /// The stall ended with the client still there: nothing to record.
    fn answered(mut self) {
        self.record = None;
    }
}

impl Drop for GaveUp {
    fn drop(&mut self) {
        if let Some(mut record) = self.record.take() {
            tracing::info!(path = %record.path, "the client gave up a stalled request");
            record.time = chrono::Utc::now();
            self.emulator.record(record);
        }
    }
}

/// One page of a list answer: `{"value":[...],"nextLink":<absolute URL>}`. When a
/// `repeat_next_link` rule fires, the `nextLink` is this page's own URL instead.
pub fn list_response(
    em: &Emulator,
    ctx: &Ctx,
    collection: &Collection,
    render: impl Fn(&EmState, &Resource) -> Value,
) -> Result<Response, ArmError> {
    list_response_where(em, ctx, collection, |_| true, render)
}

/// [`list_response`] of the members `keep` accepts (a list's `$filter`): pages count only
/// those.
pub fn list_response_where(
    em: &Emulator,
    ctx: &Ctx,
    collection: &Collection,
    keep: impl Fn(&Resource) -> bool,
    render: impl Fn(&EmState, &Resource) -> Value,
) -> Result<Response, ArmError> {
    let repeat = em.repeats_page(Target {
        operation: &ctx.operation,
        method: ctx.method.as_str(),
        path: &ctx.path,
        vm: None,
        zone: None,
        size: None,
        priority: None,
    });
    let after = match ctx.query.get("$skiptoken") {
        None => None,
        Some(token) => Some(
            parse_page_token(token)
                .ok_or_else(|| ArmError::invalid("$skiptoken", "The skip token is not valid."))?,
        ),
    };
    let (value, next) = em.read(|core| {
        let (items, next) = page_where(
            &core.state,
            collection,
            after.as_deref(),
            core.page_size,
            &keep,
        );
        let value: Vec<Value> = items.into_iter().map(|r| render(&core.state, r)).collect();
        (value, next)
    });
    let mut body = serde_json::json!({ "value": value });
    let link = |after: Option<&str>| {
        let mut link = format!("{}{}?api-version={}", ctx.base, ctx.path, ctx.api_version);
        // A list's own parameters go on to its next page.
        for (key, name) in [
            ("statusonly", "statusOnly"),
            ("$filter", "$filter"),
            ("$expand", "$expand"),
        ] {
            if let Some(value) = ctx.query.get(key) {
                link.push('&');
                link.push_str(name);
                link.push('=');
                link.extend(url::form_urlencoded::byte_serialize(value.as_bytes()));
            }
        }
        if let Some(after) = after {
            link.push_str("&$skiptoken=");
            link.push_str(&page_token(after));
        }
        link
    };
    if repeat {
        body["nextLink"] = Value::from(link(after.as_deref()));
    } else if let Some(last) = next {
        body["nextLink"] = Value::from(link(Some(&last)));
    }
    Ok(json_response(StatusCode::OK, body, None))
}
