//! How RollingUpdate ends other than complete: the cancellation path (children in flight end by
//! their own runbooks, a last look, the taint removed, the status booked), and the outdated
//! taint removed from the pool's machines when the rollout ends aborted or cancelled
//! (`model::rollout::to_clear_on_end` picks them), so no Node keeps a taint nobody owns.

use std::collections::BTreeSet;

use nodewright_activities::azure::machines::ArmScope;
use nodewright_activities::kube::{KubeActivities, MachineNode, MarkOutdated};
use nodewright_model::rollout::{
    ChildEnd, InFlight, ObservedMachine, RolloutOutcome, RolloutRequest, to_clear_on_end,
};
use temporalio_sdk::{ActivityOptions, WorkflowContext};

use super::children::{Child, child_finished, first_finished, show_in_flight};
use super::inherited;
use super::look::{decide, look_with};
use super::state::HasRollout;
use super::status::{finish, note, record_look};
use super::{Finish, RollingUpdateWorkflow};
use crate::progress::{activity_failure_text, now};
use crate::{activity_options, cancellation};

/// Patch marker: an aborted or cancelled rollout removes the outdated taint from the pool's
/// machines before it ends, as a completed one does (runs recorded before it left the taint to
/// the orphan sweep or to hand); asked only when a machine carries it.
const CLEAR_ON_END_PATCH: &str = "rollout-clears-outdated-on-end";

/// Removes the outdated taint from the machines of the last look (`machines`) that carry it or
/// that this run tainted (`marked`), with the activity's `options` (shielded on the
/// cancellation path). A failure is noted with the command that removes it by hand; the
/// orphan sweep removes it too (rule `stale-outdated-taint`).
pub(super) async fn clear_on_end<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    scope: &ArmScope,
    machines: &[ObservedMachine],
    marked: &BTreeSet<String>,
    options: ActivityOptions,
) {
    let nodes: Vec<MachineNode> = to_clear_on_end(machines, marked)
        .iter()
        .map(|m| MachineNode {
            node: m.name.clone(),
            vm_id: scope.vm_id(&m.name),
        })
        .collect();
    if nodes.is_empty() || !ctx.patched(CLEAR_ON_END_PATCH) {
        return;
    }
    let cleared = ctx
        .execute_activity(
            KubeActivities::mark_outdated,
            MarkOutdated {
                nodes,
                outdated: false,
            },
            options,
        )
        .await;
    if let Err(e) = cleared {
        note(
            ctx,
            format!(
                "could not remove the outdated taint ({}); the orphan sweep removes it, or by hand: kubectl taint nodes -l nodewright.io/pool={} nodewright.io/outdated-",
                activity_failure_text(&e),
                request.pool.name
            ),
        );
    }
}

/// The cancellation path: nothing new starts; the children in flight were asked to cancel with
/// this run (their cancellation inherits it) and each ends by its own runbook; once all have
/// ended, a last look, the outdated taint removed from what it saw, and the rollout ends
/// Canceled with what was done.
pub(super) async fn cancel(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    scope: &ArmScope,
    mut children: Vec<Child>,
    mut inherited: Vec<InFlight>,
) -> Finish {
    let because = match cancellation::reason(ctx) {
        Some(reason) => format!("canceled: {reason}"),
        None => "canceled".to_owned(),
    };
    ctx.state_mut(|s| {
        s.state
            .with_status(|status| status.paused_because = Some(because.clone()));
    });
    show_in_flight(ctx, &children, &inherited);
    let mut canceled_deletes = Vec::new();
    let mut book =
        |ctx: &mut WorkflowContext<RollingUpdateWorkflow>, entry: InFlight, outcome: ChildEnd| {
            if outcome.waits_for_last_look(entry.kind) {
                // Booked after the last look: past its point of no return it finished the deletion.
                canceled_deletes.push((entry, outcome));
            } else {
                child_finished(ctx, request, entry, outcome);
            }
        };
    // The children of the run before are not this run's: asked to cancel as its own are.
    for (entry, outcome) in inherited::cancel_all(ctx, &mut inherited, &because).await {
        book(ctx, entry, outcome);
    }
    while !children.is_empty() {
        let (index, outcome) = first_finished(&mut children).await;
        let child = children.remove(index);
        book(ctx, child.entry, outcome);
        show_in_flight(ctx, &children, &inherited);
    }
    // A last look, shielded from the cancellation: the status shows the pool as the rollout
    // leaves it, and counts the deletions that finished.
    let shielded = cancellation::shielded(activity_options::read());
    let seen = match look_with(ctx, request, &[], shielded).await {
        Ok(machines) => {
            let at = now(ctx).timestamp();
            let decided = decide(ctx, request, &machines, at);
            record_look(ctx, request, &machines, &decided.counts, decided.holdup, at);
            Some(machines)
        }
        Err(reason) => {
            note(
                ctx,
                format!("could not look at the pool after the cancellation ({reason})"),
            );
            None
        }
    };
    if let Some(machines) = &seen {
        // Shielded too: the taint would otherwise stay with no rollout to remove it.
        let options = cancellation::shielded(activity_options::kube_write());
        clear_on_end(ctx, request, scope, machines, &BTreeSet::new(), options).await;
    }
    let left: Option<Vec<&str>> = seen
        .as_ref()
        .map(|machines| machines.iter().map(|m| m.name.as_str()).collect());
    for (entry, outcome) in canceled_deletes {
        let outcome = outcome.after_last_look(&entry.machine, left.as_deref());
        child_finished(ctx, request, entry, outcome);
    }
    Finish::Canceled(Box::new(
        finish(ctx, request, RolloutOutcome::Canceled).await,
    ))
}
