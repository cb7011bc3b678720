//! The pool and rollout gauges (`nodewright_pool_*`, `nodewright_rollout_*`), read from the
//! running workflows' own `status` queries every [`INTERVAL`], never from workflow code: the
//! pool controllers and rollouts of this worker's cluster are listed (Temporal visibility), each
//! is asked its status, and the gauges are replaced by the answers, so a pool whose controller
//! ended leaves no series. A listing that fails keeps the last values; a query that fails leaves
//! that pool out and counts in `nodewright_status_queries_total{result="error"}`.
//!
//! Every worker of a deployment serves the same gauges: aggregate with `max by (pool, state)`.

use std::time::Duration;

use futures::StreamExt;
use nodewright_activities::metrics::{self, Metrics, PoolGauges, RolloutGauges};
use nodewright_model::ClusterName;
use nodewright_model::SearchAttribute;
use nodewright_model::controller::status::PoolStatusDocument;
use nodewright_model::rollout::{RolloutPhase, RolloutStatus};
use nodewright_model::workflow_type;
use nodewright_workflows::pool_controller::PoolControllerWorkflow;
use nodewright_workflows::rolling_update::RollingUpdateWorkflow;
use temporalio_client::{
    Client, NamespacedClient, WorkflowExecutionInfo, WorkflowHandle, WorkflowListOptions,
    WorkflowQueryOptions,
};

/// How often the gauges are read again.
pub const INTERVAL: Duration = Duration::from_secs(30);

/// How long one status query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the gauges every [`INTERVAL`] for as long as the process runs.
pub fn spawn(client: Client, cluster: ClusterName, metrics: &'static Metrics) {
    tokio::spawn(async move {
        loop {
            collect(&client, &cluster, metrics).await;
            tokio::time::sleep(INTERVAL).await;
        }
    });
}

async fn collect(client: &Client, cluster: &ClusterName, metrics: &Metrics) {
    // Cluster names are validated names: no quote to escape.
    let query = format!(
        "{} = '{cluster}' AND ExecutionStatus = 'Running' AND WorkflowType IN ('{}', '{}')",
        SearchAttribute::Cluster.name(),
        workflow_type::POOL_CONTROLLER,
        workflow_type::ROLLING_UPDATE,
    );
    let listed: Vec<_> = client
        .list_workflows(query, WorkflowListOptions::builder().build())
        .collect()
        .await;
    let mut pools = Vec::new();
    let mut rollouts = Vec::new();
    for execution in listed {
        let execution = match execution {
            Ok(execution) => execution,
            Err(error) => {
                tracing::warn!(%error, "cannot list the pools and rollouts for their gauges");
                return;
            }
        };
        let info = WorkflowExecutionInfo::builder()
            .namespace(client.namespace())
            .workflow_id(execution.id().to_owned())
            .run_id(execution.run_id().to_owned())
            .build();
        match execution.workflow_type() {
            workflow_type::POOL_CONTROLLER => {
                let handle: WorkflowHandle<Client, PoolControllerWorkflow> =
                    WorkflowHandle::new(client.clone(), info);
                let answer = tokio::time::timeout(
                    QUERY_TIMEOUT,
                    handle.query(
                        PoolControllerWorkflow::status,
                        (),
                        WorkflowQueryOptions::default(),
                    ),
                )
                .await;
                let answered = matches!(answer, Ok(Ok(_)));
                metrics::status_query(workflow_type::POOL_CONTROLLER, answered);
                if let Ok(Ok(Some(document))) = answer {
                    pools.push(pool_gauges(&document));
                }
            }
            workflow_type::ROLLING_UPDATE => {
                let handle: WorkflowHandle<Client, RollingUpdateWorkflow> =
                    WorkflowHandle::new(client.clone(), info);
                let answer = tokio::time::timeout(
                    QUERY_TIMEOUT,
                    handle.query(
                        RollingUpdateWorkflow::status,
                        (),
                        WorkflowQueryOptions::default(),
                    ),
                )
                .await;
                let answered = matches!(answer, Ok(Ok(_)));
                metrics::status_query(workflow_type::ROLLING_UPDATE, answered);
                if let Ok(Ok(status)) = answer {
                    rollouts.push(rollout_gauges(&status));
                }
            }
            _ => {}
        }
    }
    metrics.set_pools(&pools);
    metrics.set_rollouts(&rollouts);
}

/// A pool controller's status as gauges.
pub fn pool_gauges(document: &PoolStatusDocument) -> PoolGauges {
    let status = &document.status;
    let remediating = u32::try_from(status.remediations.len()).unwrap_or(u32::MAX);
    PoolGauges {
        pool: document.pool.clone(),
        replicas: vec![
            ("desired", document.spec.replicas),
            ("current", status.replicas),
            ("ready", status.ready_replicas),
            ("available", status.available_replicas),
            ("updated", status.updated_replicas),
            ("unhealthy", status.unhealthy_replicas),
        ],
        machines: vec![
            ("ready", status.ready_replicas),
            (
                "not_ready",
                status.replicas.saturating_sub(status.ready_replicas),
            ),
            ("unhealthy", status.unhealthy_replicas),
            ("remediating", remediating),
        ],
        conditions: status
            .conditions
            .iter()
            .map(|condition| (condition.type_.clone(), condition.status.clone()))
            .collect(),
    }
}

/// A running rollout's status as gauges; waiting for an approval counts as paused (it waits
/// for a person, not stalled).
pub fn rollout_gauges(status: &RolloutStatus) -> RolloutGauges {
    let counts = &status.counts;
    RolloutGauges {
        pool: status.pool.clone(),
        machines: vec![
            ("desired", status.desired),
            ("updated", counts.updated),
            ("in_flight", counts.creating.saturating_add(counts.deleting)),
            ("failed", status.failures_counted),
            ("remaining", status.desired.saturating_sub(counts.updated)),
        ],
        paused: matches!(
            status.phase,
            RolloutPhase::Paused | RolloutPhase::AwaitingApproval
        ),
    }
}
