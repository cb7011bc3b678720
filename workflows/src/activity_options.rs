//! Activity options, one function per kind of activity, so that timeouts and retry policies are
//! decided in one place and not scattered as literals through the workflows.

use std::time::Duration;

use nodewright_model::arm::WriteStage;
use temporalio_common::{Priority, RetryPolicy};
use temporalio_sdk::{ActivityCloseTimeouts, ActivityOptions};

/// A running wait must heartbeat at least this often; a lost worker's wait is retried on
/// another worker after this long.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(15);

fn backoff(initial: Duration, maximum: Duration) -> RetryPolicy {
    RetryPolicy::builder()
        .initial_interval(initial)
        .backoff_coefficient(2.0)
        .maximum_interval(maximum)
        .build()
}

/// A single read from Kubernetes or Azure: 30 s an attempt, retried with backoff (1 s doubling
/// to 30 s) for up to five minutes in all. Non-retryable failures end it at once.
pub fn read() -> ActivityOptions {
    read_within(READ_BUDGET)
}

/// How long a [`read`] is retried in all.
const READ_BUDGET: Duration = Duration::from_secs(300);

/// A read retried like a [`read`] for up to `budget` in all (never less than a read's five
/// minutes): a read whose caller has its own deadline (the drain's looks at the Node's pods)
/// waits out an API outage until then instead of failing after five minutes.
pub fn read_within(budget: Duration) -> ActivityOptions {
    ActivityOptions::with_close_timeouts(ActivityCloseTimeouts::ScheduleAndStartToClose {
        schedule_to_close: budget.max(READ_BUDGET),
        start_to_close: Duration::from_secs(30),
    })
    .retry_policy(backoff(Duration::from_secs(1), Duration::from_secs(30)))
    .build()
}

/// A read that follows pages (an ARM list of up to 20 pages, every page of a pool's VMs, a page
/// of Nodes): `options` (a [`read`], shielded or not) whose attempt heartbeats, so that a lost
/// worker's read is retried on another after [`HEARTBEAT_TIMEOUT`].
pub fn paged(mut options: ActivityOptions) -> ActivityOptions {
    options.heartbeat_timeout = Some(HEARTBEAT_TIMEOUT);
    options
}

/// A Kubernetes write (apply, cordon, delete): like [`read`]; 409 conflicts and 429s retry.
pub fn kube_write() -> ActivityOptions {
    read()
}

/// An ARM write on the rate-limited ARM-write task queue `queue`: 3 minutes an attempt (a NIC
/// or disk write waits for its own short operation), retried with backoff (2 s doubling to
/// 60 s, or ARM's `Retry-After`) for up to 15 minutes. The write heartbeats, so a lost worker's
/// write is retried on another after [`HEARTBEAT_TIMEOUT`], not after 3 minutes. When writes
/// are backlogged, `stage` decides which leave first (`model::arm::WriteStage`).
pub fn arm_write(queue: &str, stage: WriteStage) -> ActivityOptions {
    arm_write_within(queue, stage, Duration::from_secs(15 * 60))
}

/// A cleanup ARM write (compensation, deletion): like [`arm_write`] but allowed an hour, since
/// giving up leaves something behind.
pub fn arm_cleanup_write(queue: &str, stage: WriteStage) -> ActivityOptions {
    arm_write_within(queue, stage, Duration::from_secs(60 * 60))
}

/// An ARM write retried for up to `budget` in all.
fn arm_write_within(queue: &str, stage: WriteStage, budget: Duration) -> ActivityOptions {
    ActivityOptions::with_close_timeouts(ActivityCloseTimeouts::ScheduleAndStartToClose {
        schedule_to_close: budget,
        start_to_close: Duration::from_secs(180),
    })
    .heartbeat_timeout(HEARTBEAT_TIMEOUT)
    .task_queue(queue.to_owned())
    .priority(write_priority(stage))
    .retry_policy(backoff(Duration::from_secs(2), Duration::from_secs(60)))
    .build()
}

/// The task priority of an ARM write at `stage`; only its key is set, so fairness keeps the
/// server's defaults.
fn write_priority(stage: WriteStage) -> Priority {
    Priority::builder()
        .priority_key(stage.priority_key())
        .build()
}

/// A heartbeating wait that ends by itself at a deadline `budget` from now: each attempt may
/// run the whole budget plus two minutes; a lost worker's wait resumes elsewhere after
/// [`HEARTBEAT_TIMEOUT`].
pub fn wait(budget: Duration) -> ActivityOptions {
    let attempt = budget.saturating_add(Duration::from_secs(120));
    ActivityOptions::with_close_timeouts(ActivityCloseTimeouts::ScheduleAndStartToClose {
        schedule_to_close: attempt.saturating_add(Duration::from_secs(600)),
        start_to_close: attempt,
    })
    .heartbeat_timeout(HEARTBEAT_TIMEOUT)
    .retry_policy(backoff(Duration::from_secs(1), Duration::from_secs(30)))
    .build()
}

/// A health probe: 15 s an attempt, three attempts at most, so that an API that does not
/// answer is reported within a minute rather than retried for minutes.
pub fn probe() -> ActivityOptions {
    ActivityOptions::with_close_timeouts(ActivityCloseTimeouts::ScheduleAndStartToClose {
        schedule_to_close: Duration::from_secs(60),
        start_to_close: Duration::from_secs(15),
    })
    .retry_policy(
        RetryPolicy::builder()
            .initial_interval(Duration::from_secs(1))
            .backoff_coefficient(2.0)
            .maximum_attempts(3)
            .build(),
    )
    .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_writes_carry_their_stage_as_task_priority_on_the_write_queue() {
        for (stage, key) in [
            (WriteStage::Finishing, 1),
            (WriteStage::Building, 2),
            (WriteStage::Starting, 3),
        ] {
            for options in [
                arm_write("q-arm-writes", stage),
                arm_cleanup_write("q-arm-writes", stage),
            ] {
                assert_eq!(options.task_queue.as_deref(), Some("q-arm-writes"));
                let priority = options.priority.expect("an ARM write has a priority");
                assert_eq!(priority.priority_key, Some(key));
                assert_eq!(priority.fairness_key, None);
            }
        }
    }
}
