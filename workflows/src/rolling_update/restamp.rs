//! Drain settings changed without the template: the rollout writes them on the new template's
//! machines, a batch per look, the Node's annotation and stamp first (`kube.restamp_drain_policy`,
//! an operator's edits kept), then the VM's tag (`azure.retag_drain`). `model::rollout::restamp`
//! picks the machines; the status counts them, names the kept edits and the machines given up on.
//! The rollout completes only once none is pending.

use std::collections::BTreeMap;

use nodewright_activities::azure::machines::{ArmScope, ArmWriteActivities, RetagDrain};
use nodewright_activities::kube::{KubeActivities, MachineNode, RestampDrain};
use nodewright_model::arm::WriteStage;
use nodewright_model::names::arm_write_task_queue;
use nodewright_model::rollout::{
    DrainStamps, DrainWanted, ObservedMachine, RolloutRequest, restamp::RESTAMP_BATCH, to_restamp,
};
use temporalio_sdk::WorkflowContext;

use super::state::HasRollout;
use crate::activity_options;
use crate::progress::activity_failure_text;

/// The patch that restamps the new template's machines whose drain settings are not the pool's
/// (runs recorded before it completed without). Asked only when a machine needs it.
const RESTAMP_PATCH: &str = "rollout-restamps-drain";

/// Restamps the next batch of machines that need it; whether machines are still pending after
/// it (the rollout does not complete while they are).
pub async fn restamp_drain<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    scope: &ArmScope,
    machines: &[ObservedMachine],
) -> bool {
    let wanted = DrainWanted::of(&request.pool.drain);
    // Decided on the lists the run holds, without copying them.
    let (todo, mut stamps) = ctx.state(|s| {
        let rollout = s.rollout();
        let stamps = rollout
            .status
            .as_ref()
            .and_then(|status| status.drain_stamps.clone());
        let given_up = stamps
            .as_ref()
            .map(DrainStamps::given_up)
            .unwrap_or_default();
        let todo = match (&rollout.known_vms, &rollout.known_nodes) {
            (Some((_, vms)), Some((_, nodes))) => to_restamp(
                machines,
                vms,
                nodes,
                &request.pool.template_hash,
                &wanted,
                &given_up,
            ),
            // Runs that list the pool whole (recorded before looks kept the lists) never
            // restamp.
            _ => Vec::new(),
        };
        (todo, stamps)
    });
    if todo.is_empty() {
        if let Some(stamps) = stamps.as_mut().filter(|s| s.pending > 0) {
            stamps.pending = 0;
            show(ctx, stamps.clone());
        }
        return false;
    }
    if !ctx.patched(RESTAMP_PATCH) {
        return false;
    }
    let mut stamps = stamps.unwrap_or_default();
    let batch = &todo[..todo.len().min(RESTAMP_BATCH)];
    let mut annotated: Vec<String> = batch
        .iter()
        .filter(|r| !r.annotation)
        .map(|r| r.machine.clone())
        .collect();
    let to_annotate: Vec<MachineNode> = batch
        .iter()
        .filter(|r| r.annotation)
        .map(|r| MachineNode {
            node: r.machine.clone(),
            vm_id: scope.vm_id(&r.machine),
        })
        .collect();
    if !to_annotate.is_empty() {
        let tags: BTreeMap<String, String> = batch
            .iter()
            .filter(|r| r.annotation)
            .filter_map(|r| Some((r.machine.clone(), r.tag_now.clone()?)))
            .collect();
        let written = ctx
            .execute_activity(
                KubeActivities::restamp_drain_policy,
                RestampDrain {
                    nodes: to_annotate.clone(),
                    tags,
                    policy: request.pool.drain.clone(),
                },
                activity_options::kube_write(),
            )
            .await;
        match written {
            Ok(done) => {
                for gone in done.absent.iter().chain(&done.not_ours) {
                    stamps.failed(gone, "its Node is gone or not the machine's".to_owned());
                }
                stamps.kept_edits.extend(done.kept);
                annotated.extend(done.stamped);
            }
            Err(error) => {
                let reason = activity_failure_text(&error);
                for node in &to_annotate {
                    stamps.failed(&node.node, reason.clone());
                }
            }
        }
    }
    // The tags of the machines whose Node carries the new settings now.
    let to_tag: Vec<String> = batch
        .iter()
        .filter(|r| r.tag && annotated.contains(&r.machine))
        .map(|r| r.machine.clone())
        .collect();
    let mut done: Vec<String> = annotated
        .iter()
        .filter(|m| !to_tag.contains(m))
        .cloned()
        .collect();
    if !to_tag.is_empty() {
        let writes = arm_write_task_queue(ctx.task_queue());
        let tagged = ctx
            .execute_activity(
                ArmWriteActivities::retag_drain,
                RetagDrain {
                    cluster: request.cluster.clone(),
                    machines: to_tag.clone(),
                    value: wanted.tag.clone(),
                },
                activity_options::arm_write(&writes, WriteStage::Starting),
            )
            .await;
        match tagged {
            Ok(result) => {
                for gone in result.absent.iter().chain(&result.not_ours) {
                    stamps.failed(gone, "its VM is gone or not the machine's".to_owned());
                }
                done.extend(result.tagged);
            }
            Err(error) => {
                let reason = activity_failure_text(&error);
                for machine in &to_tag {
                    stamps.failed(machine, reason.clone());
                }
            }
        }
    }
    for machine in &done {
        stamps.failures.remove(machine);
    }
    let given_up = stamps.given_up();
    let pending = todo
        .iter()
        .filter(|r| !done.contains(&r.machine) && !given_up.contains(&r.machine))
        .count();
    stamps.restamped += u32::try_from(done.len()).unwrap_or(u32::MAX);
    stamps.pending = u32::try_from(pending).unwrap_or(u32::MAX);
    show(ctx, stamps);
    pending > 0
}

fn show<W: HasRollout>(ctx: &mut WorkflowContext<W>, stamps: DrainStamps) {
    ctx.state_mut(|s| {
        s.rollout_mut()
            .with_status(|status| status.drain_stamps = Some(stamps));
    });
}
