//! OrphanSweep's pure side: the inventory it lists, the classifier that decides what is an
//! orphan (and why everything else is kept), the safety decisions around it (the plausibility
//! brake, approvals bound to a plan, the fresh plan after waiting, the paging guard), and the
//! audit it returns (architecture §3).

pub mod approval;
pub mod audit;
pub mod brake;
pub mod classify;
pub mod grace;
pub mod inventory;
pub mod overlap;
pub mod paging;
pub mod replan;
pub mod request;
#[cfg(test)]
mod safety_tests;
#[cfg(test)]
mod tests;

pub use approval::{
    Approval, ApprovalVerdict, ApproveSignal, RefusedApproval, decide_approval, record_refusal,
};
pub use audit::{AuditEntry, ForeignGroup, KeptGroup, Outcome, Seen, SweepAudit, SweepOutcome};
pub use brake::{Brake, BrakeCounts, BrakeDecision, BrakeReason, decide_brake};
pub use classify::{Action, Decision, Rule, SubjectKind, SweepPolicy, classify, human};
pub use grace::{GraceFloor, check_grace, grace_floor};
pub use inventory::{
    ArmResource, Inventory, NodeReadiness, NodeRecord, ResourceKind, RunningWorkflow, name_from_id,
};
pub use overlap::yield_to_running_sweep;
pub use paging::{PageGuard, PageStep};
pub use replan::changed_while_waiting;
pub use request::{SweepPhase, SweepRequest, SweepStatus};
