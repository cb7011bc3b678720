#![doc = include_str!("../runbooks/orphan_sweep.md")]

use futures::FutureExt;
use nodewright_activities::azure::inventory::{InventoryPage, ListInventoryPage};
use nodewright_activities::azure::machines::{
    ArmReadActivities, ArmScope, ArmWriteActivities, DeleteLeftover, Leftover, LeftoverDeleted,
    LeftoverKind,
};
use nodewright_activities::kube::{
    DeleteOrphanNode, KubeActivities, ListNodesPage, NodesPage, OrphanNodeDeleted,
};
use nodewright_activities::temporal::{ListRunning, PoolOfLastRollout, TemporalActivities};
use nodewright_model::machine::{CreateMachineRequest, DeleteMachineRequest};
use nodewright_model::machine_name::MachineName;
use nodewright_model::names::arm_write_task_queue;
use nodewright_model::sweep::{
    Action, ApprovalVerdict, ApproveSignal, AuditEntry, Brake, BrakeDecision, Decision, Inventory,
    Outcome, PageGuard, PageStep, RefusedApproval, ResourceKind, Seen, SubjectKind, SweepAudit,
    SweepOutcome, SweepPhase, SweepPolicy, SweepRequest, SweepStatus, changed_while_waiting,
    check_grace, classify, decide_approval, decide_brake, grace_floor, record_refusal,
    yield_to_running_sweep,
};
use nodewright_model::{Operation, WorkflowId};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::workflows::{join_all, select};
use temporalio_sdk::{
    SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult, WorkflowTermination,
};

use crate::create_machine::CreateMachineWorkflow;
use crate::delete_machine::DeleteMachineWorkflow;
use crate::progress::child_options;
use crate::progress::{activity_failure_text, child_failure_text, later, now, rfc3339};
use crate::search;
use crate::{activity_options, cancellation, input};

/// Resources per ARM inventory call (whole pages).
const ARM_ITEMS_PER_CALL: u32 = 1000;
/// Nodes per Kubernetes list page.
const NODES_PER_PAGE: u32 = 500;

/// Finds and removes what nobody owns; see the runbook above.
#[workflow]
#[derive(Default)]
pub struct OrphanSweepWorkflow {
    status: Option<SweepStatus>,
    /// Who approved the deletions (the `approve` signal accepted while waiting).
    approved_by: Option<String>,
    /// While waiting for approval: the planned count an approval must name.
    waiting: Option<u32>,
    /// Approvals refused, the newest last.
    refused: Vec<RefusedApproval>,
}

#[workflow_methods]
impl OrphanSweepWorkflow {
    /// Runs the runbook.
    #[run(name = "OrphanSweep")]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: SweepRequest,
    ) -> WorkflowResult<SweepAudit> {
        input::admit(
            ctx,
            "OrphanSweep",
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

/// The patch marker of the grace floor (a sweep refused for a grace below it), recorded only
/// by runs it refuses.
const GRACE_FLOOR_PATCH: &str = "sweep-grace-floor";

/// The patch that keeps resources whose names nodewright never gives, whatever their tags
/// (`Rule::NameNotOurs`).
const NAME_PATTERN_PATCH: &str = "sweep-name-pattern";

/// The runbook: overlap check → freeze check → inventory → grace floor → classify → brake →
/// approval → fresh plan → act → audit.
async fn sweep(
    ctx: &mut WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
) -> SweepAudit {
    let started_at = rfc3339(now(ctx));
    let ended = |ctx: &mut WorkflowContext<OrphanSweepWorkflow>, outcome: SweepOutcome| {
        let audit = SweepAudit::of(
            request.cluster.clone(),
            started_at.clone(),
            outcome,
            Seen::default(),
            Vec::new(),
        );
        finished(ctx, audit)
    };
    let frozen = |ctx: &mut WorkflowContext<OrphanSweepWorkflow>, reason: String| {
        ended(ctx, SweepOutcome::Frozen { reason })
    };

    if let Some(outcome) = another_sweep_runs(ctx, request).await {
        return ended(ctx, outcome);
    }
    if let Err(reason) = kube_health(ctx).await {
        return frozen(ctx, reason);
    }
    set_status(ctx, SweepPhase::Listing, "listing".to_owned(), |_| {});
    let scope = match ctx
        .execute_activity(ArmReadActivities::scope, (), activity_options::read())
        .await
    {
        Ok(scope) => scope,
        Err(e) => {
            return frozen(
                ctx,
                format!(
                    "reading the worker's Azure scope failed: {}",
                    activity_failure_text(&e)
                ),
            );
        }
    };
    let inventory = match take_inventory(ctx, request).await {
        Ok(inventory) => inventory,
        Err(reason) => return frozen(ctx, reason),
    };
    // Behind a patch marker: a sweep started by an older worker replays its old path.
    if let Err(reason) = check_grace(
        request.grace,
        grace_floor(&inventory, &request.cluster).as_ref(),
    ) && ctx.patched(GRACE_FLOOR_PATCH)
    {
        return ended(ctx, SweepOutcome::Refused { reason });
    }
    let seen = seen(&inventory);
    let policy = policy(ctx, request, &scope);
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
    let plan = plan_by_kind(&audit);
    set_status(ctx, SweepPhase::Listing, audit.summary(), |status| {
        status.seen = seen.vms + seen.nics + seen.disks + seen.nodes;
        status.planned = planned;
        status.plan = plan;
        status.brake = brake.clone();
    });
    if planned == 0 {
        return finished(ctx, audit);
    }
    if request.dry_run {
        audit.settle_removals(&Outcome::Planned);
        return finished(ctx, audit);
    }
    if brake.is_some() || planned > request.max_deletions {
        match await_approval(ctx, request, planned, brake.as_ref()).await {
            Some(by) => audit.approved_by = Some(by),
            None if cancellation::requested(ctx) => return finished(ctx, audit),
            None => {
                let wait = nodewright_model::sweep::human(request.approval_wait());
                let reason = match &brake {
                    Some(brake) => {
                        audit.outcome = SweepOutcome::Braked {
                            reason: brake.message.clone(),
                        };
                        format!(
                            "braked ({}) and not approved within {wait}",
                            brake.reason.as_str()
                        )
                    }
                    None => {
                        audit.outcome = SweepOutcome::NotApproved {
                            planned,
                            max_deletions: request.max_deletions,
                        };
                        format!(
                            "not approved within {wait} ({planned} removals, max_deletions {})",
                            request.max_deletions
                        )
                    }
                };
                audit.settle_removals(&Outcome::Skipped { reason });
                return finished(ctx, audit);
            }
        }
        // Time passed: check the API, list everything again, and act only on what the fresh
        // plan still removes the same way.
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
    act(ctx, request, &mut audit).await;
    finished(ctx, audit)
}

/// A scheduled run that finds another sweep of the cluster running ends at once (an
/// on-demand run never gives way); the outcome when it does.
async fn another_sweep_runs(
    ctx: &mut WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
) -> Option<SweepOutcome> {
    let own = ctx.workflow_id().to_owned();
    if own == WorkflowId::for_cluster(Operation::Sweep, &request.cluster).as_str() {
        return None;
    }
    let listed = ctx
        .execute_activity(
            TemporalActivities::running_workflows,
            ListRunning {
                cluster: request.cluster.clone(),
            },
            activity_options::read(),
        )
        .await;
    match listed {
        Ok(running) => yield_to_running_sweep(&request.cluster, &own, &running)
            .map(|reason| SweepOutcome::Skipped { reason }),
        Err(e) => Some(SweepOutcome::Frozen {
            reason: format!(
                "listing the running sweeps failed: {}",
                activity_failure_text(&e)
            ),
        }),
    }
}

/// After an approval wait: everything listed again and classified again at the new time.
async fn fresh_decisions(
    ctx: &mut WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    policy: &SweepPolicy,
) -> Result<Vec<Decision>, String> {
    set_status(
        ctx,
        SweepPhase::Listing,
        "approved: listing again before acting".to_owned(),
        |_| {},
    );
    let inventory = take_inventory(ctx, request).await?;
    let mut later = policy.clone();
    later.now = now(ctx).timestamp();
    Ok(classify(&inventory, &later))
}

/// The planned removals counted by action and kind: `delete vm`, `delete nic`, `replace vm`.
fn plan_by_kind(audit: &SweepAudit) -> std::collections::BTreeMap<String, u32> {
    let mut plan = std::collections::BTreeMap::new();
    for entry in audit.removals() {
        let key = format!("{} {}", entry.decision.action, entry.decision.kind);
        let count = plan.entry(key).or_insert(0u32);
        *count = count.saturating_add(1);
    }
    plan
}

/// Ends the audit: its finishing time, and the status.
fn finished(ctx: &mut WorkflowContext<OrphanSweepWorkflow>, mut audit: SweepAudit) -> SweepAudit {
    audit.finished_at = rfc3339(now(ctx));
    audit.refused_approvals = ctx.state(|s| s.refused.clone());
    audit
}

/// `Ok` when the Kubernetes API is healthy, else why not.
async fn kube_health(ctx: &mut WorkflowContext<OrphanSweepWorkflow>) -> Result<(), String> {
    set_status(
        ctx,
        SweepPhase::Checking,
        "checking the Kubernetes API".to_owned(),
        |_| {},
    );
    match ctx
        .execute_activity(KubeActivities::api_health, (), activity_options::probe())
        .await
    {
        Ok(health) if health.healthy => Ok(()),
        Ok(health) => Err(format!(
            "the Kubernetes API is not healthy: {}",
            health.detail
        )),
        Err(e) => Err(format!(
            "the Kubernetes API could not be checked: {}",
            activity_failure_text(&e)
        )),
    }
}

/// Lists everything: ARM (paged, the three kinds side by side), Nodes (paged), volumes, and
/// the running workflows (last, so that it sees the most). Any failure is the reason to freeze.
async fn take_inventory(
    ctx: &mut WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
) -> Result<Inventory, String> {
    let lists = ResourceKind::ALL.map(|kind| list_kind(ctx, kind));
    let mut resources = Vec::new();
    for listed in join_all(lists).await {
        resources.extend(listed?);
    }
    let nodes = list_nodes(ctx).await?;
    let volume_disks = ctx
        .execute_activity(KubeActivities::volume_disks, (), activity_options::read())
        .await
        .map_err(|e| {
            format!(
                "listing PersistentVolumes failed: {}",
                activity_failure_text(&e)
            )
        })?;
    let running = running_workflows(ctx, request).await?;
    Ok(Inventory {
        resources,
        nodes,
        volume_disks,
        running,
    })
}

/// Every resource of `kind`, a bounded number of pages per activity.
async fn list_kind(
    ctx: &WorkflowContext<OrphanSweepWorkflow>,
    kind: ResourceKind,
) -> Result<Vec<nodewright_model::sweep::ArmResource>, String> {
    let mut resources = Vec::new();
    let mut next_link = None;
    let mut guard = PageGuard::new();
    loop {
        let page: InventoryPage = ctx
            .execute_activity(
                ArmReadActivities::inventory_page,
                ListInventoryPage {
                    kind,
                    next_link: next_link.take(),
                    max_items: ARM_ITEMS_PER_CALL,
                },
                activity_options::paged(activity_options::read()),
            )
            .await
            .map_err(|e| format!("listing {kind}s failed: {}", activity_failure_text(&e)))?;
        resources.extend(page.resources);
        match guard.after_page(&format!("{kind}s"), page.next_link) {
            PageStep::Follow(link) => next_link = Some(link),
            PageStep::Done => return Ok(resources),
            PageStep::Stop(reason) => return Err(reason),
        }
    }
}

/// Every Node, page by page.
async fn list_nodes(
    ctx: &mut WorkflowContext<OrphanSweepWorkflow>,
) -> Result<Vec<nodewright_model::sweep::NodeRecord>, String> {
    let mut nodes = Vec::new();
    let mut continue_token = None;
    let mut guard = PageGuard::new();
    loop {
        let page: NodesPage = ctx
            .execute_activity(
                KubeActivities::list_nodes_page,
                ListNodesPage {
                    continue_token: continue_token.take(),
                    limit: NODES_PER_PAGE,
                },
                activity_options::paged(activity_options::read()),
            )
            .await
            .map_err(|e| format!("listing Nodes failed: {}", activity_failure_text(&e)))?;
        nodes.extend(page.nodes);
        match guard.after_page("Nodes", page.continue_token) {
            PageStep::Follow(token) => continue_token = Some(token),
            PageStep::Done => return Ok(nodes),
            PageStep::Stop(reason) => return Err(reason),
        }
    }
}

/// The nodewright workflows running in the cluster, other sweeps left out.
async fn running_workflows(
    ctx: &mut WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
) -> Result<Vec<nodewright_model::sweep::RunningWorkflow>, String> {
    let running = ctx
        .execute_activity(
            TemporalActivities::running_workflows,
            ListRunning {
                cluster: request.cluster.clone(),
            },
            activity_options::read(),
        )
        .await
        .map_err(|e| {
            format!(
                "listing the running nodewright workflows failed: {}",
                activity_failure_text(&e)
            )
        })?;
    Ok(running
        .into_iter()
        .filter(|w| w.operation != Operation::Sweep.as_str())
        .collect())
}

fn seen(inventory: &Inventory) -> Seen {
    let count = |kind| {
        let n = inventory
            .resources
            .iter()
            .filter(|r| r.kind == kind)
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    Seen {
        vms: count(ResourceKind::Vm),
        nics: count(ResourceKind::Nic),
        disks: count(ResourceKind::Disk),
        nodes: u32::try_from(inventory.nodes.len()).unwrap_or(u32::MAX),
    }
}

fn policy(
    ctx: &WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    scope: &ArmScope,
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
    }
}

/// Waits for an `approve` naming this run and `planned` until the approval timeout (phase
/// `braked` when `brake` holds the plan, else `awaiting-approval`); who approved, or none.
/// Only an approval that comes during the wait counts.
async fn await_approval(
    ctx: &mut WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    planned: u32,
    brake: Option<&Brake>,
) -> Option<String> {
    let timeout = request.approval_wait();
    let deadline = later(now(ctx), timeout);
    let (phase, why) = match brake {
        Some(brake) => (
            SweepPhase::Braked,
            format!("braked ({}): {}", brake.reason.as_str(), brake.message),
        ),
        None => (
            SweepPhase::AwaitingApproval,
            format!(
                "{planned} removals planned, more than max_deletions {}",
                request.max_deletions
            ),
        ),
    };
    let summary = format!(
        "{why}; waiting for `nodewright sweep approve` naming this run and its {planned} planned removals until {}",
        rfc3339(deadline)
    );
    ctx.set_current_details(summary.clone());
    set_status(ctx, phase, summary, |status| {
        status.approval_deadline = Some(rfc3339(deadline));
    });
    ctx.state_mut(|s| {
        s.approved_by = None;
        s.waiting = Some(planned);
    });
    select! {
        _ = ctx.wait_condition(|s: &OrphanSweepWorkflow| s.approved_by.is_some()).fuse() => {},
        _ = ctx.timer(timeout).fuse() => {},
    };
    ctx.state_mut(|s| s.waiting = None);
    if cancellation::requested(ctx) {
        return None;
    }
    ctx.state(|s| s.approved_by.clone())
}

/// Removes what the plan says, `parallelism` at a time, recording each outcome.
async fn act(
    ctx: &mut WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    audit: &mut SweepAudit,
) {
    let todo: Vec<usize> = audit
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.decision.action.removes() && e.outcome.is_none())
        .map(|(index, _)| index)
        .collect();
    let planned = audit.planned();
    set_status(
        ctx,
        SweepPhase::Acting,
        format!("removing {} of {planned} planned", todo.len()),
        |_| {},
    );
    let width = usize::try_from(request.parallelism.max(1)).unwrap_or(1);
    for batch in todo.chunks(width) {
        if cancellation::requested(ctx) {
            return;
        }
        let mut names = Vec::new();
        for &index in batch {
            let entry = &audit.entries[index];
            let name = match entry.decision.action {
                Action::Replace => Some(
                    MachineName::generate(
                        entry.decision.pool.as_deref().unwrap_or("machine"),
                        ctx.random::<u64>(),
                    )
                    .to_string(),
                ),
                _ => None,
            };
            names.push(name);
        }
        let work = batch
            .iter()
            .zip(names)
            .map(|(&index, replacement)| remove(ctx, request, &audit.entries[index], replacement));
        let outcomes = join_all(work).await;
        for (&index, outcome) in batch.iter().zip(outcomes) {
            audit.record(index, outcome);
        }
        let (done, failed) = audit.tally();
        set_status(
            ctx,
            SweepPhase::Acting,
            format!("{done} of {planned} removals done, {failed} failed"),
            |status| {
                status.done = done;
                status.failed = failed;
            },
        );
    }
}

/// Removes one thing; every failure becomes its outcome, never the sweep's.
async fn remove(
    ctx: &WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    entry: &AuditEntry,
    replacement: Option<String>,
) -> Outcome {
    let decision = &entry.decision;
    match (decision.kind, decision.action) {
        (SubjectKind::Vm, Action::Delete) => delete_vm(ctx, request, decision).await,
        (SubjectKind::Vm, Action::Replace) => replace(ctx, request, decision, replacement).await,
        (SubjectKind::Nic, _) => delete_leftover(ctx, request, decision, LeftoverKind::Nic).await,
        (SubjectKind::Disk, _) => delete_leftover(ctx, request, decision, LeftoverKind::Disk).await,
        (SubjectKind::Node, _) => delete_node(ctx, decision).await,
        (SubjectKind::Vm, _) => Outcome::Skipped {
            reason: "nothing to do".to_owned(),
        },
    }
}

/// An orphan VM: DeleteMachine (no Node, so no drain; NIC and OS disk go with the VM, leftovers
/// after it).
async fn delete_vm(
    ctx: &WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    decision: &Decision,
) -> Outcome {
    let workflow_id = WorkflowId::for_subject(Operation::Delete, &request.cluster, &decision.name);
    let input = DeleteMachineRequest {
        cluster: request.cluster.clone(),
        machine: decision.name.clone(),
        skip_drain: true,
        force: false,
        drain_policy: None,
    };
    let options = cancellation::shielded_child(child_options(
        &workflow_id,
        format!(
            "orphan sweep: delete orphan VM {} ({})",
            decision.name, decision.detail
        ),
    ));
    let started = match ctx
        .start_child_workflow(DeleteMachineWorkflow::run, input, options)
        .await
    {
        Ok(started) => started,
        Err(error) => return start_failed(&workflow_id, &error),
    };
    match started.result().await {
        Ok(deleted) => match deleted.foreign_vm {
            Some(found) => Outcome::LeftAlone {
                reason: format!("the VM's tags changed: {found}"),
            },
            None if deleted.vm_deleted => Outcome::Deleted,
            None => Outcome::AlreadyGone,
        },
        Err(error) => Outcome::Failed {
            error: format!("{workflow_id} failed: {}", child_failure_text(&error)),
        },
    }
}

/// An unhealthy machine: DeleteMachine (drained, force mode as the Node is NotReady) and, for a
/// pool machine, CreateMachine from the pool's last completed rollout, started only once the
/// DeleteMachine has started (a machine someone else is deleting gets no second replacement).
/// Started, not awaited.
async fn replace(
    ctx: &WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    decision: &Decision,
    replacement: Option<String>,
) -> Outcome {
    let create = match (&decision.pool, replacement) {
        (Some(pool), Some(machine)) => {
            let looked = ctx
                .execute_activity(
                    TemporalActivities::pool_of_last_rollout,
                    PoolOfLastRollout {
                        cluster: request.cluster.clone(),
                        pool: pool.clone(),
                    },
                    activity_options::read(),
                )
                .await;
            match looked {
                Ok(Some(spec)) => Some(CreateMachineRequest {
                    cluster: request.cluster.clone(),
                    pool: spec.name.clone(),
                    machine,
                    template: spec.template.clone(),
                    template_hash: spec.template_hash.clone(),
                    creation_timeout: spec.timeouts.creation,
                    keep_on_failure: false,
                    drain: spec.drain.clone(),
                }),
                Ok(None) => {
                    return Outcome::Skipped {
                        reason: format!(
                            "no completed rollout of pool {pool} records its template, so no replacement can be built; run `nodewright pool rollout` for the pool, or `nodewright machine delete {}`",
                            decision.name
                        ),
                    };
                }
                Err(e) => {
                    return Outcome::Failed {
                        error: format!(
                            "reading pool {pool}'s template failed: {}",
                            activity_failure_text(&e)
                        ),
                    };
                }
            }
        }
        _ => None,
    };
    let delete_id = WorkflowId::for_subject(Operation::Delete, &request.cluster, &decision.name);
    let input = DeleteMachineRequest {
        cluster: request.cluster.clone(),
        machine: decision.name.clone(),
        skip_drain: false,
        force: false,
        drain_policy: None,
    };
    let options = cancellation::shielded_child(child_options(
        &delete_id,
        format!(
            "orphan sweep: replace unhealthy machine {} ({})",
            decision.name, decision.detail
        ),
    ));
    if let Err(error) = ctx
        .start_child_workflow(DeleteMachineWorkflow::run, input, options)
        .await
    {
        return start_failed(&delete_id, &error);
    }
    let mut started = vec![delete_id.to_string()];
    if let Some(input) = create {
        let create_id =
            WorkflowId::for_subject(Operation::Create, &request.cluster, &input.machine);
        let options = cancellation::shielded_child(child_options(
            &create_id,
            format!(
                "orphan sweep: replacement for unhealthy machine {} (pool {})",
                decision.name, input.pool
            ),
        ));
        match ctx
            .start_child_workflow(CreateMachineWorkflow::run, input, options)
            .await
        {
            Ok(_) => started.push(create_id.to_string()),
            Err(error) => {
                return Outcome::Failed {
                    error: format!(
                        "started {delete_id} but its replacement {create_id} did not start: {error}"
                    ),
                };
            }
        }
    }
    Outcome::Replacing { workflows: started }
}

/// An orphan NIC or OS disk (checked again by the activity: ours, attached to nothing).
async fn delete_leftover(
    ctx: &WorkflowContext<OrphanSweepWorkflow>,
    request: &SweepRequest,
    decision: &Decision,
    kind: LeftoverKind,
) -> Outcome {
    let writes = arm_write_task_queue(ctx.task_queue());
    let deleted = ctx
        .execute_activity(
            ArmWriteActivities::delete_leftover,
            DeleteLeftover {
                cluster: request.cluster.clone(),
                leftover: Leftover {
                    kind,
                    name: decision.name.clone(),
                },
            },
            cancellation::shielded(activity_options::arm_cleanup_write(&writes)),
        )
        .await;
    match deleted {
        Ok(LeftoverDeleted::Deleted) => Outcome::Deleted,
        Ok(LeftoverDeleted::AlreadyGone) => Outcome::AlreadyGone,
        Ok(LeftoverDeleted::LeftAlone) => Outcome::LeftAlone {
            reason: "looked at again, it is attached, re-tagged or not a nodewright OS disk"
                .to_owned(),
        },
        Err(e) => Outcome::Failed {
            error: activity_failure_text(&e),
        },
    }
}

/// An orphan Node object, conditional on its uid.
async fn delete_node(ctx: &WorkflowContext<OrphanSweepWorkflow>, decision: &Decision) -> Outcome {
    let deleted = ctx
        .execute_activity(
            KubeActivities::delete_orphan_node,
            DeleteOrphanNode {
                name: decision.name.clone(),
                uid: decision.uid.clone().unwrap_or_default(),
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await;
    match deleted {
        Ok(OrphanNodeDeleted::Deleted) => Outcome::Deleted,
        Ok(OrphanNodeDeleted::AlreadyGone) => Outcome::AlreadyGone,
        Ok(OrphanNodeDeleted::LeftAlone { reason }) => Outcome::LeftAlone { reason },
        Err(e) => Outcome::Failed {
            error: activity_failure_text(&e),
        },
    }
}

/// A child that could not start: its ID taken means someone else works on the machine.
fn start_failed(
    workflow_id: &WorkflowId,
    error: &temporalio_sdk::ChildWorkflowStartError,
) -> Outcome {
    let taken = matches!(
        error,
        temporalio_sdk::ChildWorkflowStartError::StartFailed {
            cause: temporalio_sdk::StartChildWorkflowExecutionFailedCause::WorkflowAlreadyExists,
            ..
        }
    );
    if taken {
        Outcome::Skipped {
            reason: format!("{workflow_id} is already running; left to it"),
        }
    } else {
        Outcome::Failed {
            error: format!("could not start {workflow_id}: {error}"),
        }
    }
}

/// Search attributes and the first status.
fn announce(ctx: &mut WorkflowContext<OrphanSweepWorkflow>, request: &SweepRequest) {
    ctx.upsert_search_attributes([
        search::CLUSTER.value_set(request.cluster.to_string()),
        search::OPERATION.value_set(Operation::Sweep.to_string()),
    ]);
    let mode = match (request.dry_run, request.remediate) {
        (true, _) => "dry run",
        (false, true) => "remediating",
        (false, false) => "deleting orphans",
    };
    ctx.set_current_details(format!(
        "orphan sweep of cluster {} ({mode}, max_deletions {}, grace {})",
        request.cluster,
        request.max_deletions,
        nodewright_model::sweep::human(request.grace)
    ));
}

/// Sets the phase (and the `NodewrightPhase` attribute when it changes) and the summary.
fn set_status(
    ctx: &mut WorkflowContext<OrphanSweepWorkflow>,
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
