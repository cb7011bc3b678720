//! Health endpoints for Kubernetes probes: `GET /healthz` answers 200 while the process runs;
//! `GET /readyz` answers 200 only once the worker is connected to Temporal and polling its task
//! queue, and 503 before that and from the moment shutdown starts. Both return
//! `{"status": ..., "taskQueue": ...}`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use anyhow::Context;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

/// Where the worker is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Connecting, or waiting for the first poll to reach Temporal.
    Starting,
    /// Polling the task queue.
    Ready,
    /// Shutting down: finishing running activities, taking no new work.
    Stopping,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Ready => "ready",
            Phase::Stopping => "stopping",
        }
    }
}

/// The worker's phase, shared by the endpoints and the code that changes it.
#[derive(Debug)]
pub struct Health {
    phase: AtomicU8,
    task_queue: String,
}

impl Health {
    /// A worker for `task_queue`, starting.
    pub fn new(task_queue: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            phase: AtomicU8::new(Phase::Starting as u8),
            task_queue: task_queue.into(),
        })
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::SeqCst) {
            0 => Phase::Starting,
            1 => Phase::Ready,
            _ => Phase::Stopping,
        }
    }

    /// Starting → ready; a worker already stopping stays stopping.
    pub fn mark_ready(&self) {
        let _ = self.phase.compare_exchange(
            Phase::Starting as u8,
            Phase::Ready as u8,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }

    /// Any phase → stopping, for good.
    pub fn mark_stopping(&self) {
        self.phase.store(Phase::Stopping as u8, Ordering::SeqCst);
    }

    fn body(&self, status: &str) -> Json<Value> {
        Json(json!({ "status": status, "taskQueue": self.task_queue }))
    }
}

/// The endpoints, without a socket (tests call it with `oneshot`).
pub fn app(health: Arc<Health>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health)
}

async fn healthz(State(health): State<Arc<Health>>) -> Json<Value> {
    health.body("alive")
}

async fn readyz(State(health): State<Arc<Health>>) -> (StatusCode, Json<Value>) {
    let phase = health.phase();
    let status = if phase == Phase::Ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, health.body(phase.name()))
}

/// Binds `address` and serves the endpoints in the background; returns the bound address.
pub async fn serve(address: SocketAddr, health: Arc<Health>) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| {
            format!(
                "cannot serve health endpoints on {address} (worker.health_address / NODEWRIGHT_HEALTH_ADDRESS)"
            )
        })?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app(health)).await {
            tracing::error!(
                error = %nodewright_model::text::error_chain(&error),
                "the health endpoints stopped"
            );
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get(health: &Arc<Health>, path: &str) -> (StatusCode, Value) {
        let response = app(health.clone())
            .oneshot(Request::get(path).body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        let status = response.status();
        let bytes = to_bytes(response.into_body(), 1 << 16).await.expect("body");
        (status, serde_json::from_slice(&bytes).expect("JSON"))
    }

    #[tokio::test]
    async fn readiness_follows_the_phase_and_liveness_stays_up() {
        let health = Health::new("tq");
        let table = [
            (None, StatusCode::SERVICE_UNAVAILABLE, "starting"),
            (Some(Phase::Ready), StatusCode::OK, "ready"),
            (
                Some(Phase::Stopping),
                StatusCode::SERVICE_UNAVAILABLE,
                "stopping",
            ),
            // Once stopping, a late "ready" from the poller check changes nothing.
            (
                Some(Phase::Ready),
                StatusCode::SERVICE_UNAVAILABLE,
                "stopping",
            ),
        ];
        for (change, status, name) in table {
            match change {
                Some(Phase::Ready) => health.mark_ready(),
                Some(Phase::Stopping) => health.mark_stopping(),
                _ => {}
            }
            let (got, body) = get(&health, "/readyz").await;
            assert_eq!(got, status, "{name}");
            assert_eq!(body, json!({ "status": name, "taskQueue": "tq" }));
            let (alive, _) = get(&health, "/healthz").await;
            assert_eq!(alive, StatusCode::OK);
        }
    }
}
