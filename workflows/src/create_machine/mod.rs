#![doc = include_str!("../../runbooks/create_machine.md")]

mod cleanup;
mod state;
mod steps;
mod vm;

use chrono::{DateTime, Utc};
use nodewright_model::Operation;
use nodewright_model::cancel::Canceled;
use nodewright_model::machine::adoption::is_name_taken;
use nodewright_model::machine::create::{FailureCleanup, JoinTokenCleanup, decide_failure_cleanup};
use nodewright_model::machine::{CreateMachineRequest, CreatedMachine, MachineStatus, Step};
use nodewright_model::workflow_type;
use temporalio_macros::workflow_methods;
use temporalio_sdk::{WorkflowContext, WorkflowContextView, WorkflowResult};

use self::cleanup::{compensate, delete_join_token, keep};
pub use self::state::CreateMachineWorkflow;
use self::state::Ctx;
use self::steps::create;
use crate::progress::{StepFailed, fact, fail, later, now, record_failure, rfc3339, succeed};
use crate::search;
use crate::{activity_options, cancellation, input};

#[workflow_methods]
impl CreateMachineWorkflow {
    /// Runs the runbook.
    #[run(name = workflow_type::CREATE_MACHINE)]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: CreateMachineRequest,
    ) -> WorkflowResult<CreatedMachine> {
        input::admit_machine_run(
            ctx,
            workflow_type::CREATE_MACHINE,
            &input::Subject {
                cluster: &request.cluster,
                named: Some(("machine", &request.machine)),
            },
            request.check(),
        )?;
        let started = now(ctx);
        announce(ctx, &request, started);
        let deadline = later(started, request.creation_timeout);

        let scope = crate::scope::read(
            ctx,
            // The options of runs recorded before `scope::SCOPE_LOCAL`.
            cancellation::shielded(activity_options::read()),
        )
        .await?;
        let vm_id = scope.vm_id(&request.machine);
        fact(ctx, "vmId", vm_id.clone());
        cancellation::before_first_step(ctx)?;

        match create(ctx, &request, started, deadline).await {
            Ok(created) => {
                let mut summary = format!("machine {} is Ready", request.machine);
                if let Some(JoinTokenCleanup::Failed(reason)) =
                    delete_join_token(ctx, &request).await
                {
                    summary.push_str("; ");
                    summary.push_str(&reason);
                }
                succeed(ctx, summary);
                Ok(created)
            }
            Err(failed) if cancellation::requested(ctx) => {
                record_failure(ctx, &StepFailed::new(failed.step, "canceled"));
                let mut canceled = Canceled::at(failed.step.as_str(), cancellation::reason(ctx));
                // A cancellation always undoes (`decide_failure_cleanup`), kept or not.
                match compensate(ctx, &request, vm_id).await {
                    Ok(removed) => {
                        canceled.undone = removed.undone;
                        canceled.kept.extend(removed.kept);
                    }
                    Err(failure) => canceled.cleanup_failure = Some(failure),
                }
                Err(cancellation::end(ctx, canceled))
            }
            Err(failed) if name_taken(ctx, &failed) => {
                record_failure(ctx, &failed);
                let message = format!(
                    "creating machine {} failed at step {}: {}; nothing was undone: what carries that name is another create's",
                    request.machine, failed.step, failed.reason
                );
                Err(fail(ctx, "NameTaken", message))
            }
            Err(failed) => {
                record_failure(ctx, &failed);
                let cleanup = match decide_failure_cleanup(false, request.keep_on_failure) {
                    FailureCleanup::Keep => {
                        let mut kept = keep(ctx, &request, &failed).await;
                        if let Some(cleanup) = delete_join_token(ctx, &request).await {
                            kept.push_str("; ");
                            kept.push_str(cleanup.text());
                        }
                        kept
                    }
                    FailureCleanup::Compensate => match compensate(ctx, &request, vm_id).await {
                        Ok(removed) => removed.summary(),
                        Err(failure) => failure,
                    },
                };
                let message = format!(
                    "creating machine {} failed at step {}: {}; {cleanup}",
                    request.machine, failed.step, failed.reason
                );
                Err(fail(ctx, "CreateFailed", message))
            }
        }
    }

    /// Every step with its state, the facts gathered, the outcome.
    #[query(name = "status")]
    pub fn status(&self, _ctx: &WorkflowContextView) -> MachineStatus {
        self.status
            .clone()
            .unwrap_or_else(|| MachineStatus::new("create", "", None, &Step::CREATE))
    }
}

/// The patch marker of a create that found its machine name taken by another create's NIC or VM
/// and touches nothing (no undo, no join token deletion: they are the other run's); runs
/// recorded before it had no such failure.
const NAME_TAKEN_PATCH: &str = "create-name-taken-touches-nothing";

/// Whether the create failed because its machine name is another create's
/// (`model::machine::adoption`): found at the NIC or VM step, before this run made anything
/// there.
fn name_taken(ctx: &mut Ctx, failed: &StepFailed) -> bool {
    matches!(failed.step, Step::EnsureNic | Step::CreateVm)
        && is_name_taken(&failed.reason)
        && ctx.patched(NAME_TAKEN_PATCH)
}

/// Search attributes, the status skeleton and the first details line.
fn announce(ctx: &mut Ctx, request: &CreateMachineRequest, started: DateTime<Utc>) {
    ctx.upsert_search_attributes([
        search::CLUSTER.value_set(request.cluster.to_string()),
        search::POOL.value_set(request.pool.clone()),
        search::MACHINE.value_set(request.machine.clone()),
        search::OPERATION.value_set(Operation::Create.to_string()),
    ]);
    let mut status = MachineStatus::new(
        "create",
        &request.machine,
        Some(&request.pool),
        &Step::CREATE,
    );
    status.started_at = Some(rfc3339(started));
    ctx.state_mut(|s| s.status = Some(status));
}
