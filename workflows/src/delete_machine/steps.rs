//! DeleteMachine's drain step: DrainNode as a child, or `--skip-drain`'s cordon, and the
//! detail the status shows for it.

use nodewright_activities::kube::{KubeActivities, MachineNode, NodeChange};
use nodewright_model::drain::{DrainPurpose, DrainRequest, DrainedNode};
use nodewright_model::machine::{DeleteMachineRequest, Step};
use nodewright_model::{Operation, WorkflowId};
use temporalio_sdk::ChildWorkflowOptions;

use super::state::Ctx;
use crate::drain_node::DrainNodeWorkflow;
use crate::progress::{StepFailed, child_failure_text, done, fact};
use crate::{activity_options, cancellation};

/// The drain step: drains the Node (or only cordons it with `--skip-drain`); returns whether
/// the Node was cordoned and what the drain did.
pub(super) async fn drain(
    ctx: &mut Ctx,
    request: &DeleteMachineRequest,
    vm_id: &str,
) -> Result<(bool, Option<DrainedNode>), StepFailed> {
    if request.skip_drain {
        let cordon = cordon(ctx, request, vm_id).await?;
        done(
            ctx,
            Step::Drain,
            match cordon {
                NodeChange::Done => "skipped (--skip-drain): cordoned only",
                NodeChange::Already => {
                    "skipped (--skip-drain): the Node was cordoned already (it stays so if this run is canceled)"
                }
                NodeChange::Absent => "skipped (--skip-drain): no Node",
                NodeChange::NotOurs => {
                    "skipped (--skip-drain): a Node of that name belongs to another VM: left alone"
                }
            },
        );
        ctx.state_mut(|s| s.cordoned_before = cordon == NodeChange::Already);
        return Ok((
            matches!(cordon, NodeChange::Done | NodeChange::Already),
            None,
        ));
    }
    let drained = drain_first(ctx, request).await?;
    done(ctx, Step::Drain, drained_detail(&drained));
    Ok((drained.node_found, Some(drained)))
}

/// What the drain did, in a few words.
fn drained_detail(drained: &DrainedNode) -> String {
    if !drained.node_found {
        return "no Node: nothing to drain".to_owned();
    }
    let mut detail = format!(
        "{} evicted, {} volumes moved",
        drained.evicted.len(),
        drained.volumes_moved.len()
    );
    if let Some(reason) = &drained.forced {
        detail.push_str(&format!(
            ", force mode ({reason}): {} pods deleted",
            drained.force_deleted.len()
        ));
    }
    if !drained.local_data_lost.is_empty() {
        detail.push_str(&format!(
            ", {} with their local data lost",
            drained.local_data_lost.len()
        ));
    }
    detail
}

/// Runs DrainNode (`drain/<cluster>/<machine>`) as a child and waits for it.
async fn drain_first(
    ctx: &mut Ctx,
    request: &DeleteMachineRequest,
) -> Result<DrainedNode, StepFailed> {
    let workflow_id = WorkflowId::for_subject(Operation::Drain, &request.cluster, &request.machine);
    fact(ctx, "drainWorkflowId", workflow_id.to_string());
    let options = ChildWorkflowOptions::builder()
        .workflow_id(workflow_id.to_string())
        .static_summary(format!(
            "drain {} before deleting its machine",
            request.machine
        ))
        .build();
    let input = DrainRequest {
        cluster: request.cluster.clone(),
        node: request.machine.clone(),
        purpose: DrainPurpose::Deletion,
        policy: request.drain_policy.clone(),
        force: request.force,
        local_data: None,
        resume: None,
        disruption: request.disruption,
        history_limit: None,
    };
    let started = ctx
        .start_child_workflow(DrainNodeWorkflow::run, input, options)
        .await
        .map_err(|e| {
            StepFailed::new(
                Step::Drain,
                format!(
                    "could not start {workflow_id} ({e}); if a drain of {} is already running, wait for it or run `nodewright machine force-drain {}`",
                    request.machine, request.machine
                ),
            )
        })?;
    let drained = started
        .result()
        .await
        .map_err(|e| StepFailed::new(Step::Drain, child_failure_text(&e)))?;
    ctx.state_mut(|s| s.drained = Some(drained.clone()));
    Ok(drained)
}

/// `--skip-drain`'s cordon.
async fn cordon(
    ctx: &mut Ctx,
    request: &DeleteMachineRequest,
    vm_id: &str,
) -> Result<NodeChange, StepFailed> {
    ctx.execute_activity(
        KubeActivities::cordon_node,
        MachineNode {
            node: request.machine.clone(),
            vm_id: vm_id.to_owned(),
        },
        // A cordon sent is let finish, so that a cancellation's restore comes after it.
        cancellation::shielded(activity_options::kube_write()),
    )
    .await
    .map_err(|e| StepFailed::from_activity(Step::Drain, &e))
}
