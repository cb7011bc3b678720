//! nodewright's Temporal workflows: sequencing only.
//!
//! **Architecture invariant:** workflow code never names `tokio::`, `reqwest`, `kube::`,
//! `SystemTime` or `rand`; time, timers, randomness and concurrency come from the workflow
//! context, and every decision comes from `nodewright-model`. The runbook of each workflow is its
//! module documentation, in `workflows/runbooks/`.

pub mod activity_options;
pub mod connect;
pub mod preflight;
pub mod search;

pub use preflight::{PreflightInput, PreflightStatus, PreflightWorkflow};
