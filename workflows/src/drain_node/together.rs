//! Steps 5 and 6 at once: the pods without persistent volumes and those with them drain in
//! rounds (`model::drain::round_evictions`): each round evicts every pod without volumes that
//! is due and the next pod with volumes, whose volumes are then followed (detach here, attach
//! elsewhere) before the next one moves; a pod a PodDisruptionBudget (or another refusal) holds
//! back is passed over and asked again after each round's pause (`rounds`: the PDB retry
//! interval, growing while the budgets do not move) until the deadline.

use chrono::{DateTime, Utc};
use nodewright_activities::kube::KubeActivities;
use nodewright_activities::kube::drain::PodAction;
use nodewright_model::drain::{
    AfterEviction, AfterLanes, DrainPlan, ForceReason, Lane, LaneEnd, LanePod, LaneStage, PodRef,
    PodState, after_eviction, after_lanes, round_evictions, volumes_moved_detail,
};
use nodewright_model::machine::Step;
use temporalio_sdk::workflows::join_all;

use super::lanes::await_gone;
use super::rounds::{Rounds, refusing_budget};
use super::state::{
    Ctx, Drain, answer_of, eviction_grace, force_due, history_is_long, list_pods_from,
    note_local_data, pause, with_status,
};
use super::volumes::{Followed, follow};
use crate::progress::{StepFailed, begin, done, fact, later, now};
use crate::{activity_options, cancellation};

/// One pod of the tier and where it stands.
struct Member {
    pod: PodRef,
    /// Its index in the plan's pods with volumes, for those.
    volume: Option<usize>,
    stage: LaneStage,
}

impl Member {
    fn lane(&self) -> LanePod {
        LanePod {
            lane: if self.volume.is_some() {
                Lane::WithVolumes
            } else {
                Lane::WithoutVolumes
            },
            stage: self.stage,
        }
    }
}

/// Steps 5 and 6 for one tier's `plan`, both lanes at once; a detach that times out is recorded
/// in `stuck`.
pub(super) async fn drain_lanes(
    ctx: &mut Ctx,
    state: &mut Drain,
    plan: &DrainPlan,
    stuck: &mut Vec<nodewright_model::drain::VolumePod>,
) -> Result<LaneEnd, StepFailed> {
    begin(ctx, Step::EvictPods);
    begin(ctx, Step::MoveVolumes);
    let mut members: Vec<Member> = plan
        .terminating
        .iter()
        .map(|pod| Member {
            pod: pod.clone(),
            volume: None,
            stage: LaneStage::Leaving,
        })
        .chain(plan.without_volumes.iter().map(|pod| Member {
            pod: pod.clone(),
            volume: None,
            stage: LaneStage::ToEvict,
        }))
        .chain(plan.with_volumes.iter().enumerate().map(|(i, vp)| Member {
            pod: vp.pod.clone(),
            volume: Some(i),
            stage: LaneStage::ToEvict,
        }))
        .collect();
    let (mut moved, mut unconfirmed) = (0usize, 0usize);
    // When the refused pods may be asked again, and the pause that led there.
    let mut retry_at: Option<DateTime<Utc>> = None;
    let mut pace = Rounds::new(state.policy.pdb_retry_interval);
    let mut retry_pause = state.policy.pdb_retry_interval;
    let mut rounds = 0u32;
    loop {
        cancellation::guard(ctx, Step::EvictPods)?;
        if let Some(reason) = force_due(ctx, state) {
            return Ok(interrupted(ctx, reason));
        }
        let retry_due = retry_at.is_none_or(|at| now(ctx) >= at);
        let lanes: Vec<LanePod> = members.iter().map(Member::lane).collect();
        let picked = round_evictions(&lanes, retry_due);
        let asked_refused = picked
            .iter()
            .any(|&i| members[i].stage == LaneStage::Refused);
        let attempts = picked.iter().map(|&i| {
            let pod = &members[i].pod;
            // An eviction sent is let finish: what it evicted is known and reported.
            ctx.execute_activity(
                KubeActivities::evict_pod,
                PodAction {
                    pod: pod.clone(),
                    grace_period_seconds: eviction_grace(ctx, pod),
                    node: Some(state.request.node.clone()),
                },
                cancellation::shielded(activity_options::kube_write()),
            )
        });
        let outcomes = join_all(attempts).await;
        let mut refused_now = false;
        let mut budgets = Vec::new();
        for (&i, outcome) in picked.iter().zip(outcomes) {
            let step = step_of(&members[i]);
            let outcome = outcome.map_err(|e| StepFailed::from_activity(step, &e))?;
            budgets.extend(refusing_budget(&outcome).cloned());
            let answer = answer_of(&outcome);
            let key = members[i].pod.key();
            with_status(ctx, |status| status.record_eviction(&key, &answer));
            members[i].stage = match after_eviction(&answer) {
                AfterEviction::Leaving => {
                    state.result.evicted.push(key.clone());
                    note_local_data(ctx, state, plan, &key);
                    LaneStage::Leaving
                }
                AfterEviction::AwaitGone => LaneStage::Leaving,
                AfterEviction::Left => LaneStage::Gone,
                AfterEviction::RetryLater => {
                    refused_now = true;
                    LaneStage::Refused
                }
            };
        }
        if asked_refused || (refused_now && retry_at.is_none()) {
            retry_pause = pace.pause_after(ctx, &budgets);
            retry_at = Some(later(now(ctx), retry_pause));
        }
        // The volume lane: the pod with volumes leaving now, its volumes followed.
        let moving = members
            .iter()
            .position(|m| m.volume.is_some() && m.stage == LaneStage::Leaving);
        if let Some(i) = moving {
            let volume_pod = members[i]
                .volume
                .and_then(|v| plan.with_volumes.get(v))
                .cloned();
            if let Some(volume_pod) = volume_pod {
                match follow(ctx, state, &volume_pod, stuck).await? {
                    Followed::Moved => moved += 1,
                    Followed::Unconfirmed => unconfirmed += 1,
                    Followed::Stuck | Followed::NothingTracked => {}
                    Followed::Interrupted(reason) => return Ok(interrupted(ctx, reason)),
                }
            }
            members[i].stage = LaneStage::Gone;
        }
        let lanes: Vec<LanePod> = members.iter().map(Member::lane).collect();
        match after_lanes(&lanes, history_is_long(ctx, state)) {
            AfterLanes::Finished => {
                let evicted = state.result.evicted.len();
                done(ctx, Step::EvictPods, format!("{evicted} evicted"));
                let detail = volumes_moved_detail(moved, unconfirmed, stuck.len());
                done(ctx, Step::MoveVolumes, detail);
                return Ok(LaneEnd::Finished);
            }
            AfterLanes::ContinueAsNew => return Ok(LaneEnd::ContinueAsNew),
            AfterLanes::NextRound => continue,
            AfterLanes::Pause => {}
        }
        // Only refused or terminating pods are left: wait for those leaving, then (while any is
        // left) the PDB retry interval, and look at the node again.
        let leaving: Vec<PodRef> = members
            .iter()
            .filter(|m| m.stage == LaneStage::Leaving)
            .map(|m| m.pod.clone())
            .collect();
        if !leaving.is_empty() {
            let left = await_gone(ctx, state, leaving, Step::EvictPods).await?;
            if let Some(reason) = left.forced {
                // Force mode came while they terminated: it deletes what is left.
                return Ok(interrupted(ctx, reason));
            }
            for member in members.iter_mut().filter(|m| m.stage == LaneStage::Leaving) {
                if !left.still.iter().any(|p| p.uid == member.pod.uid) {
                    member.stage = LaneStage::Gone;
                }
            }
        }
        if members.iter().all(|m| m.stage == LaneStage::Gone) {
            continue;
        }
        rounds = rounds.saturating_add(1);
        pause(ctx, retry_pause).await;
        // Pods may have left meanwhile (deleted by someone, rescheduled): ask only those still
        // here, and look at the node's health again.
        let from_mirror = pace.look_in_mirrors(ctx);
        let listed = list_pods_from(ctx, state, Step::EvictPods, from_mirror).await?;
        state.health = listed.health.clone();
        for member in members.iter_mut().filter(|m| m.stage != LaneStage::Gone) {
            if !listed.pods.iter().any(|p| p.uid == member.pod.uid) {
                member.stage = LaneStage::Gone;
                let key = member.pod.key();
                with_status(ctx, |status| {
                    status.set_pod(&key, PodState::Gone, None);
                    status.set_block(&key, None);
                });
            }
        }
        fact(ctx, "evictionRounds", rounds.to_string());
    }
}

/// Both lanes end: force mode is due for `reason`.
fn interrupted(ctx: &mut Ctx, reason: ForceReason) -> LaneEnd {
    done(ctx, Step::EvictPods, format!("interrupted: {reason}"));
    done(ctx, Step::MoveVolumes, format!("interrupted: {reason}"));
    LaneEnd::Forced(reason)
}

/// The step a pod's eviction belongs to.
fn step_of(member: &Member) -> Step {
    if member.volume.is_some() {
        Step::MoveVolumes
    } else {
        Step::EvictPods
    }
}
