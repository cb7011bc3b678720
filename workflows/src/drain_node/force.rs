//! Step 7, force mode: every pod still to move (and every pod a `WaitCompleted` rule kept
//! waiting; never one a `Skip` rule leaves) deleted with grace period 0, the node's
//! VolumeAttachments deleted, and the VM's data disks force-detached in Azure.
//!
//! In a voluntary drain, pods marked do-not-disrupt are deleted only by force mode that
//! overrides the marks (the hard deadline, a request, an unhealthy Node): force mode at the
//! drain's own deadline, before a later hard deadline, deletes the other pods and leaves the
//! marked ones running with their volumes; the drain waits for them, and force mode runs again
//! (deleting what is left, then releasing the volumes) when they are gone or the marks are
//! overridden. Every marked pod deleted is named in the status and result.

use nodewright_activities::azure::machines::{
    ArmReadActivities, ArmWriteActivities, AwaitForceDetach, ForceDetachDisks, ForceDetachStarted,
};
use nodewright_activities::kube::KubeActivities;
use nodewright_activities::kube::drain::{NodeAttachments, PodAction, PodDeletion};
use nodewright_model::arm::WriteStage;
use nodewright_model::drain::{
    DrainMode, FORCE_DETACH_BUDGET, ForceReason, ForceRelease, PodRef, PodState, RuledPod,
    overridden_mark,
};
use nodewright_model::machine::Step;
use nodewright_model::names::arm_write_task_queue;
use temporalio_sdk::workflows::join_all;

use super::state::{
    Ctx, Drain, list_pods, note_local_data, overrides, plan_pods, warn, with_status,
};
use crate::progress::{StepFailed, begin, done, fact, later, now, rfc3339};
use crate::{activity_options, cancellation};

/// Step 7, force mode: deletes every pod still to move with grace period 0, deletes the node's
/// VolumeAttachments and force-detaches the VM's data disks in Azure, best effort: each action
/// that fails is a warning (status and result) and the drain goes on. Returns the pods
/// do-not-disrupt marks still hold (force mode for `reason` does not override them): then the
/// volumes are not released yet.
pub(super) async fn force_drain(
    ctx: &mut Ctx,
    state: &mut Drain,
    reason: ForceReason,
) -> Result<Vec<RuledPod>, StepFailed> {
    let overriding = overrides(ctx, &reason);
    let reason_text = reason.to_string();
    let mode = DrainMode::Force {
        reason: reason_text.clone(),
    };
    with_status(ctx, |status| status.mode = mode);
    state.result.forced = Some(reason_text.clone());
    begin(ctx, Step::ForceDrain);
    fact(ctx, "forceReason", reason_text.clone());

    let listed = list_pods(ctx, state, Step::ForceDrain).await?;
    let plan = plan_pods(ctx, state, &listed.pods);
    for refused in &plan.whole.refused {
        warn(
            ctx,
            format!(
                "{refused} came after the pods were selected and stays on the node: the drain's localData policy is refuse"
            ),
        );
    }
    let victims: Vec<PodRef> = plan.force_victims(overriding);
    let marked: Vec<&RuledPod> = plan
        .overriding
        .iter()
        .chain(plan.held.iter().filter(|_| overriding))
        .collect();
    let deletions = victims.iter().map(|pod| {
        ctx.execute_activity(
            KubeActivities::delete_pod,
            PodAction {
                pod: pod.clone(),
                grace_period_seconds: None,
                node: None,
            },
            cancellation::shielded(activity_options::kube_write()),
        )
    });
    let outcomes = join_all(deletions).await;
    for (pod, outcome) in victims.iter().zip(outcomes) {
        let key = pod.key();
        // Best effort: a pod that could not be deleted is reported and the drain goes on.
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                let why = StepFailed::from_activity(Step::ForceDrain, &e).reason;
                let detail = format!("force deletion failed: {why}");
                with_status(ctx, |status| {
                    status.set_pod(&key, PodState::Blocked, Some(detail));
                });
                warn(
                    ctx,
                    format!(
                        "force mode could not delete pod {key} (it may stay on the node): {why}"
                    ),
                );
                continue;
            }
        };
        let detail = match outcome {
            PodDeletion::Deleted => {
                state.result.force_deleted.push(key.clone());
                note_local_data(ctx, state, &plan.whole, &key);
                if let Some(mark) = marked.iter().find(|m| m.pod.uid == pod.uid) {
                    let named = overridden_mark(
                        mark,
                        &format!("deleted with grace period 0, {reason_text}"),
                    );
                    state.result.note_overridden(&named);
                    with_status(ctx, |status| status.note_overridden(&named));
                }
                "deleted with grace period 0"
            }
            PodDeletion::Gone => "already gone",
        };
        with_status(ctx, |status| {
            status.set_pod(&key, PodState::ForceDeleted, Some(detail.to_owned()));
            status.set_block(&key, None);
        });
    }

    let held: Vec<RuledPod> = if overriding {
        Vec::new()
    } else {
        plan.held.clone()
    };
    if !held.is_empty() {
        done(
            ctx,
            Step::ForceDrain,
            format!(
                "{} pods deleted with grace period 0; {} held by do-not-disrupt until they go or force mode overrides them, the volumes released after",
                state.result.force_deleted.len(),
                held.len()
            ),
        );
        return Ok(held);
    }
    release_volumes(ctx, state).await?;
    Ok(Vec::new())
}

/// The end of force mode: deletes the node's VolumeAttachments and force-detaches the VM's data
/// disks in Azure; a failure of either is a warning.
async fn release_volumes(ctx: &mut Ctx, state: &mut Drain) -> Result<(), StepFailed> {
    let attachments = ctx
        .execute_activity(
            KubeActivities::delete_node_volume_attachments,
            NodeAttachments {
                node: state.request.node.clone(),
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await
        .unwrap_or_else(|e| {
            let why = StepFailed::from_activity(Step::ForceDrain, &e).reason;
            warn(
                ctx,
                format!(
                    "force mode could not delete the VolumeAttachments of {}: {why}",
                    state.request.node
                ),
            );
            Vec::new()
        });
    let force_detached = match force_detach_disks(ctx, state).await {
        Ok(detached) => detached,
        Err(failed) => {
            warn(
                ctx,
                format!(
                    "force mode could not force-detach the data disks of {}: {}",
                    state.request.node, failed.reason
                ),
            );
            ForceDetached::default()
        }
    };

    let release = ForceRelease {
        force_detached: &force_detached.disks,
        released_here: !attachments.is_empty() || !force_detached.disks.is_empty(),
        azure_holds_none: force_detached.none_left,
    };
    let at = rfc3339(now(ctx));
    with_status(ctx, |status| status.end_force_mode(&release, &at));
    done(
        ctx,
        Step::ForceDrain,
        format!(
            "{} pods deleted with grace period 0, {} VolumeAttachments deleted, {} data disks force-detached",
            state.result.force_deleted.len(),
            attachments.len(),
            force_detached.disks.len()
        ),
    );
    Ok(())
}

/// What the force detach did: the disks it detached, and whether Azure lists no data disk on
/// the VM afterwards.
#[derive(Default)]
struct ForceDetached {
    disks: Vec<String>,
    none_left: bool,
}

/// Force-detaches the VM's data disks (ARM-write queue) and waits for ARM to finish.
async fn force_detach_disks(ctx: &mut Ctx, state: &Drain) -> Result<ForceDetached, StepFailed> {
    let writes = arm_write_task_queue(ctx.task_queue());
    let started = ctx
        .execute_activity(
            ArmWriteActivities::force_detach_data_disks,
            ForceDetachDisks {
                cluster: state.request.cluster.clone(),
                machine: state.request.node.clone(),
            },
            cancellation::shielded(activity_options::arm_cleanup_write(
                &writes,
                WriteStage::Finishing,
            )),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::ForceDrain, &e))?;
    match started {
        ForceDetachStarted::Started { disks, operation } => {
            let at = later(now(ctx), FORCE_DETACH_BUDGET);
            let left = ctx
                .execute_activity(
                    ArmReadActivities::await_force_detach,
                    AwaitForceDetach {
                        machine: state.request.node.clone(),
                        operation,
                        deadline: at,
                    },
                    activity_options::wait(FORCE_DETACH_BUDGET),
                )
                .await
                .map_err(|e| StepFailed::from_activity(Step::ForceDrain, &e))?;
            if !left.pending.is_empty() {
                warn(
                    ctx,
                    format!(
                        "Azure still lists {} on the VM after the force detach",
                        left.pending.join(", ")
                    ),
                );
            }
            Ok(ForceDetached {
                none_left: left.pending.is_empty(),
                disks,
            })
        }
        // Their detach finished before the force detach looked (force mode deleted their
        // VolumeAttachments first), or the VM is gone: nothing is attached any more.
        ForceDetachStarted::NothingAttached | ForceDetachStarted::VmAbsent => Ok(ForceDetached {
            disks: Vec::new(),
            none_left: true,
        }),
    }
}
