#![doc = include_str!("../runbooks/rolling_update.md")]

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use futures::FutureExt;
use nodewright_activities::azure::machines::{ArmReadActivities, ArmScope, ListPoolVms};
use nodewright_activities::kube::{KubeActivities, ListPoolNodes, MachineNode, MarkOutdated};
use nodewright_model::cancel::delete_finished_anyway;
use nodewright_model::machine::{CreateMachineRequest, DeleteMachineRequest};
use nodewright_model::machine_name::MachineName;
use nodewright_model::pool::RolloutStrategy;
use nodewright_model::rollout::{
    Budget, ChildFailure, ChildKind, Counts, Holdup, InFlight, MachineView, ObservedMachine, Plan,
    PlanInput, RolloutOutcome, RolloutPhase, RolloutRequest, RolloutResult, RolloutStatus, Running,
    StrategyChange, StrategyView, TemplateRecord, made_progress, observe, plan,
};
use nodewright_model::{Operation, WorkflowId};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::workflows::select;
use temporalio_sdk::{
    ActivityOptions, ContinueAsNewOptions, StartChildWorkflowExecutionFailedCause,
    SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult, WorkflowTermination,
};

use crate::create_machine::CreateMachineWorkflow;
use crate::delete_machine::DeleteMachineWorkflow;
use crate::progress::child_options;
use crate::progress::{activity_failure_text, child_failure_text, now, was_canceled};
use crate::search;
use crate::{activity_options, cancellation, input};

/// Rolls a pool to a new template; see the runbook above.
#[workflow]
#[derive(Default)]
pub struct RollingUpdateWorkflow {
    status: Option<RolloutStatus>,
    /// The strategy in force (`set_strategy` changes it).
    strategy: Option<RolloutStrategy>,
    /// Bumped by every signal and update, so that the wait wakes up.
    wakeups: u64,
    /// The `NodewrightPhase` last set (it is set again only when it changes: every upsert is a
    /// history event).
    phase_shown: Option<&'static str>,
}

#[workflow_methods]
impl RollingUpdateWorkflow {
    /// Runs the runbook.
    #[run(name = "RollingUpdate")]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: RolloutRequest,
    ) -> WorkflowResult<RolloutResult> {
        input::admit(
            ctx,
            "RollingUpdate",
            &input::Subject {
                cluster: &request.cluster,
                named: Some(("pool.name", &request.pool.name)),
            },
            request.check(),
        )?;
        announce(ctx, &request);
        let scope = ctx
            .execute_activity(
                ArmReadActivities::scope,
                (),
                // Reads the worker's configuration: let it answer even after a request, so the
                // cancellation path runs with it.
                cancellation::shielded(activity_options::read()),
            )
            .await?;
        match roll(ctx, &request, &scope).await {
            Finish::Ended(result) => Ok(*result),
            Finish::Canceled(result) => {
                ctx.set_current_details(result.status.summary.clone().unwrap_or_default());
                Err(WorkflowTermination::cancelled_with_details(*result))
            }
            Finish::ContinueAsNew(next) => {
                match ctx.continue_as_new(*next, ContinueAsNewOptions::default()) {
                    Err(termination) => Err(termination),
                    Ok(never) => match never {},
                }
            }
        }
    }

    /// No new children from the next loop; those in flight finish.
    #[signal(name = "pause")]
    pub fn pause(&mut self, _ctx: &mut SyncWorkflowContext<Self>, by: String) {
        self.wakeups += 1;
        if let Some(status) = self.status.as_mut()
            && matches!(
                status.phase,
                RolloutPhase::Progressing | RolloutPhase::AwaitingApproval
            )
        {
            status.phase = RolloutPhase::Paused;
            status.paused_because = Some(format!("paused by {by}"));
        }
    }

    /// Goes on after a pause (the failure count starts again from 0).
    #[signal(name = "resume")]
    pub fn resume(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _by: String) {
        self.wakeups += 1;
        if let Some(status) = self.status.as_mut()
            && status.phase == RolloutPhase::Paused
        {
            status.phase = RolloutPhase::Progressing;
            status.paused_because = None;
            status.failures_counted = 0;
        }
    }

    /// Lets the children in flight finish, starts nothing new, then ends `aborted`.
    #[signal(name = "abort")]
    pub fn abort(&mut self, _ctx: &mut SyncWorkflowContext<Self>, by: String) {
        self.wakeups += 1;
        if let Some(status) = self.status.as_mut()
            && !matches!(
                status.phase,
                RolloutPhase::Completed | RolloutPhase::Aborted
            )
        {
            status.phase = RolloutPhase::Aborting;
            status.paused_because = Some(format!("aborted by {by}"));
        }
    }

    /// Lets a canary rollout go on beyond its canary.
    #[signal(name = "approve")]
    pub fn approve(&mut self, _ctx: &mut SyncWorkflowContext<Self>, by: String) {
        self.wakeups += 1;
        if let Some(status) = self.status.as_mut() {
            status.approved_by = Some(by);
            if status.phase == RolloutPhase::AwaitingApproval {
                status.phase = RolloutPhase::Progressing;
            }
        }
    }

    /// Refuses a change that changes nothing or zeroes both budgets.
    #[update_validator(set_strategy)]
    fn validate_set_strategy(
        &self,
        _ctx: &WorkflowContextView,
        change: &StrategyChange,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let Some(strategy) = self.strategy.as_ref() else {
            return Err("the rollout has not started yet; try again in a moment".into());
        };
        change.apply(strategy).map(|_| ()).map_err(Into::into)
    }

    /// New maxSurge/maxUnavailable, used from the next plan; returns the strategy in force.
    #[update(name = "set_strategy")]
    pub fn set_strategy(
        &mut self,
        _ctx: &mut SyncWorkflowContext<Self>,
        change: StrategyChange,
    ) -> StrategyView {
        self.wakeups += 1;
        let current = self.strategy.clone().unwrap_or_else(default_strategy);
        let changed = change.apply(&current).unwrap_or(current);
        let desired = self.status.as_ref().map_or(0, |s| s.desired);
        let view = strategy_view(&changed, desired);
        if let Some(status) = self.status.as_mut() {
            status.strategy = view;
        }
        self.strategy = Some(changed);
        view
    }

    /// Desired, updated, ready, available, old, in flight, phase and why, failures, machines,
    /// the estimated time left.
    #[query(name = "status")]
    pub fn status(&self, _ctx: &WorkflowContextView) -> RolloutStatus {
        self.status.clone().unwrap_or_else(empty_status)
    }
}

/// How a run ends.
enum Finish {
    Ended(Box<RolloutResult>),
    Canceled(Box<RolloutResult>),
    ContinueAsNew(Box<RolloutRequest>),
}

/// A child in flight and the future of its end.
struct Child {
    entry: InFlight,
    outcome: Pin<Box<dyn Future<Output = ChildEnd>>>,
}

/// How a child ended.
enum ChildEnd {
    Succeeded,
    Failed(String),
    /// Cancelled with the rollout: it ended by its own runbook (a create removed what it made,
    /// a delete gave its machine back or finished past its point of no return).
    Canceled(String),
}

/// The loop: observe → plan → act → wait, until done, aborted or due to continue as new.
async fn roll(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    scope: &ArmScope,
) -> Finish {
    let mut children: Vec<Child> = Vec::new();
    let mut tainted: BTreeSet<String> = BTreeSet::new();
    loop {
        if cancellation::requested(ctx) {
            return cancel(ctx, request, children).await;
        }
        let at = now(ctx).timestamp();
        let running: Vec<Running<'_>> = children
            .iter()
            .map(|c| Running {
                machine: &c.entry.machine,
                creating: c.entry.kind == ChildKind::Create,
                since: c.entry.started_at / 1000,
            })
            .collect();
        let observed = match look(ctx, request, &running).await {
            Ok(machines) => Some(machines),
            Err(reason) => {
                note(
                    ctx,
                    format!("could not observe the pool ({reason}); looking again"),
                );
                None
            }
        };
        drop(running);

        if let Some(machines) = &observed {
            mark_outdated(ctx, request, scope, machines, &mut tainted).await;
            let phase = ctx.state(|s| {
                s.status
                    .as_ref()
                    .map_or(RolloutPhase::Progressing, |st| st.phase)
            });
            let decided = decide(ctx, request, machines, at);
            record_look(ctx, request, machines, &decided.counts, decided.holdup, at);

            if phase == RolloutPhase::Aborting && children.is_empty() {
                return Finish::Ended(Box::new(finish(ctx, request, RolloutOutcome::Aborted)));
            }
            if decided.done && children.is_empty() && phase != RolloutPhase::Aborting {
                clear_outdated(ctx, request, scope, machines).await;
                return Finish::Ended(Box::new(finish(ctx, request, RolloutOutcome::Completed)));
            }
            if decided.holdup == Some(Holdup::CanaryReached)
                && children.is_empty()
                && phase == RolloutPhase::Progressing
            {
                ctx.state_mut(|s| {
                    if let Some(status) = s.status.as_mut() {
                        status.phase = RolloutPhase::AwaitingApproval;
                    }
                });
            }
            let continue_due = continue_as_new_due(ctx, request);
            let phase = ctx.state(|s| s.status.as_ref().map(|st| st.phase));
            if phase == Some(RolloutPhase::Progressing)
                && !continue_due
                && !cancel_came_while_looking(ctx)
            {
                let at_millis = now(ctx).timestamp_millis();
                start_children(ctx, request, &decided, &mut children, at_millis).await;
            }
            if continue_due && children.is_empty() {
                return Finish::ContinueAsNew(Box::new(next_run(ctx, request)));
            }
        }
        show_in_flight(ctx, &children);
        set_phase_attribute(ctx);

        let seen = ctx.state(|s| s.wakeups);
        let interval = request.observe_wait();
        let finished = select! {
            done = first_finished(&mut children).fuse() => Some(done),
            _ = ctx.wait_condition(move |s: &RollingUpdateWorkflow| s.wakeups != seen) => None,
            _ = ctx.timer(interval) => None,
        };
        if let Some((index, outcome)) = finished {
            let child = children.remove(index);
            child_finished(ctx, request, child.entry, outcome);
        }
    }
}

/// Whether a cancellation request reached the run during this round's look: no child is started
/// after it (the loop's top takes the cancellation path). The check is recorded as a patch, so
/// runs recorded before it replay unchanged; the marker appears only in runs cancelled there.
fn cancel_came_while_looking(ctx: &WorkflowContext<RollingUpdateWorkflow>) -> bool {
    cancellation::requested(ctx) && ctx.patched(CANCEL_WHILE_LOOKING_PATCH)
}

/// Patch marker of [`cancel_came_while_looking`].
const CANCEL_WHILE_LOOKING_PATCH: &str = "rollout-no-start-after-cancel";

/// The patch that passes the pool's drain settings to each DeleteMachine it starts (the trusted
/// baseline the Node's drain-policy annotation is bounded by); runs recorded before it passed
/// none, and their drains read the VM's tag instead.
const DRAIN_POLICY_PATCH: &str = "rollout-passes-drain-policy";

/// The plan for what a look saw, under the strategy in force and the canary's state.
fn decide(
    ctx: &WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    machines: &[ObservedMachine],
    at: i64,
) -> Plan {
    let (strategy, canary_open) = ctx.state(|s| {
        (
            s.strategy.clone().unwrap_or_else(default_strategy),
            s.status.as_ref().is_some_and(|st| st.approved_by.is_some()),
        )
    });
    let replicas = request.pool.replicas;
    let budget = Budget::resolve(strategy.max_surge, strategy.max_unavailable, replicas);
    let new_target = match request.canary {
        Some(n) if !canary_open => n.min(replicas),
        _ => replicas,
    };
    plan(&PlanInput {
        replicas,
        template_hash: &request.pool.template_hash,
        budget,
        new_target,
        machines,
        now: at,
        health_timeout_secs: secs(request.pool.timeouts.health),
    })
}

/// The cancellation path: nothing new starts; the children in flight were asked to cancel with
/// this run (their cancellation inherits it) and each ends by its own runbook; once all have
/// ended, the rollout ends Canceled with what was done.
async fn cancel(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    mut children: Vec<Child>,
) -> Finish {
    let because = match cancellation::reason(ctx) {
        Some(reason) => format!("canceled: {reason}"),
        None => "canceled".to_owned(),
    };
    ctx.state_mut(|s| {
        if let Some(status) = s.status.as_mut() {
            status.paused_because = Some(because);
        }
    });
    show_in_flight(ctx, &children);
    let mut canceled_deletes = Vec::new();
    while !children.is_empty() {
        let (index, outcome) = first_finished(&mut children).await;
        let child = children.remove(index);
        match outcome {
            // Booked after the last look: past its point of no return it finished the deletion.
            ChildEnd::Canceled(reason) if child.entry.kind == ChildKind::Delete => {
                canceled_deletes.push((child.entry, reason));
            }
            outcome => child_finished(ctx, request, child.entry, outcome),
        }
        show_in_flight(ctx, &children);
    }
    // A last look, shielded from the cancellation: the status shows the pool as the rollout
    // leaves it, and counts the deletions that finished.
    match look_with(
        ctx,
        request,
        &[],
        cancellation::shielded(activity_options::read()),
    )
    .await
    {
        Ok(machines) => {
            let at = now(ctx).timestamp();
            let decided = decide(ctx, request, &machines, at);
            record_look(ctx, request, &machines, &decided.counts, decided.holdup, at);
            let left: Vec<&str> = machines.iter().map(|m| m.name.as_str()).collect();
            for (entry, reason) in canceled_deletes {
                let outcome = if delete_finished_anyway(&entry.machine, &left) {
                    ChildEnd::Succeeded
                } else {
                    ChildEnd::Canceled(reason)
                };
                child_finished(ctx, request, entry, outcome);
            }
        }
        Err(reason) => {
            note(
                ctx,
                format!("could not look at the pool after the cancellation ({reason})"),
            );
            for (entry, reason) in canceled_deletes {
                child_finished(ctx, request, entry, ChildEnd::Canceled(reason));
            }
        }
    }
    Finish::Canceled(Box::new(finish(ctx, request, RolloutOutcome::Canceled)))
}

/// The first child to finish (children are polled in order, so replays agree), with its index.
fn first_finished(children: &mut [Child]) -> impl Future<Output = (usize, ChildEnd)> + '_ {
    std::future::poll_fn(move |cx| {
        for (index, child) in children.iter_mut().enumerate() {
            if let Poll::Ready(outcome) = child.outcome.as_mut().poll(cx) {
                return Poll::Ready((index, outcome));
            }
        }
        Poll::Pending
    })
}

/// Observes the pool: its VMs and Nodes, joined with the work in flight.
async fn look(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    running: &[Running<'_>],
) -> Result<Vec<ObservedMachine>, String> {
    look_with(ctx, request, running, activity_options::read()).await
}

/// [`look`] with the reads' `options`.
async fn look_with(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    running: &[Running<'_>],
    options: ActivityOptions,
) -> Result<Vec<ObservedMachine>, String> {
    let vms = ctx
        .execute_activity(
            ArmReadActivities::list_pool_vms,
            ListPoolVms {
                cluster: request.cluster.clone(),
                pool: request.pool.name.clone(),
            },
            activity_options::paged(options.clone()),
        )
        .await
        .map_err(|e| activity_failure_text(&e))?;
    let nodes = ctx
        .execute_activity(
            KubeActivities::list_pool_nodes,
            ListPoolNodes {
                pool: request.pool.name.clone(),
            },
            options,
        )
        .await
        .map_err(|e| activity_failure_text(&e))?;
    Ok(observe(&vms, &nodes, running, &request.pool.template_hash))
}

/// Taints the Nodes of outdated machines `nodewright.io/outdated:PreferNoSchedule` (once per
/// machine and run; a failure is noted and tried again at the next look).
async fn mark_outdated(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    scope: &ArmScope,
    machines: &[ObservedMachine],
    tainted: &mut BTreeSet<String>,
) {
    let nodes: Vec<MachineNode> = machines
        .iter()
        .filter(|m| m.template_hash != request.pool.template_hash && !m.tainted_outdated)
        .filter(|m| !tainted.contains(&m.name))
        .map(|m| MachineNode {
            node: m.name.clone(),
            vm_id: scope.vm_id(&m.name),
        })
        .collect();
    if nodes.is_empty() {
        return;
    }
    let names: Vec<String> = nodes.iter().map(|n| n.node.clone()).collect();
    let marked = ctx
        .execute_activity(
            KubeActivities::mark_outdated,
            MarkOutdated {
                nodes,
                outdated: true,
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await;
    match marked {
        Ok(_) => tainted.extend(names),
        Err(e) => note(
            ctx,
            format!(
                "could not taint outdated nodes ({}); trying again",
                activity_failure_text(&e)
            ),
        ),
    }
}

/// Removes the outdated taint from every machine of the pool that still has it.
async fn clear_outdated(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    scope: &ArmScope,
    machines: &[ObservedMachine],
) {
    let nodes: Vec<MachineNode> = machines
        .iter()
        .filter(|m| m.tainted_outdated)
        .map(|m| MachineNode {
            node: m.name.clone(),
            vm_id: scope.vm_id(&m.name),
        })
        .collect();
    if nodes.is_empty() {
        return;
    }
    if let Err(e) = ctx
        .execute_activity(
            KubeActivities::mark_outdated,
            MarkOutdated {
                nodes,
                outdated: false,
            },
            activity_options::kube_write(),
        )
        .await
    {
        note(
            ctx,
            format!(
                "could not remove the outdated taint ({}); remove it by hand: kubectl taint nodes -l nodewright.io/pool={} nodewright.io/outdated-",
                activity_failure_text(&e),
                request.pool.name
            ),
        );
    }
}

/// Starts the children the plan asks for; `at` is now in Unix milliseconds.
async fn start_children(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    decided: &nodewright_model::rollout::Plan,
    children: &mut Vec<Child>,
    at: i64,
) {
    for victim in &decided.delete {
        let workflow_id =
            WorkflowId::for_subject(Operation::Delete, &request.cluster, &victim.name);
        let input = DeleteMachineRequest {
            cluster: request.cluster.clone(),
            machine: victim.name.clone(),
            skip_drain: false,
            force: false,
            drain_policy: ctx
                .patched(DRAIN_POLICY_PATCH)
                .then(|| request.pool.drain.clone()),
        };
        let options = child_options(
            &workflow_id,
            format!(
                "rollout of pool {}: delete machine {} ({})",
                request.pool.name, victim.name, victim.reason
            ),
        );
        let entry = InFlight {
            machine: victim.name.clone(),
            kind: ChildKind::Delete,
            workflow_id: workflow_id.to_string(),
            started_at: at,
        };
        match ctx
            .start_child_workflow(DeleteMachineWorkflow::run, input, options)
            .await
        {
            Ok(started) => track(children, entry, started.result()),
            Err(error) => start_failed(ctx, request, entry, &error),
        }
    }
    for _ in 0..decided.create {
        let machine = MachineName::generate(&request.pool.name, ctx.random::<u64>()).to_string();
        let workflow_id = WorkflowId::for_subject(Operation::Create, &request.cluster, &machine);
        let input = CreateMachineRequest {
            cluster: request.cluster.clone(),
            pool: request.pool.name.clone(),
            machine: machine.clone(),
            template: request.pool.template.clone(),
            template_hash: request.pool.template_hash.clone(),
            creation_timeout: request.pool.timeouts.creation,
            keep_on_failure: false,
            drain: request.pool.drain.clone(),
        };
        let options = child_options(
            &workflow_id,
            format!(
                "rollout of pool {}: create machine {machine} (template {})",
                request.pool.name, request.pool.template_hash
            ),
        );
        let entry = InFlight {
            machine,
            kind: ChildKind::Create,
            workflow_id: workflow_id.to_string(),
            started_at: at,
        };
        match ctx
            .start_child_workflow(CreateMachineWorkflow::run, input, options)
            .await
        {
            Ok(started) => track(children, entry, started.result()),
            Err(error) => start_failed(ctx, request, entry, &error),
        }
    }
}

/// Keeps a started child and the future of its end (its result reduced to success or the
/// failure's text).
fn track<T, F>(children: &mut Vec<Child>, entry: InFlight, result: F)
where
    F: Future<Output = Result<T, temporalio_sdk::ChildWorkflowExecutionError>> + 'static,
{
    children.push(Child {
        entry,
        outcome: Box::pin(async move {
            match result.await {
                Ok(_) => ChildEnd::Succeeded,
                Err(e) if was_canceled(&e) => ChildEnd::Canceled(child_failure_text(&e)),
                Err(e) => ChildEnd::Failed(child_failure_text(&e)),
            }
        }),
    });
}

/// A child that could not start. One whose ID is taken (someone else is creating or deleting
/// that machine) is not counted as a failure: the next look sees what that run does.
fn start_failed(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    entry: InFlight,
    error: &temporalio_sdk::ChildWorkflowStartError,
) {
    let taken = matches!(
        error,
        temporalio_sdk::ChildWorkflowStartError::StartFailed {
            cause: StartChildWorkflowExecutionFailedCause::WorkflowAlreadyExists,
            ..
        }
    );
    let reason = if taken {
        format!(
            "{} is already running (started by someone else); left to it",
            entry.workflow_id
        )
    } else {
        format!("could not start {}: {error}", entry.workflow_id)
    };
    record_failure(ctx, request, entry, reason, !taken);
}

/// Books a finished child: its duration, or its failure (counted against `max_failures`).
fn child_finished(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    entry: InFlight,
    outcome: ChildEnd,
) {
    let at = now(ctx).timestamp_millis();
    match outcome {
        ChildEnd::Succeeded => ctx.state_mut(|s| {
            if let Some(status) = s.status.as_mut() {
                let millis = u64::try_from(at.saturating_sub(entry.started_at)).unwrap_or(0);
                status.timings.record(entry.kind, millis);
                match entry.kind {
                    ChildKind::Create => status.created = status.created.saturating_add(1),
                    ChildKind::Delete => status.deleted = status.deleted.saturating_add(1),
                }
            }
        }),
        ChildEnd::Failed(reason) => record_failure(ctx, request, entry, reason, true),
        ChildEnd::Canceled(reason) => {
            record_failure(ctx, request, entry, format!("canceled: {reason}"), false);
        }
    }
}

/// Records a failed child; past `max_failures` counted failures the rollout pauses itself.
fn record_failure(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    entry: InFlight,
    reason: String,
    counted: bool,
) {
    let at = now(ctx).timestamp();
    let pool = request.pool.name.clone();
    ctx.state_mut(|s| {
        let Some(status) = s.status.as_mut() else {
            return;
        };
        let machine = entry.machine.clone();
        status.failures.push(ChildFailure {
            machine: entry.machine,
            kind: entry.kind,
            workflow_id: entry.workflow_id,
            reason: reason.clone(),
            at,
        });
        if !counted {
            return;
        }
        status.failures_counted = status.failures_counted.saturating_add(1);
        if status.failures_counted >= status.max_failures
            && status.phase == RolloutPhase::Progressing
        {
            status.phase = RolloutPhase::Paused;
            status.paused_because = Some(format!(
                "paused itself after {} failed machine operations (maxFailures {}); last: {machine}: {reason}. Fix the cause, then run `nodewright pool rollout resume {pool}`",
                status.failures_counted, status.max_failures
            ));
        }
    });
}

/// Brings the status up to date with a look at the pool: counts, machines, progress, stall,
/// estimate.
fn record_look(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    machines: &[ObservedMachine],
    counts: &Counts,
    holdup: Option<Holdup>,
    at: i64,
) {
    let deadline = secs(request.pool.strategy.progress_deadline);
    let replicas = request.pool.replicas;
    let template = request.pool.template_hash.clone();
    let counts = *counts;
    let views: Vec<MachineView> = machines
        .iter()
        .map(|m| MachineView {
            name: m.name.clone(),
            template_hash: m.template_hash.clone(),
            updated: m.template_hash == template,
            health: m.health,
            activity: m.activity,
        })
        .collect();
    ctx.state_mut(|s| {
        let Some(status) = s.status.as_mut() else {
            return;
        };
        let first_look = status.machines.is_empty() && status.counts == Counts::default();
        if first_look || made_progress(&status.counts, &counts) {
            status.last_progress_at = at;
            status.stalled = None;
        } else if status.phase != RolloutPhase::Progressing {
            // The clock of the progress deadline does not run while paused or waiting.
            status.last_progress_at = at;
        } else if at.saturating_sub(status.last_progress_at) >= deadline
            && status.stalled.is_none()
        {
            status.stalled = Some(format!(
                "no progress for {}s (progressDeadline): {} of {} machines updated, {} available; see the failures and in-flight children",
                at.saturating_sub(status.last_progress_at),
                counts.updated,
                replicas,
                counts.available
            ));
        }
        status.counts = counts;
        status.machines = views;
        status.holdup = holdup;
        let remaining = counts.old.max(replicas.saturating_sub(counts.updated));
        status.estimated_seconds_left = status
            .timings
            .estimate_seconds_left(remaining, status.strategy.budget.pace());
    });
}

fn show_in_flight(ctx: &mut WorkflowContext<RollingUpdateWorkflow>, children: &[Child]) {
    let in_flight: Vec<InFlight> = children.iter().map(|c| c.entry.clone()).collect();
    ctx.state_mut(|s| {
        if let Some(status) = s.status.as_mut() {
            status.in_flight = in_flight;
        }
    });
}

/// `NodewrightPhase`: the phase, or `stalled` while stalled and progressing.
fn set_phase_attribute(ctx: &mut WorkflowContext<RollingUpdateWorkflow>) {
    let phase = ctx.state(|s| {
        s.status.as_ref().map(|st| {
            if st.stalled.is_some() && st.phase == RolloutPhase::Progressing {
                "stalled"
            } else {
                st.phase.as_str()
            }
        })
    });
    let shown = ctx.state(|s| s.phase_shown);
    if let Some(phase) = phase
        && shown != Some(phase)
    {
        ctx.upsert_search_attributes([search::PHASE.value_set(phase.to_owned())]);
        ctx.state_mut(|s| s.phase_shown = Some(phase));
    }
}

/// A line in the status's summary (observations that failed, taints that could not be set).
fn note(ctx: &mut WorkflowContext<RollingUpdateWorkflow>, line: String) {
    ctx.state_mut(|s| {
        if let Some(status) = s.status.as_mut() {
            status.summary = Some(line);
        }
    });
}

/// Whether the history is long enough to continue as a new run.
fn continue_as_new_due(
    ctx: &WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
) -> bool {
    ctx.history_length() >= request.history_limit || ctx.continue_as_new_suggested()
}

/// The next run's input: the same rollout, with the strategy in force and the status so far.
fn next_run(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
) -> RolloutRequest {
    let (strategy, status) = ctx.state(|s| (s.strategy.clone(), s.status.clone()));
    let mut next = request.clone();
    if let Some(strategy) = strategy {
        next.pool.strategy = strategy;
    }
    next.resume = status.map(|mut status| {
        status.continuation = status.continuation.saturating_add(1);
        status.in_flight.clear();
        Box::new(status)
    });
    next
}

/// Ends the rollout: the result, the phase, the summary.
fn finish(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    outcome: RolloutOutcome,
) -> RolloutResult {
    let (strategy, status) = ctx.state(|s| (s.strategy.clone(), s.status.clone()));
    let mut pool = request.pool.clone();
    if let Some(strategy) = strategy {
        pool.strategy = strategy;
    }
    let mut status = status.unwrap_or_else(|| fresh_status(request, 0));
    let history = match outcome {
        RolloutOutcome::Completed => request.history.completed(TemplateRecord {
            template_hash: pool.template_hash.clone(),
            template: pool.template.clone(),
        }),
        RolloutOutcome::Aborted | RolloutOutcome::Canceled => request.history.clone(),
    };
    let counts = status.counts;
    let (phase, summary) = match outcome {
        RolloutOutcome::Completed => (
            RolloutPhase::Completed,
            format!(
                "pool {} runs template {}: {} machines Ready ({} created, {} deleted)",
                pool.name, pool.template_hash, counts.available, status.created, status.deleted
            ),
        ),
        RolloutOutcome::Aborted => (
            RolloutPhase::Aborted,
            format!(
                "aborted: pool {} has {} machines for {} replicas: {} of template {} and {} of older templates, {} available ({} created, {} deleted); roll again or `nodewright pool rollback {}` to make it whole",
                pool.name,
                counts.total,
                pool.replicas,
                counts.updated,
                pool.template_hash,
                counts.old,
                counts.available,
                status.created,
                status.deleted,
                pool.name
            ),
        ),
        RolloutOutcome::Canceled => (
            RolloutPhase::Canceled,
            format!(
                "canceled: pool {} has {} machines for {} replicas: {} of template {} and {} of older templates, {} available ({} created, {} deleted); roll again or `nodewright pool rollback {}` to make it whole",
                pool.name,
                counts.total,
                pool.replicas,
                counts.updated,
                pool.template_hash,
                counts.old,
                counts.available,
                status.created,
                status.deleted,
                pool.name
            ),
        ),
    };
    status.phase = phase;
    status.summary = Some(summary);
    status.in_flight.clear();
    status.holdup = None;
    let final_status = status.clone();
    ctx.state_mut(|s| s.status = Some(final_status));
    set_phase_attribute(ctx);
    RolloutResult {
        outcome,
        pool,
        history,
        status,
    }
}

/// Search attributes, the status (fresh, or the previous run's) and the strategy in force.
fn announce(ctx: &mut WorkflowContext<RollingUpdateWorkflow>, request: &RolloutRequest) {
    ctx.upsert_search_attributes([
        search::CLUSTER.value_set(request.cluster.to_string()),
        search::POOL.value_set(request.pool.name.clone()),
        search::OPERATION.value_set(Operation::Rollout.to_string()),
    ]);
    let at = now(ctx).timestamp();
    let status = match &request.resume {
        Some(previous) => {
            let mut status = (**previous).clone();
            status.strategy = strategy_view(&request.pool.strategy, request.pool.replicas);
            status
        }
        None => fresh_status(request, at),
    };
    let strategy = request.pool.strategy.clone();
    ctx.state_mut(|s| {
        s.status = Some(status);
        s.strategy = Some(strategy);
    });
    set_phase_attribute(ctx);
}

/// The status of `request`'s rollout before its first look, starting at `at` (Unix seconds).
fn fresh_status(request: &RolloutRequest, at: i64) -> RolloutStatus {
    let pool = &request.pool;
    let mut status = RolloutStatus::new(
        &pool.name,
        &pool.template_hash,
        pool.replicas,
        strategy_view(&pool.strategy, pool.replicas),
        pool.strategy.max_failures,
        at,
    );
    status.previous_template_hash = request
        .history
        .current
        .as_ref()
        .map(|r| r.template_hash.clone());
    status.canary = request.canary;
    status
}

/// What the `status` query answers before the run has set its status.
fn empty_status() -> RolloutStatus {
    let strategy = default_strategy();
    RolloutStatus::new(
        "",
        "",
        0,
        strategy_view(&strategy, 0),
        strategy.max_failures,
        0,
    )
}

fn strategy_view(strategy: &RolloutStrategy, replicas: u32) -> StrategyView {
    StrategyView {
        max_surge: strategy.max_surge,
        max_unavailable: strategy.max_unavailable,
        budget: Budget::resolve(strategy.max_surge, strategy.max_unavailable, replicas),
    }
}

fn default_strategy() -> RolloutStrategy {
    RolloutStrategy {
        max_surge: nodewright_model::pool::Amount::Count(1),
        max_unavailable: nodewright_model::pool::Amount::Count(0),
        max_failures: 3,
        progress_deadline: Duration::from_secs(30 * 60),
    }
}

fn secs(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}
