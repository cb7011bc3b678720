#![doc = include_str!("../runbooks/delete_machine.md")]

use nodewright_activities::azure::machines::ArmReadActivities;
use nodewright_activities::kube::{KubeActivities, MachineNode, NodeChange, RestoreNode};
use nodewright_model::cancel::{Canceled, DeleteOnCancel, delete_on_cancel};
use nodewright_model::drain::{DrainPurpose, DrainRequest, DrainedNode};
use nodewright_model::machine::{DeleteMachineRequest, DeletedMachine, MachineStatus, Step};
use nodewright_model::workflow_type;
use nodewright_model::{Operation, WorkflowId};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{ChildWorkflowOptions, WorkflowContext, WorkflowContextView, WorkflowResult};

use crate::drain_node::DrainNodeWorkflow;
use crate::progress::{
    HasStatus, StepFailed, activity_failure_text, begin, child_failure_text, done, fact, fail, now,
    record_failure, rfc3339, succeed,
};
use crate::removal::{Removal, remove_machine};
use crate::search;
use crate::{activity_options, cancellation, input};

/// Deletes one machine; see the runbook above.
#[workflow]
#[derive(Default)]
pub struct DeleteMachineWorkflow {
    status: Option<MachineStatus>,
    /// Set once the VM delete is about to be sent: past this, a cancellation lets the deletion
    /// finish.
    vm_delete_sent: bool,
    /// What the drain child returned, once it has.
    drained: Option<DrainedNode>,
    /// `--skip-drain` found the Node cordoned already: a cancellation keeps it cordoned.
    cordoned_before: bool,
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
    #[run(name = workflow_type::DELETE_MACHINE)]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: DeleteMachineRequest,
    ) -> WorkflowResult<DeletedMachine> {
        input::admit_machine_run(
            ctx,
            workflow_type::DELETE_MACHINE,
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
                search::OPERATION.value_set(Operation::Delete.to_string()),
            ]
            .into_iter()
            .chain(search::pool_of_machine(&request.machine)),
        );
        let mut status = MachineStatus::new("delete", &request.machine, None, &Step::DELETE);
        status.started_at = Some(rfc3339(now(ctx)));
        ctx.state_mut(|s| s.status = Some(status));

        let scope = ctx
            .execute_activity(
                ArmReadActivities::scope,
                (),
                // Reads the worker's configuration: let it answer even after a request, so the
                // cancellation path runs with it.
                cancellation::shielded(activity_options::read()),
            )
            .await?;
        let vm_id = scope.vm_id(&request.machine);
        fact(ctx, "vmId", vm_id.clone());
        cancellation::before_first_step(ctx)?;

        match delete(ctx, &request, vm_id.clone()).await {
            Ok(deleted) if cancellation::requested(ctx) => {
                // The request came after the VM delete was sent: the deletion finished.
                let mut canceled = Canceled::at(Step::DeleteVm.as_str(), cancellation::reason(ctx));
                canceled.kept.push(format!(
                    "the deletion of machine {} finished: its VM delete was sent before the request (the point of no return); removed {}",
                    request.machine,
                    or_nothing(&deleted.what_went())
                ));
                Err(cancellation::end(ctx, canceled))
            }
            Ok(deleted) => {
                succeed(ctx, format!("machine {} is gone", request.machine));
                Ok(deleted)
            }
            Err(failed)
                if cancellation::requested(ctx)
                    && delete_on_cancel(ctx.state(|s| s.vm_delete_sent))
                        == DeleteOnCancel::RestoreMachine =>
            {
                record_failure(ctx, &StepFailed::new(failed.step, "canceled"));
                let canceled = restore(ctx, &request, &vm_id, failed.step).await;
                Err(cancellation::end(ctx, canceled))
            }
            // A removal that failed after the VM delete was sent is a failure, cancelled or not.
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
        (
            matches!(cordon, NodeChange::Done | NodeChange::Already),
            None,
        )
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
            if !drained.local_data_lost.is_empty() {
                detail.push_str(&format!(
                    ", {} with their local data lost",
                    drained.local_data_lost.len()
                ));
            }
            detail
        };
        done(ctx, Step::Drain, detail);
        (drained.node_found, Some(drained))
    };
    if cancellation::requested(ctx) {
        return Err(StepFailed::new(Step::DeleteVm, "canceled"));
    }
    let removal = Removal {
        cluster: request.cluster.clone(),
        machine: request.machine.clone(),
        vm_id,
    };
    ctx.state_mut(|s| s.vm_delete_sent = true);
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
        local_data: None,
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
    let drained = started
        .result()
        .await
        .map_err(|e| StepFailed::new(Step::Drain, child_failure_text(&e)))?;
    ctx.state_mut(|s| s.drained = Some(drained.clone()));
    Ok(drained)
}

/// The cancellation path before the VM delete was sent: the machine goes back to service as it
/// was. A drain cancelled with this run restored its Node itself (DrainNode's runbook); a drain
/// that had finished, or `--skip-drain`'s cordon, is undone here.
async fn restore(
    ctx: &mut WorkflowContext<DeleteMachineWorkflow>,
    request: &DeleteMachineRequest,
    vm_id: &str,
    at: Step,
) -> Canceled {
    let mut canceled = Canceled::at(at.as_str(), cancellation::reason(ctx));
    canceled.kept.push(format!(
        "machine {}: its VM was never deleted",
        request.machine
    ));
    let drained = ctx.state(|s| s.drained.clone());
    let keep_cordoned = match (&drained, request.skip_drain) {
        (Some(drained), _) => {
            if !drained.evicted.is_empty() {
                canceled.kept.push(format!(
                    "{} pods evicted by the drain stay where they were rescheduled",
                    drained.evicted.len()
                ));
            }
            drained.cordoned_before
        }
        (None, true) => ctx.state(|s| s.cordoned_before),
        (None, false) => {
            canceled.undone.push(
                "the drain was canceled with this run and gave the Node back itself".to_owned(),
            );
            return canceled;
        }
    };
    begin(ctx, Step::Restore);
    let restored = ctx
        .execute_activity(
            KubeActivities::restore_node,
            RestoreNode {
                node: request.machine.clone(),
                vm_id: vm_id.to_owned(),
                keep_cordoned,
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await;
    match restored {
        Ok(NodeChange::Done | NodeChange::Already) => {
            let what = if keep_cordoned {
                "removed the draining taint and the Terminating condition (the Node stays cordoned: it was before)"
            } else {
                "uncordoned the Node, removed the draining taint and the Terminating condition"
            };
            canceled.undone.push(what.to_owned());
            done(ctx, Step::Restore, what);
        }
        Ok(NodeChange::Absent) => done(ctx, Step::Restore, "no Node"),
        Ok(NodeChange::NotOurs) => done(
            ctx,
            Step::Restore,
            "a Node of that name belongs to another VM: left alone",
        ),
        Err(error) => {
            let reason = activity_failure_text(&error);
            record_failure(ctx, &StepFailed::new(Step::Restore, reason.clone()));
            canceled.cleanup_failure = Some(format!(
                "restoring Node {} failed: {reason}; run `nodewright machine uncordon {}`",
                request.machine, request.machine
            ));
        }
    }
    canceled
}

/// `a, b, c`, or `nothing`.
fn or_nothing(parts: &[String]) -> String {
    if parts.is_empty() {
        "nothing".to_owned()
    } else {
        parts.join(", ")
    }
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
        // A cordon sent is let finish, so that a cancellation's restore comes after it.
        cancellation::shielded(activity_options::kube_write()),
    )
    .await
    .map_err(|e| StepFailed::from_activity(Step::Drain, &e))
}
