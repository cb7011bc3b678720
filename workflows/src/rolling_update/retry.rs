//! Deleting again the machines a delete left behind: a machine that looks deleting while no
//! child of this rollout works on it is deleted again (drain included) once its back-off passed
//! (`model::rollout::retry` decides which and when; the status lists each with its reason and
//! next try). A machine whose delete failed before the cordon (given back Idle) keeps its record
//! and is held out of the plan until its back-off passed.

use nodewright_model::rollout::{
    InFlight, ObservedMachine, RolloutRequest, backoff_holds, hold_after_failed_delete,
    plan_retries,
};
use temporalio_sdk::WorkflowContext;

use super::children::{Child, start_delete};
use super::state::HasRollout;

/// The patch that starts DeleteMachine again for stranded machines; runs recorded before it left
/// them (and waited for ever), and it is asked only when a retry is due.
const RETRY_PATCH: &str = "rollout-retries-deletes";

/// The patch that keeps the records of failed deletes of machines still in the pool and holds
/// such a machine out of the plan until its back-off passed (runs recorded before it planned a
/// machine given back Idle again at the next look); asked only when that changes something.
const BACKOFF_HOLD_PATCH: &str = "rollout-holds-failed-deletes";

/// Holds out of the next plan, until their back-off passed, the machines whose delete failed
/// and that are Idle again (a delete that failed before the cordon), at `at` (Unix seconds);
/// `running` names the machines children work on. The status names each, with why.
pub fn hold_failed_deletes<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    machines: &[ObservedMachine],
    running: &[&str],
    at: i64,
) {
    let holds = ctx.state(|s| {
        s.rollout()
            .status
            .as_ref()
            .map(|status| backoff_holds(&status.retries, &status.held, machines, running, at))
            .unwrap_or_default()
    });
    if holds.is_empty() || !ctx.patched(BACKOFF_HOLD_PATCH) {
        return;
    }
    ctx.state_mut(|s| {
        s.rollout_mut().with_status(|status| {
            for hold in holds {
                hold_after_failed_delete(
                    &mut status.held,
                    &hold.machine,
                    hold.reason,
                    at,
                    hold.until,
                );
            }
        });
    });
}

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
    let now = at.div_euclid(1000);
    let retries_with = |keep_failed| {
        plan_retries(
            machines,
            &running,
            &known,
            &request.pool.template_hash,
            now,
            health_timeout,
            keep_failed,
        )
    };
    let dropping = retries_with(false);
    let keeping = retries_with(true);
    let retries = if keeping != dropping && ctx.patched(BACKOFF_HOLD_PATCH) {
        keeping
    } else {
        dropping
    };
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
