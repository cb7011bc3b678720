//! The Kubernetes client, from `[kubernetes]`: an explicit kubeconfig (and context) when set,
//! else the in-cluster configuration or `~/.kube/config`.

use std::path::Path;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};
use nodewright_model::config::KubernetesConfig;

/// A client for the configured cluster, built through
/// `nodewright_activities::kube::client_from_config` (which installs the TLS crypto provider).
/// Nothing is sent to the apiserver yet.
pub async fn client(config: &KubernetesConfig) -> anyhow::Result<kube::Client> {
    let options = KubeConfigOptions {
        context: config.context.clone(),
        ..KubeConfigOptions::default()
    };
    let kube_config = match &config.kubeconfig {
        Some(paths) => {
            let kubeconfig = read_kubeconfigs(paths)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| {
                    format!(
                        "kubernetes.kubeconfig (KUBECONFIG) {}: unusable{}",
                        paths.display(),
                        context_hint(config)
                    )
                })?
        }
        None if config.context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .with_context(|| {
                format!("the default kubeconfig is unusable{}", context_hint(config))
            })?,
        None => kube::Config::infer().await.context(
            "no Kubernetes configuration: set kubernetes.kubeconfig (KUBECONFIG), or run in a pod",
        )?,
    };
    nodewright_activities::kube::client_from_config(kube_config)
        .context("cannot build the Kubernetes client")
}

/// Reads and merges the files of a `KUBECONFIG`-style list (separated like `PATH`).
fn read_kubeconfigs(paths: &Path) -> anyhow::Result<Kubeconfig> {
    let mut merged: Option<Kubeconfig> = None;
    for path in std::env::split_paths(paths.as_os_str()) {
        let file = Kubeconfig::read_from(&path).with_context(|| {
            format!(
                "cannot read the kubeconfig {} (kubernetes.kubeconfig / KUBECONFIG)",
                path.display()
            )
        })?;
        merged = Some(match merged {
            None => file,
            Some(earlier) => earlier.merge(file)?,
        });
    }
    merged.with_context(|| {
        format!(
            "kubernetes.kubeconfig (KUBECONFIG) {} names no file",
            nodewright_model::text::quoted(&paths.display().to_string())
        )
    })
}

fn context_hint(config: &KubernetesConfig) -> String {
    config
        .context
        .as_ref()
        .map(|context| {
            format!(
                " with context {} (kubernetes.context / NODEWRIGHT_KUBE_CONTEXT)",
                nodewright_model::text::quoted(context)
            )
        })
        .unwrap_or_default()
}
