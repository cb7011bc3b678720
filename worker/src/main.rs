//! `nodewright-worker`: connects to Temporal and runs nodewright's workflows and activities.
//!
//! Start-up, in order: load the configuration (`--config FILE`, the environment, flags), start
//! logging, serve `/healthz` + `/readyz` and the Prometheus `/metrics`, connect to Temporal,
//! build the Kubernetes and ARM clients, check that the Kubernetes API is the configured cluster
//! (recording its identity on the first start), then poll. `/readyz` turns 200 once Temporal lists this
//! worker among the task queue's pollers. SIGTERM or Ctrl-C turns `/readyz` to 503 and lets
//! running activities finish within `worker.shutdown_grace`; the process then exits 0.
//!
//! Any start-up failure prints one `error:` line naming the setting to fix and exits 1.
//!
//! - [`settings`]: the command line and the configuration.
//! - [`registration`]: the workflows and activities the worker runs.
//! - [`health`], [`metrics`], [`telemetry`], [`shutdown`]: the process's operational edges;
//!   [`run_meter`] and [`status_gauges`] feed the metrics that workflows must not emit.
//! - [`azure`], [`kubernetes`], [`temporal`]: the outside systems' clients.
//! - [`identity`]: the Kubernetes API must be the configured cluster (checked after connecting).
//! - [`isolation`]: activities of another cluster's runs are refused.

mod azure;
mod deadline;
mod health;
mod identity;
mod isolation;
mod kubernetes;
mod metrics;
mod registration;
mod run_meter;
mod settings;
mod shutdown;
mod status_gauges;
mod telemetry;
mod temporal;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::anyhow;
use clap::Parser;
use nodewright_model::config::ClusterConfig;
use nodewright_model::text::error_chain;
use temporalio_sdk::{Runtime, Worker};
use tracing::{info, warn};

use health::Health;
use registration::Clients;
use settings::Args;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line with the whole chain: what failed, and why (as the CLI prints it).
            eprintln!("error: {}", error_chain(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    if args.list_metrics {
        print!("{}", metrics::list()?);
        return Ok(());
    }
    let config = args.load()?;
    telemetry::init(config.worker.log_format);
    let health = Health::new(config.temporal.task_queue.clone());
    let stop = shutdown::listen({
        let health = health.clone();
        move |signal| {
            health.mark_stopping();
            info!(
                signal,
                "shutdown signal received; finishing running activities"
            );
        }
    });

    let started = tokio::select! {
        started = start(&config, health.clone()) => started?,
        () = shutdown::requested(stop.clone()) => {
            info!("stopped before start-up finished");
            return Ok(());
        }
    };
    let Started {
        mut worker,
        mut arm_writes,
        client,
        identity,
        _runtime,
    } = started;

    let readiness = tokio::spawn({
        let health = health.clone();
        let task_queue = config.temporal.task_queue.clone();
        async move {
            temporal::wait_until_polling(client, task_queue, identity).await;
            health.mark_ready();
            info!("ready: Temporal lists this worker among the task queue's pollers");
        }
    });
    let shutdown_handles = [worker.shutdown_handle(), arm_writes.shutdown_handle()];
    tokio::spawn(async move {
        shutdown::requested(stop).await;
        for shutdown in shutdown_handles {
            shutdown();
        }
    });

    info!(
        cluster = %config.cluster,
        address = %config.temporal.address,
        namespace = %config.temporal.namespace,
        task_queue = %config.temporal.task_queue,
        tls = config.temporal.uses_tls(),
        "nodewright-worker started"
    );
    // Both workers run on this task (their futures are not Send) until both have stopped.
    let (result, writes_result) = tokio::join!(worker.run(), arm_writes.run());
    health.mark_stopping();
    readiness.abort();
    result.map_err(|error| anyhow!("the worker stopped with an error: {error}"))?;
    writes_result
        .map_err(|error| anyhow!("the ARM-write worker stopped with an error: {error}"))?;
    info!("nodewright-worker stopped");
    Ok(())
}

/// A worker ready to run, and what it needs alive while it runs.
struct Started {
    worker: Worker,
    /// The worker of the rate-limited ARM-write task queue.
    arm_writes: Worker,
    client: temporalio_client::Client,
    identity: String,
    /// The Temporal runtime must outlive the worker.
    _runtime: Runtime,
}

/// Everything between the configuration and the first poll; each step fails with a message
/// naming the setting to fix.
async fn start(config: &ClusterConfig, health: Arc<Health>) -> anyhow::Result<Started> {
    let health_address = health::serve(config.worker.health_address, health).await?;
    info!(%health_address, "serving /healthz and /readyz");
    let metrics = metrics::start(
        config.worker.metrics_address,
        config.azure.arm_writes_per_second,
    )
    .await?;
    info!(
        metrics_address = %metrics.address,
        "serving Prometheus metrics at http://{}/metrics",
        metrics.address
    );

    if config.azure.sandbox {
        warn!(
            arm_endpoint = %config.azure.arm_endpoint,
            "SANDBOX mode (azure.sandbox = true): the ARM and Key Vault endpoints are taken for nodewright-sandbox; http:// and static tokens are accepted at non-loopback addresses"
        );
    }
    let identity = temporal::worker_identity();
    let settings = temporal::settings(&config.temporal, &identity)?;
    info!("Temporal: {}", config.temporal.transport_summary());
    let client = settings.connect().await?;
    tokio::spawn(temporal::reload_credentials(
        config.temporal.clone(),
        settings,
        client.connection().clone(),
    ));
    let kube = kubernetes::client(&config.kubernetes).await?;
    let established = Arc::new(AtomicBool::new(false));
    identity::establish(&kube, &identity::expected(config), established.clone()).await?;
    let clients = Clients {
        kube,
        identity_established: established,
        arm: azure::arm_client(&config.azure)?,
        key_vault: azure::key_vault_client(&config.azure)?,
        temporal: client.clone(),
    };
    status_gauges::spawn(
        client.clone(),
        config.cluster.clone(),
        config.temporal.task_queue.clone(),
        metrics.domain,
    );
    let runtime = Runtime::from_current_tokio(metrics.runtime_options()?)
        .map_err(|error| anyhow!("creating the Temporal runtime failed: {error}"))?;
    let options = registration::worker_options(config, clients)?;
    let worker = Worker::new(&runtime, client.clone(), options.main)
        .map_err(|error| anyhow!("creating the Temporal worker failed: {error}"))?;
    let arm_writes = Worker::new(&runtime, client.clone(), options.arm_writes)
        .map_err(|error| anyhow!("creating the ARM-write Temporal worker failed: {error}"))?;
    Ok(Started {
        worker,
        arm_writes,
        client,
        identity,
        _runtime: runtime,
    })
}
