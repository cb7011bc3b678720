//! `nodewright codec-server`: the Temporal codec server protocol over the payload encryption
//! keys, so that people who hold the keys read decoded inputs and results in the Temporal UI
//! (and `temporal workflow show --codec-endpoint`) while the server and everyone else see
//! ciphertext only.
//!
//! Protocol (Temporal's codec server): `POST <anything>/encode` and `POST <anything>/decode`,
//! the body both ways `Payloads` in proto3 JSON; 400 on bad JSON or a payload that does not
//! decode. The UI calls from the browser, so every answer carries CORS headers for the allowed
//! origins and an `OPTIONS` preflight gets 204. With `NODEWRIGHT_CODEC_TOKEN` set, every POST
//! needs `Authorization: Bearer <token>` (the UI sends the user's access token when "Pass access
//! token" is on and the endpoint is https); without a token the server only listens on a
//! loopback address, for one person's machine. Each request is logged on stderr as its method,
//! path, origin, namespace and status, never a payload or a token.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use nodewright_connect::codec::KeyRing;
use nodewright_model::text::quoted;
use temporalio_common::protos::temporal::api::common::v1::Payloads;

use crate::CliError;
use crate::settings::Settings;

/// The UI origins of the local stack, allowed unless `--allow-origin` names others.
const LOCAL_UI_ORIGINS: [&str; 2] = ["http://localhost:8233", "http://127.0.0.1:8233"];

/// `nodewright codec-server`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// A Temporal UI origin allowed to call it from the browser (repeat for several); default
    /// the local stack's UI, http://localhost:8233 and http://127.0.0.1:8233.
    #[arg(long = "allow-origin", value_name = "URL")]
    pub allow_origins: Vec<String>,
}

/// What every request is answered with.
#[derive(Clone)]
pub struct CodecState {
    keys: Arc<KeyRing>,
    origins: Vec<String>,
    token: Option<String>,
}

impl CodecState {
    /// The server's state: the keys, the allowed origins, the bearer token if any.
    pub fn new(keys: Arc<KeyRing>, origins: Vec<String>, token: Option<String>) -> Self {
        Self {
            keys,
            origins,
            token,
        }
    }
}

/// Runs the server until Ctrl-C.
///
/// # Errors
///
/// No keys configured, a non-loopback address without a token, or the address is taken.
pub async fn run(settings: &Settings, args: Args) -> Result<(), CliError> {
    let keys = settings.temporal().encryption.ok_or_else(|| {
        CliError::InvalidInput(
            "codec-server needs the payload encryption keys: set temporal.encryption_keys_file (NODEWRIGHT_ENCRYPTION_KEYS_FILE) or NODEWRIGHT_ENCRYPTION_KEYS".to_owned(),
        )
    })?;
    let token = std::env::var("NODEWRIGHT_CODEC_TOKEN")
        .ok()
        .map(|token| token.trim().to_owned())
        .filter(|token| !token.is_empty());
    if token.is_none() && !args.listen.ip().is_loopback() {
        return Err(CliError::InvalidInput(format!(
            "--listen {}: a codec server that decodes for anyone who reaches it must not listen beyond this machine; set NODEWRIGHT_CODEC_TOKEN (every request then needs it as a bearer token) or listen on 127.0.0.1",
            args.listen
        )));
    }
    let origins = if args.allow_origins.is_empty() {
        LOCAL_UI_ORIGINS.iter().map(|o| (*o).to_owned()).collect()
    } else {
        args.allow_origins
    };
    let state = CodecState::new(keys, origins.clone(), token);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|error| CliError::InvalidInput(format!("--listen {}: {error}", args.listen)))?;
    eprintln!(
        "codec server on http://{} (POST /encode, /decode) for {}; point the UI's codec endpoint at it",
        args.listen,
        origins.join(", ")
    );
    let app = axum::Router::new().fallback(move |method, uri, headers: HeaderMap, body| {
        let state = state.clone();
        async move {
            let line = request_line(&method, &uri, &headers);
            let response = answer(&state, method, uri, headers, body);
            eprintln!("{line}: {}", response.status());
            response
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|error| CliError::RunFailed(format!("the codec server stopped: {error}")))
}

/// How a request is logged: method, path, and the origin and namespace it names (never a
/// header's secret or a payload), e.g. `OPTIONS /decode origin http://localhost:8233 namespace
/// default`.
pub fn request_line(method: &Method, uri: &Uri, headers: &HeaderMap) -> String {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("-")
            .to_owned()
    };
    let mut line = format!(
        "{method} {} origin {} namespace {}",
        uri.path(),
        header("origin"),
        header("x-namespace")
    );
    // A CORS preflight names the headers the call will send.
    if headers.contains_key(header::ACCESS_CONTROL_REQUEST_HEADERS) {
        line.push_str(" preflight for headers ");
        line.push_str(&header("access-control-request-headers"));
    }
    line
}

/// One request's answer, with the CORS headers its origin earns.
pub fn answer(
    state: &CodecState,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|origin| origin.to_str().ok())
        .filter(|origin| state.origins.iter().any(|allowed| allowed == origin))
        .map(str::to_owned);
    let mut response = respond(state, &method, &uri, &headers, &body);
    if let Some(origin) = origin.and_then(|origin| HeaderValue::from_str(&origin).ok()) {
        let cors = response.headers_mut();
        cors.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        cors.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("POST, GET, OPTIONS"),
        );
        cors.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(
                "X-Namespace, Content-Type, Authorization, Authorization-Extras",
            ),
        );
        cors.insert(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        );
        cors.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
    response
}

fn respond(
    state: &CodecState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    if method == Method::OPTIONS {
        return StatusCode::NO_CONTENT.into_response();
    }
    let operation = uri.path().trim_end_matches('/').rsplit('/').next();
    let encode = match operation {
        Some("encode") => true,
        Some("decode") => false,
        _ => {
            return (
                StatusCode::NOT_FOUND,
                "POST <endpoint>/encode or <endpoint>/decode",
            )
                .into_response();
        }
    };
    if method != Method::POST {
        return (StatusCode::METHOD_NOT_ALLOWED, "POST only").into_response();
    }
    if let Some(token) = &state.token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if given != Some(token.as_str()) {
            return (
                StatusCode::UNAUTHORIZED,
                "a bearer token is needed (Authorization: Bearer <NODEWRIGHT_CODEC_TOKEN>)",
            )
                .into_response();
        }
    }
    let payloads: Payloads = match serde_json::from_slice(body) {
        Ok(payloads) => payloads,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("the body is not Payloads in proto3 JSON: {error}"),
            )
                .into_response();
        }
    };
    let converted: Result<Vec<_>, _> = payloads
        .payloads
        .into_iter()
        .map(|payload| {
            if encode {
                state.keys.seal(&payload)
            } else {
                state.keys.open(payload)
            }
        })
        .collect();
    match converted {
        Ok(payloads) => match serde_json::to_vec(&Payloads { payloads }) {
            Ok(json) => (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                json,
            )
                .into_response(),
            Err(error) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the answer does not serialize: {error}"),
            )
                .into_response(),
        },
        Err(error) => (
            StatusCode::BAD_REQUEST,
            format!(
                "{} failed: {error}",
                quoted(if encode { "encode" } else { "decode" })
            ),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use temporalio_common::protos::temporal::api::common::v1::Payload;

    use super::*;

    fn state(token: Option<&str>) -> CodecState {
        let key = base64::engine::general_purpose::STANDARD.encode([5_u8; 32]);
        let keys = KeyRing::parse(&format!("k1={key}"), "test").expect("keys");
        CodecState::new(
            Arc::new(keys),
            LOCAL_UI_ORIGINS.iter().map(|o| (*o).to_owned()).collect(),
            token.map(str::to_owned),
        )
    }

    fn body(payloads: Vec<Payload>) -> Bytes {
        Bytes::from(serde_json::to_vec(&Payloads { payloads }).expect("json"))
    }

    fn plain() -> Payload {
        Payload {
            metadata: [("encoding".to_owned(), b"json/plain".to_vec())]
                .into_iter()
                .collect(),
            data: br#"{"machine":"workers-b2c4d"}"#.to_vec(),
            ..Payload::default()
        }
    }

    async fn call(
        state: &CodecState,
        method: Method,
        path: &str,
        headers: &[(&'static str, &str)],
        body: Bytes,
    ) -> (StatusCode, HeaderMap, Vec<u8>) {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_str(value).expect("header"));
        }
        let uri: Uri = path.parse().expect("uri");
        let response = answer(state, method, uri, map, body);
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        (status, headers, bytes.to_vec())
    }

    #[tokio::test]
    async fn encode_then_decode_gives_the_payloads_back_under_any_path_prefix() {
        let state = state(None);
        let (status, _, encoded) = call(
            &state,
            Method::POST,
            "/default/encode",
            &[],
            body(vec![plain()]),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        // Proto3 JSON, as the UI sends and reads it: bytes as base64 strings.
        let json: serde_json::Value = serde_json::from_slice(&encoded).expect("json");
        assert!(
            json["payloads"][0]["data"].is_string()
                && json["payloads"][0]["metadata"]["encoding"]
                    == base64::engine::general_purpose::STANDARD.encode("binary/encrypted"),
            "{json}"
        );
        let sealed: Payloads = serde_json::from_slice(&encoded).expect("payloads");
        assert!(!String::from_utf8_lossy(&encoded).contains("workers-b2c4d"));
        assert_eq!(
            sealed.payloads[0]
                .metadata
                .get("encoding")
                .map(Vec::as_slice),
            Some(&b"binary/encrypted"[..])
        );
        let (status, _, decoded) =
            call(&state, Method::POST, "/decode", &[], Bytes::from(encoded)).await;
        assert_eq!(status, StatusCode::OK);
        let opened: Payloads = serde_json::from_slice(&decoded).expect("payloads");
        assert_eq!(opened.payloads, vec![plain()]);
    }

    #[tokio::test]
    async fn the_ui_origin_gets_cors_and_a_preflight_others_get_no_cors() {
        let state = state(None);
        let (status, headers, _) = call(
            &state,
            Method::OPTIONS,
            "/decode",
            &[("origin", "http://localhost:8233")],
            Bytes::new(),
        )
        .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        assert_eq!(
            headers
                .get("access-control-allow-origin")
                .map(|v| v.as_bytes()),
            Some(&b"http://localhost:8233"[..])
        );
        assert!(
            headers
                .get("access-control-allow-headers")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.contains("X-Namespace") && v.contains("Content-Type"))
        );
        let (_, headers, _) = call(
            &state,
            Method::OPTIONS,
            "/decode",
            &[("origin", "http://evil.example")],
            Bytes::new(),
        )
        .await;
        assert!(headers.get("access-control-allow-origin").is_none());
    }

    #[tokio::test]
    async fn with_a_token_a_request_without_it_is_refused_and_bad_bodies_are_400() {
        let state = state(Some("s3cret"));
        let request = || body(vec![plain()]);
        let (status, _, _) = call(&state, Method::POST, "/encode", &[], request()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (status, _, _) = call(
            &state,
            Method::POST,
            "/encode",
            &[("authorization", "Bearer wrong")],
            request(),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (status, _, _) = call(
            &state,
            Method::POST,
            "/encode",
            &[("authorization", "Bearer s3cret")],
            request(),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let open = state_without_token();
        let (status, _, text) = call(
            &open,
            Method::POST,
            "/decode",
            &[],
            Bytes::from_static(b"{"),
        )
        .await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{}",
            String::from_utf8_lossy(&text)
        );
        let (status, _, _) = call(&open, Method::POST, "/other", &[], request()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[test]
    fn a_request_is_logged_by_method_path_origin_and_namespace_only() {
        let mut headers = HeaderMap::new();
        headers.insert("origin", HeaderValue::from_static("http://localhost:8233"));
        headers.insert("x-namespace", HeaderValue::from_static("default"));
        headers.insert("authorization", HeaderValue::from_static("Bearer s3cret"));
        let uri: Uri = "/default/decode?preserveStorageRefs=true"
            .parse()
            .expect("uri");
        let line = request_line(&Method::POST, &uri, &headers);
        assert_eq!(
            line,
            "POST /default/decode origin http://localhost:8233 namespace default"
        );
        headers.insert(
            "access-control-request-headers",
            HeaderValue::from_static("content-type,x-namespace"),
        );
        headers.remove("x-namespace");
        let preflight = request_line(&Method::OPTIONS, &uri, &headers);
        assert_eq!(
            preflight,
            "OPTIONS /default/decode origin http://localhost:8233 namespace - preflight for headers content-type,x-namespace"
        );
        let bare = request_line(
            &Method::POST,
            &"/encode".parse().expect("uri"),
            &HeaderMap::new(),
        );
        assert_eq!(bare, "POST /encode origin - namespace -");
    }

    fn state_without_token() -> CodecState {
        state(None)
    }
}
