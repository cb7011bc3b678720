//! The worker's Azure scope (subscription and resource group, from its configuration), which
//! every workflow that names VMs by ARM id reads first.
//!
//! It is read by a local activity: the worker answers from its configuration inside the
//! workflow task, without a round trip through the server's task queue (about 0.3 s of a
//! machine's create, drain and delete each, in a rollout's surge slot). Runs recorded before the
//! patch marker [`SCOPE_LOCAL`] read it with a regular activity, as they did then.

use std::time::Duration;

use nodewright_activities::azure::machines::{ArmReadActivities, ArmScope};
use temporalio_common::RetryPolicy;
use temporalio_sdk::{
    ActivityExecutionError, ActivityOptions, LocalActivityOptions, WorkflowCancellationToken,
    WorkflowContext,
};

/// The patch marker of reading the scope by a local activity.
pub const SCOPE_LOCAL: &str = "scope-local-activity";

/// Reads the scope: by a local activity (retried like a read for up to five minutes, and
/// answering even after a cancellation request, so that the cancellation path runs with it),
/// or, in runs recorded before [`SCOPE_LOCAL`], by a regular activity with `before` (the
/// options that run used).
pub async fn read<W>(
    ctx: &WorkflowContext<W>,
    before: ActivityOptions,
) -> Result<ArmScope, ActivityExecutionError> {
    if ctx.patched(SCOPE_LOCAL) {
        ctx.execute_local_activity(ArmReadActivities::scope, (), local_options())
            .await
    } else {
        ctx.execute_activity(ArmReadActivities::scope, (), before)
            .await
    }
}

fn local_options() -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(Duration::from_secs(30))
        .schedule_to_close_timeout(Duration::from_secs(300))
        .retry_policy(
            RetryPolicy::builder()
                .initial_interval(Duration::from_secs(1))
                .backoff_coefficient(2.0)
                .maximum_interval(Duration::from_secs(30))
                .build(),
        )
        .cancellation_token(WorkflowCancellationToken::new())
        .build()
}
