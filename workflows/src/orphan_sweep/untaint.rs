//! Removing stale outdated taints: a pool's Node carrying `nodewright.io/outdated` while no
//! rollout of the pool runs (rule `stale-outdated-taint`, left by a rollout that was terminated
//! or failed) loses that taint, every other taint kept (`kube.mark_outdated`, which writes only
//! a Node that is the machine's). Not a removal: outside the brake, `max_deletions` and the
//! approval; a dry run only reports it; a frozen sweep never gets here.

use nodewright_activities::azure::machines::ArmScope;
use nodewright_activities::kube::{KubeActivities, MachineNode, MarkOutdated};
use nodewright_model::sweep::{Outcome, SweepAudit, untaint_outcome};

use super::state::Ctx;
use crate::progress::activity_failure_text;
use crate::{activity_options, cancellation};

/// Nodes per `kube.mark_outdated` call.
const NODES_PER_CALL: usize = 100;

/// Removes the stale outdated taints the audit plans, recording each outcome (`Planned` in a dry
/// run; `Skipped` once a cancellation was requested).
pub(super) async fn untaint_stale(
    ctx: &mut Ctx,
    scope: &ArmScope,
    audit: &mut SweepAudit,
    dry_run: bool,
) {
    let pending = audit.pending_untaints();
    for batch in pending.chunks(NODES_PER_CALL) {
        if dry_run || cancellation::requested(ctx) {
            let outcome = if dry_run {
                Outcome::Planned
            } else {
                Outcome::Skipped {
                    reason: "canceled before it started".to_owned(),
                }
            };
            for &index in batch {
                audit.record(index, outcome.clone());
            }
            continue;
        }
        let nodes: Vec<MachineNode> = batch
            .iter()
            .map(|&index| {
                let name = audit.entries[index].decision.name.clone();
                MachineNode {
                    vm_id: scope.vm_id(&name),
                    node: name,
                }
            })
            .collect();
        let marked = ctx
            .execute_activity(
                KubeActivities::mark_outdated,
                MarkOutdated {
                    nodes,
                    outdated: false,
                },
                cancellation::shielded(activity_options::kube_write()),
            )
            .await;
        for &index in batch {
            let outcome = match &marked {
                Ok(found) => {
                    let name = &audit.entries[index].decision.name;
                    untaint_outcome(
                        found.changed.contains(name),
                        found.absent.contains(name),
                        found.not_ours.contains(name),
                    )
                }
                Err(e) => Outcome::Failed {
                    error: activity_failure_text(e),
                },
            };
            audit.record(index, outcome);
        }
    }
}
