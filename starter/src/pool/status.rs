//! `nodewright pool rollout status POOL` (the rollout: running, else the latest) and
//! `nodewright pool status POOL` (the machines, by InspectPool, and the rollout under way).

use std::time::Duration;

use nodewright_model::WorkflowId;
use nodewright_model::rollout::{InspectPoolRequest, PoolReport, RolloutStatus};
use nodewright_model::text::quoted;
use nodewright_model::{ClusterName, Operation};
use nodewright_workflows::{InspectPoolWorkflow, search};
use temporalio_client::{
    WorkflowExecutionStatus, WorkflowGetResultOptions, WorkflowIdConflictPolicy,
    WorkflowStartOptions,
};
use temporalio_common::search_attributes::SearchAttributes;

use super::render::{report_lines, status_line, status_lines};
use super::{error_chain, flags, history, query_status, rollout_handle, rollout_id};
use crate::handles::no_result;
use crate::{CliError, Output, settings::Settings};

/// How long reading a finished rollout's result may take.
const RESULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Shows the rollout of `pool`: the running one, else the latest.
pub async fn rollout(settings: &Settings, output: Output, pool: &str) -> Result<(), CliError> {
    let pool = flags::pool_name(pool)?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = rollout_id(&cluster, pool);
    let link = settings.ui_link(&workflow_id);
    let Some(latest) = history::latest(&client, &workflow_id).await? else {
        return Err(CliError::RunFailed(format!(
            "no rollout of pool {pool} in cluster {cluster} (none ran, or it is past the namespace's retention); start one with `nodewright pool rollout --pool FILE`"
        )));
    };
    let handle = rollout_handle(&client, &workflow_id, None);
    let run_status = latest.status_word();
    let status: RolloutStatus = if latest.status == WorkflowExecutionStatus::Completed {
        // A completed rollout's result holds its last status: no worker needed.
        let options = WorkflowGetResultOptions::builder()
            .follow_runs(false)
            .build();
        match tokio::time::timeout(RESULT_TIMEOUT, handle.get_result(options)).await {
            Ok(Ok(result)) => result.status,
            Ok(Err(error)) => {
                return Err(CliError::RunFailed(format!(
                    "reading the result of {workflow_id} failed: {}; see {link}",
                    error_chain(&error)
                )));
            }
            Err(_) => {
                return Err(CliError::RunFailed(format!(
                    "reading the result of {workflow_id} took more than {}s; see {link}",
                    RESULT_TIMEOUT.as_secs()
                )));
            }
        }
    } else {
        query_status(&handle).await.map_err(|error| {
            let state = if latest.is_running() {
                "is running".to_owned()
            } else {
                format!("ended {run_status}")
            };
            CliError::RunFailed(format!(
                "{workflow_id} {state} but its status could not be read: {error}; see {link}"
            ))
        })?
    };
    match output {
        Output::Json => {
            let document = status_document(&status, workflow_id.as_str(), &run_status, &link);
            println!("{document}");
        }
        Output::Text => {
            println!("{workflow_id}: {run_status}");
            for line in status_lines(&status, chrono::Utc::now().timestamp()) {
                println!("{line}");
            }
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}

/// The status as JSON with `workflowId`, `runStatus` and `ui` added beside its own fields.
fn status_document(
    status: &RolloutStatus,
    workflow_id: &str,
    run_status: &str,
    link: &str,
) -> serde_json::Value {
    let mut document = serde_json::json!(status);
    if let Some(fields) = document.as_object_mut() {
        fields.insert("workflowId".to_owned(), workflow_id.into());
        fields.insert("runStatus".to_owned(), run_status.into());
        fields.insert("ui".to_owned(), link.into());
    }
    document
}

/// The rollout under way, for `pool status`: `None` when none runs, else its status or why
/// there is none.
async fn running_rollout(
    client: &temporalio_client::Client,
    workflow_id: &WorkflowId,
) -> Result<Option<Result<RolloutStatus, String>>, CliError> {
    match history::latest(client, workflow_id).await? {
        Some(latest) if latest.is_running() => {
            let handle = rollout_handle(client, workflow_id, None);
            Ok(Some(query_status(&handle).await))
        }
        _ => Ok(None),
    }
}

/// Runs InspectPool on `pool` and shows its machines, and the rollout under way.
pub async fn pool(
    settings: &Settings,
    output: Output,
    pool: &str,
    timeout: u64,
) -> Result<(), CliError> {
    let pool = flags::pool_name(pool)?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let controller_id = super::controller::controller_id(&cluster, pool);
    if let Some(answer) = super::controller::running_status(&client, &controller_id).await? {
        let link = settings.ui_link(&controller_id);
        let document = answer.map_err(|error| {
            CliError::RunFailed(format!(
                "{controller_id} is running but its status could not be read: {error}; see {link}"
            ))
        })?;
        match output {
            Output::Json => {
                let mut json = serde_json::json!(document);
                if let Some(fields) = json.as_object_mut() {
                    fields.insert("workflowId".to_owned(), controller_id.as_str().into());
                    fields.insert("ui".to_owned(), link.into());
                }
                println!("{json}");
            }
            Output::Text => {
                for line in super::render::controller_lines(&document) {
                    println!("{line}");
                }
                println!("  temporal UI  {link}");
            }
        }
        return Ok(());
    }
    let rollout_id = rollout_id(&cluster, pool);
    let rollout = running_rollout(&client, &rollout_id).await?;
    let report = inspect(settings, &client, &cluster, pool, timeout).await?;
    match output {
        Output::Json => {
            let rollout = rollout.and_then(Result::ok);
            let document = serde_json::json!({ "report": report, "rollout": rollout });
            println!("{document}");
        }
        Output::Text => {
            for line in report_lines(&report, cluster.as_str()) {
                println!("{line}");
            }
            match rollout {
                Some(Ok(status)) => println!(
                    "  rollout      {}\n               details: nodewright pool rollout status {pool}",
                    status_line(&status)
                ),
                Some(Err(error)) => println!(
                    "  rollout      {rollout_id} is running; its status did not answer: {error}"
                ),
                None => println!("  rollout      none running"),
            }
        }
    }
    Ok(())
}

/// Runs InspectPool on `pool` (joining a look already under way) and returns its report,
/// waiting at most `timeout` seconds for a worker.
pub async fn inspect(
    settings: &Settings,
    client: &temporalio_client::Client,
    cluster: &ClusterName,
    pool: &str,
    timeout: u64,
) -> Result<PoolReport, CliError> {
    let workflow_id = WorkflowId::for_subject(Operation::Inspect, cluster, pool);
    let link = settings.ui_link(&workflow_id);
    let options = WorkflowStartOptions::new(settings.task_queue.clone(), workflow_id.to_string())
        // A look already under way answers the same question: join it instead of refusing.
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .execution_timeout(Duration::from_secs(600))
        .search_attributes(SearchAttributes::new([
            search::CLUSTER.value_set(cluster.to_string()),
            search::POOL.value_set(pool.to_owned()),
            search::OPERATION.value_set(Operation::Inspect.to_string()),
        ]))
        .static_summary(format!("Inspect pool {pool}"))
        .build();
    let request = InspectPoolRequest {
        cluster: cluster.clone(),
        pool: pool.to_owned(),
    };
    request.check()?;
    let handle = client
        .start_workflow(InspectPoolWorkflow::run, request, options)
        .await
        .map_err(|error| {
            CliError::RunFailed(format!(
                "starting {workflow_id} failed: {}",
                error_chain(&error)
            ))
        })?;
    let wait = handle.get_result(WorkflowGetResultOptions::default());
    let report = tokio::time::timeout(Duration::from_secs(timeout), wait)
        .await
        .map_err(|_| {
            CliError::RunFailed(format!(
                "{workflow_id} did not finish within {timeout}s: is nodewright-worker running on task queue {}? See {link}",
                quoted(&settings.task_queue)
            ))
        })?
        .map_err(|error| {
            CliError::RunFailed(format!("{workflow_id} {}; see {link}", no_result(&error)))
        })?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use nodewright_model::pool::Amount;
    use nodewright_model::rollout::{Budget, RolloutPhase, StrategyView};

    use super::*;

    #[test]
    fn the_status_document_is_the_status_with_where_to_find_it() {
        let strategy = StrategyView {
            max_surge: Amount::Count(1),
            max_unavailable: Amount::Count(0),
            budget: Budget {
                surge: 1,
                unavailable: 0,
            },
        };
        let mut status = RolloutStatus::new("web", "abc123", 2, strategy, 3, 0);
        status.phase = RolloutPhase::Paused;
        status.paused_because = Some("paused by ann@cli".to_owned());
        let document = status_document(&status, "rollout/dev/web", "running", "http://ui");
        assert_eq!(document["phase"], "paused");
        assert_eq!(document["pausedBecause"], "paused by ann@cli");
        assert_eq!(document["strategy"]["budget"]["surge"], 1);
        assert_eq!(document["workflowId"], "rollout/dev/web");
        assert_eq!(document["runStatus"], "running");
        assert_eq!(document["ui"], "http://ui");
    }
}
