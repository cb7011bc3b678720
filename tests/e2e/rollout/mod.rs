//! RollingUpdate end to end: pools of machines built and replaced by `nodewright pool rollout`
//! against a `nodewright-worker` process per test, with workloads on them, a sampler watching
//! the pool's Ready nodes and machines throughout, and the world checked afterwards.

mod budget;
pub(crate) mod common;
mod control;
mod crash;
mod delete_retry;
mod do_not_disrupt;
mod drain_settings;
mod failures;
mod hard_deadline;
mod held_after_failed_delete;
mod history_limits;
mod min_ready;
mod outdated_after_end;
mod progress_at_scale;
mod revisions;
mod rollback_after_upgrade;
pub(crate) mod soak;
pub(crate) mod window;
pub(crate) mod zone_balance;
mod zones;
