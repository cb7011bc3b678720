//! Removing a machine: its VM (NIC and OS disk cascade), the NICs and disks left behind, and
//! its Node object. Shared by DeleteMachine and CreateMachine's compensation. Every step is
//! shielded from cancellation: a removal, once begun, is the clean-up or the point of no
//! return, and runs to its end.

use nodewright_activities::azure::machines::{
    ArmReadActivities, ArmWriteActivities, AwaitDeletion, BeginVmDelete, DELETE_TO_RESEND,
    DeleteLeftover, FindLeftovers, LeftoverDeleted, VmDeleteStarted,
};
use nodewright_activities::kube::{KubeActivities, MachineNode, NodeChange};
use nodewright_model::ClusterName;
use nodewright_model::arm::WriteStage;
use nodewright_model::machine::{DeletedMachine, Step};
use nodewright_model::names::arm_write_task_queue;
use temporalio_sdk::WorkflowContext;

use crate::progress::{HasStatus, StepFailed, begin, done};
use crate::{activity_options, cancellation};

/// How long a VM deletion may take before the step fails (Azure usually needs 1–3 minutes).
const VM_DELETION_BUDGET: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// How many DELETEs a VM gets when Azure ends them `Failed` with a retryable code.
const MAX_VM_DELETE_SENDS: u32 = 4;

/// Patch: a VM DELETE that ended `Failed` retryably is sent again (runs recorded before it failed
/// the step at once).
const RESEND_VM_DELETE_PATCH: &str = "resend-failed-vm-delete";

/// Whether an activity's failure, or a cause of it, is an application failure of `type_name`.
fn has_failure_type(error: &temporalio_sdk::ActivityExecutionError, type_name: &str) -> bool {
    use temporalio_common::protos::temporal::api::failure::v1::failure::FailureInfo;
    std::iter::successors(error.failure(), |f| f.cause.as_deref()).any(|failure| {
        matches!(
            &failure.failure_info,
            Some(FailureInfo::ApplicationFailureInfo(info)) if info.r#type == type_name
        )
    })
}

/// What to remove.
#[derive(Debug, Clone)]
pub struct Removal {
    /// The owning cluster: nothing without its tag is touched.
    pub cluster: ClusterName,
    /// The machine.
    pub machine: String,
    /// The VM's ARM id (the Node's providerID must name it).
    pub vm_id: String,
}

/// Deletes the VM and waits until it is gone, deletes the leftovers, deletes the Node. With
/// `track`, each step is shown in the status as its own step (DeleteMachine); without, the
/// caller shows one step (compensation).
pub async fn remove_machine<W: HasStatus>(
    ctx: &mut WorkflowContext<W>,
    removal: &Removal,
    track: bool,
) -> Result<DeletedMachine, StepFailed> {
    let writes = arm_write_task_queue(ctx.task_queue());
    let mut result = DeletedMachine {
        machine: removal.machine.clone(),
        ..DeletedMachine::default()
    };

    step_begin(ctx, track, Step::DeleteVm);
    let mut os_disk = None;
    let mut sends = 0;
    loop {
        sends += 1;
        let started = ctx
            .execute_activity(
                ArmWriteActivities::begin_vm_delete,
                BeginVmDelete {
                    cluster: removal.cluster.clone(),
                    machine: removal.machine.clone(),
                },
                cancellation::shielded(activity_options::arm_cleanup_write(
                    &writes,
                    WriteStage::Finishing,
                )),
            )
            .await
            .map_err(|e| StepFailed::from_activity(Step::DeleteVm, &e))?;
        if let VmDeleteStarted::NotOwned { found } = &started {
            let reason = format!(
                "VM {} exists but {}: it is not this machine's, so neither it nor its Node was touched",
                removal.machine,
                nodewright_model::ownership::cluster_tag_mismatch(
                    found.as_deref(),
                    removal.cluster.as_str()
                )
            );
            if track {
                return Err(StepFailed::new(Step::DeleteVm, reason));
            }
            // Compensation: what this run made (NIC, disks, all tagged) still goes; the foreign
            // VM and a Node that may be its own stay.
            result.foreign_vm = Some(reason);
        }
        let VmDeleteStarted::Started {
            operation,
            os_disk_under_vm,
        } = started
        else {
            break;
        };
        result.vm_deleted = true;
        // Seen under the VM (which carries this cluster's tag): the disk is the machine's even
        // when its own tagging failed.
        os_disk = os_disk.or(os_disk_under_vm);
        let awaited = ctx
            .execute_activity(
                ArmReadActivities::await_vm_deletion,
                AwaitDeletion {
                    machine: removal.machine.clone(),
                    operation,
                },
                cancellation::shielded(activity_options::wait(VM_DELETION_BUDGET)),
            )
            .await;
        match awaited {
            Ok(()) => break,
            // Azure ended the DELETE `Failed` with a code that asks for another one.
            Err(e)
                if sends < MAX_VM_DELETE_SENDS
                    && has_failure_type(&e, DELETE_TO_RESEND)
                    && ctx.patched(RESEND_VM_DELETE_PATCH) => {}
            Err(e) => return Err(StepFailed::from_activity(Step::DeleteVm, &e)),
        }
    }
    let vm_detail = if result.vm_deleted {
        "VM deleted (NIC and OS disk with it)"
    } else if result.foreign_vm.is_some() {
        "a VM of that name is not ours: left alone"
    } else {
        "no VM: already gone"
    };
    step_done(ctx, track, Step::DeleteVm, vm_detail);

    step_begin(ctx, track, Step::DeleteLeftovers);
    let leftovers = ctx
        .execute_activity(
            ArmReadActivities::find_leftovers,
            FindLeftovers {
                cluster: removal.cluster.clone(),
                machine: removal.machine.clone(),
                os_disk_under_vm: os_disk.clone(),
            },
            cancellation::shielded(activity_options::read()),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::DeleteLeftovers, &e))?;
    for leftover in leftovers {
        let name = leftover.name.clone();
        let outcome = ctx
            .execute_activity(
                ArmWriteActivities::delete_leftover,
                DeleteLeftover {
                    cluster: removal.cluster.clone(),
                    leftover,
                    machine: Some(removal.machine.clone()),
                    os_disk_under_vm: os_disk.clone(),
                },
                cancellation::shielded(activity_options::arm_cleanup_write(
                    &writes,
                    WriteStage::Finishing,
                )),
            )
            .await
            .map_err(|e| StepFailed::from_activity(Step::DeleteLeftovers, &e))?;
        if outcome == LeftoverDeleted::Deleted {
            result.leftovers_deleted.push(name);
        }
    }
    let leftover_detail = if result.leftovers_deleted.is_empty() {
        "none".to_owned()
    } else {
        result.leftovers_deleted.join(", ")
    };
    step_done(ctx, track, Step::DeleteLeftovers, leftover_detail);

    if result.foreign_vm.is_some() {
        return Ok(result);
    }
    step_begin(ctx, track, Step::DeleteNode);
    let node = ctx
        .execute_activity(
            KubeActivities::delete_node,
            MachineNode {
                node: removal.machine.clone(),
                vm_id: removal.vm_id.clone(),
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::DeleteNode, &e))?;
    result.node_deleted = node == NodeChange::Done;
    let node_detail = match node {
        NodeChange::Done | NodeChange::Already => "Node deleted",
        NodeChange::Absent => "no Node",
        NodeChange::NotOurs => "a Node of that name belongs to another VM: left alone",
    };
    step_done(ctx, track, Step::DeleteNode, node_detail);
    Ok(result)
}

fn step_begin<W: HasStatus>(ctx: &mut WorkflowContext<W>, track: bool, step: Step) {
    if track {
        begin(ctx, step);
    }
}

fn step_done<W: HasStatus>(
    ctx: &mut WorkflowContext<W>,
    track: bool,
    step: Step,
    detail: impl Into<String>,
) {
    if track {
        done(ctx, step, detail);
    }
}
