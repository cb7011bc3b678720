//! The sweep's workflow state (the status its query answers, the approval it waits for, the
//! approvals it refused) and the two writes every step makes to it: the status, and the
//! audit's end.

use nodewright_model::sweep::{RefusedApproval, SweepAudit, SweepPhase, SweepStatus};
use temporalio_macros::workflow;
use temporalio_sdk::WorkflowContext;

use crate::progress::{now, rfc3339};
use crate::search;

/// Finds and removes what nobody owns; see the runbook (`crate::orphan_sweep`).
#[workflow]
#[derive(Default)]
pub struct OrphanSweepWorkflow {
    pub(super) status: Option<SweepStatus>,
    /// Who approved the deletions (the `approve` signal accepted while waiting).
    pub(super) approved_by: Option<String>,
    /// While waiting for approval: the planned count an approval must name.
    pub(super) waiting: Option<u32>,
    /// Approvals refused, the newest last.
    pub(super) refused: Vec<RefusedApproval>,
}

/// The sweep's workflow context.
pub(super) type Ctx = WorkflowContext<OrphanSweepWorkflow>;

/// Sets the phase (and the `NodewrightPhase` attribute when it changes) and the summary.
pub(super) fn set_status(
    ctx: &mut Ctx,
    phase: SweepPhase,
    summary: String,
    change: impl FnOnce(&mut SweepStatus),
) {
    let changed = ctx.state(|s| s.status.as_ref().map(|st| st.phase)) != Some(phase);
    ctx.state_mut(|s| {
        let status = s.status.get_or_insert_with(SweepStatus::starting);
        status.phase = phase;
        status.summary = summary;
        if phase != SweepPhase::AwaitingApproval {
            status.approval_deadline = None;
        }
        change(status);
    });
    if changed {
        ctx.upsert_search_attributes([search::PHASE.value_set(phase.as_str().to_owned())]);
    }
}

/// Ends the audit: its finishing time, and the approvals refused.
pub(super) fn finished(ctx: &mut Ctx, mut audit: SweepAudit) -> SweepAudit {
    audit.finished_at = rfc3339(now(ctx));
    audit.refused_approvals = ctx.state(|s| s.refused.clone());
    audit
}
