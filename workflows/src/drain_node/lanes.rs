//! Step 5, the parallel lane: the pods without persistent volumes are evicted all at once,
//! those a PodDisruptionBudget blocks again after each round's pause (`rounds`: the PDB retry
//! interval, growing while the budgets do not move); and the evictions and waits for pods to go
//! that the volume lane shares.

use std::time::Duration;

use nodewright_activities::kube::KubeActivities;
use nodewright_activities::kube::drain::{AwaitPodsGone, PodAction};
use nodewright_model::drain::{
    AfterEviction, DrainPlan, EvictionAnswer, ForceReason, LaneEnd, PodRef, PodState, RoundEnd,
    WaitKind, after_eviction, after_round, pod_disappearance_budget,
};
use nodewright_model::machine::Step;
use temporalio_sdk::workflows::join_all;

use super::looks::Looks;
use super::rounds::{Rounds, refusing_budget};
use super::state::{
    Ctx, Drain, answer_of, eviction_grace, force_due, history_is_long, list_pods_from,
    note_local_data, pause, wait_deadline, with_status,
};
use crate::progress::{StepFailed, begin, done, fact, now};
use crate::{activity_options, cancellation};

/// Step 5: evicts the pods without persistent volumes all at once, retries those a PDB blocks
/// every PDB retry interval, and waits for them (and the pods already terminating) to go.
pub(super) async fn evict_without_volumes(
    ctx: &mut Ctx,
    state: &mut Drain,
    plan: &DrainPlan,
) -> Result<LaneEnd, StepFailed> {
    begin(ctx, Step::EvictPods);
    let mut leaving: Vec<PodRef> = plan.terminating.clone();
    let mut to_evict: Vec<PodRef> = plan.without_volumes.clone();
    let mut rounds = 0u32;
    let mut pace = Rounds::new(state.policy.pdb_retry_interval);
    loop {
        cancellation::guard(ctx, Step::EvictPods)?;
        if let Some(reason) = force_due(ctx, state) {
            done(ctx, Step::EvictPods, format!("interrupted: {reason}"));
            return Ok(LaneEnd::Forced(reason));
        }
        let actions: Vec<PodAction> = to_evict
            .iter()
            .map(|pod| PodAction {
                pod: pod.clone(),
                grace_period_seconds: eviction_grace(ctx, pod),
                node: Some(state.request.node.clone()),
            })
            .collect();
        let attempts = actions.into_iter().map(|action| {
            // An eviction sent is let finish: what it evicted is known and reported.
            ctx.execute_activity(
                KubeActivities::evict_pod,
                action,
                cancellation::shielded(activity_options::kube_write()),
            )
        });
        let outcomes = join_all(attempts).await;
        let mut blocked = Vec::new();
        let mut budgets = Vec::new();
        for (pod, outcome) in to_evict.iter().zip(outcomes) {
            let outcome = outcome.map_err(|e| StepFailed::from_activity(Step::EvictPods, &e))?;
            budgets.extend(refusing_budget(&outcome).cloned());
            let answer = answer_of(&outcome);
            record_eviction(ctx, pod, &answer);
            match after_eviction(&answer) {
                AfterEviction::Leaving => {
                    state.result.evicted.push(pod.key());
                    note_local_data(ctx, state, plan, &pod.key());
                    leaving.push(pod.clone());
                }
                AfterEviction::Left => {}
                AfterEviction::RetryLater => blocked.push(pod.clone()),
                AfterEviction::AwaitGone => leaving.push(pod.clone()),
            }
        }
        if !leaving.is_empty() {
            let left = await_gone(ctx, state, leaving, Step::EvictPods).await?;
            if let Some(reason) = left.forced {
                // Force mode came while they terminated: it deletes what is left.
                done(ctx, Step::EvictPods, format!("interrupted: {reason}"));
                return Ok(LaneEnd::Forced(reason));
            }
            leaving = left.still;
        }
        let suggested = history_is_long(ctx, state);
        match after_round(blocked.len(), leaving.len(), suggested) {
            RoundEnd::Finished => {
                let evicted = state.result.evicted.len();
                done(ctx, Step::EvictPods, format!("{evicted} evicted"));
                return Ok(LaneEnd::Finished);
            }
            RoundEnd::ContinueAsNew => return Ok(LaneEnd::ContinueAsNew),
            RoundEnd::RetryAfterPause => {}
        }
        rounds = rounds.saturating_add(1);
        let wait = pace.pause_after(ctx, &budgets);
        pause(ctx, wait).await;
        // Pods may have left meanwhile (deleted by someone, rescheduled): evict only those
        // still here, and look at the node's health again.
        let from_mirror = pace.look_in_mirrors(ctx);
        let listed = list_pods_from(ctx, state, Step::EvictPods, from_mirror).await?;
        state.health = listed.health.clone();
        let present = |pod: &PodRef| listed.pods.iter().any(|p| p.uid == pod.uid);
        for pod in blocked.iter().chain(&leaving).filter(|p| !present(p)) {
            let key = pod.key();
            with_status(ctx, |status| {
                status.set_pod(&key, PodState::Gone, None);
                status.set_block(&key, None);
            });
        }
        blocked.retain(present);
        leaving.retain(present);
        to_evict = blocked;
        fact(ctx, "evictionRounds", rounds.to_string());
    }
}

/// Asks for one eviction of `pod` from `node`, records its answer and says what becomes of the
/// pod.
pub(super) async fn evict(
    ctx: &mut Ctx,
    node: &str,
    pod: &PodRef,
    step: Step,
) -> Result<AfterEviction, StepFailed> {
    let outcome = ctx
        .execute_activity(
            KubeActivities::evict_pod,
            PodAction {
                pod: pod.clone(),
                grace_period_seconds: eviction_grace(ctx, pod),
                node: Some(node.to_owned()),
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await
        .map_err(|e| StepFailed::from_activity(step, &e))?;
    let answer = answer_of(&outcome);
    record_eviction(ctx, pod, &answer);
    Ok(after_eviction(&answer))
}

/// Records one eviction of `pod` and its answer in the status.
fn record_eviction(ctx: &mut Ctx, pod: &PodRef, answer: &EvictionAnswer<'_>) {
    let key = pod.key();
    with_status(ctx, |status| status.record_eviction(&key, answer));
}

/// The pods an [`await_gone`] left, and whether force mode ended it early.
pub(super) struct Left {
    /// The pods still there.
    pub(super) still: Vec<PodRef>,
    /// Why force mode ended the wait early, when it did.
    pub(super) forced: Option<ForceReason>,
}

/// Waits for `pods` to go (their grace period, at most the drain timeout, plus 30 s), in looks
/// (`looks`): force mode due ends it early; returns those still there.
pub(super) async fn await_gone(
    ctx: &mut Ctx,
    state: &mut Drain,
    pods: Vec<PodRef>,
    step: Step,
) -> Result<Left, StepFailed> {
    let longest = pods
        .iter()
        .map(|p| Duration::from_secs(p.grace_period_seconds))
        .max()
        .unwrap_or_default();
    let whole = wait_deadline(ctx, pod_disappearance_budget(longest, state.policy.timeout));
    let started = now(ctx);
    let mut looks = Looks::new(ctx, WaitKind::PodsGone, whole);
    let mut pending: Vec<PodRef> = pods.clone();
    loop {
        let (deadline, look) = looks.next(ctx);
        let seen = ctx
            .execute_activity(
                KubeActivities::await_pods_gone,
                AwaitPodsGone {
                    pods: pending.clone(),
                    deadline,
                    node: Some(state.request.node.clone()),
                },
                activity_options::wait(look),
            )
            .await
            .map_err(|e| StepFailed::from_activity(step, &e))?;
        pending.retain(|pod| seen.pending.contains(&pod.key()));
        if !looks.again(ctx, state, pending.len(), step).await? {
            break;
        }
    }
    let waited = (now(ctx) - started).num_seconds().max(0);
    let mut still = Vec::new();
    for pod in pods {
        let key = pod.key();
        if pending.iter().any(|p| p.uid == pod.uid && p.key() == key) {
            let detail = match &looks.forced {
                Some(reason) => format!("still terminating after {waited}s when {reason}"),
                None => format!("still terminating after {}s", whole.1.as_secs()),
            };
            with_status(ctx, |status| {
                status.set_pod(&key, PodState::Evicting, Some(detail));
            });
            still.push(pod);
        } else {
            with_status(ctx, |status| status.set_pod(&key, PodState::Gone, None));
        }
    }
    Ok(Left {
        still,
        forced: looks.forced,
    })
}
