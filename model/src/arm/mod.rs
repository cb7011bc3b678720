//! The Azure Resource Manager contract as pure decisions: what a failure means for a retrying
//! caller, what a poll of an async operation says about its state, and when to poll next
//! (`poll_schedule`), and which backlogged write goes first (`WriteStage`).

mod failure;
mod operation;
pub mod poll_schedule;
mod request_label;
mod write_order;

pub use failure::{
    ArmFailure, DEFAULT_RETRY_AFTER, Disposition, operation_code_disposition, parse_retry_after,
};
pub use operation::{OperationState, state_from_location_poll, state_from_operation_body};
pub use request_label::arm_operation_label;
pub use write_order::WriteStage;
