//! Steps 4–5 of the runbook: the VM's PUT (or the adoption of the one an earlier attempt
//! started), its provisioning, and its OS disk's tags. A create Azure ends `Failed` with a code
//! it means as "try again" is sent again, at most [`MAX_VM_CREATE_SENDS`] PUTs in all; a failure
//! to tag the OS disk is a warning, never a reason to undo a VM that provisioned well.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use nodewright_activities::azure::machines::{
    ArmReadActivities, ArmWriteActivities, AwaitVm, BeginVmCreate, TagOsDisk, VmCreateStarted,
    VmProvisioned,
};
use nodewright_model::arm::WriteStage;
use nodewright_model::drain::{TAG_DRAIN, policy_to_tag};
use nodewright_model::machine::create::{
    MAX_VM_CREATE_SENDS, OsDiskTagging, VmCreateFailed, decide_vm_create_failed,
    os_disk_tags_outcome, past_creation_timeout,
};
use nodewright_model::machine::{CreateMachineRequest, Step, os_disk_name};
use nodewright_model::names::arm_write_task_queue;

use super::state::Ctx;
use crate::progress::{StepFailed, activity_failure_text, begin, done, fact, left_until, warn};
use crate::{activity_options, cancellation};

/// The patch marker of the VM's `nodewright.io-drain` tag (the pool's drain settings where a
/// Node cannot write them): runs recorded before it created their VM without the tag.
const DRAIN_TAG_PATCH: &str = "vm-drain-tag";

/// The patch marker of a VM create sent again after Azure ended it `Failed` with a retryable
/// code: runs recorded before it failed the step at once (and compensated).
const RESEND_VM_CREATE_PATCH: &str = "resend-failed-vm-create";

/// The patch marker of a failed OS disk tagging that warns instead of failing the create:
/// runs recorded before it failed the step (and compensated the VM).
const TAG_FAILURE_WARNS_PATCH: &str = "os-disk-tag-failure-warns";

/// The machine's VM as it provisioned.
pub(super) struct ProvisionedVm {
    /// Its ARM id.
    pub vm_id: String,
    /// Whether this run adopted a VM an earlier attempt had started.
    pub adopted: bool,
}

/// Creates (or adopts) the VM on the NIC `nic_id` with `tags` (and its drain tag), waits for
/// its provisioning until `deadline`, sending the create again on a retryable failure, and tags
/// its OS disk with `tags`.
pub(super) async fn create_vm(
    ctx: &mut Ctx,
    request: &CreateMachineRequest,
    nic_id: &str,
    tags: &BTreeMap<String, String>,
    deadline: DateTime<Utc>,
) -> Result<ProvisionedVm, StepFailed> {
    let writes = arm_write_task_queue(ctx.task_queue());
    let zone = request.chosen_zone();
    let mut vm_tags = tags.clone();
    let mut sends = 1;
    let mut adopted = false;
    let (vm_id, os_disk) = loop {
        cancellation::guard(ctx, Step::CreateVm)?;
        begin(ctx, Step::CreateVm);
        if sends == 1 {
            if let Some(zone) = &zone {
                fact(ctx, "zone", zone.clone());
            }
            // After the step began, as recorded runs have it.
            if ctx.patched(DRAIN_TAG_PATCH) {
                vm_tags.insert(TAG_DRAIN.to_owned(), policy_to_tag(&request.drain));
            }
        }
        let vm = ctx
            .execute_activity(
                ArmWriteActivities::begin_vm_create,
                BeginVmCreate {
                    cluster: request.cluster.clone(),
                    machine: request.machine.clone(),
                    template: request.template.clone(),
                    nic_id: nic_id.to_owned(),
                    zone: zone.clone(),
                    tags: vm_tags.clone(),
                    capacity_type: Some(request.chosen_capacity_type()),
                    resend: sends > 1,
                },
                cancellation::shielded(activity_options::arm_write(&writes, WriteStage::Building)),
            )
            .await
            .map_err(|e| StepFailed::from_activity(Step::CreateVm, &e))?;
        let operation = match vm {
            VmCreateStarted::Started { operation } => operation,
            VmCreateStarted::Adopted { .. } => {
                adopted |= sends == 1;
                None
            }
        };
        let detail = match (sends, &operation) {
            (1, None) if adopted => "adopted the VM an earlier attempt started".to_owned(),
            (1, _) => "PUT accepted".to_owned(),
            (send, _) => format!("PUT sent again ({send} of {MAX_VM_CREATE_SENDS})"),
        };
        done(ctx, Step::CreateVm, detail);

        cancellation::guard(ctx, Step::ProvisionVm)?;
        begin(ctx, Step::ProvisionVm);
        let provisioned = ctx
            .execute_activity(
                ArmReadActivities::await_vm,
                AwaitVm {
                    machine: request.machine.clone(),
                    operation,
                    deadline,
                },
                activity_options::wait(left_until(ctx, deadline)),
            )
            .await
            .map_err(|e| StepFailed::from_activity(Step::ProvisionVm, &e))?;
        match provisioned {
            VmProvisioned::Succeeded { vm_id, os_disk } => break (vm_id, os_disk),
            VmProvisioned::TimedOut { provisioning_state } => {
                let state = provisioning_state.as_deref().unwrap_or("unknown");
                return Err(StepFailed::new(
                    Step::ProvisionVm,
                    past_creation_timeout(
                        "the VM did not finish provisioning",
                        request.creation_timeout,
                        &format!("provisioningState {state}"),
                    ),
                ));
            }
            VmProvisioned::Failed { code, reason, .. } => {
                match decide_vm_create_failed(&code, sends) {
                    VmCreateFailed::Resend { send, detail }
                        if ctx.patched(RESEND_VM_CREATE_PATCH) =>
                    {
                        done(ctx, Step::ProvisionVm, detail.clone());
                        warn(ctx, detail);
                        sends = send;
                    }
                    VmCreateFailed::Resend { .. } | VmCreateFailed::Fail => {
                        return Err(StepFailed::new(Step::ProvisionVm, reason));
                    }
                }
            }
        }
    };

    let disk = os_disk.unwrap_or_else(|| os_disk_name(&request.machine));
    let tagging = match ctx
        .execute_activity(
            ArmWriteActivities::tag_os_disk,
            TagOsDisk {
                disk: disk.clone(),
                tags: tags.clone(),
            },
            cancellation::shielded(activity_options::arm_write(&writes, WriteStage::Finishing)),
        )
        .await
    {
        Ok(true) => OsDiskTagging::Tagged,
        Ok(false) => OsDiskTagging::Unchanged,
        Err(e) if ctx.patched(TAG_FAILURE_WARNS_PATCH) => {
            OsDiskTagging::Failed(activity_failure_text(&e))
        }
        Err(e) => return Err(StepFailed::from_activity(Step::ProvisionVm, &e)),
    };
    let outcome = os_disk_tags_outcome(&disk, &tagging);
    if let Some(warning) = outcome.warning {
        warn(ctx, warning);
    }
    done(ctx, Step::ProvisionVm, outcome.detail);
    Ok(ProvisionedVm { vm_id, adopted })
}
