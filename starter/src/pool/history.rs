//! Finding a pool's rollout runs: the latest run of `rollout/<cluster>/<pool>` (is one running?)
//! and the newest completed one, whose result carries the pool's template history.

use std::time::SystemTime;

use futures::StreamExt;
use nodewright_model::WorkflowId;
use nodewright_model::rollout::RolloutResult;
use temporalio_client::errors::WorkflowInteractionError;
use temporalio_client::{
    Client, WorkflowDescribeOptions, WorkflowExecutionStatus, WorkflowGetResultOptions,
    WorkflowListOptions,
};

use super::{error_chain, rollout_handle};
use crate::CliError;

/// The latest run of a workflow ID.
#[derive(Debug, Clone)]
pub struct Latest {
    /// Running, completed, failed...
    pub status: WorkflowExecutionStatus,
    /// Its run ID.
    pub run_id: String,
}

impl Latest {
    /// Whether it is still running.
    pub fn is_running(&self) -> bool {
        self.status == WorkflowExecutionStatus::Running
    }

    /// The status as the CLI prints it: `running`, `completed`, `failed`...
    pub fn status_word(&self) -> String {
        status_word(self.status)
    }
}

/// A run status as the CLI prints it.
pub fn status_word(status: WorkflowExecutionStatus) -> String {
    crate::runs::status_word(status).to_owned()
}

/// The latest run of `workflow_id`, or `None` when there never was one (within retention).
pub async fn latest(client: &Client, workflow_id: &WorkflowId) -> Result<Option<Latest>, CliError> {
    let handle = rollout_handle(client, workflow_id, None);
    match handle.describe(WorkflowDescribeOptions::default()).await {
        Ok(description) => Ok(Some(Latest {
            status: description.status(),
            run_id: description.run_id().to_owned(),
        })),
        Err(WorkflowInteractionError::NotFound(_)) => Ok(None),
        Err(error) => Err(CliError::RunFailed(format!(
            "looking up {workflow_id} failed: {}",
            error_chain(&error)
        ))),
    }
}

/// A completed run, as visibility lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletedRun {
    /// Its run ID.
    pub run_id: String,
    /// When it closed.
    pub closed: Option<SystemTime>,
    /// When it started.
    pub started: Option<SystemTime>,
}

/// The newest of `runs`: the latest to close, then to start.
pub fn newest(runs: Vec<CompletedRun>) -> Option<CompletedRun> {
    runs.into_iter().max_by_key(|run| (run.closed, run.started))
}

/// The newest completed run of a rollout and its result.
#[derive(Debug, Clone)]
pub struct LastRollout {
    /// Its run ID.
    pub run_id: String,
    /// What it returned: the pool, its template history, the last status.
    pub result: RolloutResult,
}

/// How many completed runs are looked at (visibility lists the newest first).
const LIST_LIMIT: usize = 100;

/// The newest completed run of `workflow_id` with its result, or `None` when no rollout of the
/// pool ever completed (within the namespace's retention).
pub async fn last_completed(
    client: &Client,
    workflow_id: &WorkflowId,
) -> Result<Option<LastRollout>, CliError> {
    let query = completed_query(workflow_id);
    let options = WorkflowListOptions::builder().limit(LIST_LIMIT).build();
    let listed: Vec<_> = client
        .list_workflows(query.clone(), options)
        .collect()
        .await;
    let mut runs = Vec::new();
    for run in listed {
        let run = run.map_err(|error| {
            CliError::RunFailed(format!(
                "listing the completed rollouts ({query}) failed: {}",
                error_chain(&error)
            ))
        })?;
        runs.push(CompletedRun {
            run_id: run.run_id().to_owned(),
            closed: run.close_time(),
            started: run.start_time(),
        });
    }
    let Some(run) = newest(runs) else {
        return Ok(None);
    };
    let handle = rollout_handle(client, workflow_id, Some(&run.run_id));
    let options = WorkflowGetResultOptions::builder()
        .follow_runs(false)
        .build();
    let result = handle.get_result(options).await.map_err(|error| {
        CliError::RunFailed(format!(
            "reading the result of {workflow_id} (run {}) failed: {}",
            run.run_id,
            error_chain(&error)
        ))
    })?;
    Ok(Some(LastRollout {
        run_id: run.run_id,
        result,
    }))
}

/// The visibility query of the completed runs of `workflow_id`.
fn completed_query(workflow_id: &WorkflowId) -> String {
    // Workflow IDs are made of validated names: no quotes to escape.
    format!("WorkflowId = '{workflow_id}' AND ExecutionStatus = 'Completed'")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nodewright_model::{ClusterName, Operation};

    use super::*;

    fn at(seconds: u64) -> Option<SystemTime> {
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
    }

    fn run(id: &str, closed: Option<SystemTime>, started: Option<SystemTime>) -> CompletedRun {
        CompletedRun {
            run_id: id.to_owned(),
            closed,
            started,
        }
    }

    #[test]
    fn the_newest_run_closed_last() {
        assert_eq!(newest(Vec::new()), None);
        let runs = vec![
            run("a", at(100), at(10)),
            run("c", at(300), at(5)),
            run("b", at(200), at(50)),
        ];
        assert_eq!(newest(runs).map(|r| r.run_id), Some("c".to_owned()));
        // Same close time: the later start wins; a missing close time loses.
        let runs = vec![
            run("a", at(300), at(10)),
            run("b", at(300), at(20)),
            run("x", None, at(99)),
        ];
        assert_eq!(newest(runs).map(|r| r.run_id), Some("b".to_owned()));
    }

    #[test]
    fn completed_runs_are_found_by_workflow_id_and_status() {
        let cluster = ClusterName::parse("cluster", "dev").unwrap_or_else(|e| panic!("{e}"));
        let id = WorkflowId::for_subject(Operation::Rollout, &cluster, "web");
        assert_eq!(
            completed_query(&id),
            "WorkflowId = 'rollout/dev/web' AND ExecutionStatus = 'Completed'"
        );
    }
}
