//! OrphanSweep's pure side: the inventory it lists, the classifier that decides what is an
//! orphan (and why everything else is kept), the safety decisions around it (the plausibility
//! brake, approvals bound to a plan, the fresh plan after waiting, the paging guard, the plan's
//! next step, how each removal is done, the last look before a deletion), and the audit it
//! returns (architecture §3).

pub mod approval;
pub mod audit;
pub mod brake;
pub mod classify;
pub mod findings;
pub mod grace;
pub mod inventory;
pub mod overlap;
pub mod paging;
pub mod plan;
pub mod recheck;
pub mod removal;
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
pub use findings::{Finding, SweepFindings};
pub use grace::{GraceFloor, check_grace, grace_floor};
pub use inventory::{
    ArmResource, Inventory, NodeReadiness, NodeRecord, ResourceKind, RunningWorkflow, name_from_id,
};
pub use overlap::yield_to_running_sweep;
pub use paging::{PageGuard, PageStep};
pub use plan::{PlanStep, api_verdict, approval_wait, decide_plan_step, not_approved};
pub use recheck::{Recheck, recheck_disk, recheck_nic, recheck_node};
pub use removal::{
    LeftoverSubject, RemovalStep, child_not_started, leftover_left_alone, machine_deleted,
    no_recorded_template, nothing_to_do, remediation_held, removal_step, replacement_prefix,
    untaint_outcome,
};
pub use replan::changed_while_waiting;
pub use request::{SweepPhase, SweepRequest, SweepStatus};
