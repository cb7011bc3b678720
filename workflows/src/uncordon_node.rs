#![doc = include_str!("../runbooks/uncordon_node.md")]

use nodewright_activities::kube::uncordon::UncordonNode;
use nodewright_activities::kube::{KubeActivities, MachineNode, NodeChange};
use nodewright_model::Operation;
use nodewright_model::cancel::Canceled;
use nodewright_model::machine::uncordon::{UncordonOutcome, Uncordoned};
use nodewright_model::machine::{MachineStatus, Step, UncordonRequest};
use nodewright_model::workflow_type;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{WorkflowContext, WorkflowContextView, WorkflowResult};

use crate::progress::{
    HasStatus, StepFailed, begin, done, fail, now, record_failure, rfc3339, succeed,
};
use crate::search;
use crate::{activity_options, cancellation, input};

/// Patch marker of the uncordon that keeps a cordon set before nodewright's drain
/// (`kube.uncordon_machine_node`): runs started before it replay with `kube.uncordon_node`.
const KEEP_ADMIN_CORDON_PATCH: &str = "uncordon-keeps-admin-cordon";

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
    ) -> WorkflowResult<Uncordoned> {
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

        let scope = crate::scope::read(
            ctx,
            // The options of runs recorded before `scope::SCOPE_LOCAL`.
            cancellation::shielded(activity_options::read()),
        )
        .await?;
        cancellation::before_first_step(ctx)?;
        begin(ctx, Step::Uncordon);
        let node = MachineNode {
            node: request.machine.clone(),
            vm_id: scope.vm_id(&request.machine),
        };
        // Runs started before an administrator's cordon was kept replay with the old activity.
        let changed = if ctx.patched(KEEP_ADMIN_CORDON_PATCH) {
            ctx.execute_activity(
                KubeActivities::uncordon_machine_node,
                UncordonNode {
                    node: node.node,
                    vm_id: node.vm_id,
                    force: request.force,
                },
                cancellation::shielded(activity_options::kube_write()),
            )
            .await
        } else {
            ctx.execute_activity(
                KubeActivities::uncordon_node,
                node,
                cancellation::shielded(activity_options::kube_write()),
            )
            .await
            .map(|change| match change {
                NodeChange::Done | NodeChange::Already => UncordonOutcome::Uncordoned,
                NodeChange::Absent => UncordonOutcome::Absent,
                NodeChange::NotOurs => UncordonOutcome::NotOurs,
            })
        }
        .map_err(|e| StepFailed::from_activity(Step::Uncordon, &e));
        let failed = match changed {
            Ok(outcome @ (UncordonOutcome::Uncordoned | UncordonOutcome::KeptCordon)) => {
                let uncordoned = Uncordoned {
                    machine: request.machine.clone(),
                    kept_cordon: outcome == UncordonOutcome::KeptCordon,
                };
                let detail = if uncordoned.kept_cordon {
                    "draining taint removed; the cordon set before nodewright's drain kept (--force clears it)"
                } else {
                    "schedulable, draining taint removed"
                };
                done(ctx, Step::Uncordon, detail);
                if cancellation::requested(ctx) {
                    let mut canceled =
                        Canceled::at(Step::Uncordon.as_str(), cancellation::reason(ctx));
                    canceled.kept.push(format!(
                        "{}: the uncordon was sent before the request",
                        uncordoned.summary()
                    ));
                    return Err(cancellation::end(ctx, canceled));
                }
                succeed(ctx, uncordoned.summary());
                return Ok(uncordoned);
            }
            Ok(UncordonOutcome::Absent) => StepFailed::new(
                Step::Uncordon,
                format!("there is no Node {}", request.machine),
            ),
            Ok(UncordonOutcome::NotOurs) => StepFailed::new(
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
