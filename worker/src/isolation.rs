//! Cluster isolation at the activity boundary: an activity inbound interceptor that refuses every
//! activity whose run belongs to another cluster, or to no nodewright run, before it touches this
//! worker's Kubernetes API or Azure resource group.
//!
//! Workflows do no I/O, so refusing their activities is enough: a run of another cluster that
//! this worker's workflow task advances still acts only through activities, and those reach a
//! worker of its own cluster or fail here (non-retryable `WrongCluster`, naming both clusters and
//! the fix). The decision is `nodewright_model::isolation::admit_activity`.

use nodewright_model::ClusterName;
use nodewright_model::isolation::{Admission, WRONG_CLUSTER, admit_activity};
use temporalio_sdk::ApplicationFailure;
use temporalio_sdk::activities::ActivityError;
use temporalio_sdk::interceptors::{
    ActivityInboundInterceptor, ExecuteActivityInput, ExecuteActivityOutput, Next,
};
use tracing::warn;

/// Refuses the activities of every run that is not of `cluster`.
pub struct ClusterGuard {
    cluster: ClusterName,
}

impl ClusterGuard {
    /// A guard for the worker of `cluster`.
    pub fn new(cluster: ClusterName) -> Self {
        Self { cluster }
    }
}

impl ActivityInboundInterceptor for ClusterGuard {
    fn execute_activity<'a>(
        &'a self,
        input: ExecuteActivityInput,
        next: Next<'a, ExecuteActivityInput, ExecuteActivityOutput<'a>>,
    ) -> ExecuteActivityOutput<'a> {
        let info = input.activity_info();
        match admit_activity(
            info.workflow_id.as_deref(),
            &info.activity_type,
            &self.cluster,
        ) {
            Admission::Admitted => next.run(input),
            Admission::Refused { message } => {
                warn!(
                    workflow_id = info.workflow_id.as_deref().unwrap_or(""),
                    activity_type = %info.activity_type,
                    "refused an activity of another cluster: {message}"
                );
                Box::pin(async move { Err(wrong_cluster(message)) })
            }
        }
    }
}

/// The non-retryable failure of a refused activity.
fn wrong_cluster(message: String) -> ActivityError {
    ActivityError::application(
        ApplicationFailure::builder(message)
            .type_name(WRONG_CLUSTER.to_owned())
            .non_retryable(true)
            .build(),
    )
}
