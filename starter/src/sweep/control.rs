//! The running sweep of the cluster: `sweep cancel [RUN]` (a cancellation request) and `sweep
//! status` (its `status` query, or the newest closed sweep when none runs). `sweep approve` is
//! in [`super::approve`].

use nodewright_model::ClusterName;
use nodewright_model::sweep::SweepStatus;
use temporalio_client::errors::WorkflowInteractionError;
use temporalio_client::{Client, WorkflowCancelOptions};

use super::find::{self, SweepRun};
use super::render::status_lines;
use super::{error_chain, flags, query_status, sweep_handle, sweep_id, timestamp};
use crate::pool::who;
use crate::{CliError, Output, settings::Settings};

/// The sweep `run` names, or the cluster's one running sweep (`verb` says what for).
async fn target(
    settings: &Settings,
    run: Option<&str>,
    verb: &str,
) -> Result<(Client, String, Option<String>), CliError> {
    let named = run.map(flags::run_id).transpose()?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let (workflow_id, run_id) = match named {
        Some(workflow_id) => (workflow_id.to_string(), None),
        None => {
            let running = find::running(&client, &cluster).await?;
            let run = only_running(&cluster, running, verb)?;
            (run.workflow_id, Some(run.run_id))
        }
    };
    Ok((client, workflow_id, run_id))
}

/// Asks `run`, or the cluster's running sweep, to cancel: no removal starts after the
/// request, those under way finish, and its audit lists what was done.
pub async fn cancel(
    settings: &Settings,
    output: Output,
    run: Option<&str>,
) -> Result<(), CliError> {
    let (client, workflow_id, run_id) = target(settings, run, "cancel").await?;
    let handle = sweep_handle(&client, &workflow_id, run_id.as_deref());
    let by = who();
    handle
        .cancel(
            WorkflowCancelOptions::builder()
                .reason(format!("nodewright sweep cancel by {by}"))
                .build(),
        )
        .await
        .map_err(|error| match error {
            WorkflowInteractionError::NotFound(_) => CliError::RunFailed(format!(
                "{workflow_id} is not running: there is nothing to cancel; `nodewright sweep status` shows the sweep running, if any"
            )),
            other => CliError::RunFailed(format!(
                "asking {workflow_id} to cancel failed: {}",
                error_chain(&other)
            )),
        })?;
    match output {
        Output::Json => {
            let document = serde_json::json!({
                "workflowId": workflow_id, "runId": run_id, "canceledBy": by,
            });
            println!("{document}");
        }
        Output::Text => println!(
            "asked {workflow_id} to cancel: no removal starts from now, those under way finish; `nodewright sweep report` shows its audit once it has ended"
        ),
    }
    Ok(())
}

/// The one running sweep to `verb`: none is exit 3, several ask for RUN (exit 2).
fn only_running(
    cluster: &ClusterName,
    mut running: Vec<SweepRun>,
    verb: &str,
) -> Result<SweepRun, CliError> {
    match running.len() {
        0 => Err(CliError::RunFailed(format!(
            "no sweep of cluster {cluster} is running: there is nothing to {verb} (`nodewright sweep status` shows the newest one)"
        ))),
        1 => Ok(running.remove(0)),
        _ => {
            let ids: Vec<&str> = running.iter().map(|run| run.workflow_id.as_str()).collect();
            Err(CliError::InvalidInput(format!(
                "{} sweeps of cluster {cluster} are running ({}); name the one to {verb}: nodewright sweep {verb} RUN",
                ids.len(),
                ids.join(", ")
            )))
        }
    }
}

/// Shows the running sweep (the newest, naming the others), or says none runs and names the
/// newest closed one.
pub async fn status(settings: &Settings, output: Output) -> Result<(), CliError> {
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let running = find::running(&client, &cluster).await?;
    let Some(newest) = running.first() else {
        return not_running(settings, output, &client, &cluster).await;
    };
    let link = match flags::run_id(&newest.workflow_id) {
        Ok(id) => settings.ui_link(&id),
        Err(_) => settings.ui_link(&sweep_id(&cluster)),
    };
    let handle = sweep_handle(&client, &newest.workflow_id, Some(&newest.run_id));
    let status = query_status(&handle).await.map_err(|error| {
        CliError::RunFailed(format!(
            "{} is running but its status could not be read: {error}; see {link}",
            newest.workflow_id
        ))
    })?;
    match output {
        Output::Json => {
            let document = status_document(&status, newest, &link);
            println!("{document}");
        }
        Output::Text => {
            for line in status_lines(&newest.workflow_id, &newest.run_id, &status) {
                println!("{line}");
            }
            for other in running.iter().skip(1) {
                println!("  also running {}", other.workflow_id);
            }
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}

/// The status as JSON with `workflowId`, `runId`, `runStatus` and `ui` added beside its fields.
fn status_document(status: &SweepStatus, run: &SweepRun, link: &str) -> serde_json::Value {
    let mut document = serde_json::json!(status);
    if let Some(fields) = document.as_object_mut() {
        fields.insert("workflowId".to_owned(), run.workflow_id.as_str().into());
        fields.insert("runId".to_owned(), run.run_id.as_str().into());
        fields.insert("runStatus".to_owned(), run.status_word().into());
        fields.insert("ui".to_owned(), link.into());
    }
    document
}

/// `sweep status` when no sweep runs: the newest closed one, if any (exit 0 either way).
async fn not_running(
    settings: &Settings,
    output: Output,
    client: &Client,
    cluster: &ClusterName,
) -> Result<(), CliError> {
    let latest = find::newest_closed(client, cluster).await?;
    match output {
        Output::Json => {
            let latest = latest.as_ref().map(|run| {
                serde_json::json!({
                    "workflowId": run.workflow_id, "runId": run.run_id,
                    "status": run.status_word(), "closedAt": timestamp(run.closed),
                })
            });
            let document = serde_json::json!({ "runStatus": "none", "latest": latest });
            println!("{document}");
        }
        Output::Text => {
            println!("{}", not_running_line(cluster, latest.as_ref()));
            if let Some(run) = &latest
                && let Ok(id) = flags::run_id(&run.workflow_id)
            {
                println!("  temporal UI  {}", settings.ui_link(&id));
            }
        }
    }
    Ok(())
}

/// What `sweep status` says when no sweep runs.
fn not_running_line(cluster: &ClusterName, latest: Option<&SweepRun>) -> String {
    match latest {
        Some(run) => {
            let closed = timestamp(run.closed).unwrap_or_else(|| "at an unknown time".to_owned());
            let next = if run.status == temporalio_client::WorkflowExecutionStatus::Completed {
                format!(
                    "`nodewright sweep report {}` shows its audit",
                    run.workflow_id
                )
            } else {
                "it has no audit".to_owned()
            };
            format!(
                "no sweep of cluster {cluster} is running; the newest, {}, ended {} {closed}: {next}",
                run.workflow_id,
                run.status_word()
            )
        }
        None => format!(
            "no sweep of cluster {cluster} is running, and none ran within the namespace's retention; start one with `nodewright sweep run`"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use nodewright_model::sweep::SweepPhase;
    use temporalio_client::WorkflowExecutionStatus;

    use super::*;

    fn cluster() -> ClusterName {
        ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"))
    }

    fn run(id: &str, status: WorkflowExecutionStatus) -> SweepRun {
        SweepRun {
            workflow_id: id.to_owned(),
            run_id: "r1".to_owned(),
            status,
            started: None,
            closed: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(7200)),
        }
    }

    #[test]
    fn cancelling_needs_exactly_one_running_sweep() {
        assert!(matches!(
            only_running(&cluster(), Vec::new(), "cancel"),
            Err(CliError::RunFailed(message)) if message.starts_with("no sweep of cluster prod is running")
        ));
        let one = run("sweep/prod", WorkflowExecutionStatus::Running);
        assert_eq!(
            only_running(&cluster(), vec![one.clone()], "cancel").ok(),
            Some(one)
        );
        let two = vec![
            run("sweep/prod", WorkflowExecutionStatus::Running),
            run(
                "sweep/prod-2026-04-01T10:15:00Z",
                WorkflowExecutionStatus::Running,
            ),
        ];
        match only_running(&cluster(), two, "cancel") {
            Err(CliError::InvalidInput(message)) => assert_eq!(
                message,
                "2 sweeps of cluster prod are running (sweep/prod, sweep/prod-2026-04-01T10:15:00Z); name the one to cancel: nodewright sweep cancel RUN"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn without_a_running_sweep_the_newest_closed_one_is_named() {
        assert_eq!(
            not_running_line(
                &cluster(),
                Some(&run(
                    "sweep/prod-2026-04-01T10:15:00Z",
                    WorkflowExecutionStatus::Completed
                ))
            ),
            "no sweep of cluster prod is running; the newest, sweep/prod-2026-04-01T10:15:00Z, ended completed 1970-01-01T02:00:00Z: `nodewright sweep report sweep/prod-2026-04-01T10:15:00Z` shows its audit"
        );
        assert_eq!(
            not_running_line(
                &cluster(),
                Some(&run("sweep/prod", WorkflowExecutionStatus::Terminated))
            ),
            "no sweep of cluster prod is running; the newest, sweep/prod, ended terminated 1970-01-01T02:00:00Z: it has no audit"
        );
        assert_eq!(
            not_running_line(&cluster(), None),
            "no sweep of cluster prod is running, and none ran within the namespace's retention; start one with `nodewright sweep run`"
        );
    }

    #[test]
    fn the_status_document_is_the_status_with_where_to_find_it() {
        let mut status = SweepStatus::starting();
        status.phase = SweepPhase::AwaitingApproval;
        status.approval_deadline = Some("2026-04-01T11:00:00Z".to_owned());
        let document = status_document(
            &status,
            &run("sweep/prod", WorkflowExecutionStatus::Running),
            "http://ui",
        );
        assert_eq!(document["phase"], "awaiting-approval");
        assert_eq!(document["approvalDeadline"], "2026-04-01T11:00:00Z");
        assert_eq!(document["workflowId"], "sweep/prod");
        assert_eq!(document["runId"], "r1");
        assert_eq!(document["runStatus"], "running");
        assert_eq!(document["ui"], "http://ui");
    }
}
