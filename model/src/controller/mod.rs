//! The pool controller's pure decisions: which machines are unhealthy ([`judge`]), what to
//! create, delete and remediate ([`decide`]), what `pool status` shows ([`status`]), and how
//! it starts and steers its rollouts ([`steer`]).
//!
//! The PoolController workflow observes the pool's VMs and Nodes, [`join`]s them with the work
//! it has in flight, asks [`decide`] and acts through child workflows and activities; every rule
//! lives here, table-tested, with property tests for the guarantees (never above maxUnhealthy,
//! never more than maxInFlight, no overshoot, nothing acted on while paused or held).

mod capacity;
mod decide;
mod health;
mod machines;
mod remediation;
mod request;
mod rollouts;
pub mod status;
mod timestamp;
mod zones;

pub use capacity::{CAPACITY_AVAILABLE, CapacityView, capacity_condition};
pub use decide::{
    Allowance, Counts, Decision, Input, Mode, Step, Unhealthy, Victim, VictimReason, decide,
};
pub use health::{HealthPolicy, Rung, UnhealthyCondition, Verdict, judge};
pub use machines::{Machine, Work, WorkKind, join, needs_power_states, unlisted_nodes};
pub use remediation::Remediation;
pub use request::{
    ApplyRequest, Carried, Changes, ControllerRequest, ControllerResult, DEFAULT_HISTORY_LIMIT,
    DEFAULT_OBSERVE_INTERVAL, DeleteRequest, ImageOrder, ScaleRequest, create_backoff,
};
pub use rollouts::{
    InFlight, RolloutEnd, RolloutOptions, RolloutOrder, Steer, should_start, steer,
};
pub use status::{
    Action, Condition, MAX_LAST_ACTIONS, PoolState, PoolStatusDocument, Progress, SpecView,
    conditions, push_action,
};
pub use timestamp::rfc3339;
pub use zones::{Creating, placements_for_creates, zones_for_creates};

#[cfg(test)]
mod test_support;
