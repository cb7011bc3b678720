//! The running local stack, as `dev/stack up` describes it in `.run/env`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use nodewright_activities::azure::{ArmClient, ArmConfig, Credential};
use nodewright_connect::TemporalSettings;
use url::Url;

/// Settings of the running stack.
#[derive(Debug, Clone)]
pub struct Stack {
    /// Path of the admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// Temporal frontend, `host:port`.
    pub temporal_address: String,
    /// Temporal namespace.
    pub temporal_namespace: String,
    /// The Kubernetes version the stack runs, e.g. `v1.36.3`.
    pub kubernetes_version: String,
    /// The cluster name the stack's env file configures.
    pub cluster: String,
    /// Where the emulated Azure Resource Manager (nodewright-sandbox) answers.
    pub arm: ArmScope,
    /// Where the sandbox serves Key Vault (`<sandbox>/keyvault`), the workers'
    /// `NODEWRIGHT_KEYVAULT_ENDPOINT`; `None` for a stack whose env file predates it.
    pub key_vault_endpoint: Option<String>,
}

/// The emulated Azure the stack runs: the sandbox's endpoint and token, and the scope in it.
#[derive(Debug, Clone)]
pub struct ArmScope {
    /// The sandbox's base URL, e.g. `http://127.0.0.1:8443`.
    pub endpoint: String,
    /// The sandbox's static bearer token.
    pub token: String,
    /// The subscription id resources are created in.
    pub subscription_id: String,
    /// The resource group resources are created in.
    pub resource_group: String,
    /// The Azure region resources are created in.
    pub location: String,
}

impl Stack {
    /// Reads the settings from the environment, falling back to the stack's env file.
    pub fn load() -> Result<Self> {
        let file = env_file_path();
        let from_file = match std::fs::read_to_string(&file) {
            Ok(text) => parse_env_file(&text),
            Err(_) => HashMap::new(),
        };
        let get = |key: &str| -> Result<String> {
            std::env::var(key)
                .ok()
                .or_else(|| from_file.get(key).cloned())
                .with_context(|| {
                    format!(
                        "{key} is not set and {} has no value for it: start the stack with `dev/stack up`",
                        file.display()
                    )
                })
        };
        Ok(Self {
            kubeconfig: PathBuf::from(get("KUBECONFIG")?),
            temporal_address: get("TEMPORAL_ADDRESS")?,
            temporal_namespace: get("TEMPORAL_NAMESPACE")?,
            kubernetes_version: get("NODEWRIGHT_KUBERNETES_VERSION")?,
            cluster: get("NODEWRIGHT_CLUSTER")?,
            arm: ArmScope {
                endpoint: get("NODEWRIGHT_ARM_ENDPOINT")?,
                token: get("NODEWRIGHT_ARM_TOKEN")?,
                subscription_id: get("NODEWRIGHT_AZURE_SUBSCRIPTION_ID")?,
                resource_group: get("NODEWRIGHT_AZURE_RESOURCE_GROUP")?,
                location: get("NODEWRIGHT_AZURE_LOCATION")?,
            },
            key_vault_endpoint: get("NODEWRIGHT_KEYVAULT_ENDPOINT").ok(),
        })
    }

    /// A Kubernetes client with the stack's admin credentials.
    pub async fn kube_client(&self) -> Result<kube::Client> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)
            .with_context(|| format!("reading {}", self.kubeconfig.display()))?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(nodewright_activities::kube::client_from_config(config)?)
    }

    /// An ARM client for the stack's emulated Azure (the sandbox), authenticated with its token.
    pub fn arm_client(&self) -> Result<ArmClient> {
        let endpoint = Url::parse(&self.arm.endpoint)
            .with_context(|| format!("NODEWRIGHT_ARM_ENDPOINT {:?}", self.arm.endpoint))?;
        let config = ArmConfig::new(
            endpoint,
            &self.arm.subscription_id,
            &self.arm.resource_group,
        );
        Ok(ArmClient::new(
            config,
            Credential::fixed(self.arm.token.clone()),
        )?)
    }

    /// A Temporal client for the stack's namespace.
    pub async fn temporal_client(&self) -> Result<temporalio_client::Client> {
        let settings = TemporalSettings {
            address: self.temporal_address.clone(),
            namespace: self.temporal_namespace.clone(),
            api_key: None,
            identity: "nodewright-e2e".to_owned(),
            tls: None,
            encryption: None,
        };
        Ok(settings.connect().await?)
    }
}

/// The repository's root directory.
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or_else(|| Path::new("."))
}

/// The stack's run directory: `$NODEWRIGHT_RUN_DIR`, default `.run` in the repository.
pub fn run_dir() -> PathBuf {
    std::env::var_os("NODEWRIGHT_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".run"))
}

fn env_file_path() -> PathBuf {
    run_dir().join("env")
}

/// Parses `KEY=value` lines; blank lines and `#` comments are skipped.
pub fn parse_env_file(text: &str) -> HashMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.trim().to_owned(), value.trim().to_owned()))
        .collect()
}

/// Fails unless `value` equals `expected`, naming what was compared.
pub fn ensure_eq<T: PartialEq + std::fmt::Debug>(what: &str, value: T, expected: T) -> Result<()> {
    if value != expected {
        bail!("{what}: got {value:?}, expected {expected:?}");
    }
    Ok(())
}

/// The Temporal CLI of the stack (`NODEWRIGHT_TEMPORAL_CLI`, from the environment or the stack's
/// env file).
pub fn temporal_cli() -> Result<PathBuf> {
    stack_tool("NODEWRIGHT_TEMPORAL_CLI")
}

/// Terminates the latest run of `workflow_id` (`temporal workflow terminate`) for `reason`: the
/// clean-up of a test or benchmark. An error says why not (no CLI, no run, a run already ended).
pub async fn terminate_workflow(stack: &Stack, workflow_id: &str, reason: &str) -> Result<()> {
    let mut command = std::process::Command::new(temporal_cli()?);
    command.args([
        "workflow",
        "terminate",
        "--workflow-id",
        workflow_id,
        "--reason",
        reason,
        "--address",
        &stack.temporal_address,
        "--namespace",
        &stack.temporal_namespace,
    ]);
    let output = tokio::task::spawn_blocking(move || command.output()).await??;
    if !output.status.success() {
        bail!(
            "terminating {workflow_id}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// `temporal workflow describe --output json` of the latest run of `workflow_id`.
pub async fn describe_workflow(stack: &Stack, workflow_id: &str) -> Result<serde_json::Value> {
    workflow_json(stack, "describe", workflow_id, &[]).await
}

/// `temporal workflow <verb> --workflow-id ID --output json` plus `extra` against the stack.
async fn workflow_json(
    stack: &Stack,
    verb: &str,
    workflow_id: &str,
    extra: &[&str],
) -> Result<serde_json::Value> {
    let mut command = std::process::Command::new(temporal_cli()?);
    command.args([
        "workflow",
        verb,
        "--workflow-id",
        workflow_id,
        "--address",
        &stack.temporal_address,
        "--namespace",
        &stack.temporal_namespace,
        "--output",
        "json",
    ]);
    command.args(extra);
    let output = tokio::task::spawn_blocking(move || command.output()).await??;
    if !output.status.success() {
        bail!(
            "temporal workflow {verb} {workflow_id}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// `temporal workflow show --output json` of the latest run of `workflow_id`: every event.
pub async fn history_json(stack: &Stack, workflow_id: &str) -> Result<serde_json::Value> {
    history_json_with(stack, workflow_id, &[]).await
}

/// Like [`history_json`], with more flags for the Temporal CLI (e.g. `--codec-endpoint`).
pub async fn history_json_with(
    stack: &Stack,
    workflow_id: &str,
    extra: &[&str],
) -> Result<serde_json::Value> {
    workflow_json(stack, "show", workflow_id, extra).await
}

/// The stack's kubectl (`NODEWRIGHT_KUBECTL`, from the environment or the stack's env file).
pub fn kubectl() -> Result<PathBuf> {
    stack_tool("NODEWRIGHT_KUBECTL")
}

/// A tool of the stack named by `variable`: from the environment, else from the stack's env file
/// (`$NODEWRIGHT_RUN_DIR/env`, default `.run/env`).
fn stack_tool(variable: &str) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(variable) {
        return Ok(PathBuf::from(path));
    }
    let text = std::fs::read_to_string(env_file_path())?;
    let prefix = format!("{variable}=");
    text.lines()
        .filter_map(|line| line.trim().strip_prefix(prefix.as_str()))
        .map(|value| PathBuf::from(value.trim()))
        .next()
        .with_context(|| format!("{variable} is not in the stack's env file"))
}
