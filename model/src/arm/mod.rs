//! The Azure Resource Manager contract as pure decisions: what a failure means for a retrying
//! caller, and what a poll of an async operation says about its state.

mod failure;
mod operation;

pub use failure::{
    ArmFailure, DEFAULT_RETRY_AFTER, Disposition, operation_code_disposition, parse_retry_after,
};
pub use operation::{OperationState, state_from_location_poll, state_from_operation_body};
