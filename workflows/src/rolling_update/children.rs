//! RollingUpdate's children: starting the CreateMachine and DeleteMachine runs a plan asks for,
//! keeping the future of each one's end, awaiting the first to finish, and booking how it ended
//! (`model::rollout::booking` decides what counts, `model::rollout::shortage` what a create that
//! found no capacity does); each create goes to the allowed zone with the fewest machines that
//! is not exhausted (`model::rollout::zones_for_creates`; `model::capacity::choose_zone` for runs
//! recorded before).

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use futures::FutureExt;
use nodewright_model::capacity::choose_zone;
use nodewright_model::machine::adoption::is_name_taken;
use nodewright_model::machine::{CreateMachineRequest, DeleteMachineRequest};
use nodewright_model::machine_name::{MAX_NAME_DRAWS, MachineName, draw_free_name};
use nodewright_model::pool::CapacityType;
use nodewright_model::rollout::{
    ChildEnd, ChildKind, InFlight, ObservedMachine, Plan, RolloutRequest, Victim, disruption_of,
    offering_refusal_of, placements_for_creates, shortage_of, zones_for_creates,
};
use nodewright_model::{Operation, WorkflowId};
use temporalio_sdk::workflows::join_all;
use temporalio_sdk::{
    ChildWorkflowOptions, ChildWorkflowStartError, StartChildWorkflowExecutionFailedCause,
    WorkflowContext,
};

use super::state::HasRollout;
use super::status::note;
use crate::create_machine::CreateMachineWorkflow;
use crate::delete_machine::DeleteMachineWorkflow;
use crate::progress::{child_failure_text, child_options, now, was_canceled};

/// The patch that passes the pool's drain settings to each DeleteMachine it starts (the trusted
/// baseline the Node's drain-policy annotation is bounded by); runs recorded before it passed
/// none, and their drains read the VM's tag instead.
const DRAIN_POLICY_PATCH: &str = "rollout-passes-drain-policy";

/// The patch that books a create's allocation failure as a shortage of its zone (not counted,
/// the zone avoided) instead of a failure counted against `max_failures`; runs recorded before
/// it counted such failures and may have paused on them.
const ZONE_SHORTAGE_PATCH: &str = "rollout-avoids-exhausted-zones";

/// The patch that sends each create to the allowed zone with the fewest machines of the pool
/// (`model::rollout::zones_for_creates`); runs recorded before it hashed the machine's name
/// (`choose_zone`), and the zone is in the child's input.
const ZONE_BALANCE_PATCH: &str = "rollout-balances-zones";

/// The patch that draws a new machine's name again while it is one in use, and books a create
/// that found its name taken by another create's VM or NIC (`model::machine::adoption`) as a
/// name collision, not counted against `max_failures` (the next look plans the machine again
/// under a new name); runs recorded before it used the first draw and counted such failures.
const NAME_COLLISION_PATCH: &str = "rollout-name-collisions";

/// The patch that starts a look's children in one workflow task and waits for their starts
/// together ([`start_children`]); runs recorded before it started them one at a time.
const STARTS_TOGETHER_PATCH: &str = "rollout-starts-children-together";

/// A child in flight and the future of its end.
pub struct Child {
    /// What the status shows of it.
    pub entry: InFlight,
    outcome: Outcome,
}

/// Starts the children the plan asks for, deletes first; `at` is now in Unix milliseconds. A
/// new machine's name is none of the `observed` machines' nor a child's in flight.
///
/// Under [`STARTS_TOGETHER_PATCH`] every start goes out in one workflow task and the run waits
/// for them together: one round trip for the whole batch instead of one per child (a
/// 200-machine rollout started about one child a second before it). Runs recorded before it
/// start one child at a time.
pub async fn start_children<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    observed: &[ObservedMachine],
    decided: &Plan,
    children: &mut Vec<Child>,
    at: i64,
) {
    let together =
        decided.delete.len() + decided.create as usize > 1 && ctx.patched(STARTS_TOGETHER_PATCH);
    let mut ready: Vec<ToStart> = Vec::new();
    for victim in &decided.delete {
        let child = delete_to_start(ctx, request, victim, at);
        if together {
            ready.push(child);
        } else {
            start_now(ctx, request, child, children).await;
        }
    }
    let template = &request.pool.template;
    let exhausted = ctx.state(|s| {
        s.rollout()
            .status
            .as_ref()
            .map(|status| status.exhausted.clone())
            .unwrap_or_default()
    });
    // A template with capacity types places each create by offering (zone and type); no run
    // recorded before capacity types had one, so this takes no patch.
    let placed = (decided.create > 0 && !template.capacity_types.is_empty()).then(|| {
        let entries: Vec<InFlight> = children.iter().map(|c| c.entry.clone()).collect();
        ctx.state(|s| {
            s.rollout().status.as_ref().map(|status| {
                placements_for_creates(status, decided, &entries, template, at.div_euclid(1000))
            })
        })
    });
    let placed = placed.flatten();
    let balanced = if placed.is_some() {
        None
    } else if decided.create > 0 && ctx.patched(ZONE_BALANCE_PATCH) {
        let entries: Vec<InFlight> = children.iter().map(|c| c.entry.clone()).collect();
        ctx.state(|s| {
            s.rollout().status.as_ref().map(|status| {
                let (size, zones) = (&template.vm_size, &template.zones);
                zones_for_creates(status, decided, &entries, size, zones, at.div_euclid(1000))
            })
        })
    } else {
        None
    };
    // Names in use: every machine observed and every child in flight.
    let mut taken: BTreeSet<String> = observed.iter().map(|m| m.name.clone()).collect();
    taken.extend(children.iter().map(|c| c.entry.machine.clone()));
    for index in 0..decided.create as usize {
        let Some(machine) = draw_name(ctx, &request.pool.name, &taken) else {
            note(
                ctx,
                format!(
                    "drew {MAX_NAME_DRAWS} machine names of pool {} and every one is in use; drawing again at the next look",
                    request.pool.name
                ),
            );
            break;
        };
        taken.insert(machine.clone());
        let placement = placed.as_ref().and_then(|placed| placed.get(index));
        let zone = match (
            placement,
            balanced.as_ref().and_then(|zones| zones.get(index)),
        ) {
            (Some(placement), _) => placement.zone.clone(),
            (None, Some(zone)) => zone.clone(),
            (None, None) => choose_zone(
                &machine,
                &template.vm_size,
                &template.zones,
                &exhausted,
                at.div_euclid(1000),
            ),
        };
        let capacity = placement.map(|p| p.capacity);
        let child = create_to_start(request, machine, zone, capacity, at);
        if together {
            ready.push(child);
        } else {
            start_now(ctx, request, child, children).await;
        }
    }
    if together {
        start_together(ctx, request, ready, children).await;
    }
}

/// Starts the DeleteMachine of `victim` (its drain with the pool's drain settings); `at` is now
/// in Unix milliseconds.
pub async fn start_delete<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    victim: &Victim,
    children: &mut Vec<Child>,
    at: i64,
) {
    let child = delete_to_start(ctx, request, victim, at);
    start_now(ctx, request, child, children).await;
}

/// A child about to start: what the status shows of it, its workflow's input and options.
struct ToStart {
    entry: InFlight,
    input: ChildInput,
    options: ChildWorkflowOptions,
}

/// The input of a child about to start.
enum ChildInput {
    Create(Box<CreateMachineRequest>),
    Delete(Box<DeleteMachineRequest>),
}

/// A child's start: its run ID and the future of its end, or why it could not start.
type Started = Result<(String, Outcome), ChildWorkflowStartError>;

/// The future of a started child's end.
type Outcome = Pin<Box<dyn Future<Output = ChildEnd>>>;

/// The DeleteMachine of `victim`, ready to start (its drain with the pool's drain settings).
fn delete_to_start<W: HasRollout>(
    ctx: &WorkflowContext<W>,
    request: &RolloutRequest,
    victim: &Victim,
    at: i64,
) -> ToStart {
    let workflow_id = WorkflowId::for_subject(Operation::Delete, &request.cluster, &victim.name);
    let input = DeleteMachineRequest {
        cluster: request.cluster.clone(),
        machine: victim.name.clone(),
        skip_drain: false,
        force: false,
        drain_policy: ctx
            .patched(DRAIN_POLICY_PATCH)
            .then(|| request.pool.drain.clone()),
        skip_hooks: false,
        hook_timeout: None,
        disruption: disruption_of(victim.reason),
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
        zone: None,
        run_id: None,
        capacity_type: None,
    };
    ToStart {
        entry,
        input: ChildInput::Delete(Box::new(input)),
        options,
    }
}

/// The CreateMachine of `machine` in `zone` (as `capacity`, for a template that lists capacity
/// types), ready to start.
fn create_to_start(
    request: &RolloutRequest,
    machine: String,
    zone: Option<String>,
    capacity: Option<CapacityType>,
    at: i64,
) -> ToStart {
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
        zone: zone.clone(),
        capacity_type: capacity,
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
        zone,
        run_id: None,
        capacity_type: capacity,
    };
    ToStart {
        entry,
        input: ChildInput::Create(Box::new(input)),
        options,
    }
}

/// Starts one child and waits for it to have started.
async fn start_now<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    child: ToStart,
    children: &mut Vec<Child>,
) {
    let started = launch(ctx, child.input, child.options).await;
    settle(ctx, request, child.entry, started, children);
}

/// Starts every child in one workflow task, then books each start in the order given.
async fn start_together<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    ready: Vec<ToStart>,
    children: &mut Vec<Child>,
) {
    let (entries, starts): (Vec<InFlight>, Vec<_>) = ready
        .into_iter()
        .map(|child| (child.entry, launch(ctx, child.input, child.options)))
        .unzip();
    // The status query shows them in flight while their starts are acknowledged (for hundreds
    // of children that takes a while); `show_in_flight` sets the list again once they started.
    // Only the query's answer changes: no command, nothing recorded.
    ctx.state_mut(|s| {
        s.rollout_mut().with_status(|status| {
            let starting = entries.iter().filter(|entry| {
                !status
                    .in_flight
                    .iter()
                    .any(|shown| shown.workflow_id == entry.workflow_id)
            });
            let starting: Vec<InFlight> = starting.cloned().collect();
            status.in_flight.extend(starting);
        });
    });
    let started = join_all(starts).await;
    for (entry, started) in entries.into_iter().zip(started) {
        settle(ctx, request, entry, started, children);
    }
}

/// The start of a child workflow, its end reduced to success or the failure's text.
fn launch<'a, W: HasRollout>(
    ctx: &'a WorkflowContext<W>,
    input: ChildInput,
    options: ChildWorkflowOptions,
) -> Pin<Box<dyn Future<Output = Started> + 'a>> {
    match input {
        ChildInput::Create(input) => Box::pin(
            ctx.start_child_workflow(CreateMachineWorkflow::run, *input, options)
                .map(|started| started.map(|s| (s.run_id.clone(), outcome_of(s.result())))),
        ),
        ChildInput::Delete(input) => Box::pin(
            ctx.start_child_workflow(DeleteMachineWorkflow::run, *input, options)
                .map(|started| started.map(|s| (s.run_id.clone(), outcome_of(s.result())))),
        ),
    }
}

/// Keeps a started child with its run ID (the run a later run of the rollout asks about, when
/// it inherits the child) and the future of its end; books a child that could not start.
fn settle<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    mut entry: InFlight,
    started: Started,
    children: &mut Vec<Child>,
) {
    match started {
        Ok((run_id, outcome)) => {
            entry.run_id = Some(run_id);
            children.push(Child { entry, outcome });
        }
        Err(error) => start_failed(ctx, request, entry, &error),
    }
}

/// A new machine's name, not one in `taken` (`model::machine_name::draw_free_name`): the first
/// draw as before, further draws (recorded as a patch) only when it is taken. `None` when
/// [`MAX_NAME_DRAWS`] draws were all taken.
fn draw_name<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    pool: &str,
    taken: &BTreeSet<String>,
) -> Option<String> {
    let first = ctx.random::<u64>();
    let name = MachineName::generate(pool, first);
    if !taken.contains(name.as_str()) || !ctx.patched(NAME_COLLISION_PATCH) {
        return Some(name.to_string());
    }
    let mut draws = Vec::with_capacity(MAX_NAME_DRAWS);
    draws.push(first);
    for _ in 1..MAX_NAME_DRAWS {
        draws.push(ctx.random::<u64>());
    }
    draw_free_name(pool, taken, draws).map(|name| name.to_string())
}

/// A child's result reduced to success or the failure's text.
fn outcome_of<T, F>(result: F) -> Outcome
where
    F: Future<Output = Result<T, temporalio_sdk::ChildWorkflowExecutionError>> + 'static,
{
    Box::pin(async move {
        match result.await {
            Ok(_) => ChildEnd::Succeeded,
            Err(e) if was_canceled(&e) => ChildEnd::Canceled(child_failure_text(&e)),
            Err(e) => ChildEnd::Failed(child_failure_text(&e)),
        }
    })
}

/// A child that could not start. One whose ID is taken (someone else is creating or deleting
/// that machine) is not counted as a failure: the next look sees what that run does.
fn start_failed<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    entry: InFlight,
    error: &ChildWorkflowStartError,
) {
    let taken = matches!(
        error,
        ChildWorkflowStartError::StartFailed {
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
    let at = now(ctx).timestamp();
    let pool = request.pool.name.clone();
    ctx.state_mut(|s| {
        s.rollout_mut()
            .with_status(|status| status.book_failure(entry, reason, !taken, at, &pool));
    });
}

/// The first child to finish (children are polled in order, so replays agree), with its index.
pub fn first_finished(children: &mut [Child]) -> impl Future<Output = (usize, ChildEnd)> + '_ {
    std::future::poll_fn(move |cx| {
        for (index, child) in children.iter_mut().enumerate() {
            if let Poll::Ready(outcome) = child.outcome.as_mut().poll(cx) {
                return Poll::Ready((index, outcome));
            }
        }
        Poll::Pending
    })
}

/// Books a finished child: its duration, or its failure (counted against `max_failures`, and
/// the rollout may pause itself; a failed delete's machine is deleted again later,
/// `model::rollout::retry`). A create that found no capacity in its zone marks the zone
/// exhausted and is not counted while another zone has room (`model::rollout::shortage`);
/// recorded as a patch, so that runs that counted such a failure before replay unchanged.
pub fn child_finished<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    entry: InFlight,
    outcome: ChildEnd,
) {
    let at = now(ctx).timestamp_millis();
    let pool = request.pool.name.clone();
    let template = &request.pool.template;
    // A template with capacity types books refusals by offering; no run recorded before
    // capacity types had one, so this takes no patch.
    if let Some(refused) = offering_refusal_of(&entry, &outcome, template) {
        ctx.state_mut(|s| {
            s.rollout_mut().with_status(|status| {
                status.book_offering_refusal(
                    entry,
                    refused,
                    template,
                    request.pool.offering_ttl(),
                    at,
                    &pool,
                );
            });
        });
        return;
    }
    if let Some(shortage) = shortage_of(&entry, &outcome, &template.zones)
        && ctx.patched(ZONE_SHORTAGE_PATCH)
    {
        ctx.state_mut(|s| {
            s.rollout_mut().with_status(|status| {
                status.book_shortage(
                    entry,
                    shortage,
                    &template.vm_size,
                    &template.zones,
                    at,
                    &pool,
                );
            });
        });
        return;
    }
    if let ChildEnd::Failed(reason) = &outcome
        && entry.kind == ChildKind::Create
        && is_name_taken(reason)
        && ctx.patched(NAME_COLLISION_PATCH)
    {
        let reason = format!(
            "name collision, the machine is created again under another name (not counted): {reason}"
        );
        ctx.state_mut(|s| {
            s.rollout_mut().with_status(|status| {
                status.book_failure(entry, reason, false, at.div_euclid(1000), &pool);
            });
        });
        return;
    }
    ctx.state_mut(|s| {
        s.rollout_mut().with_status(|status| {
            if let (ChildKind::Delete, ChildEnd::Failed(reason)) = (entry.kind, &outcome) {
                status.book_delete_failure(&entry.machine, reason, at.div_euclid(1000));
            }
            status.book_child(entry, outcome, at, &pool);
        });
    });
}

/// Shows the children in flight in the status: this run's, then those it inherited from the
/// run before.
pub fn show_in_flight<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    children: &[Child],
    inherited: &[InFlight],
) {
    let in_flight: Vec<InFlight> = children
        .iter()
        .map(|c| c.entry.clone())
        .chain(inherited.iter().cloned())
        .collect();
    ctx.state_mut(|s| {
        s.rollout_mut()
            .with_status(|status| status.in_flight = in_flight);
    });
}
