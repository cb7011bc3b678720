//! `nodewright-sandbox`: the local stand-in for Azure (ARM emulator, node joiner, disk attacher).
//!
//! Settings come from a TOML file (`--config`), overridden by flags and environment variables.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use nodewright_sandbox::arm::{self, Emulator, EmulatorConfig, LatencyProfile};
use nodewright_sandbox::attacher::{self, AttacherSettings};
use nodewright_sandbox::joiner::{self, JoinerSettings};

/// The local stand-in for Azure Resource Manager.
#[derive(Debug, Parser)]
#[command(name = "nodewright-sandbox", version)]
struct Args {
    /// Address to listen on.
    #[arg(
        long,
        env = "NODEWRIGHT_SANDBOX_LISTEN",
        default_value = "127.0.0.1:8443"
    )]
    listen: std::net::SocketAddr,
    /// Bearer token clients must send (none required when unset).
    #[arg(long, env = "NODEWRIGHT_SANDBOX_TOKEN")]
    token: Option<String>,
    /// TOML config: latency profile and scale, page size, token, state file, fault rules.
    #[arg(long, env = "NODEWRIGHT_SANDBOX_CONFIG")]
    config: Option<PathBuf>,
    /// JSON file the emulator state is persisted to and restored from.
    #[arg(long, env = "NODEWRIGHT_SANDBOX_STATE")]
    state_file: Option<PathBuf>,
    /// Latency profile: instant, short or realistic.
    #[arg(long, env = "NODEWRIGHT_SANDBOX_LATENCY")]
    latency: Option<LatencyProfile>,
    /// Factor applied to every latency.
    #[arg(long, env = "NODEWRIGHT_SANDBOX_LATENCY_SCALE")]
    latency_scale: Option<f64>,
    /// Seconds a VM's NICs stay reserved after its failed or canceled create or its deletion
    /// (`NicReservedForAnotherVm`); Azure's, the default, is 180.
    #[arg(long, env = "NODEWRIGHT_SANDBOX_NIC_RESERVATION_SECONDS")]
    nic_reservation_seconds: Option<u64>,
    /// The subscription whose VMs' Nodes the node joiner owns: it stops the heartbeat of a Node
    /// whose providerID names a VM of this subscription that is not running. Without it, every
    /// Node with an `azure:///subscriptions/` providerID is the joiner's.
    #[arg(long, env = "NODEWRIGHT_SANDBOX_SUBSCRIPTION_ID")]
    subscription_id: Option<String>,
    /// The CSI driver name whose VolumeAttachments the disk attacher serves.
    #[arg(
        long,
        env = "NODEWRIGHT_SANDBOX_CSI_DRIVER",
        default_value = "disk.csi.azure.com"
    )]
    csi_driver: String,
    /// Serve the ARM emulator only: no node joiner, no disk attacher, no Kubernetes needed.
    #[arg(long, env = "NODEWRIGHT_SANDBOX_WITHOUT_KUBERNETES")]
    without_kubernetes: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let args = Args::parse();
    let mut config = match &args.config {
        Some(path) => EmulatorConfig::load(path)
            .with_context(|| format!("loading config {}", path.display()))?,
        None => EmulatorConfig::default(),
    };
    if args.token.is_some() {
        config.token = args.token.clone();
    }
    if args.state_file.is_some() {
        config.state_file = args.state_file.clone();
    }
    if let Some(latency) = args.latency {
        config.latency = latency;
    }
    if let Some(scale) = args.latency_scale {
        config.latency_scale = scale;
    }
    if let Some(seconds) = args.nic_reservation_seconds {
        config.nic_reservation_seconds = seconds;
    }
    let emulator = Emulator::new(config).context("starting the ARM emulator")?;

    if args.without_kubernetes {
        tracing::info!("without Kubernetes: the node joiner and the disk attacher are off");
    } else {
        start_kubernetes_actors(&args, &emulator).await?;
    }

    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    tracing::info!(listen = %args.listen, latency = ?emulator.latency(), "nodewright-sandbox listening");
    axum::serve(listener, arm::app(emulator.clone()))
        .with_graceful_shutdown(shutdown())
        .await?;
    // A large state is written behind the changes: write what is still pending.
    emulator.flush();
    Ok(())
}

/// Starts the node joiner and the disk attacher against the cluster of the inferred kubeconfig
/// (`KUBECONFIG`, `~/.kube/config` or in-cluster).
async fn start_kubernetes_actors(args: &Args, emulator: &Emulator) -> anyhow::Result<()> {
    nodewright_sandbox::tls::install_crypto_provider();
    let mut config = kube::Config::infer().await.context(
        "no Kubernetes configuration for the node joiner and disk attacher \
         (set KUBECONFIG, or pass --without-kubernetes)",
    )?;
    // Retries belong to the actors' own loops, which back off and record errors on the objects.
    config.default_retry = false;
    let client =
        kube::Client::try_from(config.clone()).context("building the Kubernetes client")?;
    let compute = Arc::new(emulator.clone());
    let mut joiner_settings = JoinerSettings::default();
    if let Some(subscription) = &args.subscription_id {
        joiner_settings.managed_provider_id_prefix =
            format!("azure:///subscriptions/{subscription}/");
    }
    let attacher_settings = AttacherSettings {
        driver_name: args.csi_driver.clone(),
        ..AttacherSettings::default()
    };
    tracing::info!(
        provider_ids = %joiner_settings.managed_provider_id_prefix,
        csi_driver = %attacher_settings.driver_name,
        "starting the node joiner and the disk attacher"
    );
    // The joiner's apiserver and CA also check the bootstrap tokens VMs join with.
    tokio::spawn(joiner::run_with_token_check(
        client.clone(),
        config,
        compute.clone(),
        joiner_settings,
    ));
    tokio::spawn(attacher::run(client, compute, attacher_settings));
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutting down");
}
