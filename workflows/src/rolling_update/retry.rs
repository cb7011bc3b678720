//! Deleting again the machines a delete left behind: a machine that looks deleting while no
//! child of this rollout works on it is deleted again (drain included) once its back-off passed
//! (`model::rollout::retry` decides which and when; the status lists each with its reason and
//! next try).

use nodewright_model::rollout::{InFlight, ObservedMachine, RolloutRequest, plan_retries};
use temporalio_sdk::WorkflowContext;

use super::children::{Child, start_delete};
use super::state::HasRollout;

/// The patch that starts DeleteMachine again for stranded machines; runs recorded before it left
/// them (and waited for ever), and it is asked only when a retry is due.
const RETRY_PATCH: &str = "rollout-retries-deletes";

/// Books the stranded machines of this look in the status and starts the deletes that are due
/// (a machine a child of this run, or one it `inherited`, works on is not stranded); `at` is now
/// in Unix milliseconds.
pub async fn retry_stranded<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    machines: &[ObservedMachine],
    children: &mut Vec<Child>,
    inherited: &[InFlight],
    at: i64,
) {
    let running: Vec<String> = children
        .iter()
        .map(|c| &c.entry)
        .chain(inherited)
        .map(|entry| entry.machine.clone())
        .collect();
    let running: Vec<&str> = running.iter().map(String::as_str).collect();
    let known = ctx.state(|s| {
        s.rollout()
            .status
            .as_ref()
            .map(|status| status.retries.clone())
            .unwrap_or_default()
    });
    let health_timeout = i64::try_from(request.pool.timeouts.health.as_secs()).unwrap_or(i64::MAX);
    let retries = plan_retries(
        machines,
        &running,
        &known,
        &request.pool.template_hash,
        at.div_euclid(1000),
        health_timeout,
    );
    let due = !retries.now.is_empty() && ctx.patched(RETRY_PATCH);
    if !due && known.is_empty() && retries.kept.is_empty() {
        return;
    }
    ctx.state_mut(|s| {
        s.rollout_mut()
            .with_status(|status| status.retries = retries.kept);
    });
    if due {
        for victim in &retries.now {
            start_delete(ctx, request, victim, children, at).await;
        }
    }
}
