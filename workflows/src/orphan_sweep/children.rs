//! The removals that are child workflows: an orphan VM's DeleteMachine, and an unhealthy
//! machine's DeleteMachine with, for a pool machine, its replacement's CreateMachine. Children
//! are shielded from the sweep's cancellation: a removal started is finished.

use nodewright_activities::kube::{DisruptionMarksOf, KubeActivities};
use nodewright_activities::temporal::{PoolOfLastRollout, TemporalActivities};
use nodewright_model::disruption::Disruption;
use nodewright_model::machine::{CreateMachineRequest, DeleteMachineRequest};
use nodewright_model::sweep::{
    Decision, Outcome, SweepRequest, child_not_started, machine_deleted, no_recorded_template,
    remediation_held,
};
use nodewright_model::{Operation, WorkflowId};
use temporalio_sdk::{
    ChildWorkflowStartError, StartChildWorkflowExecutionFailedCause, WorkflowContext,
};

use super::state::OrphanSweepWorkflow;
use crate::create_machine::CreateMachineWorkflow;
use crate::delete_machine::DeleteMachineWorkflow;
use crate::progress::{activity_failure_text, child_failure_text, child_options};
use crate::{activity_options, cancellation};

/// An orphan VM: DeleteMachine (no Node, so no drain; NIC and OS disk go with the VM, leftovers
/// after it).
pub(super) async fn delete_vm(
    ctx: &WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    decision: &Decision,
) -> Outcome {
    let workflow_id = WorkflowId::for_subject(Operation::Delete, &request.cluster, &decision.name);
    let input = DeleteMachineRequest {
        cluster: request.cluster.clone(),
        machine: decision.name.clone(),
        skip_drain: true,
        force: false,
        drain_policy: None,
        skip_hooks: false,
        hook_timeout: None,
        disruption: Disruption::MachineGone,
    };
    let options = cancellation::shielded_child(child_options(
        &workflow_id,
        format!(
            "orphan sweep: delete orphan VM {} ({})",
            decision.name, decision.detail
        ),
    ));
    let started = match ctx
        .start_child_workflow(DeleteMachineWorkflow::run, input, options)
        .await
    {
        Ok(started) => started,
        Err(error) => return start_failed(&workflow_id, &error),
    };
    match started.result().await {
        Ok(deleted) => machine_deleted(deleted.foreign_vm.as_deref(), deleted.vm_deleted),
        Err(error) => Outcome::Failed {
            error: format!("{workflow_id} failed: {}", child_failure_text(&error)),
        },
    }
}

/// The patch that reads an unhealthy machine's do-not-disrupt marks before replacing it; runs
/// recorded before it read none.
const DO_NOT_DISRUPT_PATCH: &str = "sweep-honours-do-not-disrupt";

/// An unhealthy machine: left alone when its Node or a pod on it carries a do-not-disrupt mark
/// (a remediation is voluntary); else DeleteMachine (drained, force mode as the Node is NotReady)
/// and, for a pool machine, CreateMachine from the pool's last completed rollout, started only
/// once the DeleteMachine has started (a machine someone else is deleting gets no second
/// replacement). Started, not awaited.
pub(super) async fn replace(
    ctx: &WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    decision: &Decision,
    replacement: Option<String>,
) -> Outcome {
    if ctx.patched(DO_NOT_DISRUPT_PATCH) {
        let read = ctx
            .execute_activity(
                KubeActivities::disruption_marks,
                DisruptionMarksOf {
                    node: decision.name.clone(),
                },
                activity_options::read(),
            )
            .await;
        match read {
            Ok(found) => {
                if let Some(held) = remediation_held(found.marks) {
                    return held;
                }
            }
            Err(e) => {
                return Outcome::Failed {
                    error: format!(
                        "reading the machine's do-not-disrupt marks failed: {}",
                        activity_failure_text(&e)
                    ),
                };
            }
        }
    }
    let create = match (&decision.pool, replacement) {
        (Some(pool), Some(machine)) => {
            let looked = ctx
                .execute_activity(
                    TemporalActivities::pool_of_last_rollout,
                    PoolOfLastRollout {
                        cluster: request.cluster.clone(),
                        pool: pool.clone(),
                    },
                    activity_options::read(),
                )
                .await;
            match looked {
                Ok(Some(spec)) => Some(CreateMachineRequest::replacement(
                    request.cluster.clone(),
                    machine,
                    &spec,
                )),
                Ok(None) => return no_recorded_template(pool, &decision.name),
                Err(e) => {
                    return Outcome::Failed {
                        error: format!(
                            "reading pool {pool}'s template failed: {}",
                            activity_failure_text(&e)
                        ),
                    };
                }
            }
        }
        _ => None,
    };
    let delete_id = WorkflowId::for_subject(Operation::Delete, &request.cluster, &decision.name);
    let input = DeleteMachineRequest {
        cluster: request.cluster.clone(),
        machine: decision.name.clone(),
        skip_drain: false,
        force: false,
        drain_policy: None,
        skip_hooks: false,
        hook_timeout: None,
        disruption: Disruption::SweepRemediation,
    };
    let options = cancellation::shielded_child(child_options(
        &delete_id,
        format!(
            "orphan sweep: replace unhealthy machine {} ({})",
            decision.name, decision.detail
        ),
    ));
    if let Err(error) = ctx
        .start_child_workflow(DeleteMachineWorkflow::run, input, options)
        .await
    {
        return start_failed(&delete_id, &error);
    }
    let mut started = vec![delete_id.to_string()];
    if let Some(input) = create {
        let create_id =
            WorkflowId::for_subject(Operation::Create, &request.cluster, &input.machine);
        let options = cancellation::shielded_child(child_options(
            &create_id,
            format!(
                "orphan sweep: replacement for unhealthy machine {} (pool {})",
                decision.name, input.pool
            ),
        ));
        match ctx
            .start_child_workflow(CreateMachineWorkflow::run, input, options)
            .await
        {
            Ok(_) => started.push(create_id.to_string()),
            Err(error) => {
                return Outcome::Failed {
                    error: format!(
                        "started {delete_id} but its replacement {create_id} did not start: {error}"
                    ),
                };
            }
        }
    }
    Outcome::Replacing { workflows: started }
}

/// A child that could not start: its ID taken means someone else works on the machine.
fn start_failed(workflow_id: &WorkflowId, error: &ChildWorkflowStartError) -> Outcome {
    let taken = matches!(
        error,
        ChildWorkflowStartError::StartFailed {
            cause: StartChildWorkflowExecutionFailedCause::WorkflowAlreadyExists,
            ..
        }
    );
    child_not_started(workflow_id.as_str(), taken, &error.to_string())
}
