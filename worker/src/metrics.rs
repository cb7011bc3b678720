//! Prometheus metrics at `http://<worker.metrics_address>/metrics`: nodewright's own
//! (`nodewright_*`, [`nodewright_activities::metrics`]) followed by the Temporal SDK's
//! `temporal_*` worker metrics, in one text-format answer.
//!
//! The SDK's exporter keeps its registry to itself, so it listens on a loopback port of its own
//! and each scrape of `/metrics` reads it there and serves both.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use axum::Router;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use nodewright_activities::metrics::Metrics as DomainMetrics;
use temporalio_common::telemetry::metrics::CoreMeter;
use temporalio_common::telemetry::{
    PrometheusExporterOptions, TelemetryOptions, start_prometheus_metric_exporter,
};
use temporalio_sdk::runtime::RuntimeOptions;

/// The text format's content type.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How long a scrape waits for the SDK's exporter.
const SDK_SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// The running exporter.
pub struct Metrics {
    /// The meter the Temporal runtime records into.
    pub meter: Arc<dyn CoreMeter>,
    /// nodewright's own metrics.
    pub domain: &'static DomainMetrics,
    /// The address it listens on (the configured one, with the port chosen when it was 0).
    pub address: SocketAddr,
}

/// What a scrape reads.
#[derive(Clone)]
struct Sources {
    domain: &'static DomainMetrics,
    sdk: String,
    http: reqwest::Client,
}

/// Binds `address` and serves `/metrics`. Fails when the address cannot be bound.
pub async fn start(address: SocketAddr, arm_writes_per_second: f64) -> anyhow::Result<Metrics> {
    let domain = nodewright_activities::metrics::install(env!("CARGO_PKG_VERSION"))
        .map_err(|error| anyhow!("nodewright's metrics are ill-defined: {error}"))?;
    domain.set_arm_write_budget(arm_writes_per_second);
    let options = PrometheusExporterOptions::builder()
        .socket_addr(SocketAddr::from(([127, 0, 0, 1], 0)))
        .build();
    let started = start_prometheus_metric_exporter(options)
        .map_err(|error| anyhow!("{error:#}"))
        .context("cannot start the Temporal SDK's metrics exporter on a loopback port")?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| {
            format!(
                "cannot serve metrics on {address} (worker.metrics_address / NODEWRIGHT_METRICS_ADDRESS)"
            )
        })?;
    let bound = listener.local_addr()?;
    nodewright_activities::tls::install_crypto_provider();
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(SDK_SCRAPE_TIMEOUT)
        .build()
        .context("cannot build the HTTP client that reads the SDK's metrics")?;
    let sources = Sources {
        domain,
        sdk: format!("http://{}/metrics", started.bound_addr),
        http,
    };
    let app = Router::new()
        .route("/metrics", get(scrape))
        .with_state(sources);
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "the metrics endpoint stopped");
        }
    });
    Ok(Metrics {
        meter: started.meter,
        domain,
        address: bound,
    })
}

/// nodewright's metrics, then the SDK's (left out, with a warning, when its exporter does not
/// answer: ours are still served).
async fn scrape(State(sources): State<Sources>) -> impl IntoResponse {
    let mut body = sources.domain.encode();
    match read_sdk(&sources).await {
        Ok(sdk) => body.push_str(&sdk),
        Err(error) => tracing::warn!(error = %error, "cannot read the Temporal SDK's metrics"),
    }
    ([(CONTENT_TYPE, TEXT_FORMAT)], body)
}

async fn read_sdk(sources: &Sources) -> Result<String, reqwest::Error> {
    sources
        .http
        .get(&sources.sdk)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await
}

impl Metrics {
    /// Options for the Temporal runtime that record its metrics here.
    pub fn runtime_options(&self) -> anyhow::Result<RuntimeOptions> {
        let telemetry = TelemetryOptions::builder()
            .metrics(self.meter.clone())
            .build();
        RuntimeOptions::builder()
            .telemetry_options(telemetry)
            .build()
            .map_err(|error| anyhow!("invalid Temporal runtime options: {error}"))
    }
}

/// `nodewright-worker --list-metrics`: one line per `nodewright_*` metric, tab-separated: name,
/// type, labels (comma-separated), help.
pub fn list() -> anyhow::Result<String> {
    let metrics = DomainMetrics::new()
        .map_err(|error| anyhow!("nodewright's metrics are ill-defined: {error}"))?;
    Ok(metrics
        .describe()
        .iter()
        .map(|metric| {
            format!(
                "{}\t{}\t{}\t{}\n",
                metric.name,
                metric.kind,
                metric.labels.join(","),
                metric.help
            )
        })
        .collect())
}
