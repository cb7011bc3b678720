//! The `approve` signal bound to a plan: it names the run it approves and the planned count
//! its sender saw, and counts only while that run waits for approval with that count.
//!
//! An approval sent too early (before the wait), to another run, for another plan, or in an
//! older form that names no run, is refused with the reason (recorded in the status and the
//! audit) and never kept for later: a late `sweep approve` cannot approve a plan nobody saw.

use serde::{Deserialize, Serialize};

/// The longest `by` or run ID kept from a signal (longer ones are cut): signals come from
/// outside and end up in the status and the audit.
pub const MAX_APPROVAL_TEXT: usize = 200;

/// The most refused approvals a sweep records (the oldest are dropped).
pub const MAX_REFUSED_APPROVALS: usize = 20;

/// What `nodewright sweep approve` sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// The run approved (its Temporal run ID).
    pub run_id: String,
    /// The planned removals the approver was shown.
    pub planned: u32,
    /// Who approves (`$USER@cli`).
    pub by: String,
}

/// The `approve` signal's payload as it may arrive: an [`Approval`], or anything else (an older
/// CLI sent a bare name), which is refused rather than allowed to fail the workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ApproveSignal {
    /// An approval bound to a run and a plan.
    Bound(Approval),
    /// Anything else.
    Unbound(serde_json::Value),
}

/// A refused approval, as the status and the audit show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedApproval {
    /// Who sent it (empty when it did not say).
    pub by: String,
    /// Why it was refused.
    pub reason: String,
}

/// What the sweep does with an `approve` signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalVerdict {
    /// It approves the plan the run waits with; `by` is recorded.
    Accept {
        /// Who approved.
        by: String,
    },
    /// It is ignored, and recorded with why.
    Refuse(RefusedApproval),
}

/// Decides about `signal` for the run `own_run_id`, which waits for approval of `waiting`
/// planned removals (`None`: it does not wait now).
pub fn decide_approval(
    own_run_id: &str,
    waiting: Option<u32>,
    signal: &ApproveSignal,
) -> ApprovalVerdict {
    let ApproveSignal::Bound(approval) = signal else {
        let by = match signal {
            ApproveSignal::Unbound(serde_json::Value::String(by)) => bounded(by),
            _ => String::new(),
        };
        return ApprovalVerdict::Refuse(RefusedApproval {
            by,
            reason: "the approval names no run and no planned count; approve with `nodewright sweep approve`, which shows the plan and names both".to_owned(),
        });
    };
    let by = bounded(&approval.by);
    let refuse = |reason: String| {
        ApprovalVerdict::Refuse(RefusedApproval {
            by: by.clone(),
            reason,
        })
    };
    if approval.run_id != own_run_id {
        return refuse(format!(
            "it approves run {}, not this run {own_run_id}; approve the run that waits, as `nodewright sweep status` shows it",
            crate::text::quoted(&bounded(&approval.run_id))
        ));
    }
    let Some(planned) = waiting else {
        return refuse(
            "this run was not waiting for approval when it came; an approval is not kept for later: send it while `nodewright sweep status` shows the run waiting".to_owned(),
        );
    };
    if approval.planned != planned {
        return refuse(format!(
            "it approves {} planned removals, but this run's plan holds {planned}; look at the plan again with `nodewright sweep approve`",
            approval.planned
        ));
    }
    ApprovalVerdict::Accept { by }
}

/// Adds `refused` to `list`, keeping the newest [`MAX_REFUSED_APPROVALS`].
pub fn record_refusal(list: &mut Vec<RefusedApproval>, refused: RefusedApproval) {
    list.push(refused);
    if list.len() > MAX_REFUSED_APPROVALS {
        let extra = list.len() - MAX_REFUSED_APPROVALS;
        list.drain(..extra);
    }
}

/// `text` cut to [`MAX_APPROVAL_TEXT`] characters.
fn bounded(text: &str) -> String {
    text.chars().take(MAX_APPROVAL_TEXT).collect()
}
