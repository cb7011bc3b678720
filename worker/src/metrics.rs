//! Prometheus metrics: the Temporal SDK's own exporter (its `temporal_*` worker metrics), served
//! at `http://<worker.metrics_address>/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, anyhow};
use temporalio_common::telemetry::metrics::CoreMeter;
use temporalio_common::telemetry::{
    PrometheusExporterOptions, TelemetryOptions, start_prometheus_metric_exporter,
};
use temporalio_sdk::runtime::RuntimeOptions;

/// The running exporter.
pub struct Metrics {
    /// The meter the Temporal runtime records into.
    pub meter: Arc<dyn CoreMeter>,
    /// The address it listens on (the configured one, with the port chosen when it was 0).
    pub address: SocketAddr,
}

/// Binds `address` and serves `/metrics`. Fails when the address cannot be bound.
pub fn start(address: SocketAddr) -> anyhow::Result<Metrics> {
    let options = PrometheusExporterOptions::builder()
        .socket_addr(address)
        .build();
    let started = start_prometheus_metric_exporter(options)
        .map_err(|error| anyhow!("{error:#}"))
        .with_context(|| {
            format!(
                "cannot serve metrics on {address} (worker.metrics_address / NODEWRIGHT_METRICS_ADDRESS)"
            )
        })?;
    Ok(Metrics {
        meter: started.meter,
        address: started.bound_addr,
    })
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
