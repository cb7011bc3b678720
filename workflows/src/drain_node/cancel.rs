//! The cancellation path: a volume move under way is let finish (shielded), then the Node is
//! given back; what was undone and what was kept is reported.

use std::time::Duration;

use nodewright_activities::kube::{KubeActivities, NodeChange, RestoreNode};
use nodewright_model::cancel::{Canceled, CordonOnCancel, cordon_on_cancel};
use nodewright_model::drain::{
    InFlightEnd, detach_budget, given_back, in_flight_kept, kept_after_cancel,
};
use nodewright_model::machine::Step;

use super::state::{Ctx, Drain};
use super::volumes::{await_detached, await_reattached};
use crate::progress::{StepFailed, activity_failure_text, begin, done, record_failure};
use crate::{activity_options, cancellation};

/// The cancellation path: a volume move under way is let finish (shielded), so its volume ends
/// attached to exactly one node; then the Node is given back — the draining taint and the
/// `Terminating` condition removed, uncordoned unless it was cordoned before the drain. Pods
/// already moved stay where they went.
pub(super) async fn give_back(ctx: &mut Ctx, state: &mut Drain, at: Step) -> Canceled {
    let mut canceled = Canceled::at(at.as_str(), cancellation::reason(ctx));
    state.shielded = true;
    begin(ctx, Step::Restore);
    if let Some(volume_pod) = state.in_flight.take() {
        let grace = Duration::from_secs(volume_pod.pod.grace_period_seconds);
        let budget = detach_budget(grace, state.policy.volume_detach_timeout);
        // Shielded waits: force mode never ends them early.
        let end = match await_detached(ctx, state, &volume_pod, budget).await {
            Ok((pending, _)) if pending.is_empty() => {
                match await_reattached(ctx, state, &volume_pod).await {
                    Ok(_) => InFlightEnd::Moved,
                    Err(failed) => InFlightEnd::ReattachUnconfirmed(failed.reason),
                }
            }
            Ok((pending, _)) => InFlightEnd::StillAttached {
                pending,
                waited: budget,
            },
            Err(failed) => InFlightEnd::DetachUnconfirmed(failed.reason),
        };
        canceled
            .kept
            .push(in_flight_kept(&volume_pod.pod.key(), &end));
    }
    canceled.kept.extend(kept_after_cancel(&state.result));
    let keep_cordoned =
        cordon_on_cancel(state.result.cordoned_before) == CordonOnCancel::KeepCordoned;
    let node = &state.request.node;
    let restored = ctx
        .execute_activity(
            KubeActivities::restore_node,
            RestoreNode {
                node: node.clone(),
                vm_id: state.vm_id.clone(),
                keep_cordoned,
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await;
    match restored {
        Ok(NodeChange::Done | NodeChange::Already) => {
            let what = given_back(node, keep_cordoned, state.request.purpose);
            canceled.undone.push(what.clone());
            done(ctx, Step::Restore, what);
        }
        Ok(NodeChange::Absent) => done(ctx, Step::Restore, "the Node is gone"),
        Ok(NodeChange::NotOurs) => done(
            ctx,
            Step::Restore,
            "a Node of that name belongs to another VM: left alone",
        ),
        Err(error) => {
            let reason = activity_failure_text(&error);
            record_failure(ctx, &StepFailed::new(Step::Restore, reason.clone()));
            canceled.cleanup_failure = Some(format!(
                "giving Node {node} back failed: {reason}; run `nodewright machine uncordon {node}`"
            ));
        }
    }
    canceled
}
