#![doc = include_str!("../../runbooks/orphan_sweep.md")]

mod act;
mod approval;
mod children;
mod inventory;
mod state;
mod untaint;

use std::time::Duration;

use nodewright_activities::azure::machines::ArmScope;
use nodewright_activities::report::ReportActivities;
use nodewright_model::Operation;
use nodewright_model::sweep::{
    ApprovalVerdict, ApproveSignal, BrakeDecision, Outcome, PlanStep, Seen, SweepAudit,
    SweepOutcome, SweepPhase, SweepPolicy, SweepRequest, SweepStatus, changed_while_waiting,
    check_grace, classify, decide_approval, decide_brake, decide_plan_step, grace_floor, human,
    not_approved, record_refusal,
};
use nodewright_model::workflow_type;
use temporalio_common::RetryPolicy;
use temporalio_macros::workflow_methods;
use temporalio_sdk::{
    LocalActivityOptions, SyncWorkflowContext, WorkflowCancellationToken, WorkflowContext,
    WorkflowContextView, WorkflowResult, WorkflowTermination,
};

use self::act::act;
use self::approval::await_approval;
use self::inventory::{
    another_sweep_runs, azure_scope, fresh_decisions, kube_health, take_inventory,
};
pub use self::state::OrphanSweepWorkflow;
use self::state::{Ctx, finished, set_status};
use self::untaint::untaint_stale;
use crate::progress::{now, rfc3339};
use crate::{cancellation, input, search};

#[workflow_methods]
impl OrphanSweepWorkflow {
    /// Runs the runbook.
    #[run(name = workflow_type::ORPHAN_SWEEP)]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: SweepRequest,
    ) -> WorkflowResult<SweepAudit> {
        input::admit(
            ctx,
            workflow_type::ORPHAN_SWEEP,
            &input::Subject {
                cluster: &request.cluster,
                named: None,
            },
            request.check(),
        )?;
        announce(ctx, &request);
        let mut audit = sweep(ctx, &request).await;
        let canceled = cancellation::requested(ctx);
        if canceled {
            // Whatever stopped the run (a cut wait, a listing that failed because it was cut),
            // it ends as cancelled: no removal started after the request.
            audit.outcome = SweepOutcome::Canceled {
                reason: cancellation::reason(ctx),
            };
            audit.settle_removals(&Outcome::Skipped {
                reason: "canceled before it started".to_owned(),
            });
        }
        let summary = audit.summary();
        set_status(ctx, SweepPhase::Done, summary.clone(), |_| {});
        ctx.set_current_details(summary);
        report(ctx, &audit).await;
        if canceled {
            ctx.upsert_search_attributes([search::PHASE.value_set("canceled".to_owned())]);
            return Err(WorkflowTermination::cancelled_with_details(audit));
        }
        Ok(audit)
    }

    /// Lets a sweep waiting for approval (more than `max_deletions` removals, or braked) go
    /// on: only an approval naming this run and its planned count, sent while it waits;
    /// anything else is recorded as refused, with why, and ignored.
    #[signal(name = "approve")]
    pub fn approve(&mut self, ctx: &mut SyncWorkflowContext<Self>, signal: ApproveSignal) {
        match decide_approval(ctx.run_id(), self.waiting, &signal) {
            ApprovalVerdict::Accept { by } => {
                if self.approved_by.is_none() {
                    self.approved_by = Some(by);
                }
            }
            ApprovalVerdict::Refuse(refused) => {
                record_refusal(&mut self.refused, refused);
                if let Some(status) = self.status.as_mut() {
                    status.refused_approvals = self.refused.clone();
                }
            }
        }
    }

    /// Phase, counts, and the approval deadline while waiting for one.
    #[query(name = "status")]
    pub fn status(&self, _ctx: &WorkflowContextView) -> SweepStatus {
        self.status.clone().unwrap_or_else(SweepStatus::starting)
    }
}

/// The patch that hands a sweep's outcome and findings to the worker's metrics at its end
/// (`report.sweep_ended`); runs recorded before it report nothing.
const REPORT_PATCH: &str = "sweep-reports-findings";

/// Hands the sweep's outcome and findings to the worker's metrics, by a local activity that
/// answers after a cancellation request too; best effort: the run ends the same whatever it
/// answers.
async fn report(ctx: &mut Ctx, audit: &SweepAudit) {
    if !ctx.patched(REPORT_PATCH) {
        return;
    }
    let options = LocalActivityOptions::builder()
        .start_to_close_timeout(Duration::from_secs(10))
        .retry_policy(RetryPolicy::builder().maximum_attempts(2).build())
        .cancellation_token(WorkflowCancellationToken::new())
        .build();
    let _ = ctx
        .execute_local_activity(ReportActivities::sweep_ended, audit.findings(), options)
        .await;
}

/// The patch marker of the grace floor (a sweep refused for a grace below it), recorded only
/// by runs it refuses.
const GRACE_FLOOR_PATCH: &str = "sweep-grace-floor";

/// The patch that keeps resources whose names nodewright never gives, whatever their tags
/// (`Rule::NameNotOurs`).
const NAME_PATTERN_PATCH: &str = "sweep-name-pattern";

/// The patch that removes stale outdated taints (`Rule::StaleOutdatedTaint`), asked only when a
/// listed Node carries the taint.
const STALE_TAINT_PATCH: &str = "sweep-clears-stale-outdated";

/// The runbook: overlap check → freeze check → inventory → grace floor → classify → brake →
/// stale taints → approval → fresh plan → act → audit.
async fn sweep(ctx: &mut Ctx, request: &SweepRequest) -> SweepAudit {
    let started_at = rfc3339(now(ctx));
    let ended = |ctx: &mut Ctx, outcome: SweepOutcome| {
        let audit = SweepAudit::of(
            request.cluster.clone(),
            started_at.clone(),
            outcome,
            Seen::default(),
            Vec::new(),
        );
        finished(ctx, audit)
    };
    let frozen = |ctx: &mut Ctx, reason: String| ended(ctx, SweepOutcome::Frozen { reason });

    // 1. Overlap: a scheduled run gives way to a sweep already running.
    if let Some(outcome) = another_sweep_runs(ctx, request).await {
        return ended(ctx, outcome);
    }
    // 2. Freeze check: nothing is decided on an API that cannot be trusted.
    if let Err(reason) = kube_health(ctx).await {
        return frozen(ctx, reason);
    }
    // 3. Inventory.
    set_status(ctx, SweepPhase::Listing, "listing".to_owned(), |_| {});
    let scope = match azure_scope(ctx).await {
        Ok(scope) => scope,
        Err(reason) => return frozen(ctx, reason),
    };
    let inventory = match take_inventory(ctx, request).await {
        Ok(inventory) => inventory,
        Err(reason) => return frozen(ctx, reason),
    };
    // 4. Grace floor, behind a patch marker: a sweep started by an older worker replays its
    // old path.
    if let Err(reason) = check_grace(
        request.grace,
        grace_floor(&inventory, &request.cluster).as_ref(),
    ) && ctx.patched(GRACE_FLOOR_PATCH)
    {
        return ended(ctx, SweepOutcome::Refused { reason });
    }
    // 5. Classify and brake.
    let seen = Seen::of(&inventory);
    let tainted = inventory.nodes.iter().any(|node| node.tainted_outdated);
    let clear_stale_taints = tainted && ctx.patched(STALE_TAINT_PATCH);
    let policy = policy(ctx, request, &scope, clear_stale_taints);
    let decisions = classify(&inventory, &policy);
    let brake = match decide_brake(&inventory, &policy, &decisions, request.brake_share()) {
        BrakeDecision::Proceed(_) => None,
        BrakeDecision::Hold(brake) => Some(brake),
    };
    let outcome = if request.dry_run {
        SweepOutcome::DryRun
    } else {
        SweepOutcome::Completed
    };
    let mut audit = SweepAudit::of(
        request.cluster.clone(),
        started_at.clone(),
        outcome,
        seen,
        decisions,
    );
    audit.brake = brake.clone();
    let planned = audit.planned();
    let plan = audit.plan_by_kind();
    set_status(ctx, SweepPhase::Listing, audit.summary(), |status| {
        status.seen = seen.total();
        status.planned = planned;
        status.plan = plan;
        status.brake = brake.clone();
    });
    // 6. Stale outdated taints: not removals, so outside the brake, max_deletions and the
    // approval; a dry run only reports them.
    untaint_stale(ctx, &scope, &mut audit, request.dry_run).await;
    // 7. The plan's next step: finish, dry run, approval, act.
    match decide_plan_step(
        planned,
        request.dry_run,
        brake.is_some(),
        request.max_deletions,
    ) {
        PlanStep::Finish => return finished(ctx, audit),
        PlanStep::DryRun => {
            audit.settle_removals(&Outcome::Planned);
            return finished(ctx, audit);
        }
        PlanStep::AwaitApproval => {
            match await_approval(ctx, request, planned, brake.as_ref()).await {
                Some(by) => audit.approved_by = Some(by),
                None if cancellation::requested(ctx) => return finished(ctx, audit),
                None => {
                    let (outcome, reason) = not_approved(
                        brake.as_ref(),
                        planned,
                        request.max_deletions,
                        request.approval_wait(),
                    );
                    audit.outcome = outcome;
                    audit.settle_removals(&Outcome::Skipped { reason });
                    return finished(ctx, audit);
                }
            }
            // 8. Time passed: check the API, list everything again, and act only on what the
            // fresh plan still removes the same way.
            let fresh = match kube_health(ctx).await {
                Ok(()) => fresh_decisions(ctx, request, &policy).await,
                Err(reason) => Err(reason),
            };
            match fresh {
                Ok(fresh) => {
                    for (index, outcome) in changed_while_waiting(&audit.entries, &fresh) {
                        audit.record(index, outcome);
                    }
                }
                Err(reason) => {
                    audit.outcome = SweepOutcome::Frozen {
                        reason: reason.clone(),
                    };
                    audit.settle_removals(&Outcome::Skipped { reason });
                    return finished(ctx, audit);
                }
            }
        }
        PlanStep::Act => {}
    }
    // 9. Act, then the audit.
    act(ctx, request, &mut audit).await;
    finished(ctx, audit)
}

/// What the classifier decides by besides the inventory: the cluster, the worker's resource
/// group, the request's durations, the sweep's time, and whether stale outdated taints are
/// removed (`clear_stale_taints`).
fn policy(
    ctx: &Ctx,
    request: &SweepRequest,
    scope: &ArmScope,
    clear_stale_taints: bool,
) -> SweepPolicy {
    SweepPolicy {
        cluster: request.cluster.clone(),
        vm_id_prefix: scope.vm_id(""),
        grace: request.grace,
        health_timeout: request.health_timeout,
        remediate: request.remediate,
        now: now(ctx).timestamp(),
        // Behind a patch marker: a sweep started by an older worker replays its old decisions.
        check_names: ctx.patched(NAME_PATTERN_PATCH),
        clear_stale_taints,
    }
}

/// Search attributes and the first details line.
fn announce(ctx: &mut Ctx, request: &SweepRequest) {
    ctx.upsert_search_attributes([
        search::CLUSTER.value_set(request.cluster.to_string()),
        search::OPERATION.value_set(Operation::Sweep.to_string()),
    ]);
    ctx.set_current_details(format!(
        "orphan sweep of cluster {} ({}, max_deletions {}, grace {})",
        request.cluster,
        request.mode(),
        request.max_deletions,
        human(request.grace)
    ));
}
