//! The Temporal side of start-up: connection settings from `[temporal]` (reading the PEM files
//! here, at the binary's edge) and the readiness check that the worker really polls.

use std::path::Path;
use std::time::Duration;

use nodewright_connect::TemporalSettings;
use nodewright_connect::reload::{CredentialReload, RELOAD_INTERVAL, ReloadOutcome, SetApiKey};
use nodewright_model::config::TemporalConfig;
use temporalio_client::Connection;
use temporalio_client::tonic::Request;
use temporalio_client::{Client, NamespacedClient};
use temporalio_common::protos::temporal::api::enums::v1::TaskQueueType;
use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueue;
use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeTaskQueueRequest;
use tracing::{error, info};

/// How often the readiness check asks Temporal for the task queue's pollers.
const POLLER_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// Connection settings for `config`, with the TLS files read from disk.
pub fn settings(config: &TemporalConfig, identity: &str) -> anyhow::Result<TemporalSettings> {
    Ok(TemporalSettings::from_config(config, identity, |path| {
        std::fs::read(path)
    })?)
}

/// Re-reads the credential files (client certificate and key, CA, API key file) every
/// [`RELOAD_INTERVAL`] for as long as the worker runs, putting changed ones in use and logging
/// what happened (file names only). Returns at once when no file is configured.
pub async fn reload_credentials(
    config: TemporalConfig,
    settings: TemporalSettings,
    connection: Connection,
) {
    let read = |path: &Path| std::fs::read(path);
    let set_api_key: SetApiKey = Box::new(move |key| connection.set_api_key(Some(key)));
    let mut reload = CredentialReload::new(&config, &settings, set_api_key, &read);
    if reload.is_empty() {
        return;
    }
    info!(
        files = %reload.files().join(", "),
        "watching the Temporal credential files; changes are used without a restart"
    );
    loop {
        tokio::time::sleep(RELOAD_INTERVAL).await;
        for outcome in reload.check(&read) {
            match outcome {
                ReloadOutcome::Reloaded { what, files } => {
                    info!("Temporal {what} reloaded from {files}");
                }
                ReloadOutcome::Refused { what, problem } => {
                    error!("Temporal {what} not reloaded: {problem}");
                }
            }
        }
    }
}

/// `nodewright-worker@<host>:<pid>`, as the Temporal UI shows it on each task and poller. The
/// host is `$HOSTNAME` (a pod's name), else the kernel's host name (a container's id).
pub fn worker_identity() -> String {
    let host = host_name(
        std::env::var("HOSTNAME").ok(),
        std::fs::read_to_string("/proc/sys/kernel/hostname").ok(),
    );
    format!("nodewright-worker@{host}:{}", std::process::id())
}

/// The first of `from_env` and `from_kernel` that is not blank, trimmed; `unknown-host` when
/// neither is known.
fn host_name(from_env: Option<String>, from_kernel: Option<String>) -> String {
    [from_env, from_kernel]
        .into_iter()
        .flatten()
        .map(|name| name.trim().to_owned())
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

/// Resolves once Temporal lists `identity` among the pollers of `task_queue` (its workflow or
/// activity queue): the worker is connected and polling. Errors are logged and retried.
pub async fn wait_until_polling(client: Client, task_queue: String, identity: String) {
    let mut service = client.connection().workflow_service();
    let namespace = client.namespace();
    loop {
        for kind in [TaskQueueType::Workflow, TaskQueueType::Activity] {
            let request = DescribeTaskQueueRequest {
                namespace: namespace.clone(),
                task_queue: Some(TaskQueue {
                    name: task_queue.clone(),
                    ..TaskQueue::default()
                }),
                task_queue_type: kind as i32,
                ..DescribeTaskQueueRequest::default()
            };
            match service.describe_task_queue(Request::new(request)).await {
                Ok(response) => {
                    if response
                        .get_ref()
                        .pollers
                        .iter()
                        .any(|poller| poller.identity == identity)
                    {
                        return;
                    }
                }
                Err(status) => {
                    tracing::debug!(%status, "describing the task queue for readiness failed; retrying");
                }
            }
        }
        tokio::time::sleep(POLLER_CHECK_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::host_name;

    #[test]
    fn the_host_name_comes_from_the_environment_then_the_kernel() {
        let some = |name: &str| Some(name.to_owned());
        let cases = [
            (some("pod-7f9c"), some("kernel\n"), "pod-7f9c"),
            (None, some("c0ffee\n"), "c0ffee"),
            (some("  "), some("c0ffee\n"), "c0ffee"),
            (None, None, "unknown-host"),
            (some(""), some("\n"), "unknown-host"),
        ];
        for (env, kernel, expected) in cases {
            assert_eq!(
                host_name(env.clone(), kernel.clone()),
                expected,
                "{env:?} {kernel:?}"
            );
        }
    }
}
