//! After the tiers, the pods the drain does not evict: those a `WaitCompleted` drain rule (or
//! the pod's `wait-completed` label) keeps, and in a voluntary drain those marked do-not-disrupt.
//! Each is waited for until it is gone or finished (Succeeded, Failed), looking again every PDB
//! retry interval:
//!
//! - [`await_completed`], before force mode: until force mode is due (the deadline, a request,
//!   an unhealthy Node), which deletes them as it deletes every pod still to move — but for the
//!   marked pods, unless force mode overrides their marks;
//! - [`await_held`], after force mode left marked pods running: until force mode that
//!   overrides the marks is due (the hard deadline, a request, an unhealthy Node), never
//!   waiting past the hard deadline.

use nodewright_model::drain::{ForceReason, LaneEnd, PodRef, PodState, RuledPod};
use nodewright_model::machine::Step;

use super::state::{
    Ctx, Drain, force_due, history_is_long, list_pods, overrides, pause,
    pause_before_hard_deadline, with_status,
};
use crate::cancellation;
use crate::progress::{StepFailed, fact};

/// Waits until every pod of `waited` has completed or is gone; ends early when force mode is
/// due or the history is long.
pub(super) async fn await_completed(
    ctx: &mut Ctx,
    state: &mut Drain,
    waited: &[RuledPod],
) -> Result<LaneEnd, StepFailed> {
    await_pods(ctx, state, waited, Until::ForceMode).await
}

/// Waits until every pod of `held` (marked do-not-disrupt, left running by force mode) has
/// completed or is gone; ends early when force mode that overrides the marks is due or the
/// history is long.
pub(super) async fn await_held(
    ctx: &mut Ctx,
    state: &mut Drain,
    held: &[RuledPod],
) -> Result<LaneEnd, StepFailed> {
    await_pods(ctx, state, held, Until::MarksOverridden).await
}

/// When a wait gives up on the pods.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Until {
    /// Force mode is due.
    ForceMode,
    /// Force mode that overrides do-not-disrupt marks is due.
    MarksOverridden,
}

impl Until {
    fn ends_at(self, ctx: &Ctx, reason: &ForceReason) -> bool {
        match self {
            Until::ForceMode => true,
            Until::MarksOverridden => overrides(ctx, reason),
        }
    }
}

async fn await_pods(
    ctx: &mut Ctx,
    state: &mut Drain,
    waited: &[RuledPod],
    until: Until,
) -> Result<LaneEnd, StepFailed> {
    let mut pending: Vec<PodRef> = waited.iter().map(|w| w.pod.clone()).collect();
    let mut looks = 0u32;
    loop {
        cancellation::guard(ctx, Step::EvictPods)?;
        if let Some(reason) = force_due(ctx, state).filter(|r| until.ends_at(ctx, r)) {
            return Ok(LaneEnd::Forced(reason));
        }
        let listed = list_pods(ctx, state, Step::EvictPods).await?;
        state.health = listed.health.clone();
        let mut still = Vec::new();
        for pod in pending {
            let key = pod.key();
            match listed.pods.iter().find(|p| p.uid == pod.uid) {
                None => with_status(ctx, |status| status.set_pod(&key, PodState::Gone, None)),
                Some(found) if matches!(found.phase.as_str(), "Succeeded" | "Failed") => {
                    let detail = format!("completed: {}", found.phase);
                    with_status(ctx, |status| {
                        status.set_pod(&key, PodState::Completed, Some(detail));
                    });
                }
                Some(_) => still.push(pod),
            }
        }
        pending = still;
        looks = looks.saturating_add(1);
        fact(ctx, "awaitingCompletion", pending.len().to_string());
        if pending.is_empty() {
            return Ok(LaneEnd::Finished);
        }
        if history_is_long(ctx, state) {
            return Ok(LaneEnd::ContinueAsNew);
        }
        fact(ctx, "completionLooks", looks.to_string());
        match until {
            Until::ForceMode => pause(ctx, state.policy.pdb_retry_interval).await,
            Until::MarksOverridden => {
                pause_before_hard_deadline(ctx, state.policy.pdb_retry_interval).await;
            }
        }
    }
}
