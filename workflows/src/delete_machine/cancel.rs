//! DeleteMachine's cancellation path before the VM delete was sent: the machine goes back to
//! service as it was.

use nodewright_activities::kube::{KubeActivities, NodeChange, RestoreNode};
use nodewright_model::cancel::Canceled;
use nodewright_model::machine::{DeleteMachineRequest, Step};

use super::state::Ctx;
use crate::progress::{StepFailed, activity_failure_text, begin, done, record_failure};
use crate::{activity_options, cancellation};

/// Gives the machine back after a cancellation at step `at`. A request during the pre-drain
/// hold changed nothing; a drain cancelled with this run restored its Node itself (DrainNode's
/// runbook); a drain that had finished, or `--skip-drain`'s cordon, is undone here.
pub(super) async fn restore(
    ctx: &mut Ctx,
    request: &DeleteMachineRequest,
    vm_id: &str,
    at: Step,
) -> Canceled {
    let mut canceled = Canceled::at(at.as_str(), cancellation::reason(ctx));
    canceled.kept.push(format!(
        "machine {}: its VM was never deleted",
        request.machine
    ));
    if at == Step::CheckOwner {
        canceled.kept.push(
            "canceled while the VM's owner was read: the Node was neither drained nor cordoned, nothing to undo"
                .to_owned(),
        );
        return canceled;
    }
    if at == Step::PreDrainHooks {
        canceled.kept.push(
            "held by pre-drain hooks: the Node was neither drained nor cordoned, nothing to undo"
                .to_owned(),
        );
        return canceled;
    }
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
