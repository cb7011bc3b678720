//! The maintenance windows over a rollout (`spec.maintenance`, `model::maintenance::gate`): a
//! rollout that a window gates (one nodewright started by itself, or any with `applyTo: all`)
//! starts nothing while no window is open. Machines in flight finish, broken machines are still
//! replaced, and the rollout goes on by itself when the next window opens; one running when a
//! window closes stops there, at the end of what is in flight.

use nodewright_model::maintenance::{DisruptionKind, gate};
use nodewright_model::rollout::soak::hold_as;
use nodewright_model::rollout::{Holdup, Plan, RolloutRequest};
use temporalio_sdk::WorkflowContext;

use super::state::HasRollout;
use super::status::note;

/// `decided`, held while no window that gates the rollout is open; the status says the
/// windows' state (`window`). `at` is now, Unix seconds.
pub fn gate_plan<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    decided: Plan,
    at: i64,
) -> Plan {
    let kind = if request.automatic {
        DisruptionKind::AutomaticRollout
    } else {
        DisruptionKind::OperatorRollout
    };
    let gate = gate(request.pool.maintenance.as_ref(), kind, at);
    let words = gate.words();
    let closed_now = !gate.allows();
    let was_closed = ctx.state_mut(|s| {
        let mut was_closed = false;
        s.rollout_mut().with_status(|status| {
            was_closed = status
                .window
                .as_deref()
                .is_some_and(|w| w.starts_with("closed"));
            status.window.clone_from(&words);
        });
        was_closed
    });
    if closed_now != was_closed
        && let Some(words) = &words
    {
        let what = if closed_now {
            "no maintenance window is open: nothing new starts"
        } else {
            "a maintenance window is open: the rollout goes on"
        };
        note(ctx, format!("{what} ({words})"));
    }
    if closed_now {
        hold_as(decided, Holdup::MaintenanceWindow, gate.opens_at())
    } else {
        decided
    }
}
