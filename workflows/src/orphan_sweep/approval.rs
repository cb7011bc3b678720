//! The wait for a person's approval of the plan they saw: the `approve` signal naming this run
//! and its planned count, or the approval timeout.

use futures::FutureExt;
use nodewright_model::sweep::{Brake, SweepRequest, approval_wait};
use temporalio_sdk::workflows::select;

use super::state::{Ctx, OrphanSweepWorkflow, set_status};
use crate::cancellation;
use crate::progress::{later, now, rfc3339};

/// Waits for an `approve` naming this run and `planned` until the approval timeout (phase
/// `braked` when `brake` holds the plan, else `awaiting-approval`); who approved, or none.
/// Only an approval that comes during the wait counts.
pub(super) async fn await_approval(
    ctx: &mut Ctx,
    request: &SweepRequest,
    planned: u32,
    brake: Option<&Brake>,
) -> Option<String> {
    let timeout = request.approval_wait();
    let deadline = later(now(ctx), timeout);
    let (phase, why) = approval_wait(brake, planned, request.max_deletions);
    let summary = format!(
        "{why}; waiting for `nodewright sweep approve` naming this run and its {planned} planned removals until {}",
        rfc3339(deadline)
    );
    ctx.set_current_details(summary.clone());
    set_status(ctx, phase, summary, |status| {
        status.approval_deadline = Some(rfc3339(deadline));
    });
    ctx.state_mut(|s| {
        s.approved_by = None;
        s.waiting = Some(planned);
    });
    select! {
        _ = ctx.wait_condition(|s: &OrphanSweepWorkflow| s.approved_by.is_some()).fuse() => {},
        _ = ctx.timer(timeout).fuse() => {},
    };
    ctx.state_mut(|s| s.waiting = None);
    if cancellation::requested(ctx) {
        return None;
    }
    ctx.state(|s| s.approved_by.clone())
}
