//! Activity options, one function per kind of activity, so that timeouts and retry policies are
//! decided in one place and not scattered as literals through the workflows.

use std::time::Duration;

use temporalio_common::RetryPolicy;
use temporalio_sdk::{ActivityCloseTimeouts, ActivityOptions};

/// A single read from Kubernetes or Azure: 30 s an attempt, retried with backoff (1 s doubling
/// to 30 s) for up to five minutes in all. Non-retryable failures end it at once.
pub fn read() -> ActivityOptions {
    ActivityOptions::with_close_timeouts(ActivityCloseTimeouts::ScheduleAndStartToClose {
        schedule_to_close: Duration::from_secs(300),
        start_to_close: Duration::from_secs(30),
    })
    .retry_policy(
        RetryPolicy::builder()
            .initial_interval(Duration::from_secs(1))
            .backoff_coefficient(2.0)
            .maximum_interval(Duration::from_secs(30))
            .build(),
    )
    .build()
}
