//! What RollingUpdate shows and hands on: its status (brought up to date at each look, noted,
//! ended), the `NodewrightPhase` search attribute, the input of a run continued as new, and the
//! pool's revisions in the cluster (written at the start and at the end). The judgements behind
//! them live in `model::rollout` (`progress`, `phase`, `ending`, `revisions`).

use nodewright_activities::kube::{KubeActivities, RecordRevision};
use nodewright_model::Operation;
use nodewright_model::rollout::{
    Counts, Holdup, Look, MachineView, ObservedMachine, RevisionChange, RevisionOutcome,
    RolloutEnd, RolloutOutcome, RolloutRequest, RolloutResult, RolloutStart, ending_summary,
    history_after, shown_phase,
};
use temporalio_sdk::WorkflowContext;

use super::state::HasRollout;
use crate::progress::{activity_failure_text, now};
use crate::{activity_options, cancellation, search};

/// Patch marker of the revisions' writes ([`announce`], [`finish`], [`fail`]): runs recorded
/// before them replay unchanged.
pub const REVISIONS_PATCH: &str = "rollout-records-revisions";

/// Search attributes, the status (fresh, or the previous run's) and the strategy in force; then
/// the pool's revisions record the start (not again in a run continued as new).
pub async fn announce<W: HasRollout>(ctx: &mut WorkflowContext<W>, request: &RolloutRequest) {
    show(ctx, request);
    if request.resume.is_none() && ctx.patched(REVISIONS_PATCH) {
        let start = rollout_start(ctx, request);
        if let Err(reason) = record(ctx, request, RevisionChange::Started(start)).await {
            note(ctx, reason);
        }
    }
}

/// The search attributes, status and strategy of [`announce`].
fn show<W: HasRollout>(ctx: &mut WorkflowContext<W>, request: &RolloutRequest) {
    ctx.upsert_search_attributes([
        search::CLUSTER.value_set(request.cluster.to_string()),
        search::POOL.value_set(request.pool.name.clone()),
        search::OPERATION.value_set(Operation::Rollout.to_string()),
    ]);
    let status = request.first_status(now(ctx).timestamp());
    let strategy = request.pool.strategy.clone();
    ctx.state_mut(|s| {
        let rollout = s.rollout_mut();
        rollout.status = Some(status);
        rollout.strategy = Some(strategy);
    });
    set_phase_attribute(ctx);
}

/// Brings the status up to date with a look at the pool at `at` (Unix seconds): counts,
/// machines, progress or stall, estimate.
pub fn record_look<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    machines: &[ObservedMachine],
    counts: &Counts,
    holdup: Option<Holdup>,
    at: i64,
) {
    let look = Look {
        counts: *counts,
        machines: machines
            .iter()
            .map(|m| {
                MachineView::of(
                    m,
                    &request.pool.template_hash,
                    at,
                    request.pool.strategy.min_ready_secs(),
                )
            })
            .collect(),
        holdup,
        at,
        deadline: request.pool.strategy.progress_deadline,
        replicas: ctx.state(|s| s.rollout().replicas_in_force(request.pool.replicas)),
    };
    ctx.state_mut(|s| {
        s.rollout_mut()
            .with_status(|status| status.record_look(look))
    });
}

/// `NodewrightPhase`: the phase, or `stalled` while stalled and progressing; set only when it
/// changes.
pub fn set_phase_attribute<W: HasRollout>(ctx: &mut WorkflowContext<W>) {
    let (phase, shown) = ctx.state(|s| {
        let rollout = s.rollout();
        let phase = rollout
            .status
            .as_ref()
            .map(|st| shown_phase(st.phase, st.stalled.is_some()));
        (phase, rollout.phase_shown)
    });
    if let Some(phase) = phase
        && shown != Some(phase)
    {
        ctx.upsert_search_attributes([search::PHASE.value_set(phase.to_owned())]);
        ctx.state_mut(|s| s.rollout_mut().phase_shown = Some(phase));
    }
}

/// A line in the status's summary (observations that failed, taints that could not be set).
pub fn note<W: HasRollout>(ctx: &mut WorkflowContext<W>, line: String) {
    ctx.state_mut(|s| {
        s.rollout_mut()
            .with_status(|status| status.summary = Some(line));
    });
}

/// Whether the history is long enough to continue as a new run.
pub fn continue_as_new_due<W>(ctx: &WorkflowContext<W>, request: &RolloutRequest) -> bool {
    ctx.history_length() >= request.history_limit || ctx.continue_as_new_suggested()
}

/// The next run's input: the same rollout, with the strategy in force and the status so far.
pub fn next_run<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
) -> RolloutRequest {
    let (pool, status) = ctx.state(|s| {
        let rollout = s.rollout();
        (rollout.pool_in_force(&request.pool), rollout.status.clone())
    });
    let mut next = request.clone();
    next.pool = pool;
    next.resume = status.map(|status| Box::new(status.carried_over()));
    next
}

/// Ends the rollout: the result, the phase, the summary; the pool's revisions record the
/// outcome (shielded from a cancellation; a failed write is said in the summary, never fails
/// the rollout).
pub async fn finish<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    outcome: RolloutOutcome,
) -> RolloutResult {
    let (pool, status) = ctx.state(|s| {
        let rollout = s.rollout();
        (rollout.pool_in_force(&request.pool), rollout.status.clone())
    });
    let mut status = status.unwrap_or_else(|| request.fresh_status(0));
    let history = history_after(outcome, &request.history, &pool);
    let mut summary = ending_summary(outcome, &pool, &status);
    if let Err(reason) = record_end(ctx, request, outcome.into()).await {
        summary = format!("{summary}; {reason}");
    }
    status.end(outcome, summary);
    let final_status = status.clone();
    ctx.state_mut(|s| s.rollout_mut().status = Some(final_status));
    set_phase_attribute(ctx);
    RolloutResult {
        outcome,
        pool,
        history,
        status,
    }
}

/// The rollout failed (its worker's configuration could not be read): the pool's revisions
/// record it, best effort.
pub async fn fail<W: HasRollout>(ctx: &mut WorkflowContext<W>, request: &RolloutRequest) {
    // The rollout fails anyway: a write that fails too has nowhere to be said but its history.
    let _unrecorded = record_end(ctx, request, RevisionOutcome::Failed).await;
}

/// Records the rollout's end with `outcome` in the pool's revisions, when the run records them.
async fn record_end<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    outcome: RevisionOutcome,
) -> Result<(), String> {
    if !ctx.patched(REVISIONS_PATCH) {
        return Ok(());
    }
    let end = RolloutEnd {
        start: rollout_start(ctx, request),
        outcome,
        at: now(ctx).timestamp(),
    };
    record(ctx, request, RevisionChange::Ended(end)).await
}

/// This rollout as its revision records it (the start time is the status's).
fn rollout_start<W: HasRollout>(
    ctx: &WorkflowContext<W>,
    request: &RolloutRequest,
) -> RolloutStart {
    let started = ctx.state(|s| s.rollout().status.as_ref().map(|st| st.started_at));
    RolloutStart {
        pool: request.pool.clone(),
        workflow_id: ctx.workflow_id().to_owned(),
        run_id: ctx.run_id().to_owned(),
        rollback: request.rollback,
        at: started.unwrap_or_else(|| now(ctx).timestamp()),
    }
}

/// Writes `change` into the pool's revisions: a few attempts within a minute, shielded from a
/// cancellation; a failure is returned as a line for the status.
async fn record<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    change: RevisionChange,
) -> Result<(), String> {
    ctx.execute_activity(
        KubeActivities::record_revision,
        RecordRevision {
            pool: request.pool.name.clone(),
            change,
        },
        cancellation::shielded(activity_options::probe()),
    )
    .await
    .map(|_| ())
    .map_err(|error| {
        format!(
            "the pool's revision could not be recorded ({}); `nodewright pool rollback` may not find it",
            activity_failure_text(&error)
        )
    })
}
