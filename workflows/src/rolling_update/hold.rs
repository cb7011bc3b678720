//! RollingUpdate's do-not-disrupt check: before a plan's deletions start, each victim's Node and
//! pods are read for do-not-disrupt marks (`kube.disruption_marks`); `model::disruption` decides
//! whether the deletion goes ahead, and `model::rollout::hold` keeps the held machines, which the
//! next plan passes over.

use nodewright_activities::kube::{DisruptionMarksOf, KubeActivities, NodeMarks};
use nodewright_model::disruption::{
    DisruptionDecision, DoNotDisrupt, Marked, decide_before_drain, describe,
};
use nodewright_model::rollout::{Plan, disruption_of, hold, release};
use temporalio_sdk::WorkflowContext;
use temporalio_sdk::workflows::join_all;

use super::state::HasRollout;
use super::status::note;
use crate::activity_options;
use crate::progress::activity_failure_text;

/// The patch that reads the victims' marks before their deletions start; runs recorded before it
/// read none.
const DO_NOT_DISRUPT_PATCH: &str = "rollout-honours-do-not-disrupt";

/// Reads the marks of every machine `decided` deletes, at `at` (Unix seconds). Returns `true` when
/// a voluntary deletion (an outdated or surplus machine) is held: then nothing of this plan may
/// start, and the rollout plans again without that machine. An unhealthy machine is deleted
/// anyway; the marks it goes past are named in the status. Marks that cannot be read hold a
/// voluntary deletion too (the reason says so). When the pool's drain has a hard deadline
/// (`drain_keeps_pods`), only a Node mark holds a voluntary deletion: the drain keeps marked
/// pods itself until that deadline, and the status says so.
pub async fn hold_marked<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    decided: &Plan,
    drain_keeps_pods: bool,
    at: i64,
) -> bool {
    if decided.delete.is_empty() || !ctx.patched(DO_NOT_DISRUPT_PATCH) {
        return false;
    }
    let reads = decided.delete.iter().map(|victim| {
        ctx.execute_activity(
            KubeActivities::disruption_marks,
            DisruptionMarksOf {
                node: victim.name.clone(),
            },
            activity_options::read(),
        )
    });
    let found = join_all(reads).await;
    let mut held_some = false;
    for (victim, read) in decided.delete.iter().zip(found) {
        let disruption = disruption_of(victim.reason);
        let marks = match read {
            Ok(NodeMarks { marks, .. }) => marks,
            Err(error) if disruption.is_voluntary() => {
                let reason = format!(
                    "its do-not-disrupt marks could not be read ({})",
                    activity_failure_text(&error)
                );
                keep_held(ctx, &victim.name, reason, at);
                held_some = true;
                continue;
            }
            Err(error) => {
                note(
                    ctx,
                    format!(
                        "deleting {} machine {} without reading its do-not-disrupt marks ({})",
                        victim.reason,
                        victim.name,
                        activity_failure_text(&error)
                    ),
                );
                continue;
            }
        };
        let pod_marks: Vec<DoNotDisrupt> = marks
            .iter()
            .filter(|mark| mark.marked != Marked::Node)
            .cloned()
            .collect();
        let decision = decide_before_drain(disruption, marks, drain_keeps_pods);
        if drain_keeps_pods
            && disruption.is_voluntary()
            && !pod_marks.is_empty()
            && matches!(decision, DisruptionDecision::Proceed { .. })
        {
            note(
                ctx,
                format!(
                    "deleting {} machine {}: its drain keeps {} running until the drain's hard deadline (drain.terminationGracePeriod)",
                    victim.reason,
                    victim.name,
                    describe(&pod_marks)
                ),
            );
        }
        match decision {
            DisruptionDecision::Hold { marks } => {
                let reason = describe(&marks);
                note(
                    ctx,
                    format!(
                        "machine {} ({}) left alone for now: do not disrupt: {reason}",
                        victim.name, victim.reason
                    ),
                );
                keep_held(ctx, &victim.name, reason, at);
                held_some = true;
            }
            DisruptionDecision::Proceed { overridden } if !overridden.is_empty() => {
                note(
                    ctx,
                    format!(
                        "deleting {} machine {} past do-not-disrupt on {}",
                        victim.reason,
                        victim.name,
                        describe(&overridden)
                    ),
                );
                let_go(ctx, &victim.name);
            }
            DisruptionDecision::Proceed { .. } => let_go(ctx, &victim.name),
        }
    }
    held_some
}

/// Records `machine` as held with `reason`.
fn keep_held<W: HasRollout>(ctx: &mut WorkflowContext<W>, machine: &str, reason: String, at: i64) {
    ctx.state_mut(|s| {
        s.rollout_mut()
            .with_status(|status| hold(&mut status.held, machine, reason, at));
    });
}

/// Forgets `machine`'s hold: its deletion goes ahead.
fn let_go<W: HasRollout>(ctx: &mut WorkflowContext<W>, machine: &str) {
    ctx.state_mut(|s| {
        s.rollout_mut()
            .with_status(|status| release(&mut status.held, machine));
    });
}
