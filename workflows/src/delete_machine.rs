#![doc = include_str!("../runbooks/delete_machine.md")]

use nodewright_activities::azure::machines::ArmReadActivities;
use nodewright_activities::kube::{KubeActivities, MachineNode, NodeChange};
use nodewright_model::Operation;
use nodewright_model::machine::{DeleteMachineRequest, DeletedMachine, MachineStatus, Step};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{WorkflowContext, WorkflowContextView, WorkflowResult};

use crate::activity_options;
use crate::progress::{
    HasStatus, StepFailed, begin, done, fact, fail, now, record_failure, rfc3339, succeed,
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
        ctx.upsert_search_attributes([
            search::CLUSTER.value_set(request.cluster.to_string()),
            search::MACHINE.value_set(request.machine.clone()),
            search::OPERATION.value_set(Operation::Delete.to_string()),
        ]);
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
    begin(ctx, Step::Cordon);
    let cordon = ctx
        .execute_activity(
            KubeActivities::cordon_node,
            MachineNode {
                node: request.machine.clone(),
                vm_id: vm_id.clone(),
            },
            activity_options::kube_write(),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::Cordon, &e))?;
    done(
        ctx,
        Step::Cordon,
        match cordon {
            NodeChange::Done => "cordoned",
            NodeChange::Absent => "no Node",
            NodeChange::NotOurs => "a Node of that name belongs to another VM: left alone",
        },
    );
    let removal = Removal {
        cluster: request.cluster.clone(),
        machine: request.machine.clone(),
        vm_id,
    };
    let mut deleted = remove_machine(ctx, &removal, true).await?;
    deleted.cordoned = cordon == NodeChange::Done;
    Ok(deleted)
}
