//! `nodewright-node-agent`: one per Node (a DaemonSet), it polls the VM's Instance Metadata
//! Service for Azure Scheduled Events, publishes its own VM's on its Node (the condition
//! `nodewright.io/VMEventScheduled`, the annotation `nodewright.io/scheduled-event`, a Warning
//! Event each) and acknowledges the events the controller names in
//! `nodewright.io/scheduled-event-ack`. The decisions and texts are `nodewright_model`'s
//! (`scheduled_events`); this binary only does the I/O.
//!
//! Start-up: flags, logs, the TLS crypto provider, the Kubernetes client, then the Node (read
//! until the API answers: its providerID names the VM), then the loop until SIGTERM or Ctrl-C.

mod ack;
mod agent;
mod error;
mod imds;
mod node;
mod provider_id;
mod publish;
mod settings;
mod throttle;

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use nodewright_model::text::error_chain;
use tracing_subscriber::EnvFilter;

use crate::agent::Agent;
use crate::imds::Imds;
use crate::node::NodeApi;
use crate::settings::Settings;
use crate::throttle::Throttled;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let settings = Settings::parse();
    init_logs(&settings.log_format);
    install_crypto_provider();
    let client = kube_client(&settings).await?;
    let node = NodeApi::new(client, &settings.node_name);
    let found = tokio::select! {
        found = vm_of(&node, &settings) => Some(found),
        () = shutdown() => None,
    };
    let Some((vm_name, base)) = found else {
        return Ok(());
    };
    let imds = Imds::new(&base).context("cannot start")?;
    tracing::info!(
        node = %settings.node_name,
        vm = %vm_name,
        url = %imds.url(),
        poll_interval_ms = u64::try_from(settings.poll_interval.as_millis()).unwrap_or(u64::MAX),
        "polling the VM's Scheduled Events"
    );
    Agent::new(imds, node, &vm_name)
        .run(settings.poll_interval, shutdown())
        .await;
    tracing::info!("stopped");
    Ok(())
}

/// Text logs (JSON with `--log-format json`) on stdout, filtered by `RUST_LOG` (default `info`).
fn init_logs(format: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal());
    if format == "json" {
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
}

/// Installs aws-lc-rs as the process's rustls crypto provider (kube's client asks for the
/// process default), once: `ring` is not compiled in (tests/tidy).
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is then installed either way.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

/// The Kubernetes client: `--kubeconfig` when given, else the pod's ServiceAccount. kube's own
/// retries are off: the loop retries at the next poll.
async fn kube_client(settings: &Settings) -> anyhow::Result<kube::Client> {
    let mut config = match &settings.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).with_context(|| {
                format!(
                    "cannot read the kubeconfig {} (--kubeconfig)",
                    path.display()
                )
            })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("the kubeconfig {} is unusable", path.display()))?
        }
        None => kube::Config::incluster().context(
            "no Kubernetes configuration: run in a pod (its ServiceAccount) or pass --kubeconfig",
        )?,
    };
    config.default_retry = false;
    kube::Client::try_from(config).context("cannot build the Kubernetes client")
}

/// The VM's name as IMDS names it and the metadata service's base URL, from the Node (read
/// until the API answers and, with `--imds-url-from-provider-id`, until it has a providerID).
async fn vm_of(node: &NodeApi, settings: &Settings) -> (String, url::Url) {
    let mut log = Throttled::default();
    loop {
        match node.get().await {
            Ok(found) => {
                let provider_id = found.spec.and_then(|spec| spec.provider_id);
                let vm = provider_id.as_deref().map(provider_id::parse);
                match (vm, settings.imds_url_from_provider_id) {
                    (Some(Ok(vm)), true) => {
                        let base = provider_id::sandbox_imds_base(&settings.imds_url, &vm);
                        return (vm.name, base);
                    }
                    (Some(Ok(vm)), false) => return (vm.name, settings.imds_url.clone()),
                    (None | Some(Err(_)), false) => {
                        return (node.name().to_owned(), settings.imds_url.clone());
                    }
                    (Some(Err(error)), true) => {
                        if log
                            .failure(&error.to_string(), std::time::Instant::now())
                            .is_some()
                        {
                            tracing::warn!(
                                "{}; --imds-url-from-provider-id waits for one",
                                error_chain(&error)
                            );
                        }
                    }
                    (None, true) => {
                        let message = format!(
                            "Node {} has no spec.providerID yet; --imds-url-from-provider-id waits for it",
                            node.name()
                        );
                        if log.failure(&message, std::time::Instant::now()).is_some() {
                            tracing::warn!("{message}");
                        }
                    }
                }
            }
            Err(error) => {
                let message = error_chain(&error);
                if log.failure(&message, std::time::Instant::now()).is_some() {
                    tracing::warn!("{message}; trying again");
                }
            }
        }
        tokio::time::sleep(settings.poll_interval.max(Duration::from_secs(1))).await;
    }
}

/// Completes at SIGTERM (the kubelet stopping the pod) or Ctrl-C.
async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
