//! The IMDS client against a fake metadata service (axum on `127.0.0.1:0`) that answers as
//! Azure's: the header required, the document as set, the acknowledgements recorded.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use nodewright_model::scheduled_events::{EventStatus, EventType, for_vm};

use super::*;

/// What the fake serves and what it was sent.
#[derive(Default)]
struct Fake {
    document: String,
    status: u16,
    posted: Vec<String>,
}

type Shared = Arc<Mutex<Fake>>;

async fn read(State(fake): State<Shared>, headers: HeaderMap) -> (StatusCode, String) {
    if headers.get("Metadata").and_then(|v| v.to_str().ok()) != Some("true") {
        return (
            StatusCode::BAD_REQUEST,
            r#"{"error":"Bad request. Required metadata header not specified"}"#.to_owned(),
        );
    }
    let fake = fake.lock().unwrap_or_else(|e| e.into_inner());
    let status = StatusCode::from_u16(fake.status).unwrap_or(StatusCode::OK);
    (status, fake.document.clone())
}

async fn post(State(fake): State<Shared>, headers: HeaderMap, body: String) -> StatusCode {
    if headers.get("Metadata").and_then(|v| v.to_str().ok()) != Some("true") {
        return StatusCode::BAD_REQUEST;
    }
    fake.lock()
        .unwrap_or_else(|e| e.into_inner())
        .posted
        .push(body);
    StatusCode::OK
}

/// Serves the fake under `/imds/vm-1` on an ephemeral port; its base URL and state.
async fn serve(document: &str) -> (Url, Shared) {
    let fake: Shared = Arc::new(Mutex::new(Fake {
        document: document.to_owned(),
        status: 200,
        posted: Vec::new(),
    }));
    let app = Router::new()
        .route("/imds/vm-1/metadata/scheduledevents", get(read).post(post))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let address = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let base = Url::parse(&format!("http://{address}/imds/vm-1")).unwrap_or_else(|e| panic!("{e}"));
    (base, fake)
}

const TWO_VMS: &str = r#"{"DocumentIncarnation": 4, "Events": [
  {"EventId": "602d9444-d2cd-49c7-8624-8643e7171297", "EventStatus": "Scheduled",
   "EventType": "Redeploy", "ResourceType": "VirtualMachine", "Resources": ["vm-1"],
   "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT", "Description": "", "EventSource": "Platform",
   "DurationInSeconds": -1},
  {"EventId": "7d3f1e0a-0000-4000-8000-000000000001", "EventStatus": "Scheduled",
   "EventType": "SpotRebalanceRecommendation", "ResourceType": "VirtualMachine",
   "Resources": ["vm-2"], "NotBefore": "", "EventSource": "Platform", "DurationInSeconds": -1}
]}"#;

#[test]
fn the_document_url_is_the_base_and_the_api_version() {
    for base in ["http://169.254.169.254", "http://169.254.169.254/"] {
        let base = Url::parse(base).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            document_url(&base).as_str(),
            "http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01"
        );
    }
}

#[tokio::test]
async fn a_document_is_read_and_its_events_filtered_by_vm() {
    let (base, _) = serve(TWO_VMS).await;
    let imds = Imds::new(&base).unwrap_or_else(|e| panic!("{e}"));
    let document = imds.document().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(document.incarnation, 4);
    assert_eq!(document.events.len(), 2);
    let mine = for_vm(&document.events, "VM-1");
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].event_type, EventType::Redeploy);
    assert_eq!(mine[0].status, EventStatus::Scheduled);
    let other = for_vm(&document.events, "vm-2");
    assert_eq!(
        other[0].event_type,
        EventType::Other("SpotRebalanceRecommendation".to_owned())
    );
}

#[tokio::test]
async fn an_error_answer_and_a_bad_document_are_errors_naming_what_happened() {
    let (base, fake) = serve("not json").await;
    let imds = Imds::new(&base).unwrap_or_else(|e| panic!("{e}"));
    let error = imds.document().await.err().map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some("the Scheduled Events document cannot be read")
    );
    {
        let mut fake = fake.lock().unwrap_or_else(|e| e.into_inner());
        fake.status = 404;
        fake.document = r#"{"error":"Not found"}"#.to_owned();
    }
    let error = imds
        .document()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        error.starts_with("the metadata service answered 404 to GET http://127.0.0.1:")
            && error.ends_with(r#"{"error":"Not found"}"#),
        "{error}"
    );
}

#[tokio::test]
async fn an_unreachable_service_is_an_error_within_the_timeout() {
    // A port nothing listens on: bound, then closed.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let address = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    drop(listener);
    let base = Url::parse(&format!("http://{address}")).unwrap_or_else(|e| panic!("{e}"));
    let imds = Imds::new(&base).unwrap_or_else(|e| panic!("{e}"));
    let started = std::time::Instant::now();
    let error = imds
        .document()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        error.starts_with("cannot read the Scheduled Events document at"),
        "{error}"
    );
    assert!(started.elapsed() < REQUEST_TIMEOUT + Duration::from_secs(1));
}

#[tokio::test]
async fn an_acknowledgement_posts_the_start_request_with_the_header() {
    let (base, fake) = serve(TWO_VMS).await;
    let imds = Imds::new(&base).unwrap_or_else(|e| panic!("{e}"));
    imds.start("602d9444-d2cd-49c7-8624-8643e7171297")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let posted = fake
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .posted
        .clone();
    assert_eq!(
        posted,
        [r#"{"StartRequests":[{"EventId":"602d9444-d2cd-49c7-8624-8643e7171297"}]}"#]
    );
}
