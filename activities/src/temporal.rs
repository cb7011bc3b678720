//! What the orphan sweep asks Temporal itself: which nodewright workflows are running in the
//! cluster (visibility), and the template a pool last rolled out to (for replacing a machine).

use std::sync::Arc;

use futures::StreamExt;
use nodewright_model::pool::ValidPool;
use nodewright_model::rollout::{RolloutRequest, RolloutResult};
use nodewright_model::sweep::RunningWorkflow;
use nodewright_model::{ClusterName, Operation, SearchAttribute, WorkflowId};
use serde::{Deserialize, Serialize};
use temporalio_client::{
    Client, NamespacedClient, WorkflowExecutionInfo, WorkflowGetResultOptions, WorkflowHandle,
    WorkflowListOptions,
};
use temporalio_common::search_attributes::SearchAttributeKey;
use temporalio_common::{HasWorkflowDefinition, WorkflowDefinition};
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

use crate::failure::{Failure, Retry};

/// How many completed rollouts of a pool are looked at for its newest.
const ROLLOUTS_LOOKED_AT: usize = 100;

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

impl TemporalActivities {
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
