//! Cancellation in the workflows: whether a request came, options for the steps a
//! cancellation must not reach, and the Canceled ending.
//!
//! The rule every runbook follows: a wait (timer, heartbeating wait activity, child) is cut short
//! by a cancellation request; a write already sent is let finish (so what it made is known and
//! can be undone); clean-up runs **shielded**, with a cancellation token of its own that the
//! request does not reach, and is retried like any other step. Then the run ends Canceled with
//! a [`Canceled`] saying what was undone and what was kept.

use nodewright_model::cancel::Canceled;
use nodewright_model::machine::{Outcome, Step};
use temporalio_sdk::{
    ActivityExecutionError, ActivityOptions, ChildWorkflowOptions, WorkflowCancellationToken,
    WorkflowContext, WorkflowTermination,
};

use crate::progress::{HasStatus, StepFailed};
use crate::search;

/// Whether a cancellation request has reached the run.
pub fn requested<W>(ctx: &WorkflowContext<W>) -> bool {
    ctx.cancellation_token().is_cancelled()
}

/// Stops before `step` when a cancellation request has reached the run: the step fails with
/// the reason `canceled`, and the run's cancellation path takes over.
pub fn guard<W>(ctx: &WorkflowContext<W>, step: Step) -> Result<(), StepFailed> {
    if requested(ctx) {
        Err(StepFailed::new(step, "canceled"))
    } else {
        Ok(())
    }
}

/// The reason the request gave, when it gave one.
pub fn reason<W>(ctx: &WorkflowContext<W>) -> Option<String> {
    ctx.cancellation_token().reason()
}

/// `options` with a cancellation token of their own: an activity started with them runs to its
/// end even after the run is cancelled (writes in flight, clean-up).
pub fn shielded(mut options: ActivityOptions) -> ActivityOptions {
    options.cancellation_token = Some(WorkflowCancellationToken::new());
    options
}

/// `options` of a child that a cancellation of this run does not reach (a child started for
/// clean-up).
pub fn shielded_child(mut options: ChildWorkflowOptions) -> ChildWorkflowOptions {
    options.cancellation_token = Some(WorkflowCancellationToken::new());
    options
}

/// Ends the run Canceled: outcome and what was undone in the status, `NodewrightPhase=canceled`,
/// the UI's details line, and `canceled` as the ending's details.
pub fn end<W: HasStatus>(ctx: &mut WorkflowContext<W>, canceled: Canceled) -> WorkflowTermination {
    let summary = canceled.summary();
    ctx.state_mut(|s| {
        let status = s.status_mut();
        status.outcome = Outcome::Canceled;
        status.canceled = Some(canceled.clone());
    });
    ctx.upsert_search_attributes([search::PHASE.value_set("canceled".to_owned())]);
    ctx.set_current_details(summary);
    WorkflowTermination::cancelled_with_details(canceled)
}

/// Ends the run Canceled at `none` when a request came before its first step (one sent before
/// any worker took the run up): nothing was changed, so nothing is undone.
pub fn before_first_step<W: HasStatus>(
    ctx: &mut WorkflowContext<W>,
) -> Result<(), WorkflowTermination> {
    if requested(ctx) {
        let canceled = Canceled::at("none", reason(ctx));
        return Err(end(ctx, canceled));
    }
    Ok(())
}

/// Ends a run that only reads (InspectPool, Preflight) Canceled at `step`: nothing to undo,
/// `NodewrightPhase=canceled`, the UI's details line, and the [`Canceled`] as the ending's
/// details.
pub fn end_reading<W>(ctx: &mut WorkflowContext<W>, step: &str) -> WorkflowTermination {
    let canceled = Canceled::at(step, reason(ctx));
    ctx.upsert_search_attributes([search::PHASE.value_set("canceled".to_owned())]);
    ctx.set_current_details(canceled.summary());
    WorkflowTermination::cancelled_with_details(canceled)
}

/// The answer of the read `step` of a run that only reads, or its Canceled ending when a
/// cancellation request has reached the run (the read was cut short, or the answer came too
/// late to matter).
pub fn read<W, T>(
    ctx: &mut WorkflowContext<W>,
    step: &str,
    answer: Result<T, ActivityExecutionError>,
) -> Result<T, WorkflowTermination> {
    if requested(ctx) {
        return Err(end_reading(ctx, step));
    }
    answer.map_err(WorkflowTermination::from)
}
