//! nodewright's vocabulary and every pure decision.
//!
//! **Architecture invariant:** this crate has no async code, no clock, no randomness and no I/O.
//! Workflows call into it to decide; activities and binaries use its types to describe the world.

pub mod arm;
pub mod bootstrap_token;
pub mod cancel;
pub mod capacity;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod disruption;
pub mod drain;
pub mod headroom;
pub mod hooks;
pub mod identity;
pub mod image;
pub mod input;
pub mod isolation;
pub mod keyvault;
pub mod kube_request_label;
pub mod limits;
pub mod listing;
pub mod machine;
pub mod machine_name;
pub mod maintenance;
pub mod names;
pub mod ownership;
pub mod pool;
pub mod preflight;
pub mod rollout;
pub mod scheduled_events;
pub mod sweep;
pub mod taints;
pub mod text;
pub mod time;
pub mod workflow_type;

pub use cluster::{ClusterName, InvalidName};
pub use machine_name::MachineName;
pub use names::{Operation, SearchAttribute, WorkflowId};
