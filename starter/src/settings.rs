//! Where the CLI finds Temporal, the task queue and the cluster: flags or the environment.

use clap::Args;
use nodewright_model::{ClusterName, WorkflowId, names::DEFAULT_TASK_QUEUE};
use nodewright_workflows::connect::TemporalSettings;

use crate::CliError;

/// Settings shared by every command.
#[derive(Debug, Args)]
pub struct Settings {
    /// Temporal frontend, host:port or URL.
    #[arg(
        long,
        global = true,
        env = "TEMPORAL_ADDRESS",
        default_value = "127.0.0.1:7233"
    )]
    pub temporal_address: String,
    /// Temporal namespace.
    #[arg(
        long,
        global = true,
        env = "TEMPORAL_NAMESPACE",
        default_value = "default"
    )]
    pub temporal_namespace: String,
    /// Temporal API key (turns TLS on).
    #[arg(long, global = true, env = "TEMPORAL_API_KEY", hide_env_values = true)]
    pub temporal_api_key: Option<String>,
    /// Task queue the workers poll.
    #[arg(long, global = true, env = "NODEWRIGHT_TASK_QUEUE", default_value = DEFAULT_TASK_QUEUE)]
    pub task_queue: String,
    /// The cluster's name, as the workers are configured.
    #[arg(long, global = true, env = "NODEWRIGHT_CLUSTER")]
    pub cluster: Option<String>,
    /// Base URL of the Temporal Web UI, for links to runs.
    #[arg(
        long,
        global = true,
        env = "NODEWRIGHT_TEMPORAL_UI",
        default_value = "http://127.0.0.1:8233"
    )]
    pub temporal_ui: String,
}

impl Settings {
    /// The validated cluster name.
    pub fn cluster(&self) -> Result<ClusterName, CliError> {
        let value = self.cluster.as_deref().ok_or_else(|| {
            CliError::InvalidInput(
                "--cluster is not set; pass --cluster NAME or set NODEWRIGHT_CLUSTER".to_owned(),
            )
        })?;
        ClusterName::parse("--cluster / NODEWRIGHT_CLUSTER", value)
            .map_err(|e| CliError::InvalidInput(e.to_string()))
    }

    /// Connection settings for Temporal.
    pub fn temporal(&self) -> TemporalSettings {
        TemporalSettings {
            address: self.temporal_address.clone(),
            namespace: self.temporal_namespace.clone(),
            api_key: self.temporal_api_key.clone(),
            identity: format!("nodewright-cli@{}", std::process::id()),
        }
    }

    /// The Temporal UI page of a workflow's runs.
    pub fn ui_link(&self, workflow_id: &WorkflowId) -> String {
        let encoded: String =
            url::form_urlencoded::byte_serialize(workflow_id.as_str().as_bytes()).collect();
        format!(
            "{}/namespaces/{}/workflows/{encoded}",
            self.temporal_ui.trim_end_matches('/'),
            self.temporal_namespace
        )
    }
}
