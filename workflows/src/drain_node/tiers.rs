//! Steps 5–7 for one plan: per tier of the drain rules (lowest order first; one tier without
//! rules), the lanes in the order `model::drain::next_phase` gives them (both at once since
//! [`PATCH_LANES_TOGETHER`]), force mode whenever it is due, then the waits for the pods a
//! `WaitCompleted` rule keeps or do-not-disrupt marks hold. A fresh look runs it again for the
//! pods that arrived since.

use nodewright_model::drain::{
    DrainPhase, ForceReason, LaneEnd, RuledPlan, RuledPod, first_phase, next_phase,
};
use nodewright_model::machine::Step;

use super::state::{Ctx, Drain, force_due};
use super::{completion, force, lanes, together, volumes};
use crate::cancellation;
use crate::progress::{StepFailed, fact};

/// The patch that drains both lanes at once (`together`): asked only for a tier with a pod with
/// volumes, so a drain without one records no marker.
const PATCH_LANES_TOGETHER: &str = "drain-lanes-together";

/// How the drain of one plan ended.
pub(super) enum Ruled {
    /// Its tiers, waits and force mode are done.
    Done {
        /// Whether force mode ran.
        forced: bool,
    },
    /// The history is long: continue as a new run.
    ContinueAsNew,
}

/// Steps 5–7 for `ruled`: per tier, the lanes (both at once, or, in a run that began before
/// that, one after the other); force mode takes over whenever it is due; then the waits for
/// the pods a `WaitCompleted` rule keeps or do-not-disrupt marks hold.
pub(super) async fn drain_ruled(
    ctx: &mut Ctx,
    state: &mut Drain,
    ruled: &RuledPlan,
) -> Result<Ruled, StepFailed> {
    // Volumes whose detach a run before this one left stuck are looked at again after the
    // first tier's lanes (`next_phase`), until they detach or force mode is due.
    let mut stuck = std::mem::take(&mut state.stuck);
    let mut forced: Option<ForceReason> = None;
    // Pods do-not-disrupt marks keep running after force mode (released by force mode again).
    let mut held = Vec::new();
    for tier in &ruled.tiers {
        if ruled.tiers.len() > 1 {
            fact(ctx, "tier", tier.order.to_string());
        }
        let plan = &tier.plan;
        // Both lanes at once only matter with a pod with volumes: asked only then, so a drain
        // without one records no marker.
        let together = !plan.with_volumes.is_empty() && ctx.patched(PATCH_LANES_TOGETHER);
        let mut phase = first_phase(force_due(ctx, state));
        loop {
            let end = match &phase {
                DrainPhase::EvictPods if together => {
                    together::drain_lanes(ctx, state, plan, &mut stuck).await?
                }
                DrainPhase::EvictPods => lanes::evict_without_volumes(ctx, state, plan).await?,
                DrainPhase::MoveVolumes => {
                    volumes::move_volumes(ctx, state, plan, &mut stuck).await?
                }
                DrainPhase::AwaitStuckVolumes => {
                    volumes::await_stuck_volumes(ctx, state, &mut stuck).await?
                }
                DrainPhase::Force(reason) => {
                    cancellation::guard(ctx, Step::ForceDrain)?;
                    held = force::force_drain(ctx, state, reason.clone()).await?;
                    forced = Some(reason.clone());
                    LaneEnd::Finished
                }
                DrainPhase::ContinueAsNew => {
                    // The next run looks at the volumes still stuck.
                    state.stuck = stuck;
                    return Ok(Ruled::ContinueAsNew);
                }
                DrainPhase::Done => break,
            };
            phase = next_phase(&phase, end, !stuck.is_empty(), together);
        }
        if forced.is_some() {
            break;
        }
    }
    // The pods a WaitCompleted rule keeps, and those do-not-disrupt marks hold: waited for
    // until they complete or force is due.
    let waited: Vec<RuledPod> = ruled
        .wait_completed
        .iter()
        .chain(&ruled.held)
        .cloned()
        .collect();
    if forced.is_none() && !waited.is_empty() {
        match completion::await_completed(ctx, state, &waited).await? {
            LaneEnd::Finished => {}
            LaneEnd::ContinueAsNew => return Ok(Ruled::ContinueAsNew),
            LaneEnd::Forced(reason) => {
                cancellation::guard(ctx, Step::ForceDrain)?;
                held = force::force_drain(ctx, state, reason.clone()).await?;
                forced = Some(reason);
            }
        }
    }
    // Force mode left marked pods running: waited for until they go or force mode overrides
    // their marks (the hard deadline at the latest); then force mode ends the drain.
    while !held.is_empty() {
        let reason = match completion::await_held(ctx, state, &held).await? {
            LaneEnd::Finished => forced.clone().unwrap_or(ForceReason::DeadlinePassed),
            LaneEnd::ContinueAsNew => return Ok(Ruled::ContinueAsNew),
            LaneEnd::Forced(reason) => reason,
        };
        cancellation::guard(ctx, Step::ForceDrain)?;
        held = force::force_drain(ctx, state, reason.clone()).await?;
        forced = Some(reason);
    }

    Ok(Ruled::Done {
        forced: forced.is_some(),
    })
}

/// The pods of a fresh look's plan the drain evicts or waits for (`namespace/name`).
pub(super) fn arrived(fresh: &RuledPlan) -> Vec<String> {
    fresh
        .whole
        .moving()
        .map(|pod| pod.key())
        .chain(fresh.wait_completed.iter().map(|p| p.pod.key()))
        .chain(fresh.held.iter().map(|p| p.pod.key()))
        .collect()
}
