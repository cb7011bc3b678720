//! Rolling updates of a pool: the machines as observed ([`observed`]), the planner that decides
//! what to create and delete now ([`plan()`]), what the RollingUpdate workflow takes and returns
//! ([`request`]) and what its `status` query answers ([`status`]); and every other decision the
//! workflow makes: how its phase moves ([`phase`]), what a signal does ([`signal`]), what a round
//! of its loop does after a look ([`round`]), how a child's end is booked and when the rollout
//! pauses itself ([`booking`]), how a create that found no capacity is booked ([`shortage`]),
//! a delete that did not finish is tried again ([`retry`]), drain settings changed without the
//! template reach the machines ([`restamp`]), when it is stalled ([`progress`]),
//! which zones new machines go to ([`zones`]) and how it ends ([`ending`]); and the pool's
//! revisions kept in the cluster ([`revisions`]).

pub mod booking;
pub mod ending;
pub mod hold;
pub mod inherited;
pub mod observed;
pub mod phase;
pub mod plan;
pub mod progress;
pub mod report;
pub mod request;
pub mod restamp;
pub mod retry;
pub mod revisions;
pub mod round;
pub mod shortage;
pub mod signal;
pub mod soak;
pub mod status;
pub mod zones;

#[cfg(test)]
mod simulation;

pub use booking::{ChildEnd, self_pause_due};
pub use ending::{ending_summary, history_after, to_clear_on_end};
pub use hold::{
    HOLD_RECHECK_SECS, HeldMachine, disruption_of, held_now, hold, hold_after_failed_delete,
    release,
};
pub use inherited::{
    CANCEL_ASKS, CANCEL_ASKS_FAILED_IN_A_ROW, CancelWait, RunEnd, cancel_not_confirmed, run_ids,
};
pub use observed::{
    Activity, Health, NodeCondition, ObservedMachine, PoolNode, PoolVm, Running, observe,
};
pub use phase::{PhaseEvent, RolloutPhase, next_phase, shown_phase};
pub use plan::{
    Budget, Counts, DeleteReason, Holdup, Plan, PlanInput, Victim, next_availability, plan,
    victim_order, victim_order_with,
};
pub use progress::{Look, ProgressInput, ProgressVerdict, judge_progress, remaining};
pub use report::{InspectPoolRequest, PoolReport};
pub use request::{
    DEFAULT_HISTORY_LIMIT, DEFAULT_OBSERVE_INTERVAL, PoolHistory, RolloutOutcome, RolloutRequest,
    RolloutResult, StrategyChange, TemplateRecord,
};
pub use restamp::{DrainStamps, DrainWanted, Restamp, RestampFailure, to_restamp};
pub use retry::{BackoffHold, DeleteRetry, Retries, backoff_holds, plan_retries};
pub use revisions::{
    HistoryRow, NoRollback, PoolRevisions, Revision, RevisionChange, RevisionOutcome, Revisions,
    RevisionsError, RolloutEnd, RolloutStart, StoredRevisions,
};
pub use round::{AfterLook, Round, after_look, canary_target, to_clear_outdated, to_mark_outdated};
pub use shortage::{OfferingRefusal, Shortage, offering_refusal_of, shortage_of};
pub use signal::Signal;
pub use soak::{Soak, SoakInput, SoakStep, soak_step};
pub use status::{
    ChildFailure, ChildKind, InFlight, MachineView, RolloutStatus, StrategyView, Timings,
    fallback_strategy, made_progress,
};
pub use zones::{machines_per_zone, placements_for_creates, zones_for_creates};

/// The taint on Nodes of outdated machines during a rollout, so that evicted pods avoid the
/// nodes that will be drained next (`PreferNoSchedule`; removed when the rollout completes).
pub const TAINT_OUTDATED: &str = "nodewright.io/outdated";
