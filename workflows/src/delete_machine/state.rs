//! DeleteMachine's workflow state: the status its query answers and what the cancellation path
//! needs to know.

use nodewright_model::drain::DrainedNode;
use nodewright_model::machine::{MachineStatus, Step};
use temporalio_macros::workflow;
use temporalio_sdk::WorkflowContext;

use crate::progress::HasStatus;

/// Deletes one machine; see the runbook (`crate::delete_machine`).
#[workflow]
#[derive(Default)]
pub struct DeleteMachineWorkflow {
    pub(super) status: Option<MachineStatus>,
    /// Set once the VM delete is about to be sent: past this, a cancellation lets the deletion
    /// finish.
    pub(super) vm_delete_sent: bool,
    /// What the drain child returned, once it has.
    pub(super) drained: Option<DrainedNode>,
    /// `--skip-drain` found the Node cordoned already: a cancellation keeps it cordoned.
    pub(super) cordoned_before: bool,
}

impl HasStatus for DeleteMachineWorkflow {
    fn status_mut(&mut self) -> &mut MachineStatus {
        self.status
            .get_or_insert_with(|| MachineStatus::new("delete", "", None, &Step::DELETE))
    }
}

/// DeleteMachine's workflow context.
pub(super) type Ctx = WorkflowContext<DeleteMachineWorkflow>;
