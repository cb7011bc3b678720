#![doc = include_str!("../runbooks/delete_machine.md")]

use nodewright_activities::azure::machines::ArmReadActivities;
use nodewright_activities::kube::{KubeActivities, MachineNode, NodeChange};
use nodewright_model::drain::{DrainPurpose, DrainRequest, DrainedNode};
use nodewright_model::machine::{DeleteMachineRequest, DeletedMachine, MachineStatus, Step};
use nodewright_model::{Operation, WorkflowId};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{ChildWorkflowOptions, WorkflowContext, WorkflowContextView, WorkflowResult};

use crate::activity_options;
use crate::drain_node::DrainNodeWorkflow;
use crate::progress::{
    HasStatus, StepFailed, begin, child_failure_text, done, fact, fail, now, record_failure,
    rfc3339, succeed,
};
use crate::removal::{Removal, remove_machine};
use crate::search;

/// Deletes one machine; see the runbook above.
#[workflow]
#[derive(Default)]
pub struct DeleteMachineWorkflow {
    status: Option<MachineStatus>,
}

impl HasStatus for DeleteMachineWorkflow {
    fn status_mut(&mut self) -> &mut MachineStatus {
        self.status
            .get_or_insert_with(|| MachineStatus::new("delete", "", None, &Step::DELETE))
    }
}

#[workflow_methods]
impl DeleteMachineWorkflow {
    /// Runs the runbook.
    #[run(name = "DeleteMachine")]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: DeleteMachineRequest,
    ) -> WorkflowResult<DeletedMachine> {
        ctx.upsert_search_attributes(
            [
                search::CLUSTER.value_set(request.cluster.to_string()),
                search::MACHINE.value_set(request.machine.clone()),
                search::OPERATION.value_set(Operation::Delete.to_string()),
            ]
            .into_iter()
            .chain(search::pool_of_machine(&request.machine)),
        );
        let mut status = MachineStatus::new("delete", &request.machine, None, &Step::DELETE);
        status.started_at = Some(rfc3339(now(ctx)));
        ctx.state_mut(|s| s.status = Some(status));

        let scope = ctx
            .execute_activity(ArmReadActivities::scope, (), activity_options::read())
            .await?;
        let vm_id = scope.vm_id(&request.machine);
        fact(ctx, "vmId", vm_id.clone());

        match delete(ctx, &request, vm_id).await {
            Ok(deleted) => {
                succeed(ctx, format!("machine {} is gone", request.machine));
                Ok(deleted)
            }
            Err(failed) => {
                record_failure(ctx, &failed);
                let message = format!(
                    "deleting machine {} failed at step {}: {}",
                    request.machine, failed.step, failed.reason
                );
                Err(fail(ctx, "DeleteFailed", message))
            }
        }
    }

    /// Every step with its state, the facts gathered, the outcome.
    #[query(name = "status")]
    pub fn status(&self, _ctx: &WorkflowContextView) -> MachineStatus {
        self.status
            .clone()
            .unwrap_or_else(|| MachineStatus::new("delete", "", None, &Step::DELETE))
    }
}

async fn delete(
    ctx: &mut WorkflowContext<DeleteMachineWorkflow>,
    request: &DeleteMachineRequest,
    vm_id: String,
) -> Result<DeletedMachine, StepFailed> {
    begin(ctx, Step::Drain);
    let (cordoned, drained) = if request.skip_drain {
        let cordon = cordon(ctx, request, &vm_id).await?;
        done(
            ctx,
            Step::Drain,
            match cordon {
                NodeChange::Done => "skipped (--skip-drain): cordoned only",
                NodeChange::Absent => "skipped (--skip-drain): no Node",
                NodeChange::NotOurs => {
                    "skipped (--skip-drain): a Node of that name belongs to another VM: left alone"
                }
            },
        );
        (cordon == NodeChange::Done, None)
    } else {
        let drained = drain_first(ctx, request).await?;
        let detail = if !drained.node_found {
            "no Node: nothing to drain".to_owned()
        } else {
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
            detail
        };
        done(ctx, Step::Drain, detail);
        (drained.node_found, Some(drained))
    };
    let removal = Removal {
        cluster: request.cluster.clone(),
        machine: request.machine.clone(),
        vm_id,
    };
    let mut deleted = remove_machine(ctx, &removal, true).await?;
    deleted.cordoned = cordoned;
    deleted.drained = drained;
    Ok(deleted)
}

/// Runs DrainNode (`drain/<cluster>/<machine>`) as a child and waits for it.
async fn drain_first(
    ctx: &mut WorkflowContext<DeleteMachineWorkflow>,
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
        resume: None,
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
    started
        .result()
        .await
        .map_err(|e| StepFailed::new(Step::Drain, child_failure_text(&e)))
}

async fn cordon(
    ctx: &mut WorkflowContext<DeleteMachineWorkflow>,
    request: &DeleteMachineRequest,
    vm_id: &str,
) -> Result<NodeChange, StepFailed> {
    ctx.execute_activity(
        KubeActivities::cordon_node,
        MachineNode {
            node: request.machine.clone(),
            vm_id: vm_id.to_owned(),
        },
        activity_options::kube_write(),
    )
    .await
    .map_err(|e| StepFailed::from_activity(Step::Drain, &e))
}
