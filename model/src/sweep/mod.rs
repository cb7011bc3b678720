//! OrphanSweep's pure side: the inventory it lists, the classifier that decides what is an
//! orphan (and why everything else is kept), and the audit it returns (architecture §3).

pub mod audit;
pub mod classify;
pub mod inventory;
pub mod request;
#[cfg(test)]
mod tests;

pub use audit::{AuditEntry, ForeignGroup, KeptGroup, Outcome, Seen, SweepAudit, SweepOutcome};
pub use classify::{Action, Decision, Rule, SubjectKind, SweepPolicy, classify, human};
pub use inventory::{
    ArmResource, Inventory, NodeReadiness, NodeRecord, ResourceKind, RunningWorkflow, name_from_id,
};
pub use request::{SweepPhase, SweepRequest, SweepStatus};
