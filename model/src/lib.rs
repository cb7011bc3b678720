//! nodewright's vocabulary and every pure decision.
//!
//! **Architecture invariant:** this crate has no async code, no clock, no randomness and no I/O.
//! Workflows call into it to decide; activities and binaries use its types to describe the world.

pub mod arm;
pub mod cluster;
pub mod names;
pub mod ownership;
pub mod preflight;

pub use cluster::{ClusterName, InvalidName};
pub use names::{Operation, SearchAttribute, WorkflowId};
