//! Finding a cluster's sweeps in Temporal's visibility store: the ones running (started on demand
//! as `sweep/<cluster>` or by the schedule as `sweep/<cluster>-<time>`), the newest that completed
//! and the newest that closed.

use std::time::SystemTime;

use futures::StreamExt;
use nodewright_model::{ClusterName, Operation, WorkflowId};
use nodewright_workflows::search;
use temporalio_client::schedules::ScheduleError;
use temporalio_client::tonic::Code;
use temporalio_client::{Client, RpcOptions, WorkflowExecutionStatus, WorkflowListOptions};

use super::error_chain;
use crate::CliError;

/// How many runs are looked at (visibility lists the newest first).
const LIST_LIMIT: usize = 100;

/// A sweep run as visibility (or the schedule) knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepRun {
    /// `sweep/<cluster>` or `sweep/<cluster>-<time>`.
    pub workflow_id: String,
    /// Its run ID.
    pub run_id: String,
    /// Running, completed, failed...
    pub status: WorkflowExecutionStatus,
    /// When it started, when known.
    pub started: Option<SystemTime>,
    /// When it closed, when it did.
    pub closed: Option<SystemTime>,
}

impl SweepRun {
    /// The status as the CLI prints it: `running`, `completed`, `failed`...
    pub fn status_word(&self) -> String {
        status_word(self.status)
    }
}

/// A run status as the CLI prints it.
pub fn status_word(status: WorkflowExecutionStatus) -> String {
    crate::runs::status_word(status).to_owned()
}

/// The clauses every query starts with: this cluster's sweeps.
fn sweeps_of(cluster: &ClusterName) -> String {
    // Cluster names are validated DNS labels: no quotes to escape.
    format!(
        "{} = '{cluster}' AND {} = '{}'",
        search::CLUSTER.name(),
        search::OPERATION.name(),
        Operation::Sweep.as_str()
    )
}

/// The visibility query of the cluster's running sweeps.
pub fn running_query(cluster: &ClusterName) -> String {
    format!("{} AND ExecutionStatus = 'Running'", sweeps_of(cluster))
}

/// The visibility query of the cluster's completed sweeps (their result is an audit).
pub fn completed_query(cluster: &ClusterName) -> String {
    format!("{} AND ExecutionStatus = 'Completed'", sweeps_of(cluster))
}

/// The visibility query of the cluster's closed sweeps, however they ended.
pub fn closed_query(cluster: &ClusterName) -> String {
    format!("{} AND ExecutionStatus != 'Running'", sweeps_of(cluster))
}

/// The newest of `runs`: the latest to close, then to start.
pub fn newest(runs: Vec<SweepRun>) -> Option<SweepRun> {
    runs.into_iter().max_by_key(|run| (run.closed, run.started))
}

/// The runs `query` finds.
async fn list(client: &Client, query: String) -> Result<Vec<SweepRun>, CliError> {
    let options = WorkflowListOptions::builder().limit(LIST_LIMIT).build();
    let listed: Vec<_> = client
        .list_workflows(query.clone(), options)
        .collect()
        .await;
    let mut runs = Vec::with_capacity(listed.len());
    for run in listed {
        let run = run.map_err(|error| {
            CliError::RunFailed(format!(
                "listing sweeps ({query}) failed: {}",
                error_chain(&error)
            ))
        })?;
        runs.push(SweepRun {
            workflow_id: run.id().to_owned(),
            run_id: run.run_id().to_owned(),
            status: run.status(),
            started: run.start_time(),
            closed: run.close_time(),
        });
    }
    Ok(runs)
}

/// The cluster's running sweeps, the newest start first.
///
/// Visibility finds every run once a worker has set its search attributes (its first workflow
/// task); a run the schedule has just started, before any worker picked it up, is found through
/// the schedule `sweep/<cluster>` itself.
pub async fn running(client: &Client, cluster: &ClusterName) -> Result<Vec<SweepRun>, CliError> {
    let mut runs = list(client, running_query(cluster)).await?;
    for started in scheduled_running(client, cluster).await? {
        if !runs
            .iter()
            .any(|run| run.workflow_id == started.workflow_id)
        {
            runs.push(started);
        }
    }
    runs.sort_by_key(|run| std::cmp::Reverse(run.started));
    Ok(runs)
}

/// The runs the cluster's schedule says are running (none without a schedule).
async fn scheduled_running(
    client: &Client,
    cluster: &ClusterName,
) -> Result<Vec<SweepRun>, CliError> {
    let schedule_id = WorkflowId::for_cluster(Operation::Sweep, cluster);
    let handle = client.get_schedule_handle(schedule_id.to_string());
    match handle.describe(RpcOptions::default()).await {
        Ok(description) => Ok(description
            .running_actions()
            .into_iter()
            .map(|action| SweepRun {
                workflow_id: action.workflow_id,
                run_id: action.run_id,
                status: WorkflowExecutionStatus::Running,
                started: None,
                closed: None,
            })
            .collect()),
        Err(ScheduleError::Rpc(status)) if status.code() == Code::NotFound => Ok(Vec::new()),
        Err(error) => Err(CliError::RunFailed(format!(
            "looking at the schedule {schedule_id} failed: {}",
            error_chain(&error)
        ))),
    }
}

/// The cluster's newest completed sweep, if one completed (within the namespace's retention).
pub async fn newest_completed(
    client: &Client,
    cluster: &ClusterName,
) -> Result<Option<SweepRun>, CliError> {
    Ok(newest(list(client, completed_query(cluster)).await?))
}

/// The cluster's newest closed sweep, however it ended.
pub async fn newest_closed(
    client: &Client,
    cluster: &ClusterName,
) -> Result<Option<SweepRun>, CliError> {
    Ok(newest(list(client, closed_query(cluster)).await?))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn cluster() -> ClusterName {
        ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"))
    }

    fn at(seconds: u64) -> Option<SystemTime> {
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
    }

    fn run(id: &str, closed: Option<SystemTime>, started: Option<SystemTime>) -> SweepRun {
        SweepRun {
            workflow_id: id.to_owned(),
            run_id: format!("run-{id}"),
            status: WorkflowExecutionStatus::Completed,
            started,
            closed,
        }
    }

    #[test]
    fn sweeps_are_found_by_cluster_operation_and_status() {
        assert_eq!(
            running_query(&cluster()),
            "NodewrightCluster = 'prod' AND NodewrightOperation = 'sweep' AND ExecutionStatus = 'Running'"
        );
        assert_eq!(
            completed_query(&cluster()),
            "NodewrightCluster = 'prod' AND NodewrightOperation = 'sweep' AND ExecutionStatus = 'Completed'"
        );
        assert_eq!(
            closed_query(&cluster()),
            "NodewrightCluster = 'prod' AND NodewrightOperation = 'sweep' AND ExecutionStatus != 'Running'"
        );
    }

    #[test]
    fn the_newest_sweep_closed_last() {
        assert_eq!(newest(Vec::new()), None);
        let runs = vec![
            run("sweep/prod", at(100), at(10)),
            run("sweep/prod-2026-04-01T10:30:00Z", at(300), at(290)),
            run("sweep/prod-2026-04-01T10:15:00Z", at(200), at(190)),
        ];
        assert_eq!(
            newest(runs).map(|r| r.workflow_id).as_deref(),
            Some("sweep/prod-2026-04-01T10:30:00Z")
        );
        let runs = vec![
            run("a", at(300), at(10)),
            run("b", at(300), at(20)),
            run("x", None, at(99)),
        ];
        assert_eq!(newest(runs).map(|r| r.workflow_id).as_deref(), Some("b"));
    }

    #[test]
    fn statuses_are_lowercase_words() {
        assert_eq!(status_word(WorkflowExecutionStatus::Running), "running");
        assert_eq!(status_word(WorkflowExecutionStatus::Completed), "completed");
    }
}
