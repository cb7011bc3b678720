//! nodewright's Temporal workflows: sequencing only.
//!
//! **Architecture invariant:** workflow code never names `tokio::`, `reqwest`, `kube::`,
//! `SystemTime` or `rand`; time, timers, randomness and concurrency come from the workflow
//! context, and every decision comes from `nodewright-model`. The runbook of each workflow is its
//! module documentation, in `workflows/runbooks/`.

pub mod activity_options;
pub mod cancellation;
pub mod create_machine;
pub mod delete_machine;
pub mod drain_node;
pub mod headroom;
pub mod image;
pub mod input;
pub mod inspect_pool;
pub mod orphan_sweep;
pub mod pool_controller;
pub mod preflight;
pub mod progress;
pub mod registry;
pub mod removal;
pub mod rolling_update;
pub mod scope;
pub mod search;
pub mod uncordon_node;

pub use create_machine::CreateMachineWorkflow;
pub use delete_machine::DeleteMachineWorkflow;
pub use drain_node::DrainNodeWorkflow;
pub use inspect_pool::InspectPoolWorkflow;
pub use orphan_sweep::OrphanSweepWorkflow;
pub use pool_controller::PoolControllerWorkflow;
pub use preflight::{PreflightInput, PreflightStatus, PreflightWorkflow};
pub use rolling_update::RollingUpdateWorkflow;
pub use uncordon_node::UncordonNodeWorkflow;
