//! Acting on the plan: the planned removals `parallelism` at a time, each by its own step
//! (`model::sweep::removal_step`), every outcome recorded in the audit. A removal's failure is
//! its outcome, never the sweep's.

use nodewright_activities::azure::machines::{
    ArmWriteActivities, DeleteLeftover, Leftover, LeftoverDeleted, LeftoverKind,
};
use nodewright_activities::kube::{DeleteOrphanNode, KubeActivities, OrphanNodeDeleted};
use nodewright_model::arm::WriteStage;
use nodewright_model::machine_name::MachineName;
use nodewright_model::names::arm_write_task_queue;
use nodewright_model::sweep::{
    AuditEntry, Decision, LeftoverSubject, Outcome, RemovalStep, SweepAudit, SweepPhase,
    SweepRequest, leftover_left_alone, nothing_to_do, removal_step, replacement_prefix,
};
use temporalio_sdk::WorkflowContext;
use temporalio_sdk::workflows::join_all;

use super::children::{delete_vm, replace};
use super::state::{Ctx, OrphanSweepWorkflow, set_status};
use crate::progress::activity_failure_text;
use crate::{activity_options, cancellation};

/// Removes what the plan says, `parallelism` at a time, recording each outcome.
pub(super) async fn act(ctx: &mut Ctx, request: &SweepRequest, audit: &mut SweepAudit) {
    let todo = audit.pending_removals();
    let planned = audit.planned();
    set_status(
        ctx,
        SweepPhase::Acting,
        format!("removing {} of {planned} planned", todo.len()),
        |_| {},
    );
    for batch in todo.chunks(request.removals_at_once()) {
        if cancellation::requested(ctx) {
            return;
        }
        // The replacements' names first, in order: each draws from the workflow's random.
        let mut names = Vec::new();
        for &index in batch {
            let name = replacement_prefix(&audit.entries[index].decision)
                .map(|prefix| MachineName::generate(prefix, ctx.random::<u64>()).to_string());
            names.push(name);
        }
        let work = batch
            .iter()
            .zip(names)
            .map(|(&index, replacement)| remove(ctx, request, &audit.entries[index], replacement));
        let outcomes = join_all(work).await;
        for (&index, outcome) in batch.iter().zip(outcomes) {
            audit.record(index, outcome);
        }
        let (done, failed) = audit.tally();
        set_status(
            ctx,
            SweepPhase::Acting,
            format!("{done} of {planned} removals done, {failed} failed"),
            |status| {
                status.done = done;
                status.failed = failed;
            },
        );
    }
}

/// Removes one thing; every failure becomes its outcome, never the sweep's.
async fn remove(
    ctx: &WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    entry: &AuditEntry,
    replacement: Option<String>,
) -> Outcome {
    let decision = &entry.decision;
    match removal_step(decision) {
        RemovalStep::DeleteMachine => delete_vm(ctx, request, decision).await,
        RemovalStep::ReplaceMachine => replace(ctx, request, decision, replacement).await,
        RemovalStep::DeleteLeftover(LeftoverSubject::Nic) => {
            delete_leftover(ctx, request, decision, LeftoverKind::Nic).await
        }
        RemovalStep::DeleteLeftover(LeftoverSubject::Disk) => {
            delete_leftover(ctx, request, decision, LeftoverKind::Disk).await
        }
        RemovalStep::DeleteNode => delete_node(ctx, decision).await,
        RemovalStep::Nothing => nothing_to_do(),
    }
}

/// An orphan NIC or OS disk (checked again by the activity: ours, attached to nothing).
async fn delete_leftover(
    ctx: &WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    decision: &Decision,
    kind: LeftoverKind,
) -> Outcome {
    let writes = arm_write_task_queue(ctx.task_queue());
    let deleted = ctx
        .execute_activity(
            ArmWriteActivities::delete_leftover,
            DeleteLeftover {
                cluster: request.cluster.clone(),
                leftover: Leftover {
                    kind,
                    name: decision.name.clone(),
                },
                // The sweep's own recheck (`model::sweep::recheck_disk`): tags only.
                machine: None,
                os_disk_under_vm: None,
            },
            cancellation::shielded(activity_options::arm_cleanup_write(
                &writes,
                WriteStage::Starting,
            )),
        )
        .await;
    match deleted {
        Ok(LeftoverDeleted::Deleted) => Outcome::Deleted,
        Ok(LeftoverDeleted::AlreadyGone) => Outcome::AlreadyGone,
        Ok(LeftoverDeleted::LeftAlone) => leftover_left_alone(),
        Err(e) => Outcome::Failed {
            error: activity_failure_text(&e),
        },
    }
}

/// An orphan Node object, conditional on its uid.
async fn delete_node(ctx: &WorkflowContext<OrphanSweepWorkflow>, decision: &Decision) -> Outcome {
    let deleted = ctx
        .execute_activity(
            KubeActivities::delete_orphan_node,
            DeleteOrphanNode {
                name: decision.name.clone(),
                uid: decision.uid.clone().unwrap_or_default(),
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await;
    match deleted {
        Ok(OrphanNodeDeleted::Deleted) => Outcome::Deleted,
        Ok(OrphanNodeDeleted::AlreadyGone) => Outcome::AlreadyGone,
        Ok(OrphanNodeDeleted::LeftAlone { reason }) => Outcome::LeftAlone { reason },
        Err(e) => Outcome::Failed {
            error: activity_failure_text(&e),
        },
    }
}
