#![doc = include_str!("../../runbooks/delete_machine.md")]

mod cancel;
mod hooks;
mod owner;
mod state;
mod steps;

use nodewright_model::Operation;
use nodewright_model::cancel::{Canceled, DeleteOnCancel, delete_on_cancel};
use nodewright_model::hooks::HookStage;
use nodewright_model::machine::{DeleteMachineRequest, DeletedMachine, MachineStatus, Step};
use nodewright_model::workflow_type;
use temporalio_macros::workflow_methods;
use temporalio_sdk::{WorkflowContext, WorkflowContextView, WorkflowResult};

use self::cancel::restore;
use self::hooks::{HOOKS_PATCH, hold};
use self::owner::OWNER_FIRST_PATCH;
use self::state::Ctx;
pub use self::state::DeleteMachineWorkflow;
use crate::progress::{StepFailed, begin, fact, fail, now, record_failure, rfc3339, succeed};
use crate::removal::{Removal, remove_machine};
use crate::search;
use crate::{activity_options, cancellation, input};

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
        // Runs started before delete hooks existed replay without their looks.
        let with_hooks = ctx.patched(HOOKS_PATCH);
        // Runs started before the owner was checked first replay without that look.
        let owner_first = with_hooks && ctx.patched(OWNER_FIRST_PATCH);
        let steps: &[Step] = if owner_first {
            &Step::DELETE_OWNER_FIRST
        } else if with_hooks {
            &Step::DELETE_WITH_HOOKS
        } else {
            &Step::DELETE
        };
        let mut status = MachineStatus::new("delete", &request.machine, None, steps);
        status.started_at = Some(rfc3339(now(ctx)));
        ctx.state_mut(|s| s.status = Some(status));

        let scope = crate::scope::read(
            ctx,
            // The options of runs recorded before `scope::SCOPE_LOCAL`.
            cancellation::shielded(activity_options::read()),
        )
        .await?;
        let vm_id = scope.vm_id(&request.machine);
        fact(ctx, "vmId", vm_id.clone());
        cancellation::before_first_step(ctx)?;

        match delete(ctx, &request, vm_id.clone(), with_hooks, owner_first).await {
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
            // A removal that failed after the VM delete was sent is a failure, cancelled or not;
            // so is a hold by delete hooks past the hook timeout (the machine stays in place).
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

    /// Every step with its state, the facts gathered, the hold by delete hooks while there is
    /// one, the outcome.
    #[query(name = "status")]
    pub fn status(&self, _ctx: &WorkflowContextView) -> MachineStatus {
        self.status
            .clone()
            .unwrap_or_else(|| MachineStatus::new("delete", "", None, &Step::DELETE))
    }
}

/// The runbook's steps from the look at the VM's owner to the Node's delete.
async fn delete(
    ctx: &mut Ctx,
    request: &DeleteMachineRequest,
    vm_id: String,
    with_hooks: bool,
    owner_first: bool,
) -> Result<DeletedMachine, StepFailed> {
    if owner_first {
        owner::check(ctx, request).await?;
    }
    if with_hooks {
        hold(ctx, request, &vm_id, HookStage::PreDrain).await?;
    }
    begin(ctx, Step::Drain);
    let (cordoned, drained) = steps::drain(ctx, request, &vm_id).await?;
    if cancellation::requested(ctx) {
        return Err(StepFailed::new(Step::DeleteVm, "canceled"));
    }
    if with_hooks {
        hold(ctx, request, &vm_id, HookStage::PreTerminate).await?;
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
    deleted.skipped_hooks = ctx.state(|s| {
        s.status
            .as_ref()
            .map(|status| status.skipped_hooks.clone())
            .unwrap_or_default()
    });
    Ok(deleted)
}

/// `a, b, c`, or `nothing`.
fn or_nothing(parts: &[String]) -> String {
    if parts.is_empty() {
        "nothing".to_owned()
    } else {
        parts.join(", ")
    }
}
