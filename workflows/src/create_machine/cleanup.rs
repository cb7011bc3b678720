//! What a create that did not reach Ready does with what it made: undo it (compensation, with
//! the join token first), or keep it marked for debugging (`keepOnFailure`); and the join
//! token's deletion after Ready. All of it is shielded from cancellation.

use nodewright_activities::azure::machines::{ArmWriteActivities, TagMachine};
use nodewright_activities::kube::{DeleteBootstrapToken, KubeActivities, TokenDeleted};
use nodewright_model::arm::WriteStage;
use nodewright_model::bootstrap_token::{NAMESPACE as TOKEN_NAMESPACE, machine_secret_name};
use nodewright_model::machine::create::{Compensated, JoinTokenCleanup, compensation_failed};
use nodewright_model::machine::{CreateMachineRequest, Step};
use nodewright_model::names::arm_write_task_queue;
use nodewright_model::ownership::{TAG_KEPT, kept_marker, kept_tags};

use super::state::Ctx;
use crate::progress::{
    StepFailed, activity_failure_text, begin, done, now, record_failure, rfc3339,
};
use crate::removal::{Removal, remove_machine};
use crate::{activity_options, cancellation};

/// The patch marker of the join-token deletion (after Ready and after any undo): runs recorded
/// before it replay without the step. Only templates with `bootstrapToken` reach it.
const JOIN_TOKEN_PATCH: &str = "bootstrap-token-cleanup";

/// Removes what the create made (shielded from cancellation, as all of `remove_machine`);
/// returns what was removed, or why it could not be.
pub(super) async fn compensate(
    ctx: &mut Ctx,
    request: &CreateMachineRequest,
    vm_id: String,
) -> Result<Compensated, String> {
    // The token first: a VM still booting can no longer join with it.
    let token = delete_join_token(ctx, request).await;
    begin(ctx, Step::Compensate);
    let removal = Removal {
        cluster: request.cluster.clone(),
        machine: request.machine.clone(),
        vm_id,
    };
    match remove_machine(ctx, &removal, false).await {
        Ok(removed) => {
            let compensated = Compensated::of(
                removed.what_went(),
                removed.foreign_vm.clone(),
                token.as_ref(),
                &token_secret(request),
            );
            done(ctx, Step::Compensate, compensated.summary());
            Ok(compensated)
        }
        Err(failed) => {
            let reason = compensation_failed(failed.step.as_str(), &failed.reason, token.as_ref());
            record_failure(ctx, &StepFailed::new(Step::Compensate, reason.clone()));
            Err(reason)
        }
    }
}

/// Deletes the machine's minted join token (`kube.delete_bootstrap_token`, shielded from
/// cancellation) when its template has `bootstrapToken`: after the Node is Ready, and before any
/// undo. `None` when the template mints no token (or the run was recorded before this step).
pub(super) async fn delete_join_token(
    ctx: &mut Ctx,
    request: &CreateMachineRequest,
) -> Option<JoinTokenCleanup> {
    if !request.mints_join_token() || !ctx.patched(JOIN_TOKEN_PATCH) {
        return None;
    }
    let secret = token_secret(request);
    begin(ctx, Step::DeleteJoinToken);
    let deleted = ctx
        .execute_activity(
            KubeActivities::delete_bootstrap_token,
            DeleteBootstrapToken {
                cluster: request.cluster.clone(),
                machine: request.machine.clone(),
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await;
    Some(match deleted {
        Ok(deleted) => {
            let detail = deleted.summary(&secret);
            done(ctx, Step::DeleteJoinToken, detail.clone());
            if deleted == TokenDeleted::Deleted {
                JoinTokenCleanup::Deleted(detail)
            } else {
                JoinTokenCleanup::Untouched(detail)
            }
        }
        Err(error) => {
            let reason = format!(
                "deleting the join token Secret {secret} failed: {}; the token stops working at its expiration (bootstrapToken.ttl after it was minted)",
                activity_failure_text(&error)
            );
            record_failure(ctx, &StepFailed::new(Step::DeleteJoinToken, reason.clone()));
            JoinTokenCleanup::Failed(reason)
        }
    })
}

/// Marks what a failed create keeps (`keepOnFailure`) so that the orphan sweep leaves it: the
/// kept marker (`<time>: <reason>`) and the create's end merged into the tags of the machine's
/// VM, NIC and OS disk (shielded from cancellation, as compensation is). Returns what the
/// failure message says of it; a marking that fails is said there, the run fails either way.
pub(super) async fn keep(
    ctx: &mut Ctx,
    request: &CreateMachineRequest,
    failed: &StepFailed,
) -> String {
    begin(ctx, Step::Keep);
    let writes = arm_write_task_queue(ctx.task_queue());
    let ended = rfc3339(now(ctx));
    let reason = format!("create failed at step {}: {}", failed.step, failed.reason);
    let input = TagMachine {
        cluster: request.cluster.clone(),
        machine: request.machine.clone(),
        tags: kept_tags(kept_marker(&ended, &reason), &ended),
    };
    let kept = "kept the VM, NIC, disk and Node for debugging (--keep-on-failure)";
    match ctx
        .execute_activity(
            ArmWriteActivities::tag_machine,
            input,
            cancellation::shielded(activity_options::arm_write(&writes, WriteStage::Starting)),
        )
        .await
    {
        Ok(tagged) => {
            let detail = tagged.summary();
            done(ctx, Step::Keep, detail.clone());
            format!(
                "{kept}: {detail} with the {TAG_KEPT} tag, which the orphan sweep respects until it is removed"
            )
        }
        Err(error) => {
            let reason = format!(
                "marking them with the {TAG_KEPT} tag failed: {}; the orphan sweep may remove them",
                activity_failure_text(&error)
            );
            record_failure(ctx, &StepFailed::new(Step::Keep, reason.clone()));
            format!("{kept}, but {reason}")
        }
    }
}

/// The machine's join token Secret, `<namespace>/<name>`, for messages.
fn token_secret(request: &CreateMachineRequest) -> String {
    format!(
        "{TOKEN_NAMESPACE}/{}",
        machine_secret_name(&request.cluster, &request.machine)
    )
}
