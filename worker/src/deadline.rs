//! Activity deadlines kept on the worker: an activity inbound interceptor that stops an attempt
//! when its deadline (start-to-close, or schedule-to-close when earlier) has passed.
//!
//! The Temporal server times an attempt out on its own clock and schedules the next one, but the
//! SDK does not stop the attempt's future: an activity that does not heartbeat (a read, a
//! Kubernetes write) and hangs on a request that never answers would go on in this worker beside
//! its own retry, holding a connection and possibly acting after the workflow has moved on. Here
//! the attempt is dropped (its request with it) a moment after its deadline; its result could no
//! longer be delivered anyway.

use std::time::{Duration, SystemTime};

use temporalio_sdk::ApplicationFailure;
use temporalio_sdk::activities::ActivityError;
use temporalio_sdk::interceptors::{
    ActivityInboundInterceptor, ExecuteActivityInput, ExecuteActivityOutput, Next,
};
use tracing::warn;

/// How long after its deadline an attempt is stopped: the server's clock decides the timeout,
/// so the worker waits a little longer than the deadline it was told, never less.
pub const DEADLINE_SLACK: Duration = Duration::from_secs(2);

/// The failure type of an attempt stopped at its deadline (the server has timed it out already,
/// so no workflow sees it; it names the stop in the worker's log and metrics).
pub const DEADLINE_PASSED: &str = "ActivityDeadlinePassed";

/// Stops every activity attempt [`DEADLINE_SLACK`] after its deadline.
pub struct DeadlineGuard;

impl ActivityInboundInterceptor for DeadlineGuard {
    fn execute_activity<'a>(
        &'a self,
        input: ExecuteActivityInput,
        next: Next<'a, ExecuteActivityInput, ExecuteActivityOutput<'a>>,
    ) -> ExecuteActivityOutput<'a> {
        let info = input.activity_info();
        let Some(limit) = info
            .deadline
            .map(|deadline| time_left(deadline, SystemTime::now()))
        else {
            return next.run(input);
        };
        let workflow_id = info.workflow_id.clone().unwrap_or_default();
        let activity_type = info.activity_type.clone();
        let attempt = info.attempt;
        let running = next.run(input);
        Box::pin(async move {
            match tokio::time::timeout(limit, running).await {
                Ok(result) => result,
                Err(_) => {
                    let message = format!(
                        "activity {activity_type} (attempt {attempt}) of {workflow_id} was stopped {}s after its deadline: the server has timed it out and retries it",
                        DEADLINE_SLACK.as_secs()
                    );
                    warn!(
                        workflow_id = %workflow_id,
                        activity_type = %activity_type,
                        attempt,
                        "{message}"
                    );
                    Err(ActivityError::application(
                        ApplicationFailure::builder(message)
                            .type_name(DEADLINE_PASSED.to_owned())
                            .build(),
                    ))
                }
            }
        })
    }
}

/// How long an attempt whose deadline is `deadline` may still run at `now`: the time left plus
/// [`DEADLINE_SLACK`] (only the slack once the deadline has passed: the attempt started late or
/// the clocks differ; it still gets a moment to answer).
pub fn time_left(deadline: SystemTime, now: SystemTime) -> Duration {
    deadline
        .duration_since(now)
        .unwrap_or(Duration::ZERO)
        .saturating_add(DEADLINE_SLACK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_runs_until_its_deadline_and_the_slack_never_less() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let table: [(i64, Duration); 4] = [
            // (deadline relative to now in seconds, expected limit)
            (30, Duration::from_secs(32)),
            (0, DEADLINE_SLACK),
            (-5, DEADLINE_SLACK),
            (-100_000, DEADLINE_SLACK),
        ];
        for (offset, expected) in table {
            let deadline = if offset >= 0 {
                now + Duration::from_secs(offset.unsigned_abs())
            } else {
                now - Duration::from_secs(offset.unsigned_abs())
            };
            assert_eq!(time_left(deadline, now), expected, "deadline {offset}s");
        }
        // A deadline as far as a SystemTime goes saturates instead of overflowing.
        let far = now + Duration::from_secs(u64::MAX / 4);
        assert!(time_left(far, now) >= Duration::from_secs(u64::MAX / 4));
    }
}
