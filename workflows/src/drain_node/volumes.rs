//! Step 6, the serial lane: the pods with persistent volumes that attach, one at a time: evict,
//! wait for its volumes to detach here (VolumeAttachment gone, Azure disk released), then to
//! attach on another node; and the volumes whose detach timed out, looked at again until they
//! detach. Volumes that need no attach or are used from other nodes are never waited on; their
//! pods go with the parallel lane (`model::drain::volume_wait`).

use std::time::Duration;

use nodewright_activities::azure::machines::{ArmReadActivities, AwaitDisksReleased};
use nodewright_activities::kube::KubeActivities;
use nodewright_activities::kube::drain::AwaitVolumes;
use nodewright_model::drain::{
    AfterEviction, DrainPlan, ForceReason, LaneEnd, MIN_WAIT, PodState, VolumePod, VolumeState,
    WaitKind, detach_budget, volumes_moved_detail, wait_within_deadline,
};
use nodewright_model::machine::Step;

use chrono::{DateTime, Utc};

use super::lanes::{await_gone, evict};
use super::looks::Looks;
use super::state::{
    Ctx, Drain, force_due, history_is_long, list_pods, note_local_data, pause, wait_deadline,
    wait_options, warn, with_status,
};
use crate::cancellation;
use crate::progress::{StepFailed, begin, done, later, now};

/// Step 6: the pods with persistent volumes, one at a time in the plan's order: evict, wait for
/// its volumes to detach here (VolumeAttachment gone, disk released in Azure), then to attach
/// on another node. A detach that times out is recorded in `stuck`.
pub(super) async fn move_volumes(
    ctx: &mut Ctx,
    state: &mut Drain,
    plan: &DrainPlan,
    stuck: &mut Vec<VolumePod>,
) -> Result<LaneEnd, StepFailed> {
    begin(ctx, Step::MoveVolumes);
    let (mut moved, mut unconfirmed) = (0usize, 0usize);
    for volume_pod in &plan.with_volumes {
        let key = volume_pod.pod.key();
        loop {
            cancellation::guard(ctx, Step::MoveVolumes)?;
            if let Some(reason) = force_due(ctx, state) {
                done(ctx, Step::MoveVolumes, format!("interrupted: {reason}"));
                return Ok(LaneEnd::Forced(reason));
            }
            match evict(ctx, &state.request.node, &volume_pod.pod, Step::MoveVolumes).await? {
                AfterEviction::Leaving => {
                    state.result.evicted.push(key.clone());
                    note_local_data(ctx, state, plan, &key);
                    break;
                }
                AfterEviction::Left | AfterEviction::AwaitGone => break,
                AfterEviction::RetryLater => {
                    if history_is_long(ctx, state) {
                        return Ok(LaneEnd::ContinueAsNew);
                    }
                    pause(ctx, state.policy.pdb_retry_interval).await;
                    let listed = list_pods(ctx, state, Step::MoveVolumes).await?;
                    state.health = listed.health;
                    if !listed.pods.iter().any(|p| p.uid == volume_pod.pod.uid) {
                        break;
                    }
                }
            }
        }
        match follow(ctx, state, volume_pod, stuck).await? {
            Followed::Moved => moved += 1,
            Followed::Unconfirmed => unconfirmed += 1,
            Followed::Stuck | Followed::NothingTracked => {}
            Followed::Interrupted(reason) => {
                done(ctx, Step::MoveVolumes, format!("interrupted: {reason}"));
                return Ok(LaneEnd::Forced(reason));
            }
        }
    }
    let detail = volumes_moved_detail(moved, unconfirmed, stuck.len());
    done(ctx, Step::MoveVolumes, detail);
    Ok(LaneEnd::Finished)
}

/// How far the volumes of an evicted pod were followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Followed {
    /// No volume waited on: the pod was waited for until it went.
    NothingTracked,
    /// Every waited-on volume detached here and was seen attached elsewhere.
    Moved,
    /// Detached here; not every volume was seen attached elsewhere (a warning).
    Unconfirmed,
    /// The detach timed out: recorded in `stuck`, looked at again later.
    Stuck,
    /// Force mode became due while the drain waited (a volume whose detach had not finished
    /// is recorded in `stuck`): force mode takes over.
    Interrupted(ForceReason),
}

/// Follows the volumes of `volume_pod`, evicted: waits for them to detach here (VolumeAttachment
/// gone, disk released in Azure), then to attach on another node; a detach that times out is
/// recorded in `stuck`.
pub(super) async fn follow(
    ctx: &mut Ctx,
    state: &mut Drain,
    volume_pod: &VolumePod,
    stuck: &mut Vec<VolumePod>,
) -> Result<Followed, StepFailed> {
    let key = volume_pod.pod.key();
    if volume_pod.tracked.is_empty() {
        let left = await_gone(ctx, state, vec![volume_pod.pod.clone()], Step::MoveVolumes).await?;
        return Ok(left
            .forced
            .map_or(Followed::NothingTracked, Followed::Interrupted));
    }
    state.in_flight = Some(volume_pod.clone());
    set_volumes(ctx, volume_pod, VolumeState::Detaching);
    let grace = Duration::from_secs(volume_pod.pod.grace_period_seconds);
    let budget = detach_budget(grace, state.policy.volume_detach_timeout);
    let (pending, forced) = await_detached(ctx, state, volume_pod, budget).await?;
    with_status(ctx, |status| status.set_pod(&key, PodState::Gone, None));
    if let Some(reason) = forced {
        // Force mode came first: it releases what did not detach.
        with_status(ctx, |status| {
            for pv in &pending {
                status.set_volume(pv, VolumeState::DetachTimedOut, None);
            }
        });
        warn(
            ctx,
            format!(
                "{} of pod {key} had not detached from {} when {reason}: force mode releases it",
                pending.join(", "),
                state.request.node
            ),
        );
        state.in_flight = None;
        stuck.push(volume_pod.clone());
        return Ok(Followed::Interrupted(reason));
    }
    if !pending.is_empty() {
        with_status(ctx, |status| {
            for pv in &pending {
                status.set_volume(pv, VolumeState::DetachTimedOut, None);
            }
        });
        warn(
            ctx,
            format!(
                "{} of pod {key} did not detach from {} within {}s; waiting until the deadline, then force mode",
                pending.join(", "),
                state.request.node,
                budget.as_secs()
            ),
        );
        state.in_flight = None;
        stuck.push(volume_pod.clone());
        return Ok(Followed::Stuck);
    }
    let moved_before = state.result.volumes_moved.len();
    let forced = await_reattached(ctx, state, volume_pod).await?;
    state.in_flight = None;
    if let Some(reason) = forced {
        return Ok(Followed::Interrupted(reason));
    }
    // Moved only when every waited-on volume was seen attached elsewhere.
    let moved = state
        .result
        .volumes_moved
        .len()
        .saturating_sub(moved_before);
    Ok(if moved == volume_pod.tracked.len() {
        Followed::Moved
    } else {
        Followed::Unconfirmed
    })
}

/// Step 6, again: volumes whose detach timed out are looked at again every PDB retry interval
/// until they detach or force mode is due.
pub(super) async fn await_stuck_volumes(
    ctx: &mut Ctx,
    state: &mut Drain,
    stuck: &mut Vec<VolumePod>,
) -> Result<LaneEnd, StepFailed> {
    begin(ctx, Step::MoveVolumes);
    loop {
        cancellation::guard(ctx, Step::MoveVolumes)?;
        if let Some(reason) = force_due(ctx, state) {
            done(ctx, Step::MoveVolumes, format!("detach pending, {reason}"));
            return Ok(LaneEnd::Forced(reason));
        }
        if history_is_long(ctx, state) {
            return Ok(LaneEnd::ContinueAsNew);
        }
        pause(ctx, state.policy.pdb_retry_interval).await;
        let mut still = Vec::new();
        for volume_pod in stuck.drain(..) {
            // Force mode due ends these waits early; the next turn of the loop starts it.
            let (pending, _) = await_detached(ctx, state, &volume_pod, MIN_WAIT).await?;
            if pending.is_empty() {
                await_reattached(ctx, state, &volume_pod).await?;
            } else {
                still.push(volume_pod);
            }
        }
        *stuck = still;
        if stuck.is_empty() {
            done(ctx, Step::MoveVolumes, "every volume detached");
            return Ok(LaneEnd::Finished);
        }
        let listed = list_pods(ctx, state, Step::MoveVolumes).await?;
        state.health = listed.health;
    }
}

/// Waits up to `budget`, in looks (`looks`), until the pod's tracked volumes have no
/// VolumeAttachment on this node and their Azure disks are not `managedBy` its VM; returns the
/// PVs still attached, and why force mode ended the wait early when it did.
pub(super) async fn await_detached(
    ctx: &mut Ctx,
    state: &mut Drain,
    volume_pod: &VolumePod,
    budget: Duration,
) -> Result<(Vec<String>, Option<ForceReason>), StepFailed> {
    let mut looks = Looks::new(ctx, WaitKind::Detach, wait_deadline(ctx, budget));
    loop {
        let (deadline, look) = looks.next(ctx);
        let pending = look_detached(ctx, state, volume_pod, deadline, look).await?;
        if !looks
            .again(ctx, state, pending.len(), Step::MoveVolumes)
            .await?
        {
            return Ok((pending, looks.forced));
        }
    }
}

/// One look of [`await_detached`], until `deadline` (`budget` from now).
async fn look_detached(
    ctx: &mut Ctx,
    state: &Drain,
    volume_pod: &VolumePod,
    deadline: DateTime<Utc>,
    budget: Duration,
) -> Result<Vec<String>, StepFailed> {
    let attachments = ctx
        .execute_activity(
            KubeActivities::await_volumes_detached,
            AwaitVolumes {
                node: state.request.node.clone(),
                persistent_volumes: persistent_volumes(volume_pod),
                deadline,
            },
            wait_options(state, budget),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::MoveVolumes, &e))?;
    let mut pending = attachments.pending;
    let disks: Vec<(String, String)> = volume_pod
        .tracked
        .iter()
        .filter(|t| !pending.contains(&t.persistent_volume))
        .filter_map(|t| t.disk_id.clone().map(|d| (t.persistent_volume.clone(), d)))
        .collect();
    if !disks.is_empty() {
        let released = ctx
            .execute_activity(
                ArmReadActivities::await_disks_released,
                AwaitDisksReleased {
                    vm_id: state.vm_id.clone(),
                    disk_ids: disks.iter().map(|(_, d)| d.clone()).collect(),
                    deadline,
                },
                wait_options(state, budget),
            )
            .await
            .map_err(|e| StepFailed::from_activity(Step::MoveVolumes, &e))?;
        for (pv, disk) in disks {
            if released.pending.contains(&disk) {
                pending.push(pv);
            }
        }
    }
    Ok(pending)
}

/// Waits up to the reattach timeout, in looks (`looks`), until each moved volume is attached on
/// another node; a timeout is a warning. A force request or an unhealthy Node ends the wait
/// early (the deadline does not: the pod has left): returns why.
pub(super) async fn await_reattached(
    ctx: &mut Ctx,
    state: &mut Drain,
    volume_pod: &VolumePod,
) -> Result<Option<ForceReason>, StepFailed> {
    set_volumes(ctx, volume_pod, VolumeState::Reattaching);
    // The reattach wait is not bounded by the drain deadline: the pod has already left.
    let budget = wait_within_deadline(state.policy.volume_attach_timeout, None);
    let until = later(now(ctx), budget);
    let mut looks = Looks::new(ctx, WaitKind::Reattach, (until, budget));
    let mut waited = persistent_volumes(volume_pod);
    let mut attached = Vec::new();
    let pending = loop {
        let (deadline, look) = looks.next(ctx);
        let seen = ctx
            .execute_activity(
                KubeActivities::await_volumes_reattached,
                AwaitVolumes {
                    node: state.request.node.clone(),
                    persistent_volumes: waited.clone(),
                    deadline,
                },
                wait_options(state, look),
            )
            .await
            .map_err(|e| StepFailed::from_activity(Step::MoveVolumes, &e))?;
        attached.extend(seen.attached);
        waited.retain(|pv| seen.pending.contains(pv));
        if !looks
            .again(ctx, state, waited.len(), Step::MoveVolumes)
            .await?
        {
            break waited;
        }
    };
    for (pv, node) in &attached {
        let new_node = Some(node.clone());
        with_status(ctx, |status| {
            status.set_volume(pv, VolumeState::Reattached, new_node);
        });
        state.result.volumes_moved.push((pv.clone(), node.clone()));
    }
    if !pending.is_empty() {
        with_status(ctx, |status| {
            for pv in &pending {
                status.set_volume(pv, VolumeState::ReattachTimedOut, None);
            }
        });
        let within = match &looks.forced {
            Some(reason) => format!("before {reason}"),
            None => format!("within {}s", budget.as_secs()),
        };
        warn(
            ctx,
            format!(
                "{} of pod {} did not attach on another node {within}",
                pending.join(", "),
                volume_pod.pod.key(),
            ),
        );
    }
    Ok(looks.forced)
}

/// The PersistentVolumes of `volume_pod` the drain waits on.
fn persistent_volumes(volume_pod: &VolumePod) -> Vec<String> {
    volume_pod
        .tracked
        .iter()
        .map(|t| t.persistent_volume.clone())
        .collect()
}

/// Sets every tracked volume of `volume_pod` to `state`.
fn set_volumes(ctx: &mut Ctx, volume_pod: &VolumePod, state: VolumeState) {
    with_status(ctx, |status| {
        for tracked in &volume_pod.tracked {
            status.set_volume(&tracked.persistent_volume, state, None);
        }
    });
}
