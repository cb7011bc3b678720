//! `nodewright sweep report [RUN] [--run-id ID] [--all]`: the audit of a sweep (by default the
//! cluster's newest completed one), as a table or as the `SweepAudit` in JSON.

use std::time::Duration;

use temporalio_client::errors::{WorkflowGetResultError, WorkflowInteractionError};
use temporalio_client::{
    Client, WorkflowDescribeOptions, WorkflowExecutionStatus, WorkflowGetResultOptions,
};

use super::find::{self, status_word};
use super::render::audit_lines;
use super::{ReportArgs, error_chain, flags, sweep_handle};
use crate::{CliError, Output, settings::Settings};

/// How long reading a finished sweep's result may take.
const RESULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Prints the audit of the sweep `args` names, or of the newest completed one.
pub async fn run(settings: &Settings, output: Output, args: ReportArgs) -> Result<(), CliError> {
    let named = args.run.as_deref().map(flags::run_id).transpose()?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let (workflow_id, run_id) = match named {
        Some(workflow_id) => {
            let run_id = completed_run(&client, workflow_id.as_str(), args.run_id.as_deref())
                .await
                .map_err(|error| match error {
                    CliError::RunFailed(message) => CliError::RunFailed(format!(
                        "{message}; see {}",
                        settings.ui_link(&workflow_id)
                    )),
                    other => other,
                })?;
            (workflow_id.to_string(), run_id)
        }
        None => match find::newest_completed(&client, &cluster).await? {
            Some(run) => (run.workflow_id, run.run_id),
            None => {
                return Err(CliError::RunFailed(format!(
                    "no sweep of cluster {cluster} has completed (within the namespace's retention); start one with `nodewright sweep run`"
                )));
            }
        },
    };
    let handle = sweep_handle(&client, &workflow_id, Some(&run_id));
    let options = WorkflowGetResultOptions::builder()
        .follow_runs(false)
        .build();
    let audit = match tokio::time::timeout(RESULT_TIMEOUT, handle.get_result(options)).await {
        Ok(Ok(audit)) => audit,
        Ok(Err(WorkflowGetResultError::Cancelled { details })) => {
            details.deserialize().map_err(|error| {
                CliError::RunFailed(format!(
                    "{workflow_id} (run {run_id}) was canceled and its audit could not be read: {error}"
                ))
            })?
        }
        Ok(Err(error)) => {
            return Err(CliError::RunFailed(format!(
                "reading the audit of {workflow_id} (run {run_id}) failed: {}",
                error_chain(&error)
            )));
        }
        Err(_) => {
            return Err(CliError::RunFailed(format!(
                "reading the audit of {workflow_id} (run {run_id}) took more than {}s",
                RESULT_TIMEOUT.as_secs()
            )));
        }
    };
    match output {
        Output::Json => {
            let document = serde_json::to_string(&audit).map_err(|error| {
                CliError::RunFailed(format!("printing the audit failed: {error}"))
            })?;
            println!("{document}");
        }
        Output::Text => {
            for line in audit_lines(&workflow_id, &audit, args.all) {
                println!("{line}");
            }
        }
    }
    Ok(())
}

/// The run ID of `workflow_id` (its run `run_id`, or its latest) when that run completed: a
/// running sweep has no audit yet, a failed or terminated one none at all (exit 3).
async fn completed_run(
    client: &Client,
    workflow_id: &str,
    run_id: Option<&str>,
) -> Result<String, CliError> {
    let handle = sweep_handle(client, workflow_id, run_id);
    let which = run_id.map(|id| format!(" (run {id})")).unwrap_or_default();
    let description = handle
        .describe(WorkflowDescribeOptions::default())
        .await
        .map_err(|error| match error {
            WorkflowInteractionError::NotFound(_) => CliError::RunFailed(format!(
                "there is no sweep {workflow_id}{which} (or it is past the namespace's retention)"
            )),
            other => CliError::RunFailed(format!(
                "looking up {workflow_id}{which} failed: {}",
                error_chain(&other)
            )),
        })?;
    match description.status() {
        // A cancelled sweep carries its audit as the cancellation's details.
        WorkflowExecutionStatus::Completed | WorkflowExecutionStatus::Canceled => {
            Ok(description.run_id().to_owned())
        }
        WorkflowExecutionStatus::Running => Err(CliError::RunFailed(format!(
            "{workflow_id}{which} is still running: its audit comes when it ends (`nodewright sweep status` shows where it is)"
        ))),
        other => Err(CliError::RunFailed(format!(
            "{workflow_id}{which} ended {}: it has no audit",
            status_word(other)
        ))),
    }
}
