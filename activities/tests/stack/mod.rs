//! The local stack's Kubernetes API for the activities' integration tests: its kubeconfig from
//! `KUBECONFIG`, or else from the stack's env file (`.run/env`); without either a test fails,
//! saying the stack is needed. Each test file includes it with `mod stack;`. Other settings of
//! the stack (Temporal's address) are read the same way ([`env_value`]).

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
    env_value("KUBECONFIG").map(PathBuf::from)
}

/// The stack's setting `key`: from the environment, or else from the stack's env file
/// (`.run/env`, under `NODEWRIGHT_RUN_DIR` when set).
pub fn env_value(key: &str) -> Option<String> {
    if let Some(value) = std::env::var_os(key) {
        return Some(value.to_string_lossy().into_owned());
    }
    let run_dir = std::env::var_os("NODEWRIGHT_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.run"));
    let text = std::fs::read_to_string(run_dir.join("env")).ok()?;
    let prefix = format!("{key}=");
    text.lines()
        .filter_map(|line| line.trim().strip_prefix(prefix.as_str()))
        .map(str::to_owned)
        .next()
}
