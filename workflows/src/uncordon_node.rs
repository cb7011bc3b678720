#![doc = include_str!("../runbooks/uncordon_node.md")]

use nodewright_activities::azure::machines::ArmReadActivities;
use nodewright_activities::kube::{KubeActivities, MachineNode, NodeChange};
use nodewright_model::Operation;
use nodewright_model::cancel::Canceled;
use nodewright_model::machine::{MachineStatus, Step, UncordonRequest};
use nodewright_model::workflow_type;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{WorkflowContext, WorkflowContextView, WorkflowResult};

use crate::progress::{
    HasStatus, StepFailed, begin, done, fail, now, record_failure, rfc3339, succeed,
};
use crate::search;
use crate::{activity_options, cancellation, input};

/// Makes a drained machine's Node schedulable again; see the runbook above.
#[workflow]
#[derive(Default)]
pub struct UncordonNodeWorkflow {
    status: Option<MachineStatus>,
}

impl HasStatus for UncordonNodeWorkflow {
    fn status_mut(&mut self) -> &mut MachineStatus {
        self.status
            .get_or_insert_with(|| MachineStatus::new("uncordon", "", None, &Step::UNCORDON))
    }
}

#[workflow_methods]
impl UncordonNodeWorkflow {
    /// Runs the runbook.
    #[run(name = workflow_type::UNCORDON_NODE)]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: UncordonRequest,
    ) -> WorkflowResult<()> {
        input::admit_machine_run(
            ctx,
            workflow_type::UNCORDON_NODE,
            &input::Subject {
                cluster: &request.cluster,
                named: Some(("machine", &request.machine)),
            },
            request.check(),
        )?;
        ctx.upsert_search_attributes(
            [
                search::CLUSTER.value_set(request.cluster.to_string()),
                search::MACHINE.value_set(request.machine.clone()),
                search::OPERATION.value_set(Operation::Uncordon.to_string()),
            ]
            .into_iter()
            .chain(search::pool_of_machine(&request.machine)),
        );
        let mut status = MachineStatus::new("uncordon", &request.machine, None, &Step::UNCORDON);
        status.started_at = Some(rfc3339(now(ctx)));
        ctx.state_mut(|s| s.status = Some(status));

        let scope = ctx
            .execute_activity(
                ArmReadActivities::scope,
                (),
                // Reads the worker's configuration: let it answer even after a request.
                cancellation::shielded(activity_options::read()),
            )
            .await?;
        cancellation::before_first_step(ctx)?;
        begin(ctx, Step::Uncordon);
        let changed = ctx
            .execute_activity(
                KubeActivities::uncordon_node,
                MachineNode {
                    node: request.machine.clone(),
                    vm_id: scope.vm_id(&request.machine),
                },
                cancellation::shielded(activity_options::kube_write()),
            )
            .await
            .map_err(|e| StepFailed::from_activity(Step::Uncordon, &e));
        let failed = match changed {
            Ok(NodeChange::Done | NodeChange::Already) => {
                done(ctx, Step::Uncordon, "schedulable, draining taint removed");
                if cancellation::requested(ctx) {
                    let mut canceled =
                        Canceled::at(Step::Uncordon.as_str(), cancellation::reason(ctx));
                    canceled.kept.push(format!(
                        "{} is schedulable: the uncordon was sent before the request",
                        request.machine
                    ));
                    return Err(cancellation::end(ctx, canceled));
                }
                succeed(ctx, format!("{} is schedulable again", request.machine));
                return Ok(());
            }
            Ok(NodeChange::Absent) => StepFailed::new(
                Step::Uncordon,
                format!("there is no Node {}", request.machine),
            ),
            Ok(NodeChange::NotOurs) => StepFailed::new(
                Step::Uncordon,
                format!(
                    "Node {} is not this cluster's machine (providerID or nodewright.io/machine label differ): left alone",
                    request.machine
                ),
            ),
            Err(failed) => failed,
        };
        record_failure(ctx, &failed);
        if cancellation::requested(ctx) {
            let mut canceled = Canceled::at(Step::Uncordon.as_str(), cancellation::reason(ctx));
            canceled.kept.push(format!(
                "{} may still be cordoned: the uncordon sent before the request failed ({})",
                request.machine, failed.reason
            ));
            return Err(cancellation::end(ctx, canceled));
        }
        let message = format!("uncordoning {} failed: {}", request.machine, failed.reason);
        Err(fail(ctx, "UncordonFailed", message))
    }

    /// The step and the outcome.
    #[query(name = "status")]
    pub fn status(&self, _ctx: &WorkflowContextView) -> MachineStatus {
        self.status
            .clone()
            .unwrap_or_else(|| MachineStatus::new("uncordon", "", None, &Step::UNCORDON))
    }
}
