//! Rolling updates of a pool: the machines as observed ([`observed`]), the planner that decides
//! what to create and delete now ([`plan()`]), what the RollingUpdate workflow takes and returns
//! ([`request`]) and what its `status` query answers ([`status`]).

pub mod observed;
pub mod plan;
pub mod report;
pub mod request;
pub mod status;

#[cfg(test)]
mod simulation;

pub use observed::{Activity, Health, ObservedMachine, PoolNode, PoolVm, Running, observe};
pub use plan::{Budget, Counts, DeleteReason, Holdup, Plan, PlanInput, Victim, plan, victim_order};
pub use report::{InspectPoolRequest, PoolReport};
pub use request::{
    DEFAULT_HISTORY_LIMIT, DEFAULT_OBSERVE_INTERVAL, PoolHistory, RolloutOutcome, RolloutRequest,
    RolloutResult, StrategyChange, TemplateRecord,
};
pub use status::{
    ChildFailure, ChildKind, InFlight, MachineView, RolloutPhase, RolloutStatus, StrategyView,
    Timings, made_progress,
};

/// The taint on Nodes of outdated machines during a rollout, so that evicted pods avoid the
/// nodes that will be drained next (`PreferNoSchedule`; removed when the rollout completes).
pub const TAINT_OUTDATED: &str = "nodewright.io/outdated";
