#![doc = include_str!("../runbooks/drain_node.md")]

use std::time::Duration;

use chrono::{DateTime, Utc};
use nodewright_activities::azure::machines::{
    ArmReadActivities, ArmWriteActivities, AwaitDisksReleased, AwaitForceDetach, DrainTag,
    ForceDetachDisks, ForceDetachStarted, ReadDrainTag,
};
use nodewright_activities::kube::drain::{
    AwaitPodsGone, AwaitVolumes, Eviction, ListNodePods, NodeAttachments, NodePods, PodAction,
    PodDeletion, PrepareDrain, PreparedNode,
};
use nodewright_activities::kube::{KubeActivities, NodeChange, NodeEvent, RestoreNode};
use nodewright_model::cancel::{Canceled, CordonOnCancel, cordon_on_cancel};
use nodewright_model::drain::{
    ANNOTATION_DRAIN_POLICY, DrainMode, DrainPlan, DrainPurpose, DrainRequest, DrainResume,
    DrainStatus, DrainedNode, ForceReason, LocalDataPolicy, NodeHealth, PodFacts, PodRef, PodState,
    TAG_DRAIN, VolumePod, VolumeProgress, VolumeState, bound_annotation, detach_budget,
    force_reason, is_misconfigured, plan_drain, pod_disappearance_budget, policy_from_annotation,
    policy_from_tag, refusal, salvage_policy,
};
use nodewright_model::machine::{MachineStatus, Step, StepState};
use nodewright_model::names::arm_write_task_queue;
use nodewright_model::pool::DrainPolicy;
use nodewright_model::{Operation, limits};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::workflows::{join_all, select};
use temporalio_sdk::{
    ContinueAsNewOptions, SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult,
};

use crate::progress::{
    HasStatus, StepFailed, activity_failure_text, begin, done, fact, fail, later, left_until, now,
    record_failure, rfc3339, succeed,
};
use crate::search;
use crate::{activity_options, cancellation, input};

/// How long force mode waits for ARM to force-detach the VM's data disks.
const FORCE_DETACH_BUDGET: Duration = Duration::from_secs(10 * 60);

/// A wait that ends by itself is never shorter than this (a deadline already passed still
/// gets one look).
const MIN_WAIT: Duration = Duration::from_secs(1);

/// The patch that brought the local-data policy: asked only when a plan refuses a pod, so a run
/// that planned before it evicts such pods as it did then, and a drain without local data
/// records no marker.
const PATCH_LOCAL_DATA: &str = "local-data-policy";

/// The patch that keeps the readable fields of a refused drain-policy annotation (the pool's
/// settings) instead of all defaults: asked only when the annotation is refused.
const PATCH_SALVAGE_ANNOTATION: &str = "drain-annotation-per-field";

/// The patch that bounds the Node's drain-policy annotation by the trusted settings (the
/// request's, else the VM's `nodewright.io-drain` tag read by `azure.read_drain_tag`, else the
/// defaults) and reports a refused annotation as a Node Event (`kube.record_node_event`).
/// Asked once per fresh drain (not a resumed one); runs recorded before it trust the annotation
/// as they did then.
const PATCH_BOUNDED_ANNOTATION: &str = "drain-annotation-bounded";

/// The reason of the Node Event that reports a refused drain-policy annotation.
const EVENT_ANNOTATION_REFUSED: &str = "DrainAnnotationRefused";

/// Drains one node; see the runbook above.
#[workflow]
#[derive(Default)]
pub struct DrainNodeWorkflow {
    status: Option<DrainStatus>,
    deadline: Option<DateTime<Utc>>,
    force_requested: bool,
    /// Extensions signalled before the deadline was known, added to it once it is.
    pending_extension_seconds: u64,
}

fn fresh_status(node: &str) -> DrainStatus {
    DrainStatus::new(MachineStatus::new("drain", node, None, &Step::DRAIN))
}

impl HasStatus for DrainNodeWorkflow {
    fn status_mut(&mut self) -> &mut MachineStatus {
        &mut self.status.get_or_insert_with(|| fresh_status("")).run
    }
}

#[workflow_methods]
impl DrainNodeWorkflow {
    /// Runs the runbook.
    #[run(name = "DrainNode")]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: DrainRequest,
    ) -> WorkflowResult<DrainedNode> {
        input::admit_machine_run(
            ctx,
            "DrainNode",
            &input::Subject {
                cluster: &request.cluster,
                named: Some(("node", &request.node)),
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
        let vm_id = scope.vm_id(&request.node);
        fact(ctx, "vmId", vm_id.clone());
        if request.resume.is_none() {
            // A resumed drain has cordoned already: its cancellation gives the Node back.
            cancellation::before_first_step(ctx)?;
        }

        match drain(ctx, &request, &vm_id).await {
            Ok(Finish::Drained(drained)) => {
                let summary = if !drained.node_found {
                    format!("no Node {}: nothing to drain", request.node)
                } else if let Some(reason) = &drained.forced {
                    format!("{} drained in force mode ({reason})", request.node)
                } else {
                    format!("{} drained", request.node)
                };
                succeed(ctx, summary);
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
                *deadline = extended(*deadline, seconds);
                let text = rfc3339(*deadline);
                self.status.get_or_insert_with(|| fresh_status("")).deadline = Some(text);
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

/// `deadline` moved `seconds` later (saturating at the latest instant a deadline can name).
fn extended(deadline: DateTime<Utc>, seconds: u64) -> DateTime<Utc> {
    later(deadline, Duration::from_secs(seconds))
}

/// How a drain run ends, but for a failure.
enum Finish {
    Drained(DrainedNode),
    ContinueAsNew(Box<DrainRequest>),
    Canceled(Canceled),
}

/// Search attributes, the status skeleton and the first details line.
fn announce(ctx: &mut WorkflowContext<DrainNodeWorkflow>, request: &DrainRequest) {
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
        match request.purpose {
            DrainPurpose::Maintenance => "maintenance",
            DrainPurpose::Deletion => "deletion",
        }
        .to_owned(),
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

/// What every step of one drain needs.
struct Drain {
    request: DrainRequest,
    vm_id: String,
    policy: DrainPolicy,
    started_at: String,
    result: DrainedNode,
    health: NodeHealth,
    /// The pod whose volumes are moving: evicted, its volumes not yet attached elsewhere.
    in_flight: Option<VolumePod>,
    /// Set on the cancellation path: waits run shielded from the cancellation.
    shielded: bool,
}

/// The runbook's steps 3–8.
async fn drain(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    request: &DrainRequest,
    vm_id: &str,
) -> Result<Finish, StepFailed> {
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
    let prepared = match prepared {
        PreparedNode::Absent => {
            done(ctx, Step::Cordon, "no Node: nothing to drain");
            return Ok(Finish::Drained(DrainedNode {
                node: request.node.clone(),
                ..DrainedNode::default()
            }));
        }
        PreparedNode::NotOurs { provider_id } => {
            let provider = match provider_id {
                Some(id) => format!("has providerID {id}"),
                None => "has no providerID".to_owned(),
            };
            return Err(StepFailed::new(
                Step::Cordon,
                format!(
                    "Node {} {provider} or lacks the label nodewright.io/machine={}: it is not this machine's, so nothing on it was touched",
                    request.node, request.node
                ),
            ));
        }
        PreparedNode::Prepared {
            policy_annotation,
            health,
            cordoned_before,
        } => (policy_annotation, health, cordoned_before),
    };
    let (annotation, health, cordoned_before) = prepared;
    let baseline = if request.resume.is_none() && ctx.patched(PATCH_BOUNDED_ANNOTATION) {
        Some(trusted_baseline(ctx, request).await)
    } else {
        None
    };
    let (mut state, refused) =
        start_state(ctx, request, vm_id, annotation.as_deref(), baseline, health);
    if request.resume.is_none() {
        state.result.cordoned_before = cordoned_before;
    }
    if let Some(note) = refused {
        report_refused_annotation(ctx, request, note).await;
    }
    done(
        ctx,
        Step::Cordon,
        match request.purpose {
            DrainPurpose::Deletion => {
                "cordoned, tainted nodewright.io/draining:NoSchedule, condition Terminating"
            }
            DrainPurpose::Maintenance => "cordoned, tainted nodewright.io/draining:NoSchedule",
        },
    );

    match steps(ctx, &mut state).await {
        Err(failed) if cancellation::requested(ctx) => {
            record_failure(ctx, &StepFailed::new(failed.step, "canceled"));
            Ok(Finish::Canceled(
                give_back(ctx, &mut state, failed.step).await,
            ))
        }
        other => other,
    }
}

/// Steps 4–8: select, evict, move volumes, force mode; stops at a cancellation request.
async fn steps(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    state: &mut Drain,
) -> Result<Finish, StepFailed> {
    cancellation::guard(ctx, Step::SelectPods)?;
    begin(ctx, Step::SelectPods);
    let listed = list_pods(ctx, state, Step::SelectPods).await?;
    state.health = listed.health.clone();
    let plan = plan_pods(ctx, state, &listed.pods);
    show_plan(ctx, &plan);
    if !plan.refused.is_empty() {
        let chosen = state.policy.local_data.is_some();
        let reason = refusal(&state.request.node, &plan.refused, chosen);
        return Err(StepFailed::new(Step::SelectPods, reason));
    }
    done(ctx, Step::SelectPods, describe_plan(&plan));

    let mut forced = force_due(ctx, state);
    if forced.is_none() {
        forced = match evict_without_volumes(ctx, state, &plan).await? {
            Lane::Finished => None,
            Lane::Forced(reason) => Some(reason),
            Lane::ContinueAsNew => return Ok(continue_as_new(ctx, state)),
        };
    }
    let mut stuck = Vec::new();
    if forced.is_none() {
        forced = match move_volumes(ctx, state, &plan, &mut stuck).await? {
            Lane::Finished => None,
            Lane::Forced(reason) => Some(reason),
            Lane::ContinueAsNew => return Ok(continue_as_new(ctx, state)),
        };
    }
    if forced.is_none() && !stuck.is_empty() {
        forced = match await_stuck_volumes(ctx, state, &mut stuck).await? {
            Lane::Finished => None,
            Lane::Forced(reason) => Some(reason),
            Lane::ContinueAsNew => return Ok(continue_as_new(ctx, state)),
        };
    }
    if let Some(reason) = forced {
        cancellation::guard(ctx, Step::ForceDrain)?;
        force_drain(ctx, state, reason).await?;
    }
    let warnings = ctx.state(|s| {
        s.status
            .as_ref()
            .map(|status| status.warnings.clone())
            .unwrap_or_default()
    });
    state.result.warnings = warnings;
    Ok(Finish::Drained(state.result.clone()))
}

/// The cancellation path: a volume move under way is let finish (shielded), so its volume ends
/// attached to exactly one node; then the Node is given back — the draining taint and the
/// `Terminating` condition removed, uncordoned unless it was cordoned before the drain. Pods
/// already moved stay where they went.
async fn give_back(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    state: &mut Drain,
    at: Step,
) -> Canceled {
    let mut canceled = Canceled::at(at.as_str(), cancellation::reason(ctx));
    state.shielded = true;
    begin(ctx, Step::Restore);
    if let Some(volume_pod) = state.in_flight.take() {
        let key = volume_pod.pod.key();
        let grace = Duration::from_secs(volume_pod.pod.grace_period_seconds);
        let budget = detach_budget(grace, state.policy.volume_detach_timeout);
        match await_detached(ctx, state, &volume_pod, budget).await {
            Ok(pending) if pending.is_empty() => {
                match await_reattached(ctx, state, &volume_pod).await {
                    Ok(()) => canceled.kept.push(format!(
                        "pod {key} was moving with its volumes when the request came: the move finished"
                    )),
                    Err(failed) => canceled.kept.push(format!(
                        "pod {key} was moving with its volumes: its reattach was not confirmed ({})",
                        failed.reason
                    )),
                }
            }
            Ok(pending) => canceled.kept.push(format!(
                "pod {key} was moving with its volumes: {} still attached here after {}s, so attached to this node only",
                pending.join(", "),
                budget.as_secs()
            )),
            Err(failed) => canceled.kept.push(format!(
                "pod {key} was moving with its volumes: its detach was not confirmed ({})",
                failed.reason
            )),
        }
    }
    let evicted = state.result.evicted.len();
    if evicted > 0 {
        canceled.kept.push(format!(
            "{evicted} pods already evicted stay where they were rescheduled"
        ));
    }
    for (pv, node) in &state.result.volumes_moved {
        canceled
            .kept
            .push(format!("volume {pv} stays attached to {node}"));
    }
    let keep_cordoned =
        cordon_on_cancel(state.result.cordoned_before) == CordonOnCancel::KeepCordoned;
    let restored = ctx
        .execute_activity(
            KubeActivities::restore_node,
            RestoreNode {
                node: state.request.node.clone(),
                vm_id: state.vm_id.clone(),
                keep_cordoned,
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await;
    match restored {
        Ok(NodeChange::Done | NodeChange::Already) => {
            let what = if keep_cordoned {
                format!(
                    "removed the draining taint from {} (it stays cordoned: it was before the drain)",
                    state.request.node
                )
            } else {
                format!(
                    "uncordoned {} and removed the draining taint",
                    state.request.node
                )
            };
            let what = if state.request.purpose == DrainPurpose::Deletion {
                format!("{what} and the Terminating condition")
            } else {
                what
            };
            canceled.undone.push(what.clone());
            done(ctx, Step::Restore, what);
        }
        Ok(NodeChange::Absent) => done(ctx, Step::Restore, "the Node is gone"),
        Ok(NodeChange::NotOurs) => done(
            ctx,
            Step::Restore,
            "a Node of that name belongs to another VM: left alone",
        ),
        Err(error) => {
            let reason = activity_failure_text(&error);
            record_failure(ctx, &StepFailed::new(Step::Restore, reason.clone()));
            canceled.cleanup_failure = Some(format!(
                "giving Node {} back failed: {reason}; run `nodewright machine uncordon {}`",
                state.request.node, state.request.node
            ));
        }
    }
    canceled
}

/// The drain settings nothing on the Node can change, where they came from, and a warning
/// when the VM's tag could not be used.
struct Baseline {
    policy: DrainPolicy,
    source: String,
    warning: Option<String>,
}

/// The trusted settings a drain bounds the Node's annotation by: the request's, else the VM's
/// `nodewright.io-drain` tag (one GET of the VM, `azure.read_drain_tag`), else the defaults.
async fn trusted_baseline(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    request: &DrainRequest,
) -> Baseline {
    if let Some(policy) = &request.policy {
        return Baseline {
            policy: policy.clone(),
            source: "the request".to_owned(),
            warning: None,
        };
    }
    let read = ctx
        .execute_activity(
            ArmReadActivities::read_drain_tag,
            ReadDrainTag {
                cluster: request.cluster.clone(),
                machine: request.node.clone(),
            },
            cancellation::shielded(activity_options::read()),
        )
        .await;
    let defaults = |source: &str, warning: Option<String>| Baseline {
        policy: DrainPolicy::default(),
        source: source.to_owned(),
        warning,
    };
    match read {
        Ok(DrainTag::Tagged { value }) => match policy_from_tag(&value) {
            Ok(policy) => Baseline {
                policy,
                source: format!("the pool, VM tag {TAG_DRAIN}"),
                warning: None,
            },
            Err(problem) => defaults(
                "defaults",
                Some(format!(
                    "{problem}; the drain's trusted settings are the defaults (fix or remove the tag)"
                )),
            ),
        },
        Ok(DrainTag::Untagged) => defaults(
            &format!("defaults: the VM has no tag {TAG_DRAIN}, it was created before it"),
            None,
        ),
        Ok(DrainTag::NoVm | DrainTag::NotOwned) => defaults(
            &format!("defaults: no VM of this cluster's machine to read the tag {TAG_DRAIN} of"),
            None,
        ),
        Err(error) => defaults(
            "defaults",
            Some(format!(
                "reading the VM's tag {TAG_DRAIN} failed ({}): the drain's trusted settings are the defaults",
                activity_failure_text(&error)
            )),
        ),
    }
}

/// Reports a refused drain-policy annotation as a Warning Event on the Node (named after the
/// run, so a retried activity finds it); a failure to record it is a warning in the status.
async fn report_refused_annotation(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    request: &DrainRequest,
    note: String,
) {
    let event = NodeEvent {
        node: request.node.clone(),
        name: format!("{}.drain-annotation.{}", request.node, ctx.run_id()),
        reason: EVENT_ANNOTATION_REFUSED.to_owned(),
        action: "Drain".to_owned(),
        note,
    };
    let recorded = ctx
        .execute_activity(
            KubeActivities::record_node_event,
            event,
            cancellation::shielded(activity_options::kube_write()),
        )
        .await;
    if let Err(error) = recorded {
        let warning = format!(
            "recording the Event {EVENT_ANNOTATION_REFUSED} on Node {} failed: {}",
            request.node,
            activity_failure_text(&error)
        );
        ctx.state_mut(|s| {
            if let Some(status) = s.status.as_mut() {
                status.warnings.push(warning);
            }
        });
    }
}

/// The settings, the deadline and what a resumed run carries; and, when the Node's annotation
/// asked for more than `baseline` allows, the note for the Node's Event.
fn start_state(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    request: &DrainRequest,
    vm_id: &str,
    annotation: Option<&str>,
    baseline: Option<Baseline>,
    health: NodeHealth,
) -> (Drain, Option<String>) {
    let mut warnings = Vec::new();
    let mut refused_note = None;
    let (mut chosen, source) = match baseline {
        Some(baseline) => {
            warnings.extend(baseline.warning);
            match annotation {
                Some(text) => {
                    let bounded = bound_annotation(&baseline.policy, request.purpose, text);
                    if bounded.has_refusals() {
                        let note = format!(
                            "annotation {ANNOTATION_DRAIN_POLICY} of Node {} asks for what the drain settings from {} do not allow (it may only make the drain more patient or more careful, within the maxima): {}",
                            request.node,
                            baseline.source,
                            bounded.refusals()
                        );
                        warnings.push(note.clone());
                        refused_note = Some(note);
                    }
                    let source = if bounded.taken.is_empty() {
                        baseline.source
                    } else {
                        format!(
                            "{}, made more patient by the Node's annotation: {}",
                            baseline.source,
                            bounded.taken.join(", ")
                        )
                    };
                    (bounded.policy, source)
                }
                None => (baseline.policy, baseline.source),
            }
        }
        None => {
            let (policy, source, bad_annotation) = legacy_settings(ctx, request, annotation);
            warnings.extend(bad_annotation);
            (policy, source.to_owned())
        }
    };
    chosen.local_data = request.local_data.or(chosen.local_data);
    let (policy, started_at, deadline, result) = match &request.resume {
        Some(resume) => (
            resume.policy.clone(),
            resume.started_at.clone(),
            parse_time(&resume.deadline).unwrap_or_else(|| now(ctx)),
            resume.done_so_far.clone(),
        ),
        None => {
            let policy = chosen;
            let started = now(ctx);
            let deadline = later(started, policy.timeout);
            let result = DrainedNode {
                node: request.node.clone(),
                node_found: true,
                ..DrainedNode::default()
            };
            (policy, rfc3339(started), deadline, result)
        }
    };
    ctx.state_mut(|s| {
        let deadline = extended(deadline, std::mem::take(&mut s.pending_extension_seconds));
        s.deadline = Some(deadline);
        let status = s.status.get_or_insert_with(|| fresh_status(&request.node));
        status.deadline = Some(rfc3339(deadline));
        status.run.facts.insert(
            "drainSettings".to_owned(),
            format!(
                "{} (from {source})",
                describe_policy(&policy, request.purpose)
            ),
        );
        if request.resume.is_none() {
            status.warnings.extend(warnings);
        }
    });
    let drain = Drain {
        request: request.clone(),
        vm_id: vm_id.to_owned(),
        policy,
        started_at,
        result,
        health,
        in_flight: None,
        shielded: false,
    };
    (drain, refused_note)
}

/// The settings of a run recorded before [`PATCH_BOUNDED_ANNOTATION`]: the request's, else the
/// annotation's (salvaged field by field under [`PATCH_SALVAGE_ANNOTATION`]), else the
/// defaults; and the warning for an annotation that was not read.
fn legacy_settings(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    request: &DrainRequest,
    annotation: Option<&str>,
) -> (DrainPolicy, &'static str, Option<String>) {
    match (&request.policy, annotation.map(policy_from_annotation)) {
        (Some(policy), _) => (policy.clone(), "request", None),
        (None, Some(Ok(policy))) => (policy, "the Node's pool", None),
        (None, Some(Err(bad))) => match annotation {
            Some(text) if ctx.patched(PATCH_SALVAGE_ANNOTATION) => {
                let (policy, problems) = salvage_policy(text);
                let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
                let warning = format!(
                    "{}; drained with the pool's other settings from the annotation and the default for those",
                    said.join("; ")
                );
                (policy, "the Node's pool, partly defaults", Some(warning))
            }
            _ => (
                DrainPolicy::default(),
                "defaults",
                Some(format!("{bad}; drained with the default settings instead")),
            ),
        },
        (None, None) => (DrainPolicy::default(), "defaults", None),
    }
}

fn describe_policy(policy: &DrainPolicy, purpose: DrainPurpose) -> String {
    let local_data = LocalDataPolicy::or_default_for(policy.local_data, purpose).as_str();
    format!(
        "timeout {}s, PDB retry {}s, detach {}s, reattach {}s, force after {}s unhealthy, local data {local_data}{}",
        policy.timeout.as_secs(),
        policy.pdb_retry_interval.as_secs(),
        policy.volume_detach_timeout.as_secs(),
        policy.volume_attach_timeout.as_secs(),
        policy.force_after_unhealthy.as_secs(),
        if policy.local_data.is_none() {
            " (the purpose's default)"
        } else {
            ""
        }
    )
}

/// [`plan_drain`] under the drain's local-data policy (the purpose's default unless set). A run
/// that planned before the policy existed (no [`PATCH_LOCAL_DATA`] marker) evicts every pod, as
/// it did then.
fn plan_pods(
    ctx: &WorkflowContext<DrainNodeWorkflow>,
    state: &Drain,
    pods: &[PodFacts],
) -> DrainPlan {
    let policy = LocalDataPolicy::or_default_for(state.policy.local_data, state.request.purpose);
    let plan = plan_drain(pods, policy);
    if plan.refused.is_empty() || ctx.patched(PATCH_LOCAL_DATA) {
        plan
    } else {
        plan_drain(pods, LocalDataPolicy::Evict)
    }
}

/// Records that `pod` left with its local data, when the plan says it had any.
fn note_local_data(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    state: &mut Drain,
    plan: &DrainPlan,
    pod: &str,
) {
    if let Some(lost) = plan.local_data_of(pod) {
        state.result.note_local_data_lost(lost);
        ctx.state_mut(|s| {
            if let Some(status) = s.status.as_mut() {
                status.note_local_data_lost(lost);
            }
        });
    }
}

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The next run's input: the same request, with where this one left off.
fn continue_as_new(ctx: &mut WorkflowContext<DrainNodeWorkflow>, state: &Drain) -> Finish {
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
    let continuation = state
        .request
        .resume
        .as_ref()
        .map_or(1, |r| r.continuation.saturating_add(1));
    let mut next = state.request.clone();
    next.resume = Some(DrainResume {
        started_at: state.started_at.clone(),
        deadline,
        force_requested,
        policy: state.policy.clone(),
        done_so_far,
        continuation,
    });
    Finish::ContinueAsNew(Box::new(next))
}

/// How a lane of the drain ended.
enum Lane {
    /// Its pods are gone.
    Finished,
    /// Force mode is due, for this reason.
    Forced(ForceReason),
    /// The history is long: continue as a new run (the world is re-read there).
    ContinueAsNew,
}

/// Whether force mode is due now.
fn force_due(ctx: &WorkflowContext<DrainNodeWorkflow>, state: &Drain) -> Option<ForceReason> {
    let (deadline, requested) = ctx.state(|s| (s.deadline, s.force_requested));
    let deadline = deadline.unwrap_or_else(|| now(ctx));
    force_reason(
        now(ctx).timestamp(),
        deadline.timestamp(),
        &state.health,
        state.policy.force_after_unhealthy,
        requested,
    )
}

/// Waits `interval` (never past the deadline), or less when force is requested.
async fn pause(ctx: &mut WorkflowContext<DrainNodeWorkflow>, interval: Duration) {
    let deadline = ctx.state(|s| s.deadline);
    let wait = deadline
        .map(|d| left_until(ctx, d))
        .unwrap_or(interval)
        .min(interval)
        .max(MIN_WAIT);
    select! {
        _ = ctx.timer(wait) => {},
        _ = ctx.wait_condition(|s: &DrainNodeWorkflow| s.force_requested) => {},
    };
}

/// Options of a wait of up to `budget`: shielded from the cancellation on its path.
fn wait_options(state: &Drain, budget: Duration) -> temporalio_sdk::ActivityOptions {
    let options = activity_options::wait(budget);
    if state.shielded {
        cancellation::shielded(options)
    } else {
        options
    }
}

/// A deadline `budget` from now, never past the drain's deadline, as RFC 3339.
fn wait_deadline(ctx: &WorkflowContext<DrainNodeWorkflow>, budget: Duration) -> (String, Duration) {
    let drain_left = ctx
        .state(|s| s.deadline)
        .map(|d| left_until(ctx, d))
        .unwrap_or(budget);
    let budget = budget.min(drain_left).max(MIN_WAIT);
    let at = later(now(ctx), budget);
    (rfc3339(at), budget)
}

async fn list_pods(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    state: &Drain,
    step: Step,
) -> Result<NodePods, StepFailed> {
    ctx.execute_activity(
        KubeActivities::list_node_pods,
        ListNodePods {
            node: state.request.node.clone(),
        },
        activity_options::read(),
    )
    .await
    .map_err(|e| StepFailed::from_activity(step, &e))
}

/// Puts every pod of the plan and every tracked volume into the status.
fn show_plan(ctx: &mut WorkflowContext<DrainNodeWorkflow>, plan: &DrainPlan) {
    ctx.state_mut(|s| {
        let Some(status) = s.status.as_mut() else {
            return;
        };
        for skipped in &plan.skipped {
            status.set_pod(
                &skipped.pod,
                PodState::Skipped,
                Some(skipped.reason.as_str().to_owned()),
            );
        }
        for pod in &plan.terminating {
            status.set_pod(&pod.key(), PodState::Terminating, None);
        }
        for refused in &plan.refused {
            let detail = format!("refused: local data ({})", refused.what());
            status.set_pod(&refused.pod, PodState::Refused, Some(detail));
        }
        for pod in &plan.without_volumes {
            status.set_pod(&pod.key(), PodState::Waiting, None);
        }
        for volume_pod in &plan.with_volumes {
            let key = volume_pod.pod.key();
            status.set_pod(&key, PodState::Waiting, None);
            if let Some(entry) = status.pods.iter_mut().find(|p| p.pod == key) {
                entry.with_volumes = true;
            }
            for tracked in &volume_pod.tracked {
                if !status
                    .volumes
                    .iter()
                    .any(|v| v.persistent_volume == tracked.persistent_volume)
                {
                    status.volumes.push(VolumeProgress {
                        persistent_volume: tracked.persistent_volume.clone(),
                        pod: key.clone(),
                        disk_id: tracked.disk_id.clone(),
                        state: VolumeState::Attached,
                        new_node: None,
                    });
                }
            }
        }
    });
}

fn describe_plan(plan: &DrainPlan) -> String {
    let mut parts = vec![
        format!("{} without volumes", plan.without_volumes.len()),
        format!("{} with volumes", plan.with_volumes.len()),
    ];
    if !plan.terminating.is_empty() {
        parts.push(format!("{} already terminating", plan.terminating.len()));
    }
    if !plan.skipped.is_empty() {
        parts.push(format!("{} left in place", plan.skipped.len()));
    }
    if !plan.local_data.is_empty() {
        parts.push(format!(
            "{} evicted with their local data (localData evict)",
            plan.local_data.len()
        ));
    }
    parts.join(", ")
}

fn set_pod(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    pod: &str,
    state: PodState,
    detail: Option<String>,
) {
    ctx.state_mut(|s| {
        if let Some(status) = s.status.as_mut() {
            status.set_pod(pod, state, detail);
        }
    });
}

fn set_volume(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    pv: &str,
    state: VolumeState,
    node: Option<String>,
) {
    ctx.state_mut(|s| {
        if let Some(status) = s.status.as_mut() {
            status.set_volume(pv, state, node);
        }
    });
}

fn warn(ctx: &mut WorkflowContext<DrainNodeWorkflow>, warning: String) {
    ctx.state_mut(|s| {
        if let Some(status) = s.status.as_mut()
            && !status.warnings.contains(&warning)
        {
            status.warnings.push(warning);
        }
    });
}

/// Asks for one eviction and records what came of it.
async fn evict(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    pod: &PodRef,
    step: Step,
) -> Result<Eviction, StepFailed> {
    let outcome = ctx
        .execute_activity(
            KubeActivities::evict_pod,
            PodAction { pod: pod.clone() },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await
        .map_err(|e| StepFailed::from_activity(step, &e))?;
    record_eviction(ctx, pod, &outcome);
    Ok(outcome)
}

fn record_eviction(ctx: &mut WorkflowContext<DrainNodeWorkflow>, pod: &PodRef, outcome: &Eviction) {
    let key = pod.key();
    ctx.state_mut(|s| {
        let Some(status) = s.status.as_mut() else {
            return;
        };
        status.count_eviction(&key);
        match outcome {
            Eviction::Accepted => {
                status.set_block(&key, None);
                status.set_pod(&key, PodState::Evicting, Some("evicted".to_owned()));
            }
            Eviction::Gone => {
                status.set_block(&key, None);
                status.set_pod(&key, PodState::Gone, Some("already gone".to_owned()));
            }
            Eviction::Blocked { pdb, message } => {
                let detail = match pdb {
                    Some(pdb) if is_misconfigured(pdb) => format!(
                        "blocked by PodDisruptionBudget {} (misconfigured: all its pods are healthy and it allows no disruption)",
                        pdb.key()
                    ),
                    Some(pdb) => format!(
                        "blocked by PodDisruptionBudget {} ({} disruptions allowed)",
                        pdb.key(),
                        pdb.disruptions_allowed
                    ),
                    None => format!("eviction refused: {message}"),
                };
                let block = pdb
                    .as_ref()
                    .map(|pdb| (pdb.key(), is_misconfigured(pdb), pdb.disruptions_allowed));
                status.set_block(&key, block);
                status.set_pod(&key, PodState::Blocked, Some(detail));
            }
        }
    });
}

/// Step 5: evicts the pods without persistent volumes all at once, retries those a PDB blocks
/// every PDB retry interval, and waits for them (and the pods already terminating) to go.
async fn evict_without_volumes(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    state: &mut Drain,
    plan: &DrainPlan,
) -> Result<Lane, StepFailed> {
    begin(ctx, Step::EvictPods);
    let mut leaving: Vec<PodRef> = plan.terminating.clone();
    let mut to_evict: Vec<PodRef> = plan.without_volumes.clone();
    let mut rounds = 0u32;
    loop {
        cancellation::guard(ctx, Step::EvictPods)?;
        if let Some(reason) = force_due(ctx, state) {
            done(ctx, Step::EvictPods, format!("interrupted: {reason}"));
            return Ok(Lane::Forced(reason));
        }
        let attempts = to_evict.iter().map(|pod| {
            // An eviction sent is let finish: what it evicted is known and reported.
            ctx.execute_activity(
                KubeActivities::evict_pod,
                PodAction { pod: pod.clone() },
                cancellation::shielded(activity_options::kube_write()),
            )
        });
        let outcomes = join_all(attempts).await;
        let mut blocked = Vec::new();
        for (pod, outcome) in to_evict.iter().zip(outcomes) {
            let outcome = outcome.map_err(|e| StepFailed::from_activity(Step::EvictPods, &e))?;
            record_eviction(ctx, pod, &outcome);
            match outcome {
                Eviction::Accepted => {
                    state.result.evicted.push(pod.key());
                    note_local_data(ctx, state, plan, &pod.key());
                    leaving.push(pod.clone());
                }
                Eviction::Gone => {}
                Eviction::Blocked { .. } => blocked.push(pod.clone()),
            }
        }
        if !leaving.is_empty() {
            leaving = await_gone(ctx, state, leaving, Step::EvictPods).await?;
        }
        if blocked.is_empty() && leaving.is_empty() {
            let evicted = state.result.evicted.len();
            done(ctx, Step::EvictPods, format!("{evicted} evicted"));
            return Ok(Lane::Finished);
        }
        rounds = rounds.saturating_add(1);
        if ctx.continue_as_new_suggested() {
            return Ok(Lane::ContinueAsNew);
        }
        pause(ctx, state.policy.pdb_retry_interval).await;
        // Pods may have left meanwhile (deleted by someone, rescheduled): evict only those
        // still here, and look at the node's health again.
        let listed = list_pods(ctx, state, Step::EvictPods).await?;
        state.health = listed.health.clone();
        let present = |pod: &PodRef| listed.pods.iter().any(|p| p.uid == pod.uid);
        for pod in blocked.iter().chain(&leaving).filter(|p| !present(p)) {
            set_pod(ctx, &pod.key(), PodState::Gone, None);
            let key = pod.key();
            ctx.state_mut(|s| {
                if let Some(status) = s.status.as_mut() {
                    status.set_block(&key, None);
                }
            });
        }
        blocked.retain(present);
        leaving.retain(present);
        to_evict = blocked;
        fact(ctx, "evictionRounds", rounds.to_string());
    }
}

/// Waits for `pods` to go (their grace period, at most the drain timeout, plus 30 s); returns
/// those still there.
async fn await_gone(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    state: &Drain,
    pods: Vec<PodRef>,
    step: Step,
) -> Result<Vec<PodRef>, StepFailed> {
    let longest = pods
        .iter()
        .map(|p| Duration::from_secs(p.grace_period_seconds))
        .max()
        .unwrap_or_default();
    let (deadline, budget) =
        wait_deadline(ctx, pod_disappearance_budget(longest, state.policy.timeout));
    let pending = ctx
        .execute_activity(
            KubeActivities::await_pods_gone,
            AwaitPodsGone {
                pods: pods.clone(),
                deadline,
            },
            activity_options::wait(budget),
        )
        .await
        .map_err(|e| StepFailed::from_activity(step, &e))?;
    let mut still = Vec::new();
    for pod in pods {
        let key = pod.key();
        if pending.pending.contains(&key) {
            set_pod(
                ctx,
                &key,
                PodState::Evicting,
                Some(format!("still terminating after {}s", budget.as_secs())),
            );
            still.push(pod);
        } else {
            set_pod(ctx, &key, PodState::Gone, None);
        }
    }
    Ok(still)
}

/// Step 6: the pods with persistent volumes, one at a time in the plan's order: evict, wait for
/// its volumes to detach here (VolumeAttachment gone, disk released in Azure), then to attach
/// on another node. A detach that times out is recorded in `stuck`.
async fn move_volumes(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    state: &mut Drain,
    plan: &DrainPlan,
    stuck: &mut Vec<VolumePod>,
) -> Result<Lane, StepFailed> {
    begin(ctx, Step::MoveVolumes);
    let mut moved = 0usize;
    for volume_pod in &plan.with_volumes {
        let key = volume_pod.pod.key();
        loop {
            cancellation::guard(ctx, Step::MoveVolumes)?;
            if let Some(reason) = force_due(ctx, state) {
                done(ctx, Step::MoveVolumes, format!("interrupted: {reason}"));
                return Ok(Lane::Forced(reason));
            }
            match evict(ctx, &volume_pod.pod, Step::MoveVolumes).await? {
                Eviction::Accepted => {
                    state.result.evicted.push(key.clone());
                    note_local_data(ctx, state, plan, &key);
                    break;
                }
                Eviction::Gone => break,
                Eviction::Blocked { .. } => {
                    if ctx.continue_as_new_suggested() {
                        return Ok(Lane::ContinueAsNew);
                    }
                    pause(ctx, state.policy.pdb_retry_interval).await;
                    let listed = list_pods(ctx, state, Step::MoveVolumes).await?;
                    state.health = listed.health;
                    if !listed.pods.iter().any(|p| p.uid == volume_pod.pod.uid) {
                        break;
                    }
                }
            }
        }
        if volume_pod.tracked.is_empty() {
            await_gone(ctx, state, vec![volume_pod.pod.clone()], Step::MoveVolumes).await?;
            continue;
        }
        state.in_flight = Some(volume_pod.clone());
        for tracked in &volume_pod.tracked {
            set_volume(
                ctx,
                &tracked.persistent_volume,
                VolumeState::Detaching,
                None,
            );
        }
        let grace = Duration::from_secs(volume_pod.pod.grace_period_seconds);
        let pending = await_detached(
            ctx,
            state,
            volume_pod,
            detach_budget(grace, state.policy.volume_detach_timeout),
        )
        .await?;
        set_pod(ctx, &key, PodState::Gone, None);
        if !pending.is_empty() {
            for pv in &pending {
                set_volume(ctx, pv, VolumeState::DetachTimedOut, None);
            }
            warn(
                ctx,
                format!(
                    "{} of pod {key} did not detach from {} within {}s; waiting until the deadline, then force mode",
                    pending.join(", "),
                    state.request.node,
                    detach_budget(grace, state.policy.volume_detach_timeout).as_secs()
                ),
            );
            state.in_flight = None;
            stuck.push(volume_pod.clone());
            continue;
        }
        await_reattached(ctx, state, volume_pod).await?;
        state.in_flight = None;
        moved += 1;
    }
    let detail = if stuck.is_empty() {
        format!("{moved} pods moved with their volumes")
    } else {
        format!(
            "{moved} pods moved with their volumes, {} with a detach pending",
            stuck.len()
        )
    };
    done(ctx, Step::MoveVolumes, detail);
    Ok(Lane::Finished)
}

/// Waits up to `budget` until the pod's tracked volumes have no VolumeAttachment on this node
/// and their Azure disks are not `managedBy` its VM; returns the PVs still attached.
async fn await_detached(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    state: &Drain,
    volume_pod: &VolumePod,
    budget: Duration,
) -> Result<Vec<String>, StepFailed> {
    let (deadline, budget) = wait_deadline(ctx, budget);
    let persistent_volumes: Vec<String> = volume_pod
        .tracked
        .iter()
        .map(|t| t.persistent_volume.clone())
        .collect();
    let attachments = ctx
        .execute_activity(
            KubeActivities::await_volumes_detached,
            AwaitVolumes {
                node: state.request.node.clone(),
                persistent_volumes,
                deadline: deadline.clone(),
            },
            wait_options(state, budget),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::MoveVolumes, &e))?;
    let mut pending = attachments.pending;
    let disks: Vec<(String, String)> = volume_pod
        .tracked
        .iter()
        .filter(|t| !pending.contains(&t.persistent_volume))
        .filter_map(|t| t.disk_id.clone().map(|d| (t.persistent_volume.clone(), d)))
        .collect();
    if !disks.is_empty() {
        let released = ctx
            .execute_activity(
                ArmReadActivities::await_disks_released,
                AwaitDisksReleased {
                    vm_id: state.vm_id.clone(),
                    disk_ids: disks.iter().map(|(_, d)| d.clone()).collect(),
                    deadline,
                },
                wait_options(state, budget),
            )
            .await
            .map_err(|e| StepFailed::from_activity(Step::MoveVolumes, &e))?;
        for (pv, disk) in disks {
            if released.pending.contains(&disk) {
                pending.push(pv);
            }
        }
    }
    Ok(pending)
}

/// Waits up to the reattach timeout until each moved volume is attached on another node; a
/// timeout is a warning.
async fn await_reattached(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    state: &mut Drain,
    volume_pod: &VolumePod,
) -> Result<(), StepFailed> {
    for tracked in &volume_pod.tracked {
        set_volume(
            ctx,
            &tracked.persistent_volume,
            VolumeState::Reattaching,
            None,
        );
    }
    // The reattach wait is not bounded by the drain deadline: the pod has already left.
    let budget = state.policy.volume_attach_timeout.max(MIN_WAIT);
    let at = later(now(ctx), budget);
    let reattached = ctx
        .execute_activity(
            KubeActivities::await_volumes_reattached,
            AwaitVolumes {
                node: state.request.node.clone(),
                persistent_volumes: volume_pod
                    .tracked
                    .iter()
                    .map(|t| t.persistent_volume.clone())
                    .collect(),
                deadline: rfc3339(at),
            },
            wait_options(state, budget),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::MoveVolumes, &e))?;
    for (pv, node) in &reattached.attached {
        set_volume(ctx, pv, VolumeState::Reattached, Some(node.clone()));
        state.result.volumes_moved.push((pv.clone(), node.clone()));
    }
    if !reattached.pending.is_empty() {
        for pv in &reattached.pending {
            set_volume(ctx, pv, VolumeState::ReattachTimedOut, None);
        }
        warn(
            ctx,
            format!(
                "{} of pod {} did not attach on another node within {}s",
                reattached.pending.join(", "),
                volume_pod.pod.key(),
                budget.as_secs()
            ),
        );
    }
    Ok(())
}

/// Step 7: volumes whose detach timed out are looked at again every PDB retry interval until
/// they detach or force mode is due.
async fn await_stuck_volumes(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    state: &mut Drain,
    stuck: &mut Vec<VolumePod>,
) -> Result<Lane, StepFailed> {
    begin(ctx, Step::MoveVolumes);
    loop {
        cancellation::guard(ctx, Step::MoveVolumes)?;
        if let Some(reason) = force_due(ctx, state) {
            done(ctx, Step::MoveVolumes, format!("detach pending, {reason}"));
            return Ok(Lane::Forced(reason));
        }
        if ctx.continue_as_new_suggested() {
            return Ok(Lane::ContinueAsNew);
        }
        pause(ctx, state.policy.pdb_retry_interval).await;
        let mut still = Vec::new();
        for volume_pod in stuck.drain(..) {
            let pending = await_detached(ctx, state, &volume_pod, MIN_WAIT).await?;
            if pending.is_empty() {
                await_reattached(ctx, state, &volume_pod).await?;
            } else {
                still.push(volume_pod);
            }
        }
        *stuck = still;
        if stuck.is_empty() {
            done(ctx, Step::MoveVolumes, "every volume detached");
            return Ok(Lane::Finished);
        }
        let listed = list_pods(ctx, state, Step::MoveVolumes).await?;
        state.health = listed.health;
    }
}

/// Step 8, force mode: deletes every pod still to move with grace period 0, deletes the node's
/// VolumeAttachments and force-detaches the VM's data disks in Azure.
async fn force_drain(
    ctx: &mut WorkflowContext<DrainNodeWorkflow>,
    state: &mut Drain,
    reason: ForceReason,
) -> Result<(), StepFailed> {
    let reason_text = reason.to_string();
    ctx.state_mut(|s| {
        if let Some(status) = s.status.as_mut() {
            status.mode = DrainMode::Force {
                reason: reason_text.clone(),
            };
        }
    });
    state.result.forced = Some(reason_text.clone());
    begin(ctx, Step::ForceDrain);
    fact(ctx, "forceReason", reason_text);

    let listed = list_pods(ctx, state, Step::ForceDrain).await?;
    let plan = plan_pods(ctx, state, &listed.pods);
    show_plan(ctx, &plan);
    for refused in &plan.refused {
        warn(
            ctx,
            format!(
                "{refused} came after the pods were selected and stays on the node: the drain's localData policy is refuse"
            ),
        );
    }
    let victims: Vec<PodRef> = plan.moving().cloned().collect();
    let deletions = victims.iter().map(|pod| {
        ctx.execute_activity(
            KubeActivities::delete_pod,
            PodAction { pod: pod.clone() },
            cancellation::shielded(activity_options::kube_write()),
        )
    });
    let outcomes = join_all(deletions).await;
    for (pod, outcome) in victims.iter().zip(outcomes) {
        let outcome = outcome.map_err(|e| StepFailed::from_activity(Step::ForceDrain, &e))?;
        let key = pod.key();
        let detail = match outcome {
            PodDeletion::Deleted => {
                state.result.force_deleted.push(key.clone());
                note_local_data(ctx, state, &plan, &key);
                "deleted with grace period 0"
            }
            PodDeletion::Gone => "already gone",
        };
        set_pod(ctx, &key, PodState::ForceDeleted, Some(detail.to_owned()));
        ctx.state_mut(|s| {
            if let Some(status) = s.status.as_mut() {
                status.set_block(&key, None);
            }
        });
    }

    let attachments = ctx
        .execute_activity(
            KubeActivities::delete_node_volume_attachments,
            NodeAttachments {
                node: state.request.node.clone(),
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::ForceDrain, &e))?;

    let writes = arm_write_task_queue(ctx.task_queue());
    let started = ctx
        .execute_activity(
            ArmWriteActivities::force_detach_data_disks,
            ForceDetachDisks {
                cluster: state.request.cluster.clone(),
                machine: state.request.node.clone(),
            },
            cancellation::shielded(activity_options::arm_cleanup_write(&writes)),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::ForceDrain, &e))?;
    let detached = match started {
        ForceDetachStarted::Started { disks, operation } => {
            let at = later(now(ctx), FORCE_DETACH_BUDGET);
            let left = ctx
                .execute_activity(
                    ArmReadActivities::await_force_detach,
                    AwaitForceDetach {
                        machine: state.request.node.clone(),
                        operation,
                        deadline: rfc3339(at),
                    },
                    activity_options::wait(FORCE_DETACH_BUDGET),
                )
                .await
                .map_err(|e| StepFailed::from_activity(Step::ForceDrain, &e))?;
            if !left.pending.is_empty() {
                warn(
                    ctx,
                    format!(
                        "Azure still lists {} on the VM after the force detach",
                        left.pending.join(", ")
                    ),
                );
            }
            Some(disks)
        }
        ForceDetachStarted::NothingAttached | ForceDetachStarted::VmAbsent => None,
    };
    let force_detached = match &detached {
        Some(disks) => disks.clone(),
        None => Vec::new(),
    };
    let released_here = !attachments.is_empty() || !force_detached.is_empty();
    let at = rfc3339(now(ctx));
    ctx.state_mut(|s| {
        if let Some(status) = s.status.as_mut() {
            for volume in &mut status.volumes {
                let disk_released = volume.disk_id.as_ref().is_some_and(|disk| {
                    force_detached.iter().any(|d| d.eq_ignore_ascii_case(disk))
                });
                let released = disk_released || (volume.disk_id.is_none() && released_here);
                if volume.state != VolumeState::Reattached && released {
                    volume.state = VolumeState::ForceDetached;
                }
            }
            for step in [Step::EvictPods, Step::MoveVolumes] {
                let pending = status
                    .run
                    .steps
                    .iter()
                    .any(|p| p.step == step && p.state == StepState::Pending);
                if pending {
                    status
                        .run
                        .finish(step, &at, Some("skipped: force mode".to_owned()));
                }
            }
        }
    });
    let detached = force_detached.len();
    done(
        ctx,
        Step::ForceDrain,
        format!(
            "{} pods deleted with grace period 0, {} VolumeAttachments deleted, {detached} data disks force-detached",
            state.result.force_deleted.len(),
            attachments.len()
        ),
    );
    Ok(())
}
