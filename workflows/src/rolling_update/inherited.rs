//! The children this run inherited from the run before it: a rollout continues as new without
//! waiting for its children, which run on (ParentClosePolicy Abandon); this run finds them again
//! by their workflow IDs (the carried status's `in_flight`), asks Temporal at each look how they
//! are (`temporal.workflow_ends`) and books each that ended as a child of its own
//! (`model::rollout::inherited`). On cancellation it asks them to cancel
//! (`temporal.cancel_workflows`), as Temporal does for children of its own.

use std::time::Duration;

use nodewright_activities::temporal::{TemporalActivities, Workflows};
use nodewright_model::rollout::{ChildEnd, InFlight};
use temporalio_sdk::{ActivityOptions, WorkflowContext};

use super::state::HasRollout;
use super::status::note;
use crate::activity_options;
use crate::cancellation;
use crate::progress::activity_failure_text;

/// How long one shielded ask waits for an inherited child to end on the cancellation path.
const CANCEL_WAIT: Duration = Duration::from_secs(60);

/// Asks Temporal how the `inherited` children are (waiting up to `wait` for one to end): those
/// that ended leave `inherited` and are returned with their end; a failed ask is noted and
/// returns none (asked again at the next look).
pub async fn ended<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    inherited: &mut Vec<InFlight>,
    wait: Duration,
    options: ActivityOptions,
) -> Vec<(InFlight, ChildEnd)> {
    if inherited.is_empty() {
        return Vec::new();
    }
    let asked = ctx
        .execute_activity(
            TemporalActivities::workflow_ends,
            Workflows {
                workflow_ids: inherited.iter().map(|c| c.workflow_id.clone()).collect(),
                reason: String::new(),
                wait_secs: u32::try_from(wait.as_secs()).unwrap_or(u32::MAX),
            },
            options,
        )
        .await;
    let ends = match asked {
        Ok(ends) if ends.len() == inherited.len() => ends,
        Ok(_) => {
            note(
                ctx,
                "Temporal answered for a different number of children; asking again".to_owned(),
            );
            return Vec::new();
        }
        Err(e) => {
            note(
                ctx,
                format!(
                    "could not ask Temporal how the children of the run before ended ({}); asking again",
                    activity_failure_text(&e)
                ),
            );
            return Vec::new();
        }
    };
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

/// At once: how the inherited children are now (see [`ended`]).
pub async fn ended_now<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    inherited: &mut Vec<InFlight>,
) -> Vec<(InFlight, ChildEnd)> {
    ended(ctx, inherited, Duration::ZERO, activity_options::read()).await
}

/// The cancellation path: asks every inherited child to cancel (shielded), then waits until
/// each has ended (shielded asks of up to a minute each); returns them with their ends.
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
            Workflows {
                workflow_ids: inherited.iter().map(|c| c.workflow_id.clone()).collect(),
                reason: reason.to_owned(),
                wait_secs: 0,
            },
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
    while !inherited.is_empty() {
        let options = cancellation::shielded(activity_options::wait(CANCEL_WAIT));
        finished.extend(ended(ctx, inherited, CANCEL_WAIT, options).await);
    }
    finished
}
