//! What workflows ask Temporal itself: which nodewright workflows are running in the cluster
//! (visibility) and the template a pool last rolled out to (the orphan sweep, for replacing a
//! machine); how the children a rollout run inherited from the run before it ended, and asking
//! them to cancel (a rollout continues as new without waiting for its children). A child whose
//! run ID is known is asked about by it (and the runs it continued into), never a newer run that
//! someone else started under the same workflow ID.

use std::sync::Arc;

use futures::StreamExt;
use nodewright_model::pool::ValidPool;
use nodewright_model::rollout::RunEnd;
use nodewright_model::rollout::{RolloutRequest, RolloutResult};
use nodewright_model::sweep::RunningWorkflow;
use nodewright_model::{ClusterName, Operation, SearchAttribute, WorkflowId};
use serde::{Deserialize, Serialize};
use temporalio_client::errors::{WorkflowGetResultError, WorkflowInteractionError};
use temporalio_client::{
    Client, HistoryEventFilterType, NamespacedClient, WorkflowCancelOptions,
    WorkflowDescribeOptions, WorkflowExecutionInfo, WorkflowExecutionStatus,
    WorkflowFetchHistoryOptions, WorkflowGetResultOptions, WorkflowHandle, WorkflowListOptions,
};
use temporalio_common::protos::temporal::api::history::v1::history_event::Attributes;
use temporalio_common::search_attributes::SearchAttributeKey;
use temporalio_common::{HasWorkflowDefinition, WorkflowDefinition};
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

use crate::failure::{Failure, Retry};
use crate::lifetime::{beat, until_cancelled};

/// How many completed rollouts of a pool are looked at for its newest.
const ROLLOUTS_LOOKED_AT: usize = 100;

/// How many runs a run's chain (continued as new, retried) is followed through at most.
const RUNS_FOLLOWED: usize = 100;

/// Reads from Temporal: holds a client of the worker's namespace.
pub struct TemporalActivities {
    client: Client,
}

impl TemporalActivities {
    /// Reads through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// The running nodewright workflows of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListRunning {
    /// The cluster (`NodewrightCluster`).
    pub cluster: ClusterName,
}

/// The pool a newest completed rollout left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolOfLastRollout {
    /// The cluster.
    pub cluster: ClusterName,
    /// The pool.
    pub pool: String,
}

/// Workflows by ID, and by run where it is known: the children a rollout run inherited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workflows {
    /// Their workflow IDs.
    pub workflow_ids: Vec<String>,
    /// Their run IDs, in the same order (`model::rollout::run_ids`): each known one is the run
    /// asked about (with the runs it continued into); where it is `None` or missing, the
    /// workflow ID's latest run. Empty when none is known (left out, as runs recorded before
    /// run IDs were kept sent it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_ids: Vec<Option<String>>,
    /// Why, for a cancellation request (shown in Temporal's UI).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// For [`TemporalActivities::workflow_ends`]: wait up to this many seconds for one of them
    /// to end (0: answer at once), heartbeating.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wait_secs: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// An error reading from Temporal.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A visibility list failed.
    #[error("listing workflows ({query}) failed: {message}")]
    List {
        /// The visibility query.
        query: String,
        /// The client's error.
        message: String,
    },
    /// Describing or cancelling a workflow failed.
    #[error("asking Temporal about {workflow_id} failed: {message}")]
    Describe {
        /// The workflow.
        workflow_id: String,
        /// The client's error.
        message: String,
    },
    /// Reading a workflow's result failed.
    #[error("reading the result of {workflow_id} failed: {message}")]
    Result {
        /// The workflow.
        workflow_id: String,
        /// The client's error.
        message: String,
    },
}

impl Error {
    fn into_activity_error(self) -> ActivityError {
        let type_name = match self {
            Error::List { .. } => "ListWorkflows",
            Error::Result { .. } => "WorkflowResult",
            Error::Describe { .. } => "DescribeWorkflow",
        };
        Failure {
            error: self,
            type_name,
            retry: Retry::Retryable,
            retry_after: None,
        }
        .into()
    }
}

/// RollingUpdate as far as reading its result goes (the workflow type lives in the workflows
/// crate, which depends on this one).
struct RollingUpdateResult;

impl WorkflowDefinition for RollingUpdateResult {
    type Input = RolloutRequest;
    type Output = RolloutResult;
    fn name(&self) -> &str {
        nodewright_model::workflow_type::ROLLING_UPDATE
    }
}

impl HasWorkflowDefinition for RollingUpdateResult {
    type Run = Self;
}

/// Any workflow, as far as how it ended goes (its result is not read).
struct UntypedWorkflow;

impl WorkflowDefinition for UntypedWorkflow {
    type Input = serde_json::Value;
    type Output = serde_json::Value;
    fn name(&self) -> &str {
        ""
    }
}

impl HasWorkflowDefinition for UntypedWorkflow {
    type Run = Self;
}

#[activities]
impl TemporalActivities {
    /// The nodewright workflows running in the cluster (by `NodewrightCluster`), with their
    /// operation, machine and pool.
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "temporal.running_workflows")]
    pub async fn running_workflows(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ListRunning,
    ) -> Result<Vec<RunningWorkflow>, ActivityError> {
        self.running(&input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// How each workflow ended, in order: the run of its known run ID (following the runs it
    /// continued into), else its latest run; `None` while it runs. With `wait_secs`,
    /// asks again every 2 s (heartbeating) until one has ended or the time is up.
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "temporal.workflow_ends")]
    pub async fn workflow_ends(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: Workflows,
    ) -> Result<Vec<Option<RunEnd>>, ActivityError> {
        let until = tokio::time::Instant::now()
            + std::time::Duration::from_secs(u64::from(input.wait_secs));
        let work = async {
            loop {
                let ends = self
                    .ends(&input)
                    .await
                    .map_err(Error::into_activity_error)?;
                if ends.iter().any(Option::is_some) || tokio::time::Instant::now() >= until {
                    return Ok(ends);
                }
                beat(&ctx).await;
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
        };
        until_cancelled(&ctx, work).await
    }

    /// Asks each workflow to cancel, with `reason`: the run of its known run ID (or the run it
    /// continued into), else its latest run; one that already ended is left as it is, and so is
    /// a newer run under the same workflow ID.
    ///
    /// # Idempotency
    /// A second request to a run already asked changes nothing.
    #[activity(name = "temporal.cancel_workflows")]
    pub async fn cancel_workflows(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: Workflows,
    ) -> Result<(), ActivityError> {
        self.cancel(&input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// The pool (template, hash, timeouts, drain policy) as the newest completed rollout of it
    /// left it; none when no rollout of the pool completed within the namespace's retention.
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "temporal.pool_of_last_rollout")]
    pub async fn pool_of_last_rollout(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: PoolOfLastRollout,
    ) -> Result<Option<ValidPool>, ActivityError> {
        self.last_rollout(&input)
            .await
            .map_err(Error::into_activity_error)
    }
}

impl Workflows {
    /// Each workflow ID with its run ID, when known.
    fn runs(&self) -> impl Iterator<Item = (&String, Option<&str>)> {
        self.workflow_ids.iter().enumerate().map(|(index, id)| {
            let run = self.run_ids.get(index).and_then(Option::as_deref);
            (id, run)
        })
    }
}

/// Where a workflow is: running (the run to cancel; `None`: its latest), or ended so.
enum RunState {
    Running { run_id: Option<String> },
    Ended(RunEnd),
}

impl TemporalActivities {
    /// How each of `workflows` ended, in order (`None` while it runs): the body of
    /// [`Self::workflow_ends`], one ask.
    ///
    /// # Errors
    ///
    /// Temporal could not be asked about one of them.
    pub async fn ends(&self, workflows: &Workflows) -> Result<Vec<Option<RunEnd>>, Error> {
        let mut ends = Vec::with_capacity(workflows.workflow_ids.len());
        for (workflow_id, run_id) in workflows.runs() {
            ends.push(self.end_of(workflow_id, run_id).await?);
        }
        Ok(ends)
    }

    /// Asks each of `workflows` that runs to cancel: the body of [`Self::cancel_workflows`].
    ///
    /// # Errors
    ///
    /// Temporal could not be asked about one of them, or refused to cancel one that runs.
    pub async fn cancel(&self, workflows: &Workflows) -> Result<(), Error> {
        for (workflow_id, run_id) in workflows.runs() {
            let running = match self.state_of(workflow_id, run_id).await? {
                RunState::Running { run_id } => run_id,
                RunState::Ended(_) => continue,
            };
            let options = WorkflowCancelOptions::builder()
                .reason(workflows.reason.clone())
                .build();
            let handle = self.run_handle(workflow_id, running.as_deref());
            if let Err(error) = handle.cancel(options).await {
                // It may have ended between the two calls: that is as good.
                if self
                    .end_of(workflow_id, running.as_deref())
                    .await?
                    .is_none()
                {
                    return Err(Error::Describe {
                        workflow_id: workflow_id.clone(),
                        message: error.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// A handle on the run `run_id` of `workflow_id`, or on its latest run.
    fn run_handle(
        &self,
        workflow_id: &str,
        run_id: Option<&str>,
    ) -> WorkflowHandle<Client, UntypedWorkflow> {
        let info = WorkflowExecutionInfo::builder()
            .namespace(self.client.namespace())
            .workflow_id(workflow_id.to_owned())
            .maybe_run_id(run_id.map(str::to_owned))
            .build();
        WorkflowHandle::new(self.client.clone(), info)
    }

    /// How the workflow ended (`None` while it runs): see [`Self::state_of`].
    async fn end_of(
        &self,
        workflow_id: &str,
        run_id: Option<&str>,
    ) -> Result<Option<RunEnd>, Error> {
        Ok(match self.state_of(workflow_id, run_id).await? {
            RunState::Running { .. } => None,
            RunState::Ended(end) => Some(end),
        })
    }

    /// Where the run `run_id` of `workflow_id` is, following the runs it continued into (or
    /// that retried it); without a run ID, where its latest run is.
    async fn state_of(&self, workflow_id: &str, run_id: Option<&str>) -> Result<RunState, Error> {
        let failed = |error: String| Error::Describe {
            workflow_id: workflow_id.to_owned(),
            message: error,
        };
        let mut run_id = run_id.map(str::to_owned);
        for _ in 0..RUNS_FOLLOWED {
            let handle = self.run_handle(workflow_id, run_id.as_deref());
            let described = match handle.describe(WorkflowDescribeOptions::default()).await {
                Ok(described) => described,
                // Past the namespace's retention (or never started): nothing will ever end it,
                // so it counts as ended, and the rollout does not wait for it for ever.
                Err(WorkflowInteractionError::NotFound(_)) => {
                    let run = run_id
                        .as_deref()
                        .map(|run| format!(" run {run}"))
                        .unwrap_or_default();
                    return Ok(RunState::Ended(RunEnd::Failed {
                        message: format!(
                            "Temporal no longer knows {workflow_id}{run} (past the namespace's retention?)"
                        ),
                    }));
                }
                Err(e) => return Err(failed(e.to_string())),
            };
            if described.status() == WorkflowExecutionStatus::Running {
                return Ok(RunState::Running { run_id });
            }
            if run_id.is_some()
                && let Some(next) = next_run(&handle).await.map_err(failed)?
            {
                run_id = Some(next);
                continue;
            }
            // A known run is read alone; the latest run as before (a run after it would be
            // the latest).
            let options = WorkflowGetResultOptions::builder()
                .follow_runs(run_id.is_none())
                .build();
            return Ok(RunState::Ended(match handle.get_result(options).await {
                Ok(_) => RunEnd::Completed,
                Err(WorkflowGetResultError::Failed(failure)) => RunEnd::Failed {
                    message: nodewright_model::text::error_chain(failure.as_ref()),
                },
                Err(WorkflowGetResultError::Cancelled { .. }) => RunEnd::Canceled {
                    message: "canceled".to_owned(),
                },
                Err(WorkflowGetResultError::Terminated { .. }) => RunEnd::Terminated {
                    reason: String::new(),
                },
                Err(WorkflowGetResultError::TimedOut) => RunEnd::TimedOut,
                Err(error) => return Err(failed(error.to_string())),
            }));
        }
        Err(failed(format!(
            "it continued into more than {RUNS_FOLLOWED} runs"
        )))
    }

    async fn running(&self, input: &ListRunning) -> Result<Vec<RunningWorkflow>, Error> {
        // Cluster names are validated names: no quote to escape.
        let query = format!(
            "{} = '{}' AND ExecutionStatus = 'Running'",
            SearchAttribute::Cluster.name(),
            input.cluster
        );
        let keyword = |attribute: SearchAttribute| SearchAttributeKey::keyword(attribute.name());
        let listed: Vec<_> = self
            .client
            .list_workflows(query.clone(), WorkflowListOptions::builder().build())
            .collect()
            .await;
        let mut running = Vec::new();
        for execution in listed {
            let execution = execution.map_err(|error| Error::List {
                query: query.clone(),
                message: error.to_string(),
            })?;
            let attributes = execution.search_attributes();
            let get = |attribute| attributes.get(&keyword(attribute));
            running.push(RunningWorkflow {
                workflow_id: execution.id().to_owned(),
                operation: get(SearchAttribute::Operation).unwrap_or_default(),
                machine: get(SearchAttribute::Machine),
                pool: get(SearchAttribute::Pool),
            });
        }
        Ok(running)
    }

    async fn last_rollout(&self, input: &PoolOfLastRollout) -> Result<Option<ValidPool>, Error> {
        let workflow_id = WorkflowId::for_subject(Operation::Rollout, &input.cluster, &input.pool);
        let query = format!("WorkflowId = '{workflow_id}' AND ExecutionStatus = 'Completed'");
        let listed: Vec<_> = self
            .client
            .list_workflows(
                query.clone(),
                WorkflowListOptions::builder()
                    .limit(ROLLOUTS_LOOKED_AT)
                    .build(),
            )
            .collect()
            .await;
        let mut newest = None;
        for execution in listed {
            let execution = execution.map_err(|error| Error::List {
                query: query.clone(),
                message: error.to_string(),
            })?;
            let key = (execution.close_time(), execution.start_time());
            if newest.as_ref().is_none_or(|(best, _)| key > *best) {
                newest = Some((key, execution.run_id().to_owned()));
            }
        }
        let Some((_, run_id)) = newest else {
            return Ok(None);
        };
        let info = WorkflowExecutionInfo::builder()
            .namespace(self.client.namespace())
            .workflow_id(workflow_id.to_string())
            .run_id(run_id)
            .build();
        let handle: WorkflowHandle<Client, RollingUpdateResult> =
            WorkflowHandle::new(self.client.clone(), info);
        let options = WorkflowGetResultOptions::builder()
            .follow_runs(false)
            .build();
        let result = handle
            .get_result(options)
            .await
            .map_err(|error| Error::Result {
                workflow_id: workflow_id.to_string(),
                message: error.to_string(),
            })?;
        Ok(Some(result.pool))
    }
}

/// The run that the closed run of `handle` continued into (continue-as-new, a retry, a cron
/// run), from its close event; `None` when it was the last.
async fn next_run(
    handle: &WorkflowHandle<Client, UntypedWorkflow>,
) -> Result<Option<String>, String> {
    let options = WorkflowFetchHistoryOptions::builder()
        .event_filter_type(HistoryEventFilterType::CloseEvent)
        .build();
    let events = handle
        .fetch_history(options)
        .into_events()
        .await
        .map_err(|error| error.to_string())?;
    let next = match events.into_iter().last().and_then(|event| event.attributes) {
        Some(Attributes::WorkflowExecutionContinuedAsNewEventAttributes(a)) => {
            a.new_execution_run_id
        }
        Some(Attributes::WorkflowExecutionCompletedEventAttributes(a)) => a.new_execution_run_id,
        Some(Attributes::WorkflowExecutionFailedEventAttributes(a)) => a.new_execution_run_id,
        Some(Attributes::WorkflowExecutionTimedOutEventAttributes(a)) => a.new_execution_run_id,
        _ => String::new(),
    };
    Ok(Some(next).filter(|run| !run.is_empty()))
}
