//! DeleteMachine's first step, `check-owner`: one GET of the VM (`azure.read_vm_owner`) and
//! `model::machine::owner::before_cordon`, so that a VM without this cluster's and machine's
//! tags is refused before anything is cordoned, drained or deleted. A VM already gone lets the
//! run go on: the Node steps recognise the machine's Node by providerID and label.

use nodewright_activities::azure::machines::{ArmReadActivities, ReadVmOwner};
use nodewright_model::machine::owner::{OwnerVerdict, before_cordon};
use nodewright_model::machine::{DeleteMachineRequest, Step};

use super::state::Ctx;
use crate::progress::{StepFailed, begin, done};
use crate::{activity_options, cancellation};

/// Patch marker of the look at the VM's owner before the cordon: runs started before it replay
/// without (their owner check is the VM delete's own, after the drain).
pub(super) const OWNER_FIRST_PATCH: &str = "delete-owner-first";

/// The `check-owner` step: fails it, nothing touched, when the VM is someone else's.
pub(super) async fn check(ctx: &mut Ctx, request: &DeleteMachineRequest) -> Result<(), StepFailed> {
    begin(ctx, Step::CheckOwner);
    let found = ctx
        .execute_activity(
            ArmReadActivities::read_vm_owner,
            ReadVmOwner {
                machine: request.machine.clone(),
            },
            cancellation::shielded(activity_options::read()),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::CheckOwner, &e))?;
    match before_cordon(&found, &request.cluster, &request.machine) {
        OwnerVerdict::Ours => {
            done(
                ctx,
                Step::CheckOwner,
                "the VM carries this cluster's and machine's tags",
            );
            Ok(())
        }
        OwnerVerdict::NoVm => {
            done(
                ctx,
                Step::CheckOwner,
                "no VM: its Node is recognised by its providerID and nodewright.io/machine label",
            );
            Ok(())
        }
        OwnerVerdict::NotOurs(reason) => Err(StepFailed::new(Step::CheckOwner, reason)),
    }
}
