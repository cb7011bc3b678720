#![doc = include_str!("../../runbooks/drain_node.md")]
//!
//! # Code map
//!
//! This file is the runbook's order: [`DrainNodeWorkflow::run`] admits the input, reads the
//! scope, cordons and settles the settings, then runs the lanes in the order
//! `model::drain::next_phase` gives them, once per tier of the drain rules (lowest order first;
//! one tier without rules). The mechanics live beside it: `settings` (where the drain's
//! settings come from), `lanes` (step 5, the parallel evictions), `volumes` (step 6, one
//! stateful pod at a time), `completion` (the pods a `WaitCompleted` rule keeps, waited for
//! after the tiers), `force` (step 7), `cancel` (giving the Node back) and `state` (what every
//! step shares: the workflow's state and the status edits).

mod cancel;
mod completion;
mod force;
mod lanes;
mod settings;
mod state;
mod volumes;

use nodewright_model::workflow_type;
use std::time::Duration;

use nodewright_activities::azure::machines::ArmReadActivities;
use nodewright_activities::kube::KubeActivities;
use nodewright_activities::kube::drain::{PrepareDrain, PreparedNode};
use nodewright_model::drain::{
    DrainPhase, DrainPurpose, DrainRequest, DrainResume, DrainStatus, DrainedNode, ForceReason,
    LaneEnd, RuledPlan, RuledPod, cordoned, describe_ruled_plan, drained_summary, first_phase,
    next_continuation, next_phase, not_held_because, not_this_machine, overridden_mark,
    purpose_word, refusal,
};
use nodewright_model::machine::Step;
use nodewright_model::{Operation, limits};
use temporalio_macros::workflow_methods;
use temporalio_sdk::{
    ContinueAsNewOptions, SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult,
};

pub use state::DrainNodeWorkflow;
use state::{Ctx, Drain, Finish, capped, extended, force_due, fresh_status, list_pods, plan_pods};

use crate::progress::{StepFailed, begin, done, fact, fail, now, record_failure, rfc3339, succeed};
use crate::search;
use crate::{activity_options, cancellation, input};

#[workflow_methods]
impl DrainNodeWorkflow {
    /// Runs the runbook.
    #[run(name = workflow_type::DRAIN_NODE)]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: DrainRequest,
    ) -> WorkflowResult<DrainedNode> {
        // 0. The input is checked before anything happens.
        input::admit_machine_run(
            ctx,
            workflow_type::DRAIN_NODE,
            &input::Subject {
                cluster: &request.cluster,
                named: Some(("node", &request.node)),
            },
            request.check(),
        )?;
        // 1. Search attributes and the status skeleton.
        announce(ctx, &request);
        // 2. The VM's ARM id, which the Node's providerID must name.
        let scope = ctx
            .execute_activity(
                ArmReadActivities::scope,
                (),
                // Reads the worker's configuration: let it answer even after a request, so the
                // cancellation path runs with it.
                cancellation::shielded(activity_options::read()),
            )
            .await?;
        let vm_id = scope.vm_id(&request.node);
        fact(ctx, "vmId", vm_id.clone());
        if request.resume.is_none() {
            // A resumed drain has cordoned already: its cancellation gives the Node back.
            cancellation::before_first_step(ctx)?;
        }

        // 3–8.
        match drain(ctx, &request, &vm_id).await {
            Ok(Finish::Drained(drained)) => {
                succeed(ctx, drained_summary(&request.node, &drained));
                Ok(drained)
            }
            Ok(Finish::Canceled(canceled)) => Err(cancellation::end(ctx, canceled)),
            Ok(Finish::ContinueAsNew(next)) => {
                match ctx.continue_as_new(*next, ContinueAsNewOptions::default()) {
                    Err(termination) => Err(termination),
                    Ok(never) => match never {},
                }
            }
            Err(failed) => {
                record_failure(ctx, &failed);
                let message = format!(
                    "draining {} failed at step {}: {}",
                    request.node, failed.step, failed.reason
                );
                Err(fail(ctx, "DrainFailed", message))
            }
        }
    }

    /// Switches the drain to force mode at its next look (within the PDB retry interval).
    #[signal(name = "force")]
    pub fn force(&mut self, _ctx: &mut SyncWorkflowContext<Self>, by: String) {
        self.force_requested = true;
        let status = self.status.get_or_insert_with(|| fresh_status(""));
        status.run.facts.insert("forceRequestedBy".to_owned(), by);
    }

    /// Moves the deadline (when force mode starts) later by this many seconds, at most
    /// [`limits::MAX_DRAIN_EXTENSION`] per signal (more is clamped, with a warning).
    #[signal(name = "extend_deadline")]
    pub fn extend_deadline(&mut self, _ctx: &mut SyncWorkflowContext<Self>, seconds: u64) {
        let (by, warning) = limits::clamp(
            "extend_deadline",
            Duration::from_secs(seconds),
            limits::MAX_DRAIN_EXTENSION,
        );
        let seconds = by.as_secs();
        if let Some(warning) = warning {
            let status = self.status.get_or_insert_with(|| fresh_status(""));
            status.warnings.push(warning);
        }
        match self.deadline.as_mut() {
            Some(deadline) => {
                let (moved, cut) = capped(extended(*deadline, seconds), self.hard_deadline);
                *deadline = moved;
                let text = rfc3339(moved);
                let status = self.status.get_or_insert_with(|| fresh_status(""));
                status.deadline = Some(text.clone());
                if cut {
                    status.warnings.push(format!(
                        "extend_deadline: the deadline stays at {text}, the drain's hard deadline (terminationGracePeriod): nothing moves it later"
                    ));
                }
            }
            None => {
                self.pending_extension_seconds =
                    self.pending_extension_seconds.saturating_add(seconds);
            }
        }
    }

    /// The mode, the deadline, every pod still on the node, the PDBs blocking, the volumes
    /// waited on, the steps.
    #[query(name = "status")]
    pub fn status(&self, _ctx: &WorkflowContextView) -> DrainStatus {
        self.status.clone().unwrap_or_else(|| fresh_status(""))
    }
}

/// Step 1: search attributes, the status skeleton and the first details line.
fn announce(ctx: &mut Ctx, request: &DrainRequest) {
    ctx.upsert_search_attributes(
        [
            search::CLUSTER.value_set(request.cluster.to_string()),
            search::MACHINE.value_set(request.node.clone()),
            search::OPERATION.value_set(Operation::Drain.to_string()),
        ]
        .into_iter()
        .chain(search::pool_of_machine(&request.node)),
    );
    let mut status = fresh_status(&request.node);
    let started = match &request.resume {
        Some(resume) => resume.started_at.clone(),
        None => rfc3339(now(ctx)),
    };
    status.run.started_at = Some(started);
    status.run.facts.insert(
        "purpose".to_owned(),
        purpose_word(request.purpose).to_owned(),
    );
    if let Some(resume) = &request.resume {
        status.warnings = resume.done_so_far.warnings.clone();
        status.local_data_lost = resume.done_so_far.local_data_lost.clone();
        status
            .run
            .facts
            .insert("continuation".to_owned(), resume.continuation.to_string());
    }
    ctx.state_mut(|s| {
        s.status = Some(status);
        s.force_requested =
            request.force || request.resume.as_ref().is_some_and(|r| r.force_requested);
    });
}

/// Step 3, then steps 4–8; on a cancellation request, the Node is given back.
async fn drain(ctx: &mut Ctx, request: &DrainRequest, vm_id: &str) -> Result<Finish, StepFailed> {
    // 3. Cordon: only the Node that is this machine's.
    begin(ctx, Step::Cordon);
    let prepared = ctx
        .execute_activity(
            KubeActivities::prepare_drain,
            PrepareDrain {
                node: request.node.clone(),
                vm_id: vm_id.to_owned(),
                terminating: request.purpose == DrainPurpose::Deletion,
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::Cordon, &e))?;
    let (annotation, health, cordoned_before) = match prepared {
        PreparedNode::Absent => {
            done(ctx, Step::Cordon, "no Node: nothing to drain");
            return Ok(Finish::Drained(DrainedNode {
                node: request.node.clone(),
                ..DrainedNode::default()
            }));
        }
        PreparedNode::NotOurs { provider_id } => {
            let reason = not_this_machine(&request.node, provider_id.as_deref());
            return Err(StepFailed::new(Step::Cordon, reason));
        }
        PreparedNode::Prepared {
            policy_annotation,
            health,
            cordoned_before,
        } => (policy_annotation, health, cordoned_before),
    };
    // The settings: request, VM tag or defaults, bounded annotation; the deadline.
    let settings = settings::settle(ctx, request, annotation.as_deref()).await;
    let refused = settings.refused_note.clone();
    let mut state = settings::start_state(ctx, request, vm_id, settings, health);
    if request.resume.is_none() {
        state.result.cordoned_before = cordoned_before;
    }
    if let Some(note) = refused {
        settings::report_refused_annotation(ctx, request, note).await;
    }
    done(ctx, Step::Cordon, cordoned(request.purpose));

    match steps(ctx, &mut state).await {
        Err(failed) if cancellation::requested(ctx) => {
            record_failure(ctx, &StepFailed::new(failed.step, "canceled"));
            Ok(Finish::Canceled(
                cancel::give_back(ctx, &mut state, failed.step).await,
            ))
        }
        other => other,
    }
}

/// Steps 4–8: select, evict, move volumes, force mode; stops at a cancellation request.
async fn steps(ctx: &mut Ctx, state: &mut Drain) -> Result<Finish, StepFailed> {
    // 4. Select the pods; under `localData: refuse` stop before the first eviction.
    cancellation::guard(ctx, Step::SelectPods)?;
    begin(ctx, Step::SelectPods);
    let listed = list_pods(ctx, state, Step::SelectPods).await?;
    state.health = listed.health.clone();
    let ruled = plan_pods(ctx, state, &listed.pods);
    if !ruled.whole.refused.is_empty() {
        let chosen = state.policy.local_data.is_some();
        let reason = refusal(&state.request.node, &ruled.whole.refused, chosen);
        return Err(StepFailed::new(Step::SelectPods, reason));
    }
    name_overridden_marks(ctx, state, &ruled);
    done(ctx, Step::SelectPods, describe_ruled_plan(&ruled));

    // 5–7. Per tier, the lanes in order; force mode takes over whenever it is due.
    let mut stuck = Vec::new();
    let mut forced: Option<ForceReason> = None;
    // Pods do-not-disrupt marks keep running after force mode (released by force mode again).
    let mut held = Vec::new();
    for tier in &ruled.tiers {
        if ruled.tiers.len() > 1 {
            fact(ctx, "tier", tier.order.to_string());
        }
        let plan = &tier.plan;
        let mut phase = first_phase(force_due(ctx, state));
        loop {
            let end = match &phase {
                DrainPhase::EvictPods => lanes::evict_without_volumes(ctx, state, plan).await?,
                DrainPhase::MoveVolumes => {
                    volumes::move_volumes(ctx, state, plan, &mut stuck).await?
                }
                DrainPhase::AwaitStuckVolumes => {
                    volumes::await_stuck_volumes(ctx, state, &mut stuck).await?
                }
                DrainPhase::Force(reason) => {
                    cancellation::guard(ctx, Step::ForceDrain)?;
                    held = force::force_drain(ctx, state, reason.clone()).await?;
                    forced = Some(reason.clone());
                    LaneEnd::Finished
                }
                DrainPhase::ContinueAsNew => return Ok(continue_as_new(ctx, state)),
                DrainPhase::Done => break,
            };
            phase = next_phase(&phase, end, !stuck.is_empty());
        }
        if forced.is_some() {
            break;
        }
    }
    // The pods a WaitCompleted rule keeps, and those do-not-disrupt marks hold: waited for
    // until they complete or force is due.
    let waited: Vec<RuledPod> = ruled
        .wait_completed
        .iter()
        .chain(&ruled.held)
        .cloned()
        .collect();
    if forced.is_none() && !waited.is_empty() {
        match completion::await_completed(ctx, state, &waited).await? {
            LaneEnd::Finished => {}
            LaneEnd::ContinueAsNew => return Ok(continue_as_new(ctx, state)),
            LaneEnd::Forced(reason) => {
                cancellation::guard(ctx, Step::ForceDrain)?;
                held = force::force_drain(ctx, state, reason.clone()).await?;
                forced = Some(reason);
            }
        }
    }
    // Force mode left marked pods running: waited for until they go or force mode overrides
    // their marks (the hard deadline at the latest); then force mode ends the drain.
    while !held.is_empty() {
        let reason = match completion::await_held(ctx, state, &held).await? {
            LaneEnd::Finished => forced.clone().unwrap_or(ForceReason::DeadlinePassed),
            LaneEnd::ContinueAsNew => return Ok(continue_as_new(ctx, state)),
            LaneEnd::Forced(reason) => reason,
        };
        cancellation::guard(ctx, Step::ForceDrain)?;
        held = force::force_drain(ctx, state, reason.clone()).await?;
        forced = Some(reason);
    }

    // 8. Done: the result, with the warnings.
    let warnings = ctx.state(|s| {
        s.status
            .as_ref()
            .map(|status| status.warnings.clone())
            .unwrap_or_default()
    });
    state.result.warnings = warnings;
    Ok(Finish::Drained(state.result.clone()))
}

/// Names the pods marked do-not-disrupt that a drain which does not honour the marks evicts.
fn name_overridden_marks(ctx: &mut Ctx, state: &mut Drain, ruled: &RuledPlan) {
    let evicted: Vec<&RuledPod> = ruled
        .overriding
        .iter()
        .filter(|p| ruled.whole.moving().any(|m| m.uid == p.pod.uid))
        .collect();
    let why = format!("evicted: {}", not_held_because(state.request.disruption));
    for pod in evicted {
        let named = overridden_mark(pod, &why);
        state.result.note_overridden(&named);
        state::with_status(ctx, |status| status.note_overridden(&named));
    }
}

/// The next run's input: the same request, with where this one left off.
fn continue_as_new(ctx: &mut Ctx, state: &Drain) -> Finish {
    let (deadline, force_requested, warnings) = ctx.state(|s| {
        (
            s.deadline.map(rfc3339).unwrap_or_default(),
            s.force_requested,
            s.status
                .as_ref()
                .map(|status| status.warnings.clone())
                .unwrap_or_default(),
        )
    });
    let mut done_so_far = state.result.clone();
    done_so_far.warnings = warnings;
    let mut next = state.request.clone();
    next.resume = Some(DrainResume {
        started_at: state.started_at.clone(),
        deadline,
        force_requested,
        policy: state.policy.clone(),
        done_so_far,
        continuation: next_continuation(state.request.resume.as_ref()),
    });
    Finish::ContinueAsNew(Box::new(next))
}
