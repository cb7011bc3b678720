//! The local stack's Kubernetes API for the activities' integration tests: its kubeconfig from
//! `KUBECONFIG`, or else from the stack's env file (`.run/env`); without either a test fails,
//! saying the stack is needed. Each test file includes it with `mod stack;`.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use nodewright_activities::kube::client_from_config;

/// A test's error: anything, with its message.
pub type StackResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A client of the stack's API server, built as nodewright builds its own.
pub async fn client() -> StackResult<kube::Client> {
    Ok(client_from_config(config().await?)?)
}

/// The stack's kubeconfig, read.
pub async fn config() -> StackResult<kube::Config> {
    let path = kubeconfig_path().ok_or("needs the local stack: KUBECONFIG is not set and no stack env file (.run/env) names one; run `dev/stack up`, or `dev/test` which brings it up")?;
    let kubeconfig = Kubeconfig::read_from(&path)?;
    Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?)
}

fn kubeconfig_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("KUBECONFIG") {
        return Some(PathBuf::from(path));
    }
    let run_dir = std::env::var_os("NODEWRIGHT_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.run"));
    let text = std::fs::read_to_string(run_dir.join("env")).ok()?;
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("KUBECONFIG="))
        .map(PathBuf::from)
        .next()
}
