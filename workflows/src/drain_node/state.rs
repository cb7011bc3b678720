//! What every step of a drain shares: the workflow's state (the `status` query's answer, the
//! deadline, a force request), the drain's own (settings, result, the pod in flight), and the
//! small moves each step makes: edit the status, look whether force mode is due, pause, list
//! the node's pods, plan them.

use std::time::Duration;

use chrono::{DateTime, Utc};
use nodewright_activities::kube::KubeActivities;
use nodewright_activities::kube::drain::{Eviction, ListNodePods, NodePods};
use nodewright_model::cancel::Canceled;
use nodewright_model::drain::{
    DrainPlan, DrainRequest, DrainStatus, DrainedNode, EvictionAnswer, ForceReason, HardDeadline,
    LocalDataPolicy, NodeHealth, PodFacts, PodRef, RuledPlan, VolumePod, capped_deadline,
    force_reason, history_is_long as long_history, overrides_marks, plan_drain, plan_with_rules,
    trimmed_grace, wait_within_deadline,
};
use nodewright_model::machine::{MachineStatus, Step};
use nodewright_model::pool::DrainPolicy;
use temporalio_macros::workflow;
use temporalio_sdk::workflows::select;
use temporalio_sdk::{ActivityOptions, WorkflowContext};

use crate::progress::{HasStatus, StepFailed, later, left_until, now, rfc3339};
use crate::{activity_options, cancellation};

/// The patch that brought the local-data policy: asked only when a plan refuses a pod, so a run
/// that planned before it evicts such pods as it did then, and a drain without local data
/// records no marker.
const PATCH_LOCAL_DATA: &str = "local-data-policy";

/// The patch that brought drain rules' tiers and `WaitCompleted` waits: asked only when a plan
/// has more than one tier or a pod to wait for, so a drain without rules records no marker and
/// issues the commands it did before.
const PATCH_DRAIN_RULES: &str = "drain-rules-tiers";

/// The patch that brought do-not-disrupt holds inside a voluntary drain: asked only when a plan
/// holds a marked pod, so a drain without one records no marker.
const PATCH_HOLD_MARKED: &str = "drain-holds-do-not-disrupt";

/// Drains one node; see the runbook in the module documentation.
#[workflow]
#[derive(Default)]
pub struct DrainNodeWorkflow {
    pub(super) status: Option<DrainStatus>,
    pub(super) deadline: Option<DateTime<Utc>>,
    /// The hard deadline (`terminationGracePeriod` from the start), when the settings have one:
    /// the deadline never moves past it.
    pub(super) hard_deadline: Option<HardDeadline>,
    pub(super) force_requested: bool,
    /// Extensions signalled before the deadline was known, added to it once it is.
    pub(super) pending_extension_seconds: u64,
}

/// The status of a drain of `node` before its first step.
pub(super) fn fresh_status(node: &str) -> DrainStatus {
    DrainStatus::new(MachineStatus::new("drain", node, None, &Step::DRAIN))
}

impl HasStatus for DrainNodeWorkflow {
    fn status_mut(&mut self) -> &mut MachineStatus {
        &mut self.status.get_or_insert_with(|| fresh_status("")).run
    }
}

/// The workflow's context.
pub(super) type Ctx = WorkflowContext<DrainNodeWorkflow>;

/// How a drain run ends, but for a failure.
pub(super) enum Finish {
    Drained(DrainedNode),
    ContinueAsNew(Box<DrainRequest>),
    Canceled(Canceled),
}

/// What every step of one drain needs.
pub(super) struct Drain {
    pub(super) request: DrainRequest,
    pub(super) vm_id: String,
    pub(super) policy: DrainPolicy,
    pub(super) started_at: String,
    pub(super) result: DrainedNode,
    pub(super) health: NodeHealth,
    /// The pod whose volumes are moving: evicted, its volumes not yet attached elsewhere.
    pub(super) in_flight: Option<VolumePod>,
    /// Set on the cancellation path: waits run shielded from the cancellation.
    pub(super) shielded: bool,
    /// The pods whose volumes did not detach in time, carried by a run continued as new (the
    /// tiers take them over and leave those still stuck here when the run continues as new).
    pub(super) stuck: Vec<VolumePod>,
}

/// `deadline` moved `seconds` later (saturating at the latest instant a deadline can name).
pub(super) fn extended(deadline: DateTime<Utc>, seconds: u64) -> DateTime<Utc> {
    later(deadline, Duration::from_secs(seconds))
}

/// `deadline`, never later than the hard deadline `hard`; and whether it was cut.
pub(super) fn capped(deadline: DateTime<Utc>, hard: Option<HardDeadline>) -> (DateTime<Utc>, bool) {
    let at = capped_deadline(deadline.timestamp(), hard);
    if at < deadline.timestamp() {
        (DateTime::from_timestamp(at, 0).unwrap_or(deadline), true)
    } else {
        (deadline, false)
    }
}

/// The hard deadline as RFC 3339.
pub(super) fn hard_text(hard: HardDeadline) -> String {
    DateTime::from_timestamp(hard.at, 0).map_or_else(String::new, rfc3339)
}

/// Edits the status, when there is one.
pub(super) fn with_status(ctx: &mut Ctx, edit: impl FnOnce(&mut DrainStatus)) {
    ctx.state_mut(|s| {
        if let Some(status) = s.status.as_mut() {
            edit(status);
        }
    });
}

/// Adds `warning` to the status, once.
pub(super) fn warn(ctx: &mut Ctx, warning: String) {
    with_status(ctx, |status| {
        if !status.warnings.contains(&warning) {
            status.warnings.push(warning);
        }
    });
}

/// An eviction's answer as the model reads it.
pub(super) fn answer_of(outcome: &Eviction) -> EvictionAnswer<'_> {
    match outcome {
        Eviction::Accepted => EvictionAnswer::Accepted,
        Eviction::Gone => EvictionAnswer::Gone,
        Eviction::Blocked { pdb, message } => EvictionAnswer::Blocked {
            pdb: pdb.as_ref(),
            message,
        },
        Eviction::Refused {
            code,
            reason,
            message,
            budgets,
        } => EvictionAnswer::Refused {
            code: *code,
            reason,
            message,
            budgets,
        },
    }
}

/// Whether the history is long enough to continue as a new run at this chance: the request's
/// `historyLimit` reached, or Temporal suggests it.
pub(super) fn history_is_long(ctx: &Ctx, state: &Drain) -> bool {
    long_history(
        ctx.history_length(),
        state.request.history_limit,
        ctx.continue_as_new_suggested(),
    )
}

/// Whether force mode is due now.
pub(super) fn force_due(ctx: &Ctx, state: &Drain) -> Option<ForceReason> {
    let (deadline, hard, requested) =
        ctx.state(|s| (s.deadline, s.hard_deadline, s.force_requested));
    let deadline = deadline.unwrap_or_else(|| now(ctx));
    force_reason(
        now(ctx).timestamp(),
        deadline.timestamp(),
        hard,
        &state.health,
        state.policy.force_after_unhealthy,
        requested,
    )
}

/// Whether force mode for `reason` deletes the pods do-not-disrupt marks hold.
pub(super) fn overrides(ctx: &Ctx, reason: &ForceReason) -> bool {
    overrides_marks(reason, ctx.state(|s| s.hard_deadline.is_some()))
}

/// The time left until the drain's deadline, when it is known.
fn left(ctx: &Ctx) -> Option<Duration> {
    ctx.state(|s| s.deadline).map(|d| left_until(ctx, d))
}

/// The time left until the hard deadline, when there is one.
fn left_until_hard(ctx: &Ctx) -> Option<Duration> {
    let at = ctx.state(|s| s.hard_deadline.map(|hard| hard.at))?;
    let left = at.saturating_sub(now(ctx).timestamp());
    Some(Duration::from_secs(u64::try_from(left).unwrap_or(0)))
}

/// The grace period to evict `pod` with now: its own, or the time left until the hard deadline
/// when that is shorter.
pub(super) fn eviction_grace(ctx: &Ctx, pod: &PodRef) -> Option<u64> {
    let hard = ctx.state(|s| s.hard_deadline);
    trimmed_grace(pod.grace_period_seconds, now(ctx).timestamp(), hard)
}

/// Waits `interval` (never past the deadline), or less when force is requested.
pub(super) async fn pause(ctx: &mut Ctx, interval: Duration) {
    let left = left(ctx);
    pause_within(ctx, interval, left).await;
}

/// Waits `interval` (never past the hard deadline), or less when force is requested: the
/// wait for pods do-not-disrupt marks hold once force mode came at the drain's own deadline.
pub(super) async fn pause_before_hard_deadline(ctx: &mut Ctx, interval: Duration) {
    let left = left_until_hard(ctx);
    pause_within(ctx, interval, left).await;
}

/// Waits `interval`, at most `left`, or less when force is requested.
async fn pause_within(ctx: &mut Ctx, interval: Duration, left: Option<Duration>) {
    let wait = wait_within_deadline(interval, left);
    select! {
        _ = ctx.timer(wait) => {},
        _ = ctx.wait_condition(|s: &DrainNodeWorkflow| s.force_requested) => {},
    };
}

/// Options of a wait of up to `budget`: shielded from the cancellation on its path.
pub(super) fn wait_options(state: &Drain, budget: Duration) -> ActivityOptions {
    let options = activity_options::wait(budget);
    if state.shielded {
        cancellation::shielded(options)
    } else {
        options
    }
}

/// A deadline `budget` from now, never past the drain's deadline, as RFC 3339.
pub(super) fn wait_deadline(ctx: &Ctx, budget: Duration) -> (DateTime<Utc>, Duration) {
    let budget = wait_within_deadline(budget, left(ctx));
    let at = later(now(ctx), budget);
    (at, budget)
}

/// The node's pods and health now. An API outage is waited out (the read retried) until the
/// drain's deadline, at least a read's five minutes: the deadline, not the outage, ends a drain.
pub(super) async fn list_pods(
    ctx: &mut Ctx,
    state: &Drain,
    step: Step,
) -> Result<NodePods, StepFailed> {
    list_pods_from(ctx, state, step, false).await
}

/// [`list_pods`], from the worker's mirrors when `from_mirror` (the looks between eviction
/// rounds) and they are in sync.
pub(super) async fn list_pods_from(
    ctx: &mut Ctx,
    state: &Drain,
    step: Step,
    from_mirror: bool,
) -> Result<NodePods, StepFailed> {
    let budget = left(ctx).unwrap_or_default();
    ctx.execute_activity(
        KubeActivities::list_node_pods,
        ListNodePods {
            node: state.request.node.clone(),
            from_mirror,
        },
        activity_options::read_within(budget),
    )
    .await
    .map_err(|e| StepFailed::from_activity(step, &e))
}

/// [`plan_with_rules`] under the drain's rules and local-data policy (the purpose's default
/// unless set), shown in the status. A run that planned before the policy existed (no
/// [`PATCH_LOCAL_DATA`] marker) evicts every pod, as it did then; one that planned before the
/// rules' tiers (no [`PATCH_DRAIN_RULES`] marker) drains every pod in one tier, as it did then;
/// one that planned before do-not-disrupt held pods in a voluntary drain (no
/// [`PATCH_HOLD_MARKED`] marker) holds none.
pub(super) fn plan_pods(ctx: &mut Ctx, state: &Drain, pods: &[PodFacts]) -> RuledPlan {
    let plan = plan_quietly(ctx, state, pods);
    with_status(ctx, |status| status.show_ruled_plan(&plan));
    plan
}

/// [`plan_pods`] without showing the plan in the status (a fresh look shows only the pods that
/// arrived).
pub(super) fn plan_quietly(ctx: &mut Ctx, state: &Drain, pods: &[PodFacts]) -> RuledPlan {
    let rules = &state.policy.rules;
    let mut local_data =
        LocalDataPolicy::or_default_for(state.policy.local_data, state.request.purpose);
    let mut marks_hold = state.request.disruption.is_voluntary();
    let mut plan = plan_with_rules(pods, rules, local_data, marks_hold);
    if !plan.held.is_empty() && !ctx.patched(PATCH_HOLD_MARKED) {
        marks_hold = false;
        plan = plan_with_rules(pods, rules, local_data, marks_hold);
    }
    if !plan.whole.refused.is_empty() && !ctx.patched(PATCH_LOCAL_DATA) {
        local_data = LocalDataPolicy::Evict;
        plan = plan_with_rules(pods, rules, local_data, marks_hold);
    }
    if plan.is_tiered() && !ctx.patched(PATCH_DRAIN_RULES) {
        plan = RuledPlan::untiered(plan_drain(pods, local_data));
    }
    plan
}

/// Records that `pod` left with its local data, when the plan says it had any.
pub(super) fn note_local_data(ctx: &mut Ctx, state: &mut Drain, plan: &DrainPlan, pod: &str) {
    if let Some(lost) = plan.local_data_of(pod) {
        state.result.note_local_data_lost(lost);
        with_status(ctx, |status| status.note_local_data_lost(lost));
    }
}
