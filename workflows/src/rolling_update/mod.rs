#![doc = include_str!("../../runbooks/rolling_update.md")]

mod children;
mod ending;
mod headroom;
mod hold;
mod image;
mod inherited;
mod look;
mod restamp;
mod retry;
mod soak;
mod state;
mod status;
mod window;

use nodewright_model::workflow_type;
use std::collections::BTreeSet;
use std::future::Future;

use futures::FutureExt;
use futures::future::FusedFuture;
use nodewright_activities::azure::machines::ArmScope;
use nodewright_model::rollout::{
    AfterLook, ChildEnd, ChildKind, InFlight, RolloutOutcome, RolloutPhase, RolloutRequest,
    RolloutResult, RolloutStatus, Round, RunEnd, Running, Signal, StrategyChange, StrategyView,
    after_look,
};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::workflows::select;
use temporalio_sdk::{
    ActivityExecutionError, CancellableFuture, ContinueAsNewOptions, SyncWorkflowContext,
    WorkflowContext, WorkflowContextView, WorkflowResult, WorkflowTermination,
};

use self::children::{Child, child_finished, first_finished, show_in_flight, start_children};
use self::ending::{cancel, clear_on_end};
use self::hold::hold_marked;
use self::look::{clear_outdated, decide, look, mark_outdated};
use self::restamp::restamp_drain;
use self::retry::{hold_failed_deletes, retry_stranded};
use self::state::{HasRollout, RolloutState};
use self::status::{
    announce, continue_as_new_due, fail, finish, next_run, note, record_look, set_phase_attribute,
};
use crate::progress::now;
use crate::{activity_options, cancellation, input};

/// Rolls a pool to a new template; see the runbook above.
#[workflow]
#[derive(Default)]
pub struct RollingUpdateWorkflow {
    state: RolloutState,
}

impl HasRollout for RollingUpdateWorkflow {
    fn rollout(&self) -> &RolloutState {
        &self.state
    }

    fn rollout_mut(&mut self) -> &mut RolloutState {
        &mut self.state
    }
}

#[workflow_methods]
impl RollingUpdateWorkflow {
    /// Runs the runbook.
    #[run(name = workflow_type::ROLLING_UPDATE)]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: RolloutRequest,
    ) -> WorkflowResult<RolloutResult> {
        input::admit(
            ctx,
            workflow_type::ROLLING_UPDATE,
            &input::Subject {
                cluster: &request.cluster,
                named: Some(("pool.name", &request.pool.name)),
            },
            request.check(),
        )?;
        let request = image::resolved(ctx, request).await?;
        announce(ctx, &request).await;
        let scope = crate::scope::read(
            ctx,
            // The options of runs recorded before `scope::SCOPE_LOCAL`.
            cancellation::shielded(activity_options::read()),
        )
        .await;
        let scope = match scope {
            Ok(scope) => scope,
            Err(error) => {
                fail(ctx, &request).await;
                return Err(error.into());
            }
        };
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
        self.signaled(Signal::Pause, &by);
    }

    /// Goes on after a pause (the failure count starts again from 0).
    #[signal(name = "resume")]
    pub fn resume(&mut self, _ctx: &mut SyncWorkflowContext<Self>, by: String) {
        self.signaled(Signal::Resume, &by);
    }

    /// Lets the children in flight finish, starts nothing new, then ends `aborted`.
    #[signal(name = "abort")]
    pub fn abort(&mut self, _ctx: &mut SyncWorkflowContext<Self>, by: String) {
        self.signaled(Signal::Abort, &by);
    }

    /// Lets a canary rollout go on beyond its canary.
    #[signal(name = "approve")]
    pub fn approve(&mut self, _ctx: &mut SyncWorkflowContext<Self>, by: String) {
        self.signaled(Signal::Approve, &by);
    }

    /// Refuses a change that changes nothing or zeroes both budgets.
    #[update_validator(set_strategy)]
    fn validate_set_strategy(
        &self,
        _ctx: &WorkflowContextView,
        change: &StrategyChange,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let Some(strategy) = self.state.strategy.as_ref() else {
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
        let state = &mut self.state;
        state.wakeups += 1;
        let current = state.strategy_in_force();
        let changed = change.apply(&current).unwrap_or(current);
        let desired = state.status.as_ref().map_or(0, |s| s.desired);
        let view = StrategyView::of(&changed, desired);
        state.with_status(|status| status.strategy = view);
        state.strategy = Some(changed);
        view
    }

    /// The pool's new replicas (its controller was scaled during the rollout): planned with from
    /// the next look, the budget resolved for them, as a Deployment does. Beyond the replicas
    /// limit it is brought down to the limit.
    #[signal(name = "scale")]
    pub fn scale(&mut self, _ctx: &mut SyncWorkflowContext<Self>, replicas: u32) {
        let replicas = replicas.min(nodewright_model::limits::MAX_REPLICAS);
        let state = &mut self.state;
        state.wakeups += 1;
        state.replicas = Some(replicas);
        let view = StrategyView::of(&state.strategy_in_force(), replicas);
        state.with_status(|status| {
            status.desired = replicas;
            status.strategy = view;
        });
    }

    /// Desired, updated, ready, available, old, in flight, phase and why, failures, machines,
    /// the estimated time left.
    #[query(name = "status")]
    pub fn status(&self, _ctx: &WorkflowContextView) -> RolloutStatus {
        self.state
            .status
            .clone()
            .unwrap_or_else(RolloutStatus::empty)
    }
}

impl RollingUpdateWorkflow {
    /// A signal: wakes the loop and acts on the status as `model::rollout::signal` says.
    fn signaled(&mut self, signal: Signal, by: &str) {
        self.state.wakeups += 1;
        self.state.with_status(|status| status.signaled(signal, by));
    }
}

/// How a run ends.
enum Finish {
    Ended(Box<RolloutResult>),
    Canceled(Box<RolloutResult>),
    ContinueAsNew(Box<RolloutRequest>),
}

/// The loop: observe → taint → plan → act → wait, until done, aborted, cancelled or due to
/// continue as new.
async fn roll(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    scope: &ArmScope,
) -> Finish {
    let mut children: Vec<Child> = Vec::new();
    // Children of the run before (it continued as new without waiting for them).
    let mut inherited: Vec<InFlight> = request
        .resume
        .as_ref()
        .map(|status| status.in_flight.clone())
        .unwrap_or_default();
    let mut tainted: BTreeSet<String> = BTreeSet::new();
    loop {
        if cancellation::requested(ctx) {
            return cancel(ctx, request, scope, children, inherited).await;
        }
        for (entry, outcome) in inherited::ended_now(ctx, &mut inherited).await {
            child_finished(ctx, request, entry, outcome);
        }
        let at = now(ctx).timestamp();
        let mut next_available_at = None;
        let observed = match look(ctx, request, &running(&children, &inherited)).await {
            Ok(machines) => Some(machines),
            Err(reason) => {
                note(
                    ctx,
                    format!("could not observe the pool ({reason}); looking again"),
                );
                None
            }
        };

        if let Some(machines) = &observed {
            mark_outdated(ctx, request, scope, machines, &mut tainted).await;
            let restamping = restamp_drain(ctx, request, scope, machines).await;
            let phase = ctx.state(|s| s.state.status.as_ref().map(|st| st.phase));
            hold_failed_deletes(ctx, machines, &running_machines(&children, &inherited), at);
            let decided = decide(ctx, request, machines, at);
            let decided = soak::soak_plan(ctx, request, machines, decided, at);
            let decided = window::gate_plan(ctx, request, decided, at);
            // Only a progressing rollout starts creates: only it reads the headroom.
            let decided = if phase.unwrap_or(RolloutPhase::Progressing) == RolloutPhase::Progressing
            {
                let creating = creating_machines(&children, &inherited);
                headroom::fit_to_headroom(ctx, request, &creating, decided, at).await
            } else {
                decided
            };
            next_available_at = decided.next_available_at;
            record_look(ctx, request, machines, &decided.counts, decided.holdup, at);
            let in_flight = !children.is_empty() || !inherited.is_empty();
            let continue_due = continue_as_new_due(ctx, request);
            let round = Round {
                phase: phase.unwrap_or(RolloutPhase::Progressing),
                in_flight,
                done: decided.done,
                holdup: decided.holdup,
                continue_due,
                leave_children: continue_due && in_flight && ctx.patched(LEAVE_CHILDREN_PATCH),
                restamping,
            };
            match after_look(&round) {
                AfterLook::EndAborted => {
                    let options = activity_options::kube_write();
                    clear_on_end(ctx, request, scope, machines, &tainted, options).await;
                    return Finish::Ended(Box::new(
                        finish(ctx, request, RolloutOutcome::Aborted).await,
                    ));
                }
                AfterLook::Complete => {
                    clear_outdated(ctx, request, scope, machines).await;
                    return Finish::Ended(Box::new(
                        finish(ctx, request, RolloutOutcome::Completed).await,
                    ));
                }
                AfterLook::GoOn {
                    await_approval,
                    start_children: start,
                    continue_as_new,
                } => {
                    if await_approval {
                        ctx.state_mut(|s| {
                            s.state.with_status(|status| {
                                status.phase = RolloutPhase::AwaitingApproval;
                            });
                        });
                    }
                    if start && !cancel_came_while_looking(ctx) {
                        let drain_keeps_pods =
                            request.pool.drain.termination_grace_period.is_some();
                        if hold_marked(ctx, &decided, drain_keeps_pods, at).await {
                            // A machine to delete asked not to be disrupted: plan again without it.
                            continue;
                        }
                        let at_millis = now(ctx).timestamp_millis();
                        start_children(ctx, request, machines, &decided, &mut children, at_millis)
                            .await;
                        retry_stranded(
                            ctx,
                            request,
                            machines,
                            &mut children,
                            &inherited,
                            at_millis,
                        )
                        .await;
                    }
                    if continue_as_new {
                        // The status carries the children in flight: the next run finds them.
                        show_in_flight(ctx, &children, &inherited);
                        return Finish::ContinueAsNew(Box::new(next_run(ctx, request)));
                    }
                }
            }
        }
        show_in_flight(ctx, &children, &inherited);
        set_phase_attribute(ctx);

        let seen = ctx.state(|s| s.state.wakeups);
        let interval = request.wait_after_look(at, next_available_at);
        let mut ask = (!inherited.is_empty() && ctx.patched(INHERITED_ENDS_PATCH))
            .then(|| Box::pin(inherited::ask_for_an_end(ctx, &inherited, interval)));
        let woke = select! {
            done = first_finished(&mut children).fuse() => Woke::Child(done),
            answer = answer_of(ask.as_mut()).fuse() => Woke::Inherited(Box::new(answer)),
            _ = ctx.wait_condition(move |s: &RollingUpdateWorkflow| s.state.wakeups != seen) => Woke::Other,
            _ = ctx.timer(interval) => Woke::Other,
        };
        // The ask for an inherited end: its answer if it came in this workflow task too,
        // otherwise it is cancelled (the next wait asks again).
        let (woke, answer) = match (woke, ask.as_mut()) {
            (Woke::Inherited(answer), _) => (None, Some(*answer)),
            // A failed ask already ended (it is not polled again).
            (woke, Some(ask)) if ask.is_terminated() => (Some(woke), None),
            (woke, Some(ask)) => {
                let answer = ask.as_mut().now_or_never();
                if answer.is_none() {
                    ask.cancel();
                }
                (Some(woke), answer)
            }
            (woke, None) => (Some(woke), None),
        };
        drop(ask);
        if let Some(Woke::Child((index, outcome))) = woke {
            let child = children.remove(index);
            child_finished(ctx, request, child.entry, outcome);
            if ctx.patched(BOOK_ALL_FINISHED_PATCH) {
                book_finished_too(ctx, request, &mut children);
            }
        }
        if let Some(answer) = answer {
            for (entry, outcome) in inherited::booked_by(&mut inherited, answer) {
                child_finished(ctx, request, entry, outcome);
            }
        }
    }
}

/// The answer of the ask for an inherited child's end, when there is one and it succeeded; never
/// otherwise (a failed ask does not wake the loop, which would only ask again at once: the
/// look after the wait asks too, and notes the failure).
async fn answer_of<T, E, F>(ask: Option<&mut F>) -> Result<T, E>
where
    F: Future<Output = Result<T, E>> + Unpin,
{
    match ask {
        Some(ask) => match ask.await {
            Ok(answer) => Ok(answer),
            Err(_) => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// What ended the wait between two looks.
enum Woke {
    /// A child of this run ended (its index and end).
    Child((usize, ChildEnd)),
    /// The ask for an inherited child's end answered.
    Inherited(Box<Result<Vec<Option<RunEnd>>, ActivityExecutionError>>),
    /// A signal or update, or the look's interval.
    Other,
}

/// Books every other child whose end reached this workflow task, so that one look plans for
/// all of them (before, each finished child cost a look of its own: with hundreds of machines
/// the looks, not the write budget, paced the rollout). The ends are those the workflow task
/// brought, polled in order, so replays agree.
fn book_finished_too(
    ctx: &mut WorkflowContext<RollingUpdateWorkflow>,
    request: &RolloutRequest,
    children: &mut Vec<Child>,
) {
    while let Some((index, outcome)) = first_finished(children).now_or_never() {
        let child = children.remove(index);
        child_finished(ctx, request, child.entry, outcome);
    }
}

/// The children in flight (this run's and those it inherited) as the observation joins them
/// with the pool's machines.
fn running<'a>(children: &'a [Child], inherited: &'a [InFlight]) -> Vec<Running<'a>> {
    children
        .iter()
        .map(|c| &c.entry)
        .chain(inherited)
        .map(|entry| Running {
            machine: &entry.machine,
            creating: entry.kind == ChildKind::Create,
            since: entry.started_at / 1000,
        })
        .collect()
}

/// The machines of the creates in flight (this run's and those it inherited).
fn creating_machines<'a>(children: &'a [Child], inherited: &'a [InFlight]) -> Vec<&'a str> {
    children
        .iter()
        .map(|c| &c.entry)
        .chain(inherited.iter())
        .filter(|entry| entry.kind == ChildKind::Create)
        .map(|entry| entry.machine.as_str())
        .collect()
}

/// The machines children in flight work on (this run's and those it inherited).
fn running_machines<'a>(children: &'a [Child], inherited: &'a [InFlight]) -> Vec<&'a str> {
    children
        .iter()
        .map(|c| c.entry.machine.as_str())
        .chain(inherited.iter().map(|entry| entry.machine.as_str()))
        .collect()
}

/// Patch marker: while a run waits between looks with children inherited from the run before,
/// one ask waits for the first of them to end (`inherited::next_end`); runs recorded before it
/// noticed their ends only at a look (a run that had just continued as new, its budget full of
/// inherited children, sat idle until its next look).
const INHERITED_ENDS_PATCH: &str = "rollout-awaits-inherited-ends";

/// Patch marker of [`book_finished_too`]: runs recorded before it booked one finished child per
/// look.
const BOOK_ALL_FINISHED_PATCH: &str = "rollout-books-every-finished-child";

/// Patch marker: a run due to continue as new does so with children in flight, which the next
/// run finds again by their IDs (runs recorded before it waited for every child to end).
const LEAVE_CHILDREN_PATCH: &str = "rollout-continues-with-children-running";

/// Whether a cancellation request reached the run during this round's look: no child is started
/// after it (the loop's top takes the cancellation path). The check is recorded as a patch, so
/// runs recorded before it replay unchanged; the marker appears only in runs cancelled there.
fn cancel_came_while_looking(ctx: &WorkflowContext<RollingUpdateWorkflow>) -> bool {
    cancellation::requested(ctx) && ctx.patched(CANCEL_WHILE_LOOKING_PATCH)
}

/// Patch marker of [`cancel_came_while_looking`].
const CANCEL_WHILE_LOOKING_PATCH: &str = "rollout-no-start-after-cancel";
