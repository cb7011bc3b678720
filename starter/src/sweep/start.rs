//! `nodewright sweep run [flags] [--wait]`: checks the flags, refuses when a sweep of the cluster
//! is running (on demand or scheduled), starts `sweep/<cluster>` and follows it with `--wait`.

use nodewright_model::{ClusterName, Operation};
use nodewright_workflows::{OrphanSweepWorkflow, search};
use temporalio_client::errors::WorkflowStartError;
use temporalio_client::{Client, WorkflowIdConflictPolicy, WorkflowStartOptions};
use temporalio_common::search_attributes::SearchAttributes;

use super::{RunArgs, error_chain, find, flags, follow, sweep_id};
use crate::{CliError, Output, settings::Settings};

/// Validates the flags, refuses a second sweep, starts `sweep/<cluster>`, and follows it when
/// asked.
pub async fn run(settings: &Settings, output: Output, args: RunArgs) -> Result<(), CliError> {
    let cluster = settings.cluster()?;
    let request = args.flags.request(&cluster)?;
    let client = settings.temporal().connect().await?;
    refuse_if_running(settings, &client, &cluster).await?;
    let workflow_id = sweep_id(&cluster);
    let link = settings.ui_link(&workflow_id);
    let summary = flags::summary(&request);
    // Like a rollout: a running sweep of the ID is refused, a closed one may be run again.
    let options = WorkflowStartOptions::new(settings.task_queue.clone(), workflow_id.to_string())
        .id_conflict_policy(WorkflowIdConflictPolicy::Fail)
        .search_attributes(SearchAttributes::new([
            search::CLUSTER.value_set(cluster.to_string()),
            search::OPERATION.value_set(Operation::Sweep.to_string()),
        ]))
        .static_summary(summary)
        .build();
    let handle = client
        .start_workflow(OrphanSweepWorkflow::run, request, options)
        .await
        .map_err(|error| match error {
            WorkflowStartError::AlreadyStarted { .. } => {
                already_running(workflow_id.as_str(), &link)
            }
            other => CliError::RunFailed(format!(
                "starting {workflow_id} failed: {}",
                error_chain(&other)
            )),
        })?;
    let run_id = handle.run_id().unwrap_or_default().to_owned();
    match output {
        Output::Text => eprintln!("started {workflow_id} (run {run_id}): {link}"),
        Output::Json if !args.wait => {
            let document = serde_json::json!({
                "workflowId": workflow_id.as_str(), "runId": run_id,
            });
            println!("{document}");
        }
        Output::Json => {}
    }
    if !args.wait {
        return Ok(());
    }
    follow::follow(&client, output, workflow_id.as_str(), &run_id, &link).await
}

/// Refuses (exit 5) when a sweep of the cluster is running, naming it and how to follow it.
async fn refuse_if_running(
    settings: &Settings,
    client: &Client,
    cluster: &ClusterName,
) -> Result<(), CliError> {
    let running = find::running(client, cluster).await?;
    match running.first() {
        Some(run) => {
            let link = match flags::run_id(&run.workflow_id) {
                Ok(id) => settings.ui_link(&id),
                Err(_) => settings.ui_link(&sweep_id(cluster)),
            };
            Err(already_running(&run.workflow_id, &link))
        }
        None => Ok(()),
    }
}

fn already_running(workflow_id: &str, link: &str) -> CliError {
    CliError::AlreadyRunning(format!(
        "a sweep of this cluster is already running: {workflow_id}; nothing new was started. Follow it with `nodewright sweep status` or {link}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_sweep_is_refused_with_where_to_follow_the_first() {
        let error = already_running(
            "sweep/prod-2026-04-01T10:15:00Z",
            "http://ui/namespaces/default/workflows/sweep%2Fprod-2026-04-01T10%3A15%3A00Z",
        );
        assert!(matches!(error, CliError::AlreadyRunning(_)));
        assert_eq!(
            error.to_string(),
            "a sweep of this cluster is already running: sweep/prod-2026-04-01T10:15:00Z; nothing new was started. Follow it with `nodewright sweep status` or http://ui/namespaces/default/workflows/sweep%2Fprod-2026-04-01T10%3A15%3A00Z"
        );
    }
}
