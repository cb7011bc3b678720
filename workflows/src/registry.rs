//! The set of workflows nodewright runs, listed once: the worker registers it
//! (`worker/src/registration.rs`), the replay test replays with it, and a test below holds it
//! equal to `nodewright_model::workflow_type::ALL`, the names every other place uses.

use std::convert::Infallible;

use temporalio_common::WorkflowDefinition;
use temporalio_sdk::workflow_replayer::{
    WorkflowReplayerOptionsBuilder, workflow_replayer_options_builder,
};
use temporalio_sdk::{WorkerOptionsBuilder, WorkflowRegistrationError, worker_options_builder};
use temporalio_workflow::workflows::WorkflowImplementation;

use crate::{
    CreateMachineWorkflow, DeleteMachineWorkflow, DrainNodeWorkflow, InspectPoolWorkflow,
    OrphanSweepWorkflow, PoolControllerWorkflow, PreflightWorkflow, RollingUpdateWorkflow,
    UncordonNodeWorkflow,
};

/// Something workflows are registered with: a worker's options or a replayer's.
pub trait RegistersWorkflows: Sized {
    /// What a registration can fail with.
    type Error;

    /// Registers workflow `W`.
    ///
    /// # Errors
    ///
    /// The SDK's, e.g. a type name registered twice.
    fn with_workflow<W>(self) -> Result<Self, Self::Error>
    where
        W: WorkflowImplementation,
        <W::Run as WorkflowDefinition>::Input: Send;
}

impl<S: worker_options_builder::State> RegistersWorkflows for WorkerOptionsBuilder<S> {
    type Error = WorkflowRegistrationError;

    fn with_workflow<W>(self) -> Result<Self, WorkflowRegistrationError>
    where
        W: WorkflowImplementation,
        <W::Run as WorkflowDefinition>::Input: Send,
    {
        self.register_workflow::<W>()
    }
}

impl<S: workflow_replayer_options_builder::State> RegistersWorkflows
    for WorkflowReplayerOptionsBuilder<S>
{
    type Error = WorkflowRegistrationError;

    fn with_workflow<W>(self) -> Result<Self, WorkflowRegistrationError>
    where
        W: WorkflowImplementation,
        <W::Run as WorkflowDefinition>::Input: Send,
    {
        self.register_workflow::<W>()
    }
}

/// Registers every workflow nodewright runs, in the order of
/// `nodewright_model::workflow_type::ALL`.
///
/// # Errors
///
/// The registry's, e.g. the SDK's when a type name is registered twice.
pub fn register_every_workflow<R: RegistersWorkflows>(registry: R) -> Result<R, R::Error> {
    registry
        .with_workflow::<PreflightWorkflow>()?
        .with_workflow::<CreateMachineWorkflow>()?
        .with_workflow::<DeleteMachineWorkflow>()?
        .with_workflow::<DrainNodeWorkflow>()?
        .with_workflow::<UncordonNodeWorkflow>()?
        .with_workflow::<RollingUpdateWorkflow>()?
        .with_workflow::<InspectPoolWorkflow>()?
        .with_workflow::<OrphanSweepWorkflow>()?
        .with_workflow::<PoolControllerWorkflow>()
}

/// The type names [`register_every_workflow`] registers, in its order.
pub fn registered_types() -> Vec<&'static str> {
    match register_every_workflow(TypeNames::default()) {
        Ok(names) => names.0,
        Err(never) => match never {},
    }
}

/// A registry that only records the type names registered with it.
#[derive(Default)]
struct TypeNames(Vec<&'static str>);

impl RegistersWorkflows for TypeNames {
    type Error = Infallible;

    fn with_workflow<W>(mut self) -> Result<Self, Infallible>
    where
        W: WorkflowImplementation,
        <W::Run as WorkflowDefinition>::Input: Send,
    {
        self.0.push(W::name());
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use nodewright_model::workflow_type;

    use super::*;

    #[test]
    fn the_registered_set_is_the_models_list_of_type_names() {
        assert_eq!(registered_types(), workflow_type::ALL.to_vec());
    }
}
