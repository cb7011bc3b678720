//! The Key Vault secrets data plane, served under `/keyvault/{vault}` on the emulator's listener
//! so that a worker with `azure.key_vault_endpoint = http://<sandbox>/keyvault` reads
//! `https://{vault}.vault.azure.net/secrets/...` here:
//!
//! - `PUT /keyvault/{vault}/secrets/{name}?api-version=...` (SetSecret): body `{value,
//!   contentType?, attributes?: {enabled?}, tags?}`; creates a new version (32 hex digits) and
//!   answers its SecretBundle.
//! - `GET /keyvault/{vault}/secrets/{name}[/{version}]?api-version=...` (GetSecret): the latest
//!   or the given version's SecretBundle (`value`, `id` = the full versioned URI on the vault's
//!   real-looking base `https://{vault}.vault.azure.net`, `attributes`, `contentType`, `tags`).
//!
//! As Key Vault answers: 401 with a `WWW-Authenticate` challenge without the sandbox's token,
//! 400 `BadParameter` without an api-version or with a bad name or body, 404 `SecretNotFound`,
//! 403 `Forbidden` for a disabled secret; errors are `{"error":{"code","message"}}`. Vaults
//! exist as soon as a secret is set in them. Secrets are persisted with the rest of the state and
//! counted in the stats as `keyvault.secret.set` and `keyvault.secret.get`.

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State as AxState};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::emulator::Emulator;
use super::http::query_map;
use super::requests::RequestRecord;

/// Where the data plane is served.
pub const PREFIX: &str = "/keyvault";

/// The tenant the 401 challenge names.
pub const SANDBOX_TENANT: &str = "00000000-0000-0000-0000-000000000000";

/// The recovery level every secret reports (soft delete and purge protection off).
const RECOVERY_LEVEL: &str = "Recoverable+Purgeable";

pub use super::state::vaults::{SecretVersion, StoredSecret, Vaults};

/// The routes, behind the data plane's own authentication and api-version check.
pub fn routes(emulator: Emulator) -> Router<Emulator> {
    Router::new()
        .route(
            &format!("{PREFIX}/{{vault}}/secrets/{{name}}"),
            get(get_latest).put(set_secret),
        )
        .route(
            &format!("{PREFIX}/{{vault}}/secrets/{{name}}/{{version}}"),
            get(get_version),
        )
        .layer(axum::middleware::from_fn_with_state(emulator, layer))
}

/// A Key Vault refusal.
struct Refusal {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl Refusal {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    fn bad(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadParameter", message)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "code": self.code, "message": self.message } });
        (self.status, axum::Json(body)).into_response()
    }
}

/// Authentication (401 with Key Vault's challenge), the api-version, the stats and the request
/// log.
async fn layer(AxState(em): AxState<Emulator>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let operation = if method == axum::http::Method::PUT {
        "keyvault.secret.set"
    } else {
        "keyvault.secret.get"
    };
    let api_version = query_map(request.uri().query())
        .get("api-version")
        .cloned()
        .unwrap_or_default();
    let response = if !em.authorized(request.headers().get(header::AUTHORIZATION)) {
        let mut response = Refusal::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "AKV10000: Request is missing a Bearer or PoP token, or its token is not valid.",
        )
        .into_response();
        let challenge = format!(
            "Bearer authorization=\"https://login.microsoftonline.com/{SANDBOX_TENANT}\", resource=\"https://vault.azure.net\""
        );
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    } else if api_version.is_empty() {
        Refusal::bad("The api-version query parameter is missing; add ?api-version=2025-07-01.")
            .into_response()
    } else {
        next.run(request).await
    };
    tracing::debug!(%method, %path, status = response.status().as_u16(), operation, "key vault request");
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

/// `^[0-9a-zA-Z-]{1,127}$`.
fn check_name(name: &str) -> Result<(), Refusal> {
    let fine = (1..=127).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if fine {
        Ok(())
    } else {
        Err(Refusal::bad(format!(
            "The secret name '{name}' is invalid: use 1-127 letters, digits and dashes."
        )))
    }
}

/// The SecretBundle of `version` of `secret` in `vault`.
fn bundle(vault: &str, secret: &StoredSecret, version: &SecretVersion) -> Value {
    let created = version.created.timestamp();
    let mut body = json!({
        "value": version.value,
        "id": format!("https://{vault}.vault.azure.net/secrets/{}/{}", secret.name, version.version),
        "attributes": {
            "enabled": version.enabled,
            "created": created,
            "updated": created,
            "recoveryLevel": RECOVERY_LEVEL,
            "recoverableDays": 0,
        },
        "tags": version.tags,
    });
    if let Some(content_type) = &version.content_type {
        body["contentType"] = json!(content_type);
    }
    body
}

/// SetSecret's body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetSecret {
    value: String,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    attributes: Option<SetAttributes>,
    #[serde(default)]
    tags: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct SetAttributes {
    #[serde(default)]
    enabled: Option<bool>,
}

async fn set_secret(
    AxState(em): AxState<Emulator>,
    Path((vault, name)): Path<(String, String)>,
    raw: Bytes,
) -> Response {
    if let Err(refusal) = check_name(&name) {
        return refusal.into_response();
    }
    let request: SetSecret = match serde_json::from_slice(&raw) {
        Ok(request) => request,
        Err(_) => {
            return Refusal::bad(
                "The request body must be a JSON object with a string 'value' (and optionally contentType, attributes.enabled, tags).",
            )
            .into_response();
        }
    };
    let version = SecretVersion {
        version: uuid::Uuid::new_v4().simple().to_string(),
        value: request.value,
        content_type: request.content_type,
        enabled: request
            .attributes
            .and_then(|attributes| attributes.enabled)
            .unwrap_or(true),
        created: Utc::now(),
        tags: request.tags,
    };
    let body = em.write(|core, _| {
        let secrets = core
            .state
            .vaults
            .entry(vault.to_ascii_lowercase())
            .or_default();
        let secret = secrets
            .entry(name.to_ascii_lowercase())
            .or_insert_with(|| StoredSecret {
                name: name.clone(),
                versions: Vec::new(),
            });
        secret.versions.push(version.clone());
        Ok(bundle(&vault, secret, &version))
    });
    match body {
        Ok(body) => (StatusCode::OK, axum::Json(body)).into_response(),
        Err(error) => error.into_response(),
    }
}

async fn get_latest(
    AxState(em): AxState<Emulator>,
    Path((vault, name)): Path<(String, String)>,
) -> Response {
    read(&em, &vault, &name, None)
}

async fn get_version(
    AxState(em): AxState<Emulator>,
    Path((vault, name, version)): Path<(String, String, String)>,
) -> Response {
    read(&em, &vault, &name, Some(&version))
}

fn read(em: &Emulator, vault: &str, name: &str, version: Option<&str>) -> Response {
    if let Err(refusal) = check_name(name) {
        return refusal.into_response();
    }
    let found = em.read(|core| {
        let secret = core
            .state
            .vaults
            .get(&vault.to_ascii_lowercase())?
            .get(&name.to_ascii_lowercase())?;
        let chosen = match version {
            None => secret.versions.last(),
            Some(wanted) => secret
                .versions
                .iter()
                .find(|v| v.version.eq_ignore_ascii_case(wanted)),
        }?;
        Some((chosen.enabled, bundle(vault, secret, chosen)))
    });
    match found {
        None => Refusal::new(
            StatusCode::NOT_FOUND,
            "SecretNotFound",
            format!(
                "A secret with (name/id) {name}{} was not found in this key vault. If you recently deleted this secret you may be able to recover it using the correct recovery command.",
                version.map(|v| format!("/{v}")).unwrap_or_default()
            ),
        )
        .into_response(),
        Some((false, _)) => Refusal::new(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "Operation get is not allowed on a disabled secret.",
        )
        .into_response(),
        Some((true, body)) => (StatusCode::OK, axum::Json(body)).into_response(),
    }
}
