//! CreateMachine's workflow state: the status its query answers.

use nodewright_model::machine::{MachineStatus, Step};
use temporalio_macros::workflow;
use temporalio_sdk::WorkflowContext;

use crate::progress::HasStatus;

/// Creates one machine; see the runbook (`crate::create_machine`).
#[workflow]
#[derive(Default)]
pub struct CreateMachineWorkflow {
    pub(super) status: Option<MachineStatus>,
}

impl HasStatus for CreateMachineWorkflow {
    fn status_mut(&mut self) -> &mut MachineStatus {
        self.status
            .get_or_insert_with(|| MachineStatus::new("create", "", None, &Step::CREATE))
    }
}

/// CreateMachine's workflow context.
pub(super) type Ctx = WorkflowContext<CreateMachineWorkflow>;
