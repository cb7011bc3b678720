//! `nodewright-worker`: connects to Temporal and runs nodewright's workflows and activities.
//!
//! Configuration comes from flags or the environment (see `--help`); it stops gracefully on
//! SIGTERM or Ctrl-C, letting running activities finish within the shutdown period.

use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use nodewright_activities::kube::KubeActivities;
use nodewright_model::names::DEFAULT_TASK_QUEUE;
use nodewright_workflows::{PreflightWorkflow, connect::TemporalSettings};
use temporalio_sdk::{Runtime, Worker, WorkerOptions};
use tracing::info;

/// Runs nodewright's workflows and activities for one cluster.
#[derive(Debug, Parser)]
#[command(name = "nodewright-worker", version)]
struct Args {
    /// Temporal frontend, host:port or URL.
    #[arg(long, env = "TEMPORAL_ADDRESS", default_value = "127.0.0.1:7233")]
    temporal_address: String,
    /// Temporal namespace.
    #[arg(long, env = "TEMPORAL_NAMESPACE", default_value = "default")]
    temporal_namespace: String,
    /// Temporal API key (turns TLS on).
    #[arg(long, env = "TEMPORAL_API_KEY", hide_env_values = true)]
    temporal_api_key: Option<String>,
    /// Task queue to poll.
    #[arg(long, env = "NODEWRIGHT_TASK_QUEUE", default_value = DEFAULT_TASK_QUEUE)]
    task_queue: String,
    /// Log format.
    #[arg(long, env = "NODEWRIGHT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// How long running activities may take to finish after a shutdown signal.
    #[arg(long, env = "NODEWRIGHT_SHUTDOWN_SECONDS", default_value_t = 20)]
    shutdown_seconds: u64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_tracing(args.log_format);

    let kube_config = kube::Config::infer()
        .await
        .context("no Kubernetes configuration: set KUBECONFIG or run in a pod")?;
    let kube_client = nodewright_activities::kube::client_from_config(kube_config)?;
    let settings = TemporalSettings {
        address: args.temporal_address.clone(),
        namespace: args.temporal_namespace.clone(),
        api_key: args.temporal_api_key.clone(),
        identity: worker_identity(),
    };
    let client = settings.connect().await?;
    let runtime = Runtime::from_current_tokio(Default::default())
        .map_err(|e| anyhow::anyhow!("creating the Temporal runtime failed: {e}"))?;

    let options = WorkerOptions::new(args.task_queue.clone())
        .register_workflow::<PreflightWorkflow>()?
        .register_activities(KubeActivities::new(kube_client))
        .graceful_shutdown_period(Duration::from_secs(args.shutdown_seconds))
        .build();
    let mut worker = Worker::new(&runtime, client, options)?;

    let shutdown = worker.shutdown_handle();
    tokio::spawn(async move {
        wait_for_shutdown_signal().await;
        info!("shutdown signal received; finishing running activities");
        shutdown();
    });

    info!(
        address = %args.temporal_address,
        namespace = %args.temporal_namespace,
        task_queue = %args.task_queue,
        "nodewright-worker started"
    );
    worker.run().await?;
    info!("nodewright-worker stopped");
    Ok(())
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// `nodewright-worker@<host>:<pid>`, as the Temporal UI shows it on each task.
fn worker_identity() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "unknown-host".to_owned());
    format!("nodewright-worker@{host}:{}", std::process::id())
}

async fn wait_for_shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::terminate(),
        ) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops the worker");
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
