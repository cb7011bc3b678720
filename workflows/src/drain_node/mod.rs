#![doc = include_str!("../../runbooks/drain_node.md")]
//!
//! # Code map
//!
//! This file is the runbook's order: [`DrainNodeWorkflow::run`] admits the input, reads the
//! scope, cordons and settles the settings, selects the pods, has `tiers` drain them, then takes
//! a fresh look at the Node's pods and drains what arrived since (`model::drain::fresh_look`,
//! at most `MAX_FRESH_LOOKS` times). The mechanics live beside it: `tiers` (steps 5–7 for one
//! plan: the lanes of each tier in the order `model::drain::next_phase` gives them, force mode,
//! the waits after the tiers), `together` (steps 5 and 6 at once: both lanes in rounds,
//! `model::drain::round_evictions`), `settings` (where the drain's settings come from), `lanes`
//! (step 5 alone, the parallel evictions, for runs that began before both lanes ran at once),
//! `volumes` (step 6: following a stateful pod's volumes; one after the other in those older
//! runs), `completion` (the pods a `WaitCompleted` rule keeps, waited for after the tiers),
//! `force` (step 7), `cancel` (giving the Node back) and `state` (what every step shares: the
//! workflow's state and the status edits).

mod cancel;
mod completion;
mod force;
mod lanes;
mod looks;
mod rounds;
mod settings;
mod state;
mod tiers;
mod together;
mod volumes;

use nodewright_model::workflow_type;
use std::time::Duration;

use nodewright_activities::kube::KubeActivities;
use nodewright_activities::kube::drain::{PrepareDrain, PreparedNode};
use nodewright_model::drain::{
    DrainPurpose, DrainRequest, DrainResume, DrainStatus, DrainedNode, FreshLook, PodFacts,
    RuledPlan, RuledPod, cordoned, describe_ruled_plan, drained_summary, fresh_look,
    fresh_look_detail, fresh_look_warning, next_continuation, not_held_because, not_this_machine,
    overridden_mark, purpose_word, refusal,
};
use nodewright_model::machine::Step;
use nodewright_model::{Operation, limits};
use temporalio_macros::workflow_methods;
use temporalio_sdk::{
    ContinueAsNewOptions, SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult,
};

pub use state::DrainNodeWorkflow;

/// The patch that looks at the Node's pods again before "drained" and drains what arrived:
/// asked by every drain that ends without force mode.
const PATCH_FRESH_LOOK: &str = "drain-fresh-look";
use state::{
    Ctx, Drain, Finish, capped, extended, fresh_status, list_pods, plan_pods, plan_quietly, warn,
    with_status,
};

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
        let scope = crate::scope::read(
            ctx,
            // The options of runs recorded before `scope::SCOPE_LOCAL`.
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
        // Warnings, local data lost, marks overridden, force mode, pods and volumes (a stuck
        // detach stays detach-timed-out).
        status.carry_over(resume);
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
    let (annotation, stamp, health, cordoned_before) = match prepared {
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
            policy_stamp,
            health,
            cordoned_before,
        } => (policy_annotation, policy_stamp, health, cordoned_before),
    };
    // The settings: request, VM tag or defaults, bounded annotation; the deadline.
    let settings = settings::settle(ctx, request, annotation.as_deref(), stamp.as_deref()).await;
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
    if state.request.resume.is_some() {
        // Pods the runs before showed that left meanwhile.
        let present: Vec<String> = listed.pods.iter().map(PodFacts::key).collect();
        with_status(ctx, |status| status.settle_carried(&present));
    }
    let ruled = plan_pods(ctx, state, &listed.pods);
    if !ruled.whole.refused.is_empty() {
        let chosen = state.policy.local_data.is_some();
        let reason = refusal(&state.request.node, &ruled.whole.refused, chosen);
        return Err(StepFailed::new(Step::SelectPods, reason));
    }
    name_overridden_marks(ctx, state, &ruled);
    done(ctx, Step::SelectPods, describe_ruled_plan(&ruled));

    // 5–7. The tiers, the waits, force mode; then fresh looks until nothing arrived.
    let mut ruled = ruled;
    let mut drained_again = 0u32;
    loop {
        let forced = match tiers::drain_ruled(ctx, state, &ruled).await? {
            tiers::Ruled::ContinueAsNew => return Ok(continue_as_new(ctx, state)),
            tiers::Ruled::Done { forced } => forced,
        };
        // A fresh look: the pods that arrived since the pods were listed (bound late, created
        // with nodeName) are drained too; a run that began before this looked no more.
        if forced || !ctx.patched(PATCH_FRESH_LOOK) {
            break;
        }
        let listed = list_pods(ctx, state, Step::EvictPods).await?;
        state.health = listed.health.clone();
        let fresh = plan_quietly(ctx, state, &listed.pods);
        with_status(ctx, |status| status.show_arrivals(&fresh));
        for refused in &fresh.whole.refused {
            warn(
                ctx,
                format!(
                    "{refused} came after the pods were selected and stays on the node: the drain's localData policy is refuse"
                ),
            );
        }
        let arrived = tiers::arrived(&fresh);
        match fresh_look(arrived.len(), drained_again) {
            FreshLook::Drained => break,
            FreshLook::DrainAgain => {
                drained_again = drained_again.saturating_add(1);
                fact(ctx, "freshLooks", drained_again.to_string());
                fact(ctx, "freshLook", fresh_look_detail(drained_again, &arrived));
                name_overridden_marks(ctx, state, &fresh);
                ruled = fresh;
            }
            FreshLook::GiveUp => {
                warn(ctx, fresh_look_warning(&state.request.node, &arrived));
                break;
            }
        }
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
    let (deadline, force_requested, shown) = ctx.state(|s| {
        (
            s.deadline.map(rfc3339).unwrap_or_default(),
            s.force_requested,
            s.status.clone(),
        )
    });
    let shown = shown.unwrap_or_else(|| fresh_status(&state.request.node));
    let mut done_so_far = state.result.clone();
    done_so_far.warnings = shown.warnings;
    let mut next = state.request.clone();
    next.resume = Some(DrainResume {
        started_at: state.started_at.clone(),
        deadline,
        force_requested,
        policy: state.policy.clone(),
        done_so_far,
        continuation: next_continuation(state.request.resume.as_ref()),
        stuck_volumes: state.stuck.clone(),
        pods: shown.pods,
        volumes: shown.volumes,
    });
    Finish::ContinueAsNew(Box::new(next))
}
