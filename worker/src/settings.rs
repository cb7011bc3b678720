//! The worker's command line and its configuration: `--config FILE` (or `NODEWRIGHT_CONFIG`),
//! the `NODEWRIGHT_*` environment, and flags that win over both.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use nodewright_model::config::ClusterConfig;

/// Runs nodewright's workflows and activities for one cluster.
///
/// Settings come from the config file (see nodewright.example.toml), then the environment
/// (NODEWRIGHT_*, KUBECONFIG, TEMPORAL_ADDRESS...), then these flags; later ones win.
#[derive(Debug, Parser)]
#[command(name = "nodewright-worker", version)]
pub struct Args {
    /// Print the nodewright_* metrics the worker serves (name, type, labels, help; tab-separated)
    /// and exit.
    #[arg(long)]
    pub list_metrics: bool,
    /// The config file; without it, the environment alone configures the worker.
    #[arg(long, env = "NODEWRIGHT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The cluster's name (cluster, NODEWRIGHT_CLUSTER).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Temporal frontend, host:port or URL (temporal.address, NODEWRIGHT_TEMPORAL_ADDRESS).
    #[arg(long)]
    pub temporal_address: Option<String>,
    /// Temporal namespace (temporal.namespace, NODEWRIGHT_TEMPORAL_NAMESPACE).
    #[arg(long)]
    pub temporal_namespace: Option<String>,
    /// Temporal API key; turns TLS on. Prefer the variable, which `ps` does not show
    /// (temporal.api_key, NODEWRIGHT_TEMPORAL_API_KEY).
    #[arg(long)]
    pub temporal_api_key: Option<String>,
    /// Task queue to poll; default nodewright-<cluster> (temporal.task_queue, NODEWRIGHT_TASK_QUEUE).
    #[arg(long)]
    pub task_queue: Option<String>,
    /// Log format: text or json (worker.log_format, NODEWRIGHT_LOG_FORMAT).
    #[arg(long, value_name = "text|json")]
    pub log_format: Option<String>,
    /// Prometheus metrics address (worker.metrics_address, NODEWRIGHT_METRICS_ADDRESS).
    #[arg(long, value_name = "IP:PORT")]
    pub metrics_address: Option<String>,
    /// Health endpoints address (worker.health_address, NODEWRIGHT_HEALTH_ADDRESS).
    #[arg(long, value_name = "IP:PORT")]
    pub health_address: Option<String>,
    /// Seconds running activities may take to finish after SIGTERM
    /// (worker.shutdown_grace, NODEWRIGHT_SHUTDOWN_SECONDS).
    #[arg(long, value_name = "SECONDS")]
    pub shutdown_seconds: Option<u64>,
}

impl Args {
    /// The value a flag gives the environment variable `name`, if the flag was passed.
    fn flag(&self, name: &str) -> Option<String> {
        match name {
            "NODEWRIGHT_CLUSTER" => self.cluster.clone(),
            "NODEWRIGHT_TEMPORAL_ADDRESS" => self.temporal_address.clone(),
            "NODEWRIGHT_TEMPORAL_NAMESPACE" => self.temporal_namespace.clone(),
            "NODEWRIGHT_TEMPORAL_API_KEY" => self.temporal_api_key.clone(),
            "NODEWRIGHT_TASK_QUEUE" => self.task_queue.clone(),
            "NODEWRIGHT_LOG_FORMAT" => self.log_format.clone(),
            "NODEWRIGHT_METRICS_ADDRESS" => self.metrics_address.clone(),
            "NODEWRIGHT_HEALTH_ADDRESS" => self.health_address.clone(),
            "NODEWRIGHT_SHUTDOWN_SECONDS" => self.shutdown_seconds.map(|s| s.to_string()),
            _ => None,
        }
    }

    /// Reads the config file (if any) and lays the environment and the flags over it.
    pub fn load(&self) -> anyhow::Result<ClusterConfig> {
        let (text, name) = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| {
                    format!(
                        "cannot read the config file {} (--config / NODEWRIGHT_CONFIG)",
                        path.display()
                    )
                })?;
                (Some(text), path.display().to_string())
            }
            None => (None, String::new()),
        };
        let lookup = |name: &str| self.flag(name).or_else(|| std::env::var(name).ok());
        Ok(ClusterConfig::load(text.as_deref(), &name, lookup)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_stand_in_for_their_variables() {
        let args = Args::parse_from([
            "nodewright-worker",
            "--task-queue",
            "tq",
            "--shutdown-seconds",
            "3",
            "--log-format",
            "json",
        ]);
        assert_eq!(args.flag("NODEWRIGHT_TASK_QUEUE").as_deref(), Some("tq"));
        assert_eq!(
            args.flag("NODEWRIGHT_SHUTDOWN_SECONDS").as_deref(),
            Some("3")
        );
        assert_eq!(args.flag("NODEWRIGHT_LOG_FORMAT").as_deref(), Some("json"));
        assert_eq!(args.flag("NODEWRIGHT_CLUSTER"), None);
    }

    #[test]
    fn every_flag_names_a_known_variable() {
        let names: Vec<&str> = nodewright_model::config::ENV_VARS
            .iter()
            .map(|var| var.name())
            .collect();
        for name in [
            "NODEWRIGHT_CLUSTER",
            "NODEWRIGHT_TEMPORAL_ADDRESS",
            "NODEWRIGHT_TEMPORAL_NAMESPACE",
            "NODEWRIGHT_TEMPORAL_API_KEY",
            "NODEWRIGHT_TASK_QUEUE",
            "NODEWRIGHT_LOG_FORMAT",
            "NODEWRIGHT_METRICS_ADDRESS",
            "NODEWRIGHT_HEALTH_ADDRESS",
            "NODEWRIGHT_SHUTDOWN_SECONDS",
        ] {
            assert!(names.contains(&name), "{name}");
        }
    }
}
