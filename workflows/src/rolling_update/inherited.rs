//! The children this run inherited from the run before it: a rollout continues as new without
//! waiting for its children, which run on (ParentClosePolicy Abandon); this run finds them again
//! by their workflow IDs and run IDs (the carried status's `in_flight`), asks Temporal at each
//! look how they are (`temporal.workflow_ends`) and books each that ended as a child of its own
//! (`model::rollout::inherited`); while the run waits between looks, one ask waits for the first
//! of them to end ([`ask_for_an_end`]). On cancellation it asks them to cancel
//! (`temporal.cancel_workflows`), as Temporal does for children of its own, and waits for their
//! ends within bounds (`model::rollout::CancelWait`).

use std::time::Duration;

use nodewright_activities::temporal::{TemporalActivities, Workflows};
use nodewright_model::rollout::{
    CancelWait, ChildEnd, InFlight, RunEnd, cancel_not_confirmed, run_ids,
};
use temporalio_sdk::{ActivityExecutionError, ActivityOptions, CancellableFuture, WorkflowContext};

use super::state::HasRollout;
use super::status::note;
use crate::activity_options;
use crate::cancellation;
use crate::progress::activity_failure_text;

/// How long one shielded ask waits for an inherited child to end on the cancellation path.
const CANCEL_WAIT: Duration = Duration::from_secs(60);

/// The patch that stops waiting for the inherited children on the cancellation path once
/// [`CancelWait`]'s bounds are reached (asked only then); runs recorded before it asked until
/// every child had ended.
const CANCEL_BOUND_PATCH: &str = "rollout-bounds-cancel-wait";

/// Asks Temporal how the `inherited` children are (waiting up to `wait` for one to end): those
/// that ended leave `inherited` and are returned with their end; a failed ask is noted and
/// returns none (asked again at the next look).
pub async fn ended<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    inherited: &mut Vec<InFlight>,
    wait: Duration,
    options: ActivityOptions,
) -> Vec<(InFlight, ChildEnd)> {
    match ask(ctx, inherited, wait, options).await {
        Some(ends) => booked(inherited, ends),
        None => Vec::new(),
    }
}

/// At once: how the inherited children are now (see [`ended`]).
pub async fn ended_now<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    inherited: &mut Vec<InFlight>,
) -> Vec<(InFlight, ChildEnd)> {
    ended(ctx, inherited, Duration::ZERO, activity_options::read()).await
}

/// The cancellation path: asks every inherited child to cancel (shielded), then waits until
/// each has ended (shielded asks of up to a minute each), within [`CancelWait`]'s bounds: the
/// children still in flight then are booked as cancelled, not confirmed. Returns them all with
/// their ends; `inherited` is left empty.
pub async fn cancel_all<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    inherited: &mut Vec<InFlight>,
    reason: &str,
) -> Vec<(InFlight, ChildEnd)> {
    let mut finished = Vec::new();
    if inherited.is_empty() {
        return finished;
    }
    let asked = ctx
        .execute_activity(
            TemporalActivities::cancel_workflows,
            workflows(inherited, reason, Duration::ZERO),
            cancellation::shielded(activity_options::read()),
        )
        .await;
    if let Err(e) = asked {
        note(
            ctx,
            format!(
                "could not ask the children of the run before to cancel ({}); waiting for them to end",
                activity_failure_text(&e)
            ),
        );
    }
    let mut wait = CancelWait::default();
    while !inherited.is_empty() && (wait.goes_on() || !ctx.patched(CANCEL_BOUND_PATCH)) {
        let options = cancellation::shielded(activity_options::wait(CANCEL_WAIT));
        let answered = ask(ctx, inherited, CANCEL_WAIT, options).await;
        wait = wait.after(answered.is_some());
        if let Some(ends) = answered {
            finished.extend(booked(inherited, ends));
        }
    }
    for child in inherited.drain(..) {
        let end = cancel_not_confirmed(&child, wait);
        finished.push((child, end));
    }
    finished
}

/// The input asking Temporal about the `inherited` children: by workflow ID, and by run ID
/// where it is known (left out when none is, as runs recorded before sent it).
fn workflows(inherited: &[InFlight], reason: &str, wait: Duration) -> Workflows {
    Workflows {
        workflow_ids: inherited.iter().map(|c| c.workflow_id.clone()).collect(),
        run_ids: run_ids(inherited),
        reason: reason.to_owned(),
        wait_secs: u32::try_from(wait.as_secs()).unwrap_or(u32::MAX),
    }
}

/// One ask of how the `inherited` children are, waiting up to `wait` for one to end: their
/// ends in order (`None` while running), or `None` when the ask failed (noted).
async fn ask<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    inherited: &[InFlight],
    wait: Duration,
    options: ActivityOptions,
) -> Option<Vec<Option<RunEnd>>> {
    if inherited.is_empty() {
        return Some(Vec::new());
    }
    let asked = ctx
        .execute_activity(
            TemporalActivities::workflow_ends,
            workflows(inherited, "", wait),
            options,
        )
        .await;
    match asked {
        Ok(ends) if ends.len() == inherited.len() => Some(ends),
        Ok(_) => {
            note(
                ctx,
                "Temporal answered for a different number of children; asking again".to_owned(),
            );
            None
        }
        Err(e) => {
            note(
                ctx,
                format!(
                    "could not ask Temporal how the children of the run before ended ({}); asking again",
                    activity_failure_text(&e)
                ),
            );
            None
        }
    }
}

/// While the loop waits: one ask of how the `inherited` children are that answers as soon as one
/// of them has ended (or after `wait`), so that the run books them and plans again at once
/// instead of at its next look. The loop cancels it when something else woke it first.
pub fn ask_for_an_end<'a, W: HasRollout>(
    ctx: &'a WorkflowContext<W>,
    inherited: &[InFlight],
    wait: Duration,
) -> impl CancellableFuture<Output = Result<Vec<Option<RunEnd>>, ActivityExecutionError>> + 'a {
    ctx.execute_activity(
        TemporalActivities::workflow_ends,
        workflows(inherited, "", wait),
        activity_options::wait(wait),
    )
}

/// The children of `inherited` that ended by an answer of [`ask_for_an_end`], with their ends
/// as booked; none when the ask failed or answered for a different number of children (the
/// look that follows asks again and notes a failure).
pub fn booked_by(
    inherited: &mut Vec<InFlight>,
    answer: Result<Vec<Option<RunEnd>>, ActivityExecutionError>,
) -> Vec<(InFlight, ChildEnd)> {
    match answer {
        Ok(ends) if ends.len() == inherited.len() => booked(inherited, ends),
        _ => Vec::new(),
    }
}

/// The children of `inherited` that ended by `ends` (in the same order), with their ends as
/// booked; those running stay in `inherited`.
fn booked(inherited: &mut Vec<InFlight>, ends: Vec<Option<RunEnd>>) -> Vec<(InFlight, ChildEnd)> {
    let mut finished = Vec::new();
    let mut running = Vec::new();
    for (child, end) in inherited.drain(..).zip(ends) {
        match end {
            Some(end) => finished.push((child, end.child_end())),
            None => running.push(child),
        }
    }
    *inherited = running;
    finished
}
