//! Where the CLI finds Temporal, the task queue and the cluster: the config file shared with the
//! worker (`--config FILE` or `NODEWRIGHT_CONFIG`), the environment, and flags that win over both.

use std::path::PathBuf;

use clap::Args;
use nodewright_connect::TemporalSettings;
use nodewright_model::config::{ClientConfig, ConfigError, TemporalTransport};
use nodewright_model::{ClusterName, WorkflowId};

use crate::CliError;

/// Global options shared by every command. Each one stands in for its environment variable, so
/// the order of precedence is: flag, then environment, then config file, then default.
#[derive(Debug, Args)]
pub struct SettingsArgs {
    /// The config file shared with the worker (see nodewright.example.toml).
    #[arg(long, global = true, env = "NODEWRIGHT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Temporal frontend, host:port or URL [env: NODEWRIGHT_TEMPORAL_ADDRESS, TEMPORAL_ADDRESS]
    /// [default: 127.0.0.1:7233]
    #[arg(long, global = true)]
    pub temporal_address: Option<String>,
    /// Temporal namespace [env: NODEWRIGHT_TEMPORAL_NAMESPACE, TEMPORAL_NAMESPACE]
    /// [default: default]
    #[arg(long, global = true)]
    pub temporal_namespace: Option<String>,
    /// Temporal API key; turns TLS on [env: NODEWRIGHT_TEMPORAL_API_KEY, TEMPORAL_API_KEY]
    #[arg(long, global = true)]
    pub temporal_api_key: Option<String>,
    /// Task queue the workers of the cluster poll [env: NODEWRIGHT_TASK_QUEUE]
    /// [default: nodewright-<cluster>]
    #[arg(long, global = true)]
    pub task_queue: Option<String>,
    /// The cluster's name, as the workers are configured [env: NODEWRIGHT_CLUSTER]
    #[arg(long, global = true)]
    pub cluster: Option<String>,
    /// Base URL of the Temporal Web UI, for links to runs [env: NODEWRIGHT_TEMPORAL_UI]
    /// [default: http://127.0.0.1:8233]
    #[arg(long, global = true)]
    pub temporal_ui: Option<String>,
    /// Say on stderr how the CLI connects to Temporal (mTLS, API key, plain text). Plain text to
    /// a non-loopback address (temporal.tls.enabled = false) is always said.
    #[arg(long, global = true)]
    pub verbose: bool,
}

/// The resolved settings every command uses.
#[derive(Debug, Clone)]
pub struct Settings {
    cluster: ClusterName,
    temporal: TemporalSettings,
    /// Task queue the workers poll.
    pub task_queue: String,
    ui_url: String,
}

impl SettingsArgs {
    /// The value a flag gives the environment variable `name`, if the flag was passed.
    fn flag(&self, name: &str) -> Option<String> {
        match name {
            "NODEWRIGHT_CLUSTER" => self.cluster.clone(),
            "NODEWRIGHT_TEMPORAL_ADDRESS" => self.temporal_address.clone(),
            "NODEWRIGHT_TEMPORAL_NAMESPACE" => self.temporal_namespace.clone(),
            "NODEWRIGHT_TEMPORAL_API_KEY" => self.temporal_api_key.clone(),
            "NODEWRIGHT_TASK_QUEUE" => self.task_queue.clone(),
            "NODEWRIGHT_TEMPORAL_UI" => self.temporal_ui.clone(),
            _ => None,
        }
    }

    /// Reads the config file (if any), the environment and the flags, and reads the TLS files the
    /// configuration names. Every failure is invalid input (exit code 2).
    pub fn load(&self) -> Result<Settings, CliError> {
        // Checked here first so the message names the flag the operator typed.
        if let Some(cluster) = &self.cluster {
            ClusterName::parse("--cluster", cluster)
                .map_err(|error| CliError::InvalidInput(error.to_string()))?;
        }
        let (text, file_name) = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|error| {
                    CliError::InvalidInput(format!(
                        "cannot read the config file {} (--config / NODEWRIGHT_CONFIG): {error}",
                        path.display()
                    ))
                })?;
                (Some(text), path.display().to_string())
            }
            None => (None, String::new()),
        };
        let lookup = |name: &str| self.flag(name).or_else(|| std::env::var(name).ok());
        let config = ClientConfig::load(text.as_deref(), &file_name, lookup)
            .map_err(|error| CliError::InvalidInput(config_message(&error)))?;
        match config.temporal.transport() {
            TemporalTransport::PlainTextOnPurpose => eprintln!(
                "warning: Temporal: {}; anyone on the path can read and forge nodewright's commands",
                config.temporal.transport_summary()
            ),
            _ if self.verbose => {
                eprintln!("Temporal: {}", config.temporal.transport_summary());
            }
            _ => {}
        }
        let identity = format!("nodewright-cli@{}", std::process::id());
        let temporal =
            TemporalSettings::from_config(&config.temporal, identity, |path| std::fs::read(path))
                .map_err(|error| CliError::InvalidInput(crate::error_chain(&error)))?;
        Ok(Settings {
            cluster: config.cluster,
            temporal,
            task_queue: config.temporal.task_queue,
            ui_url: config.temporal.ui_url,
        })
    }
}

impl Settings {
    /// The validated cluster name.
    pub fn cluster(&self) -> Result<ClusterName, CliError> {
        Ok(self.cluster.clone())
    }

    /// Connection settings for Temporal.
    pub fn temporal(&self) -> TemporalSettings {
        self.temporal.clone()
    }

    /// The Temporal UI page of a workflow's runs.
    pub fn ui_link(&self, workflow_id: &WorkflowId) -> String {
        let encoded: String =
            url::form_urlencoded::byte_serialize(workflow_id.as_str().as_bytes()).collect();
        format!(
            "{}/namespaces/{}/workflows/{encoded}",
            self.ui_url.trim_end_matches('/'),
            self.temporal.namespace
        )
    }
}

/// The configuration error with its causes, plus the CLI's own flag where there is one.
fn config_message(error: &ConfigError) -> String {
    let hint = match error {
        ConfigError::Missing { key: "cluster", .. } => "; or pass --cluster NAME",
        _ => "",
    };
    format!("{}{hint}", crate::error_chain(error))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        settings: SettingsArgs,
    }

    fn args(flags: &[&str]) -> SettingsArgs {
        Cli::parse_from(std::iter::once("nodewright").chain(flags.iter().copied())).settings
    }

    #[test]
    fn flags_stand_in_for_their_variables() {
        let args = args(&[
            "--cluster",
            "dev",
            "--task-queue",
            "tq",
            "--temporal-ui",
            "http://ui",
        ]);
        let table = [
            ("NODEWRIGHT_CLUSTER", Some("dev")),
            ("NODEWRIGHT_TASK_QUEUE", Some("tq")),
            ("NODEWRIGHT_TEMPORAL_UI", Some("http://ui")),
            ("NODEWRIGHT_TEMPORAL_ADDRESS", None),
            ("TEMPORAL_ADDRESS", None),
        ];
        for (name, expected) in table {
            assert_eq!(args.flag(name).as_deref(), expected, "{name}");
        }
    }

    #[test]
    fn an_invalid_cluster_flag_is_named_as_typed() {
        let error = args(&["--cluster", "Prod_WEU"])
            .load()
            .expect_err("invalid");
        let message = error.to_string();
        assert!(message.starts_with("--cluster: \"Prod_WEU\""), "{message}");
        assert!(matches!(error, CliError::InvalidInput(_)));
    }

    #[test]
    fn ui_links_use_the_namespace_and_encode_the_workflow_id() {
        let settings = Settings {
            cluster: ClusterName::parse("cluster", "dev").expect("valid"),
            temporal: TemporalSettings::plaintext("127.0.0.1:7233", "prod", "cli"),
            task_queue: "nodewright-dev".to_owned(),
            ui_url: "http://ui:8233/".to_owned(),
        };
        let id = WorkflowId::for_cluster(nodewright_model::Operation::Preflight, &settings.cluster);
        assert_eq!(
            settings.ui_link(&id),
            "http://ui:8233/namespaces/prod/workflows/preflight%2Fdev"
        );
    }
}
