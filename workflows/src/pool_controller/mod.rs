#![doc = include_str!("../../runbooks/pool_controller.md")]

mod children;
mod headroom;
mod image;
mod look;
mod rollouts;
mod state;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures::FutureExt;
use nodewright_activities::azure::machines::VmSource;
use nodewright_activities::kube::KubeActivities;
use nodewright_model::capacity::active;
use nodewright_model::capacity::offering::{Booked, book_refusal, describe};
use nodewright_model::controller::{
    ApplyRequest, Carried, Changes, ControllerRequest, ControllerResult, Creating, DeleteRequest,
    ImageOrder, InFlight, Input, Mode, PoolState, PoolStatusDocument, Progress, RolloutEnd,
    RolloutOptions, RolloutOrder, ScaleRequest, SpecView, WorkKind, capacity_condition, conditions,
    create_backoff, decide, join, needs_power_states, placements_for_creates, push_action,
    should_start, unlisted_nodes, zones_for_creates,
};
use nodewright_model::controller::{Victim, VictimReason};
use nodewright_model::limits::MAX_REPLICAS;
use nodewright_model::maintenance::{DisruptionKind, gate};
use nodewright_model::pool::CapacityType;
use nodewright_model::pool::ValidPool;
use nodewright_model::rollout::TemplateRecord;
use nodewright_model::text::duration;
use nodewright_model::{ClusterName, Operation, workflow_type};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::workflows::select;
use temporalio_sdk::{
    ContinueAsNewOptions, SyncWorkflowContext, WorkflowContext, WorkflowContextView,
    WorkflowResult, WorkflowTermination,
};

use self::children::{
    Child, End, first_finished, start_creates, start_delete, start_rollout, work_of,
};
use self::rollouts::{rollout_ended, steer_rollout};
use self::state::ControllerState;
use crate::progress::{now, rfc3339};
use crate::{activity_options, cancellation, input, search};

/// Keeps a pool at its declared state; see the runbook above.
#[workflow]
#[derive(Default)]
pub struct PoolControllerWorkflow {
    state: ControllerState,
}

type Error = Box<dyn std::error::Error + Send + Sync>;

#[workflow_methods]
impl PoolControllerWorkflow {
    /// Runs the runbook.
    #[run(name = workflow_type::POOL_CONTROLLER)]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: ControllerRequest,
    ) -> WorkflowResult<ControllerResult> {
        input::admit(
            ctx,
            workflow_type::POOL_CONTROLLER,
            &input::Subject {
                cluster: &request.cluster,
                named: Some(("pool.name", &request.pool.name)),
            },
            request.check(),
        )?;
        begin(ctx, &request);
        match control(ctx, &request).await {
            Finish::Ended(result) => Ok(*result),
            Finish::Canceled(result) => {
                ctx.upsert_search_attributes([search::PHASE.value_set("canceled".to_owned())]);
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

    /// Observe and report only: no machine is created, deleted or remediated, no rollout
    /// starts (children in flight finish).
    #[signal(name = "pause")]
    pub fn pause(&mut self, _ctx: &mut SyncWorkflowContext<Self>, by: String) {
        self.state.paused = true;
        self.state.paused_by = Some(by);
        self.state.wakeups += 1;
    }

    /// Acts again after a pause.
    #[signal(name = "resume")]
    pub fn resume(&mut self, _ctx: &mut SyncWorkflowContext<Self>, by: String) {
        self.state.paused = false;
        self.state.paused_by = Some(by);
        self.state.wakeups += 1;
    }

    /// Refuses a pool of another name, a pool that breaks a rule, and any change while the
    /// pool is being deleted.
    #[update_validator(apply)]
    fn validate_apply(
        &self,
        _ctx: &WorkflowContextView,
        request: &ApplyRequest,
    ) -> Result<(), Error> {
        self.check_pool(&request.pool)
    }

    /// The pool as it should be from now on (unless `dry_run`); returns what changes.
    #[update(name = "apply")]
    pub fn apply(
        &mut self,
        _ctx: &mut SyncWorkflowContext<Self>,
        request: ApplyRequest,
    ) -> Changes {
        let Some(current) = self.state.pool.as_ref() else {
            return Changes::default();
        };
        // Both at the version followed, so the hashes are those the machines carry.
        let held = self.state.image.as_ref();
        let changes = Changes::between(&current.in_force(held), &request.pool.in_force(held));
        if !request.dry_run && !changes.is_empty() {
            if changes.template.is_some() {
                let in_force = current.in_force(self.state.image.as_ref());
                self.state.remember_running(&in_force);
                // An operator's change: its rollout is not the image update's.
                if let Some(image) = self.state.image.as_mut() {
                    image.updated_to = None;
                }
            }
            self.state.pool = Some(request.pool);
            self.state.wakeups += 1;
        }
        changes
    }

    /// Refuses more than the replicas limit, and any change while the pool is being deleted.
    #[update_validator(scale)]
    fn validate_scale(
        &self,
        _ctx: &WorkflowContextView,
        request: &ScaleRequest,
    ) -> Result<(), Error> {
        self.current()?;
        if request.replicas > MAX_REPLICAS {
            return Err(format!(
                "replicas: {} is more than {MAX_REPLICAS}; give --replicas from 0 to {MAX_REPLICAS}",
                request.replicas
            )
            .into());
        }
        Ok(())
    }

    /// The pool's new number of machines; returns what changes.
    #[update(name = "scale")]
    pub fn scale(
        &mut self,
        _ctx: &mut SyncWorkflowContext<Self>,
        request: ScaleRequest,
    ) -> Changes {
        let Some(current) = self.state.pool.as_ref() else {
            return Changes::default();
        };
        let mut scaled = current.clone();
        scaled.replicas = request.replicas;
        let changes = Changes::between(current, &scaled);
        self.state.pool = Some(scaled);
        self.state.wakeups += 1;
        changes
    }

    /// Refuses a pool of another name or that breaks a rule, a canary outside 1..=replicas, and
    /// any order while the controller is paused, deleting, or rolling out already.
    #[update_validator(rollout)]
    fn validate_rollout(
        &self,
        _ctx: &WorkflowContextView,
        order: &RolloutOrder,
    ) -> Result<(), Error> {
        self.check_pool(&order.pool)?;
        let pool = &order.pool.name;
        if let Some(n) = order.canary
            && (n == 0 || n > order.pool.replicas)
        {
            return Err(format!(
                "canary: {n} is not from 1 to the pool's replicas ({}); give --canary within them or leave it out",
                order.pool.replicas
            )
            .into());
        }
        if self.state.paused {
            return Err(format!(
                "the controller of pool {pool} is paused; resume it first (`nodewright pool resume {pool}`)"
            )
            .into());
        }
        if self.state.rolling_out {
            return Err(format!(
                "a rollout of pool {pool} is running; follow it (`nodewright pool rollout status {pool}`) or abort it (`nodewright pool rollout abort {pool}`) first"
            )
            .into());
        }
        Ok(())
    }

    /// `pool rollout` / `pool rollback`: the pool to roll to becomes the spec (a rollback keeps
    /// the controller's replicas), and the next look starts the rollout as asked (even when
    /// every machine runs the template already: a rollout that only restamps drain settings);
    /// returns what changes.
    #[update(name = "rollout")]
    pub fn rollout(
        &mut self,
        _ctx: &mut SyncWorkflowContext<Self>,
        order: RolloutOrder,
    ) -> Changes {
        let state = &mut self.state;
        let changes = state
            .pool
            .as_ref()
            .map(|current| {
                let mut to = order.pool.clone();
                if order.rollback {
                    to.replicas = current.replicas;
                }
                let held = state.image.as_ref();
                Changes::between(&current.in_force(held), &to.in_force(held))
            })
            .unwrap_or_default();
        state.order = Some(RolloutOptions {
            canary: order.canary,
            rollback: order.rollback,
        });
        // The CLI's history (from the last completed rollout) when it has one, else what the
        // controller knows: the template its machines were made with.
        let known = std::mem::take(&mut state.history);
        let history = if order.history.current.is_some() {
            order.history
        } else {
            known
        };
        state.history = match state.pool.as_ref() {
            Some(current) => history.or_running(running(&current.in_force(state.image.as_ref()))),
            None => history,
        };
        // A rollback changes the template, not the size: the replicas stay the controller's
        // (the revision rolled back to recorded the size of its day).
        let mut pool = order.pool;
        if order.rollback
            && let Some(current) = state.pool.as_ref()
        {
            pool.replicas = current.replicas;
            // A revision at a version of the image the file follows: the file's image stays
            // written as it is, and the version rolled back to is pinned.
            if let Some(held) = state.image.as_mut()
                && let Some(version) = current.rolled_back_version(&pool, held)
            {
                held.roll_back_to(version);
                pool = pool.with_image_of(current);
            }
        }
        state.held_template = None;
        state.pool = Some(pool);
        state.wakeups += 1;
        changes
    }

    /// Refuses a second delete that asks for something else.
    #[update_validator(delete)]
    fn validate_delete(
        &self,
        _ctx: &WorkflowContextView,
        request: &DeleteRequest,
    ) -> Result<(), Error> {
        match self.state.deleting {
            Some(asked) if asked.orphan != request.orphan => Err(
                "the pool is already being deleted the other way; wait for the controller to end"
                    .into(),
            ),
            _ => Ok(()),
        }
    }

    /// Deletes every machine (drained within PDBs) then ends; with `orphan`, ends at once and
    /// leaves the machines.
    #[update(name = "delete")]
    pub fn delete(&mut self, _ctx: &mut SyncWorkflowContext<Self>, request: DeleteRequest) {
        self.state.deleting = Some(request);
        self.state.wakeups += 1;
    }

    /// Refuses an order for a pool whose image has no versions followed, and an update when no
    /// newer version was found.
    #[update_validator(image)]
    fn validate_image(&self, _ctx: &WorkflowContextView, order: &ImageOrder) -> Result<(), Error> {
        let pool = self.current()?;
        let Some(held) = self.state.image.as_ref() else {
            return Err(format!(
                "pool {} follows no image versions: its image names a concrete version (or is a managed image, or is not resolved yet); write version: latest or a gallery image id without /versions/... to follow them",
                pool.name
            )
            .into());
        };
        if *order == ImageOrder::Update
            && held
                .newest
                .as_ref()
                .is_none_or(|newest| newest <= held.current())
        {
            return Err(format!(
                "pool {} runs version {}, the newest eligible one the last check found; nothing to update to",
                pool.name,
                held.current()
            )
            .into());
        }
        Ok(())
    }

    /// `pool image pin|unpin|update`; returns the version the pool's template runs after it.
    #[update(name = "image")]
    pub fn image(&mut self, _ctx: &mut SyncWorkflowContext<Self>, order: ImageOrder) -> String {
        let state = &mut self.state;
        if order == ImageOrder::Update {
            // The template running now is the one a rollback goes back to.
            let running_now = state
                .pool
                .as_ref()
                .map(|current| current.in_force(state.image.as_ref()));
            if let Some(running_now) = running_now {
                state.remember_running(&running_now);
            }
        }
        let Some(held) = state.image.as_mut() else {
            return String::new();
        };
        match order {
            ImageOrder::Pin => held.pinned = true,
            ImageOrder::Unpin => held.pinned = false,
            ImageOrder::Update => {
                if let Some(newest) = held.newest.clone() {
                    held.history.advance(newest);
                    held.updated_to = None;
                    state.held_template = None;
                }
            }
        }
        // The status shows it at the next look (at once: the wait wakes up).
        state.wakeups += 1;
        held.current().to_string()
    }

    /// The pool's spec and status, Kubernetes style.
    #[query(name = "status")]
    pub fn status(&self, _ctx: &WorkflowContextView) -> Option<PoolStatusDocument> {
        self.state.status.clone()
    }
}

impl PoolControllerWorkflow {
    /// Refuses a pool of another name or that breaks a rule of a pool file.
    fn check_pool(&self, pool: &ValidPool) -> Result<(), Error> {
        let current = self.current()?;
        if pool.name != current.name {
            return Err(format!(
                "this controller keeps pool {}, not {}; give the file of pool {} to its own controller",
                current.name, pool.name, pool.name
            )
            .into());
        }
        nodewright_model::input::check_pool_update(pool).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The pool in force, or why an update cannot be taken now.
    fn current(&self) -> Result<&ValidPool, Error> {
        if self.state.deleting.is_some() {
            return Err("the pool is being deleted; nothing else can change".into());
        }
        self.state
            .pool
            .as_ref()
            .ok_or_else(|| "the controller has not started yet; try again in a moment".into())
    }
}

/// The template `pool` runs, as a rollout's history records it.
fn running(pool: &ValidPool) -> TemplateRecord {
    TemplateRecord {
        template_hash: pool.template_hash.clone(),
        template: pool.template.clone(),
    }
}

/// How a run ends.
enum Finish {
    Ended(Box<ControllerResult>),
    Canceled(Box<ControllerResult>),
    ContinueAsNew(Box<ControllerRequest>),
}

/// Sets the state from the request (and what the run before carried) and the search
/// attributes the UI lists pools by.
fn begin(ctx: &mut WorkflowContext<PoolControllerWorkflow>, request: &ControllerRequest) {
    let carried = request.carried.as_deref().cloned().unwrap_or_default();
    ctx.state_mut(|s| {
        let state = &mut s.state;
        state.pool = Some(request.pool.clone());
        state.paused = request.paused;
        state.remediations = carried.remediations;
        state.conditions = carried.conditions;
        state.last_actions = carried.last_actions;
        state.create_failures = carried.create_failures;
        state.creates_after = carried.creates_after;
        state.deleting = carried.deleting.then_some(DeleteRequest { orphan: false });
        state.order = carried.order;
        state.held_template = carried.held_template;
        state.history = carried.history;
        state.image = carried.image;
        state.unavailable = carried.unavailable;
        state.evictions = carried.evictions;
    });
    ctx.upsert_search_attributes([
        search::CLUSTER.value_set(request.cluster.to_string()),
        search::POOL.value_set(request.pool.name.clone()),
        search::OPERATION.value_set(Operation::Pool.to_string()),
    ]);
}

/// The loop: look → decide → act → wait (for a child's end, a Node change, an operator, the
/// next interval or the next time a decision may change), until deleted, orphaned, cancelled
/// or due to continue as new.
async fn control(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    request: &ControllerRequest,
) -> Finish {
    let cluster = &request.cluster;
    let interval = request.observe_wait();
    let mut children: Vec<Child> = Vec::new();
    let mut rollout: Option<Pin<Box<dyn Future<Output = RolloutEnd>>>> = None;
    let mut in_flight: Option<InFlight> = None;
    let mut vms_due = true;
    let mut last_vm_look = 0_i64;
    let mut phase_shown = String::new();
    loop {
        let at = now(ctx).timestamp();
        let written = ctx
            .state(|s| s.state.pool.clone())
            .unwrap_or_else(|| request.pool.clone());
        let pool = written.clone();
        if cancellation::requested(ctx) {
            note(ctx, "the controller was cancelled: the machines are kept as they are, runs in flight go on".to_owned());
            return Finish::Canceled(Box::new(result(ctx, &pool, "cancelled")));
        }
        let deleting = ctx.state(|s| s.state.deleting);
        if deleting.is_some_and(|d| d.orphan) {
            note(
                ctx,
                "pool deleted with --orphan: the controller ends and leaves every machine"
                    .to_owned(),
            );
            return Finish::Ended(Box::new(result(ctx, &pool, "orphaned")));
        }

        // Look: VMs once per interval (or after a child ended), Nodes once (then watched).
        if vms_due || at.saturating_sub(last_vm_look) >= secs(interval) {
            let (held_vms, held_nodes) = look::held(ctx);
            let (power_states, source, expected) = if ctx.patched(RESOURCE_GRAPH_PATCH) {
                let expected = unlisted_nodes(&held_vms, &held_nodes);
                (true, VmSource::ResourceGraph, expected)
            } else {
                let power_states = needs_power_states(&held_vms, &held_nodes);
                (power_states, VmSource::ResourceGroup, Vec::new())
            };
            match look::list_vms(ctx, cluster, &pool.name, power_states, source, expected).await {
                Ok(()) => {
                    last_vm_look = at;
                    // A VM now without a Ready Node is looked at again at once, with its power
                    // state.
                    let (vms, nodes) = look::held(ctx);
                    vms_due = !power_states
                        && needs_power_states(&vms, &nodes)
                        && ctx.patched(LOOK_ON_NODE_CHANGE_PATCH);
                }
                Err(reason) => note(
                    ctx,
                    format!("could not list the pool's VMs ({reason}); looking again"),
                ),
            }
        }
        if ctx.state(|s| s.state.known_nodes.is_none())
            && let Err(reason) = look::list_nodes(ctx, &pool.name).await
        {
            note(
                ctx,
                format!("could not list the pool's Nodes ({reason}); looking again"),
            );
        }
        let (vms, nodes) = look::held(ctx);
        let seen_vms = ctx.state(|s| s.state.known_vms.is_some());
        let machines = join(&vms, &nodes, &work_of(&children));
        ctx.state_mut(|s| remember_spot_vms(&mut s.state.spot_vms, &vms, &nodes));

        // The image: resolved to one version, and followed as `spec.imageUpdate` says.
        let paused = ctx.state(|s| s.state.paused);
        let (pool, unresolved) = if ctx.patched(IMAGE_PATCH) {
            let may_roll = rollout.is_none() && !paused && deleting.is_none();
            match image::follow(ctx, &written, at, may_roll).await {
                Some(resolved) => (resolved, false),
                None => (pool, true),
            }
        } else {
            (pool, false)
        };

        // Decide.
        let mode = if deleting.is_some() {
            Mode::Deleting
        } else if paused || !seen_vms || unresolved {
            Mode::Paused
        } else if rollout.is_some() || at < ctx.state(|s| s.state.foreign_rollout_until) {
            Mode::RollingOut
        } else {
            Mode::Active
        };
        let remediations = ctx.state(|s| s.state.remediations.clone());
        let max_unavailable = pool.strategy.max_unavailable.resolve(pool.replicas, false);
        // Maintenance windows (`applyTo: all`): no remediation starts or moves on outside one.
        let remediation_gate = gate(pool.maintenance.as_ref(), DisruptionKind::Remediation, at);
        let remediation_closed = (!remediation_gate.allows())
            .then(|| remediation_gate.words())
            .flatten()
            .filter(|_| ctx.patched(REMEDIATION_WINDOW_PATCH));
        let mut decision = decide(&Input {
            replicas: pool.replicas,
            template_hash: &pool.template_hash,
            policy: &pool.health,
            creation_timeout_secs: secs(pool.timeouts.creation),
            min_ready_secs: pool.strategy.min_ready_secs(),
            max_unavailable,
            machines: &machines,
            remediations: &remediations,
            mode,
            now: at,
            remediation_window_closed: remediation_closed.as_deref(),
        });
        if deleting.is_some() && machines.is_empty() && children.is_empty() && rollout.is_none() {
            note(
                ctx,
                format!(
                    "every machine of pool {} is deleted: the controller ends",
                    pool.name
                ),
            );
            return Finish::Ended(Box::new(result(ctx, &pool, "deleted")));
        }

        // Act.
        let stamp = now(ctx).timestamp_millis().div_euclid(1000);
        let busy: BTreeSet<String> = children.iter().map(|c| c.machine.clone()).collect();
        // Maintenance windows (`applyTo: all`): a scale-down and a rollout wait for one.
        let scale_down = gate(pool.maintenance.as_ref(), DisruptionKind::ScaleDown, at);
        // A rollout to the version `imageUpdate: auto` moved to is an automatic one.
        let automatic = ctx.state(|s| s.state.image.as_ref().is_some_and(|i| i.automatic()));
        let rollout_kind = if automatic {
            DisruptionKind::AutomaticRollout
        } else {
            DisruptionKind::OperatorRollout
        };
        let rollout_gate = gate(pool.maintenance.as_ref(), rollout_kind, at);
        let window_words = scale_down.words();
        let window_changed = ctx.state_mut(|s| {
            let changed = s.state.window != window_words;
            s.state.window.clone_from(&window_words);
            changed
        });
        if window_changed && let Some(words) = &window_words {
            note(ctx, format!("maintenance window {words}"));
        }
        let waits_for_window =
            |v: &&Victim| v.reason == VictimReason::ScaleDown && !scale_down.allows();
        for victim in decision
            .delete
            .iter()
            .filter(|v| !busy.contains(&v.name) && !waits_for_window(v))
        {
            note(
                ctx,
                format!("deleting machine {} ({})", victim.name, victim.reason),
            );
            count_eviction(ctx, victim, &machines);
            if let Some(failed) =
                start_delete(ctx, cluster, &pool, victim, &mut children, stamp).await
            {
                note(ctx, failed);
            }
        }
        let creates_after = ctx.state(|s| s.state.creates_after);
        let (create, allowed_zones) = if decision.create > 0 && at >= creates_after {
            let fitted = headroom::fit_creates(ctx, &pool, &vms, &children, decision.create).await;
            // The status counts the creates started, not those the headroom holds back.
            decision.create = fitted.0;
            fitted
        } else {
            (0, Vec::new())
        };
        if create > 0 {
            let mut taken: BTreeSet<String> = machines.iter().map(|m| m.name.clone()).collect();
            taken.extend(busy.iter().cloned());
            let before = children.len();
            let creating: Vec<Creating> = children
                .iter()
                .filter(|c| c.work.kind == WorkKind::Create)
                .map(|c| (c.machine.clone(), c.zone.clone()))
                .collect();
            // A template with capacity types places each create by offering (zone and type,
            // around those set aside); no run recorded before capacity types had one.
            let places: Vec<(Option<String>, Option<CapacityType>)> =
                if pool.template.capacity_types.is_empty() {
                    zones_for_creates(
                        &machines,
                        &decision.delete,
                        &creating,
                        &pool.template_hash,
                        create,
                        &pool.template.vm_size,
                        &allowed_zones,
                    )
                    .into_iter()
                    .map(|zone| (zone, None))
                    .collect()
                } else {
                    let unavailable = ctx.state(|s| s.state.unavailable.clone());
                    placements_for_creates(
                        &machines,
                        &decision.delete,
                        &creating,
                        &pool.template_hash,
                        create,
                        &pool.template,
                        &allowed_zones,
                        &unavailable,
                        at,
                    )
                    .into_iter()
                    .map(|placed| (placed.zone, Some(placed.capacity)))
                    .collect()
                };
            let failed = start_creates(
                ctx,
                cluster,
                &pool,
                &places,
                &mut taken,
                &mut children,
                stamp,
            )
            .await;
            let started: Vec<String> = children[before..]
                .iter()
                .map(|c| c.machine.clone())
                .collect();
            if !started.is_empty() {
                note(
                    ctx,
                    format!(
                        "creating machine(s) {} (template {})",
                        started.join(", "),
                        pool.template_hash
                    ),
                );
            }
            for line in failed {
                note(ctx, line);
            }
        }
        for step in &decision.remediate {
            remediate(ctx, cluster, &step.machine, step.rung).await;
        }
        if let Some(flight) = in_flight.as_mut() {
            steer_rollout(ctx, cluster, &pool, flight, deleting.is_some()).await;
        }
        let (order, held, spec_now) = ctx.state(|s| {
            let spec_now = s
                .state
                .pool
                .as_ref()
                .map(|p| p.in_force(s.state.image.as_ref()).template_hash);
            (
                s.state.order.clone(),
                s.state.held_template.clone(),
                spec_now,
            )
        });
        // An update taken during this look (its awaits let them in) is acted on at the next:
        // the wait below wakes at once.
        let spec_unchanged = spec_now.as_deref() == Some(pool.template_hash.as_str());
        if rollout.is_none()
            && mode == Mode::Active
            && spec_unchanged
            && rollout_gate.allows()
            && should_start(
                decision.start_rollout,
                order.is_some(),
                &pool.template_hash,
                held.as_deref(),
            )
        {
            let options = order.unwrap_or_default();
            let history = ctx.state(|s| s.state.history.clone());
            // The rollout looks as often as the controller, at most every 15 s (its default).
            let observe = interval.min(nodewright_model::rollout::DEFAULT_OBSERVE_INTERVAL);
            let started =
                start_rollout(ctx, cluster, &pool, &options, &history, observe, automatic).await;
            match started {
                Ok(end) => {
                    let to = if options.rollback { "back to" } else { "to" };
                    note(
                        ctx,
                        format!(
                            "rolling pool {} {to} template {}",
                            pool.name, pool.template_hash
                        ),
                    );
                    rollout = Some(end);
                    in_flight = Some(InFlight {
                        template_hash: pool.template_hash.clone(),
                        replicas: pool.replicas,
                        aborting: false,
                    });
                    ctx.state_mut(|s| {
                        s.state.order = None;
                        s.state.rolling_out = true;
                    });
                }
                Err((reason, taken)) => {
                    note(ctx, reason);
                    if taken {
                        // Someone else's rollout: act as if it were ours until the next look.
                        let until = at.saturating_add(secs(interval));
                        ctx.state_mut(|s| s.state.foreign_rollout_until = until);
                    }
                }
            }
        }
        ctx.state_mut(|s| s.state.remediations = decision.remediations.clone());
        show(
            ctx,
            &pool,
            &decision,
            &children,
            rollout.is_some(),
            mode,
            max_unavailable,
            &mut phase_shown,
        );

        if children.is_empty() && rollout.is_none() && continue_as_new_due(ctx, request) {
            return Finish::ContinueAsNew(Box::new(next_run(ctx, request, &written)));
        }

        // Wait. The Node watch is the timer too: it answers "unchanged" at the next VM listing
        // or `recheck_at`, whichever comes first (one activity per wait, no timer beside it).
        let seen = ctx.state(|s| s.state.wakeups);
        let until_vms = secs(interval)
            .saturating_sub(at.saturating_sub(last_vm_look))
            .max(1);
        let until_recheck = decision.recheck_at.map_or(until_vms, |then| {
            then.saturating_sub(at).clamp(1, until_vms)
        });
        let max_wait = Duration::from_secs(u64::try_from(until_recheck).unwrap_or(1));
        let watch_input = look::watch_input(ctx, &pool.name, max_wait);
        let watch = ctx.execute_activity(
            KubeActivities::watch_pool_nodes,
            watch_input,
            activity_options::wait(max_wait),
        );
        let rollout_end = async {
            match rollout.as_mut() {
                Some(end) => end.await,
                None => std::future::pending().await,
            }
        };
        let woke = select! {
            done = first_finished(&mut children).fuse() => Woke::Child(done),
            end = rollout_end.fuse() => Woke::Rollout(Box::new(end)),
            _ = ctx.wait_condition(move |s: &PoolControllerWorkflow| s.state.wakeups != seen) => Woke::Operator,
            answer = watch.fuse() => Woke::Nodes(Box::new(answer)),
        };
        match woke {
            Woke::Child((index, end)) => {
                let child = children.remove(index);
                child_ended(ctx, &child, end);
                vms_due = true;
            }
            Woke::Rollout(end) => {
                rollout = None;
                let template = in_flight
                    .take()
                    .map(|f| f.template_hash)
                    .unwrap_or_default();
                rollout_ended(ctx, &pool, template, *end);
                vms_due = true;
            }
            Woke::Nodes(answer) => {
                let before = ctx.state(|s| s.state.known_nodes.as_ref().map(|(d, _)| d.clone()));
                let kept = look::keep_watched(ctx, *answer);
                let after = ctx.state(|s| s.state.known_nodes.as_ref().map(|(d, _)| d.clone()));
                // A Node that changed (NotReady, gone, tainted) is explained by a look at the
                // VMs now, not at the next interval.
                if before != after && ctx.patched(LOOK_ON_NODE_CHANGE_PATCH) {
                    vms_due = true;
                }
                if let Err(reason) = kept {
                    note(
                        ctx,
                        format!(
                            "could not watch the pool's Nodes ({reason}); looking again shortly"
                        ),
                    );
                    ctx.timer(WATCH_RETRY).await;
                }
            }
            Woke::Operator => {}
        }
    }
}

/// The patch that lists the VMs again as soon as a Node changed (and once more, with power
/// states, when a VM has no Ready Node); runs recorded before it listed them once per interval,
/// always with power states.
const LOOK_ON_NODE_CHANGE_PATCH: &str = "controller-looks-on-node-change";

/// The patch that lists the VMs with one Azure Resource Graph query (power states included)
/// instead of the resource group's list; runs recorded before it used the list.
const RESOURCE_GRAPH_PATCH: &str = "controller-lists-by-resource-graph";

/// The patch that resolves and follows the pool's image (`image::follow`); runs recorded before
/// it made every machine from the image as written.
const IMAGE_PATCH: &str = "controller-resolves-images";

/// The patch that holds remediation while no maintenance window is open (`applyTo: all`),
/// asked only then; runs recorded before it remediated at any time.
const REMEDIATION_WINDOW_PATCH: &str = "controller-windows-gate-remediation";

/// How long the loop waits after a Node watch failed before it watches again.
const WATCH_RETRY: Duration = Duration::from_secs(5);

/// What ended a wait.
enum Woke {
    Child((usize, End)),
    Rollout(Box<RolloutEnd>),
    Operator,
    Nodes(
        Box<
            Result<
                nodewright_model::listing::Listing<nodewright_model::rollout::PoolNode>,
                temporalio_sdk::ActivityExecutionError,
            >,
        >,
    ),
}

/// Books a child's end: an action line, and the create back-off.
fn child_ended(ctx: &mut WorkflowContext<PoolControllerWorkflow>, child: &Child, end: End) {
    let at = now(ctx).timestamp();
    let what = match child.work.kind {
        WorkKind::Create => "create",
        WorkKind::Delete => "delete",
        WorkKind::Restart => "restart",
        WorkKind::Redeploy => "redeploy",
    };
    match end {
        End::Succeeded => {
            if child.work.kind == WorkKind::Create {
                ctx.state_mut(|s| s.state.create_failures = 0);
            }
            note(ctx, format!("{what} of machine {} done", child.machine));
        }
        End::Failed(reason) => {
            let refused = (child.work.kind == WorkKind::Create)
                .then(|| refused_offering(ctx, child, &reason, at))
                .flatten();
            if let Some(booked) = refused.as_ref().filter(|booked| !booked.counted) {
                note(
                    ctx,
                    format!(
                        "create of machine {} refused for capacity: {} set aside for {}, the next machine goes elsewhere ({reason})",
                        child.machine,
                        describe(&booked.entry),
                        duration(Duration::from_secs(
                            u64::try_from(booked.entry.until.saturating_sub(at)).unwrap_or(0)
                        ))
                    ),
                );
            } else if child.work.kind == WorkKind::Create {
                let failures = ctx.state_mut(|s| {
                    s.state.create_failures = s.state.create_failures.saturating_add(1);
                    s.state.create_failures
                });
                let backoff = create_backoff(failures);
                ctx.state_mut(|s| s.state.creates_after = at.saturating_add(secs(backoff)));
                note(
                    ctx,
                    format!(
                        "{what} of machine {} failed ({reason}); next create in {}s",
                        child.machine,
                        backoff.as_secs()
                    ),
                );
            } else {
                note(
                    ctx,
                    format!("{what} of machine {} failed ({reason})", child.machine),
                );
            }
        }
    }
}

/// Keeps `seen` (Spot VM → zone) up to date with the pool's `vms`: every Spot VM listed is
/// added, and a machine with neither a VM nor a Node any more is forgotten.
fn remember_spot_vms(
    seen: &mut std::collections::BTreeMap<String, String>,
    vms: &[nodewright_model::rollout::PoolVm],
    nodes: &[nodewright_model::rollout::PoolNode],
) {
    for vm in vms.iter().filter(|vm| vm.is_spot()) {
        let zone = vm.zone.clone().unwrap_or_else(|| "none".to_owned());
        seen.insert(vm.name.clone(), zone);
    }
    let present: BTreeSet<&str> = vms
        .iter()
        .map(|vm| vm.name.as_str())
        .chain(nodes.iter().map(|node| node.name.as_str()))
        .collect();
    seen.retain(|name, _| present.contains(name.as_str()));
}

/// Counts `victim` as an eviction by zone when Azure evicted it: a Spot VM stopped or
/// deallocated ([`VictimReason::Evicted`]), or a Node left without its VM that was Spot.
fn count_eviction(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    victim: &Victim,
    machines: &[nodewright_model::controller::Machine],
) {
    let zone = match victim.reason {
        VictimReason::Evicted => machines
            .iter()
            .find(|m| m.name == victim.name)
            .and_then(|m| m.vm.as_ref())
            .map(|vm| vm.zone.clone().unwrap_or_else(|| "none".to_owned())),
        VictimReason::VmGone => ctx.state(|s| s.state.spot_vms.get(&victim.name).cloned()),
        _ => None,
    };
    if let Some(zone) = zone {
        ctx.state_mut(|s| {
            let count = s.state.evictions.entry(zone.clone()).or_default();
            *count = count.saturating_add(1);
        });
        note(
            ctx,
            format!(
                "machine {} was evicted by Azure (Spot, zone {zone}): it is replaced now",
                victim.name
            ),
        );
    }
}

/// Books a create's failure `reason` as a refusal for capacity when it is one (a template with
/// capacity types): its offering set aside in the state, carried by continue-as-new.
fn refused_offering(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    child: &Child,
    reason: &str,
    at: i64,
) -> Option<Booked> {
    ctx.state_mut(|s| {
        let pool = s.state.pool.as_ref()?;
        let (template, ttl) = (pool.template.clone(), pool.offering_ttl());
        book_refusal(
            &mut s.state.unavailable,
            &template,
            child.zone.as_deref(),
            child.capacity,
            reason,
            at,
            ttl,
        )
    })
}

/// Runs one rung of the remediation ladder (restart or redeploy) on `machine`.
async fn remediate(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    cluster: &ClusterName,
    machine: &str,
    rung: nodewright_model::controller::Rung,
) {
    use nodewright_activities::azure::machines::{ArmWriteActivities, VmAction};
    use nodewright_model::controller::Rung;
    let writes = nodewright_model::names::arm_write_task_queue(ctx.task_queue());
    let input = VmAction {
        cluster: cluster.clone(),
        machine: machine.to_owned(),
    };
    let options = activity_options::arm_write(&writes, nodewright_model::arm::WriteStage::Starting);
    let done = match rung {
        Rung::Restart => {
            ctx.execute_activity(ArmWriteActivities::restart_vm, input, options)
                .await
        }
        Rung::Redeploy => {
            ctx.execute_activity(ArmWriteActivities::redeploy_vm, input, options)
                .await
        }
        Rung::Replace => return,
    };
    match done {
        Ok(_) => note(
            ctx,
            format!("remediation: {rung} of machine {machine} done"),
        ),
        Err(e) => note(
            ctx,
            format!(
                "remediation: {rung} of machine {machine} failed ({})",
                crate::progress::activity_failure_text(&e)
            ),
        ),
    }
}

/// Sets the status the query answers, the conditions, and the phase search attribute (only
/// when it changes: every upsert is a history event).
#[allow(clippy::too_many_arguments)]
fn show(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    pool: &ValidPool,
    decision: &nodewright_model::controller::Decision,
    children: &[Child],
    rolling_out: bool,
    mode: Mode,
    max_unavailable: u32,
    phase_shown: &mut String,
) {
    let when = rfc3339(now(ctx));
    let now_secs = now(ctx).timestamp();
    let progress = Progress {
        creating: count(children, WorkKind::Create),
        deleting: count(children, WorkKind::Delete),
        remediating: u32::try_from(decision.remediations.len()).unwrap_or(u32::MAX),
        rolling_out,
        deleting_pool: mode == Mode::Deleting,
    };
    let phase = mode.phase();
    ctx.state_mut(|s| {
        let state = &mut s.state;
        let mut shown = conditions(
            &state.conditions,
            decision,
            progress,
            max_unavailable,
            pool.replicas,
            &when,
        );
        shown.push(capacity_condition(
            &state.conditions,
            &state.capacity,
            &when,
        ));
        state.conditions = shown;
        let counts = &decision.counts;
        state.status = Some(PoolStatusDocument {
            pool: pool.name.clone(),
            spec: SpecView {
                replicas: pool.replicas,
                template_hash: pool.template_hash.clone(),
                paused: state.paused,
            },
            status: PoolState {
                replicas: counts.replicas,
                ready_replicas: counts.ready,
                available_replicas: counts.available,
                updated_replicas: counts.updated,
                unhealthy_replicas: counts.unhealthy,
                unhealthy: decision.unhealthy.clone(),
                remediations: decision.remediations.clone(),
                last_actions: state.last_actions.clone(),
                conditions: state.conditions.clone(),
                phase: phase.to_owned(),
                observed_at: Some(when.clone()),
                maintenance: state.window.clone(),
                unavailable_offerings: active(&state.unavailable, now_secs),
                evictions: state.evictions.clone(),
                image: state.image.as_ref().map(|image| {
                    image.status(
                        &pool.image_update,
                        state.image_words.clone().unwrap_or_default(),
                    )
                }),
            },
        });
    });
    if phase_shown != phase {
        ctx.upsert_search_attributes([search::PHASE.value_set(phase.to_lowercase())]);
        phase.clone_into(phase_shown);
    }
}

fn count(children: &[Child], kind: WorkKind) -> u32 {
    u32::try_from(children.iter().filter(|c| c.work.kind == kind).count()).unwrap_or(u32::MAX)
}

/// Adds a line to the last actions (and the status shown).
fn note(ctx: &mut WorkflowContext<PoolControllerWorkflow>, text: String) {
    let at = rfc3339(now(ctx));
    ctx.state_mut(|s| {
        push_action(&mut s.state.last_actions, &at, text);
        let actions = s.state.last_actions.clone();
        if let Some(status) = s.state.status.as_mut() {
            status.status.last_actions = actions;
        }
    });
}

/// The run's result.
fn result(
    ctx: &WorkflowContext<PoolControllerWorkflow>,
    pool: &ValidPool,
    ended: &str,
) -> ControllerResult {
    ControllerResult {
        pool: pool.name.clone(),
        ended: ended.to_owned(),
        status: ctx
            .state(|s| s.state.status.clone())
            .unwrap_or_else(|| PoolStatusDocument {
                pool: pool.name.clone(),
                spec: SpecView {
                    replicas: pool.replicas,
                    template_hash: pool.template_hash.clone(),
                    paused: false,
                },
                status: PoolState::default(),
            }),
    }
}

fn continue_as_new_due(
    ctx: &WorkflowContext<PoolControllerWorkflow>,
    request: &ControllerRequest,
) -> bool {
    ctx.history_length() >= request.history_limit || ctx.continue_as_new_suggested()
}

/// The next run's input: the pool in force and what this run carries.
fn next_run(
    ctx: &WorkflowContext<PoolControllerWorkflow>,
    request: &ControllerRequest,
    pool: &ValidPool,
) -> ControllerRequest {
    let runs_before = request.carried.as_ref().map_or(0, |c| c.runs_before);
    let carried = ctx.state(|s| Carried {
        remediations: s.state.remediations.clone(),
        conditions: s.state.conditions.clone(),
        last_actions: s.state.last_actions.clone(),
        create_failures: s.state.create_failures,
        creates_after: s.state.creates_after,
        deleting: s.state.deleting.is_some(),
        runs_before: runs_before.saturating_add(1),
        order: s.state.order.clone(),
        held_template: s.state.held_template.clone(),
        history: s.state.history.clone(),
        image: s.state.image.clone(),
        unavailable: s.state.unavailable.clone(),
        evictions: s.state.evictions.clone(),
    });
    let paused = ctx.state(|s| s.state.paused);
    ControllerRequest {
        cluster: request.cluster.clone(),
        pool: pool.clone(),
        paused,
        observe_interval: request.observe_interval,
        history_limit: request.history_limit,
        carried: Some(Box::new(carried)),
    }
}

fn secs(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}
