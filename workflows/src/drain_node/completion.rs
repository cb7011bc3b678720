//! After the tiers, the pods a `WaitCompleted` drain rule (or the pod's `wait-completed`
//! label) keeps from eviction: waited for until each is gone or finished (Succeeded, Failed),
//! looking again every PDB retry interval, until force mode is due (the deadline, a request,
//! an unhealthy Node), which deletes them as it deletes every pod still to move.

use nodewright_model::drain::{LaneEnd, PodRef, PodState, RuledPod};
use nodewright_model::machine::Step;

use super::state::{Ctx, Drain, force_due, list_pods, pause, with_status};
use crate::cancellation;
use crate::progress::{StepFailed, fact};

/// Waits until every pod of `waited` has completed or is gone; ends early when force mode is
/// due or the history is long.
pub(super) async fn await_completed(
    ctx: &mut Ctx,
    state: &mut Drain,
    waited: &[RuledPod],
) -> Result<LaneEnd, StepFailed> {
    let mut pending: Vec<PodRef> = waited.iter().map(|w| w.pod.clone()).collect();
    let mut looks = 0u32;
    loop {
        cancellation::guard(ctx, Step::EvictPods)?;
        if let Some(reason) = force_due(ctx, state) {
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
        if ctx.continue_as_new_suggested() {
            return Ok(LaneEnd::ContinueAsNew);
        }
        fact(ctx, "completionLooks", looks.to_string());
        pause(ctx, state.policy.pdb_retry_interval).await;
    }
}
