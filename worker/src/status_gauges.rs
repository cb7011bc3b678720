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
use nodewright_activities::metrics::{self, Metrics, PoolGauges, RolloutGauges, WriteQueueGauges};
use nodewright_model::ClusterName;
use nodewright_model::SearchAttribute;
use nodewright_model::arm::WriteStage;
use nodewright_model::controller::status::PoolStatusDocument;
use nodewright_model::names::arm_write_task_queue;
use nodewright_model::rollout::{RolloutPhase, RolloutStatus};
use nodewright_model::workflow_type;
use nodewright_workflows::pool_controller::PoolControllerWorkflow;
use nodewright_workflows::rolling_update::RollingUpdateWorkflow;
use temporalio_client::tonic::Request;
use temporalio_client::{
    Client, NamespacedClient, WorkflowExecutionInfo, WorkflowHandle, WorkflowListOptions,
    WorkflowQueryOptions,
};
use temporalio_common::protos::temporal::api::enums::v1::TaskQueueType;
use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueue;
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    DescribeTaskQueueRequest, DescribeTaskQueueResponse,
};

/// How often the gauges are read again.
pub const INTERVAL: Duration = Duration::from_secs(30);

/// How long one status query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the gauges every [`INTERVAL`] for as long as the process runs; `task_queue` is the
/// worker's main task queue (its ARM-write queue is described for the write budget's gauges).
pub fn spawn(client: Client, cluster: ClusterName, task_queue: String, metrics: &'static Metrics) {
    let writes = arm_write_task_queue(&task_queue);
    tokio::spawn(async move {
        loop {
            collect(&client, &cluster, metrics).await;
            describe_writes(&client, &writes, metrics).await;
            tokio::time::sleep(INTERVAL).await;
        }
    });
}

/// The ARM-write queue's backlog by stage, its age, its dispatch rate and the rate limit the
/// server enforces (DescribeTaskQueue with its statistics); a failed description keeps the last
/// values.
async fn describe_writes(client: &Client, task_queue: &str, metrics: &Metrics) {
    let request = DescribeTaskQueueRequest {
        namespace: client.namespace(),
        task_queue: Some(TaskQueue {
            name: task_queue.to_owned(),
            ..TaskQueue::default()
        }),
        task_queue_type: TaskQueueType::Activity as i32,
        report_stats: true,
        report_config: true,
        ..DescribeTaskQueueRequest::default()
    };
    let mut service = client.connection().workflow_service();
    let described = tokio::time::timeout(
        QUERY_TIMEOUT,
        service.describe_task_queue(Request::new(request)),
    )
    .await;
    match described {
        Ok(Ok(response)) => metrics.set_write_queue(&write_queue_gauges(response.get_ref())),
        Ok(Err(status)) => {
            tracing::warn!(%status, task_queue, "cannot describe the ARM-write task queue");
        }
        Err(_) => tracing::warn!(task_queue, "describing the ARM-write task queue timed out"),
    }
}

/// Temporal's description of the ARM-write queue as gauges.
pub fn write_queue_gauges(described: &DescribeTaskQueueResponse) -> WriteQueueGauges {
    let mut backlog: Vec<(&'static str, f64)> = Vec::new();
    for (key, stats) in &described.stats_by_priority_key {
        if let Some(stage) = WriteStage::from_priority_key(*key) {
            let count = stats.approximate_backlog_count as f64;
            match backlog.iter_mut().find(|(name, _)| *name == stage.as_str()) {
                Some((_, total)) => *total += count,
                None => backlog.push((stage.as_str(), count)),
            }
        }
    }
    if backlog.is_empty()
        && let Some(stats) = &described.stats
    {
        backlog.push((
            WriteStage::Starting.as_str(),
            stats.approximate_backlog_count as f64,
        ));
    }
    backlog.sort_by_key(|(name, _)| *name);
    let stats = described.stats.unwrap_or_default();
    let age = stats
        .approximate_backlog_age
        .map(|age| age.seconds as f64 + f64::from(age.nanos) / 1e9)
        .unwrap_or_default();
    WriteQueueGauges {
        backlog,
        backlog_age_seconds: age.max(0.0),
        dispatch_per_second: f64::from(stats.tasks_dispatch_rate),
        rate_limit_per_second: described
            .effective_rate_limit
            .as_ref()
            .map(|limit| f64::from(limit.requests_per_second)),
    }
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
        spot_evictions: status
            .evictions
            .iter()
            .map(|(zone, count)| (zone.clone(), *count))
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

#[cfg(test)]
mod tests {
    use super::*;
    use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueueStats;
    use temporalio_common::protos::temporal::api::workflowservice::v1::describe_task_queue_response::EffectiveRateLimit;

    fn stats(backlog: i64) -> TaskQueueStats {
        TaskQueueStats {
            approximate_backlog_count: backlog,
            ..TaskQueueStats::default()
        }
    }

    #[test]
    fn the_write_queue_is_read_by_stage_with_its_age_dispatch_and_limit() {
        let mut total = TaskQueueStats {
            approximate_backlog_count: 12,
            approximate_backlog_age: Some(Default::default()),
            tasks_dispatch_rate: 5.0,
            ..TaskQueueStats::default()
        };
        if let Some(age) = total.approximate_backlog_age.as_mut() {
            age.seconds = 4;
            age.nanos = 500_000_000;
        }
        let described = DescribeTaskQueueResponse {
            stats: Some(total),
            stats_by_priority_key: [(1, stats(2)), (2, stats(3)), (3, stats(6)), (0, stats(1))]
                .into_iter()
                .collect(),
            effective_rate_limit: Some(EffectiveRateLimit {
                requests_per_second: 5.0,
                ..EffectiveRateLimit::default()
            }),
            ..DescribeTaskQueueResponse::default()
        };
        let gauges = write_queue_gauges(&described);
        assert_eq!(
            gauges.backlog,
            vec![("building", 3.0), ("finishing", 2.0), ("starting", 7.0)]
        );
        assert_eq!(gauges.backlog_age_seconds, 4.5);
        assert_eq!(gauges.dispatch_per_second, 5.0);
        assert_eq!(gauges.rate_limit_per_second, Some(5.0));
        let bare = write_queue_gauges(&DescribeTaskQueueResponse::default());
        assert!(bare.backlog.is_empty());
        assert_eq!(bare.rate_limit_per_second, None);
    }
}
