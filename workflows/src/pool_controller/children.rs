//! PoolController's hands: the CreateMachine and DeleteMachine children a decision asks for
//! (IDs by machine name, so a worker killed mid-reconcile never creates a machine twice: a
//! second start of the same ID is refused and left to the run that has it), the RollingUpdate
//! child a template change starts, and the futures of their ends.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use nodewright_model::controller::{
    RolloutEnd, RolloutOptions, Victim, VictimReason, Work, WorkKind,
};
use nodewright_model::disruption::Disruption;
use nodewright_model::machine::{CreateMachineRequest, DeleteMachineRequest};
use nodewright_model::machine_name::{MAX_NAME_DRAWS, draw_free_name};
use nodewright_model::pool::CapacityType;
use nodewright_model::pool::ValidPool;
use nodewright_model::rollout::{PoolHistory, RolloutOutcome, RolloutRequest};
use nodewright_model::{ClusterName, Operation, WorkflowId};
use temporalio_sdk::{StartChildWorkflowExecutionFailedCause, WorkflowContext};

use super::PoolControllerWorkflow;
use crate::create_machine::CreateMachineWorkflow;
use crate::delete_machine::DeleteMachineWorkflow;
use crate::progress::{child_failure_text, child_options, was_canceled};
use crate::rolling_update::RollingUpdateWorkflow;

/// How a child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// It succeeded.
    Succeeded,
    /// It failed or was cancelled, with the reason.
    Failed(String),
}

/// A child in flight: the machine, what it does to it, and the future of its end.
pub struct Child {
    /// The machine (for a rollout, the pool).
    pub machine: String,
    /// What it does.
    pub work: Work,
    /// For a create, the zone it was given (none when the pool has no zones).
    pub zone: Option<String>,
    /// For a create of a template with capacity types, the type it was given.
    pub capacity: Option<CapacityType>,
    outcome: Pin<Box<dyn Future<Output = End>>>,
}

/// Starts a CreateMachine for each of `places` (one new machine of `pool` per entry, in that
/// availability zone, as that capacity type when given), named so that no name is one in
/// `taken`; returns a line per start that failed.
pub async fn start_creates(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    cluster: &ClusterName,
    pool: &ValidPool,
    places: &[(Option<String>, Option<CapacityType>)],
    taken: &mut BTreeSet<String>,
    children: &mut Vec<Child>,
    at: i64,
) -> Vec<String> {
    let mut notes = Vec::new();
    for (zone, capacity) in places {
        let draws: Vec<u64> = (0..MAX_NAME_DRAWS).map(|_| ctx.random::<u64>()).collect();
        let Some(name) = draw_free_name(&pool.name, taken, draws) else {
            notes.push(format!(
                "drew {MAX_NAME_DRAWS} machine names of pool {} and every one is in use",
                pool.name
            ));
            break;
        };
        let machine = name.to_string();
        taken.insert(machine.clone());
        let workflow_id = WorkflowId::for_subject(Operation::Create, cluster, &machine);
        let input = CreateMachineRequest {
            cluster: cluster.clone(),
            pool: pool.name.clone(),
            machine: machine.clone(),
            template: pool.template.clone(),
            template_hash: pool.template_hash.clone(),
            creation_timeout: pool.timeouts.creation,
            keep_on_failure: false,
            drain: pool.drain.clone(),
            zone: zone.clone(),
            capacity_type: *capacity,
        };
        let options = child_options(
            &workflow_id,
            format!(
                "controller of pool {}: create machine {machine} (template {})",
                pool.name, pool.template_hash
            ),
        );
        match ctx
            .start_child_workflow(CreateMachineWorkflow::run, input, options)
            .await
        {
            Ok(started) => {
                track(children, machine, WorkKind::Create, at, started.result());
                if let Some(child) = children.last_mut() {
                    child.zone = zone.clone();
                    child.capacity = *capacity;
                }
            }
            Err(error) => notes.push(start_failed(&workflow_id, &error)),
        }
    }
    notes
}

/// Starts the DeleteMachine of `victim` (drained within PDBs with the pool's drain settings);
/// returns a line when it could not start.
pub async fn start_delete(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    cluster: &ClusterName,
    pool: &ValidPool,
    victim: &Victim,
    children: &mut Vec<Child>,
    at: i64,
) -> Option<String> {
    let workflow_id = WorkflowId::for_subject(Operation::Delete, cluster, &victim.name);
    let input = DeleteMachineRequest {
        cluster: cluster.clone(),
        machine: victim.name.clone(),
        skip_drain: false,
        force: false,
        drain_policy: Some(pool.drain.clone()),
        skip_hooks: false,
        hook_timeout: None,
        disruption: disruption_of(victim.reason),
    };
    let options = child_options(
        &workflow_id,
        format!(
            "controller of pool {}: delete machine {} ({})",
            pool.name, victim.name, victim.reason
        ),
    );
    match ctx
        .start_child_workflow(DeleteMachineWorkflow::run, input, options)
        .await
    {
        Ok(started) => {
            track(
                children,
                victim.name.clone(),
                WorkKind::Delete,
                at,
                started.result(),
            );
            None
        }
        Err(error) => Some(start_failed(&workflow_id, &error)),
    }
}

/// What a deletion for `reason` is to the drain (it decides which do-not-disrupt marks hold).
fn disruption_of(reason: VictimReason) -> Disruption {
    match reason {
        VictimReason::ScaleDown => Disruption::ScaleDown,
        VictimReason::Unhealthy => Disruption::HealthRemediation,
        VictimReason::VmGone | VictimReason::Evicted => Disruption::MachineGone,
        VictimReason::PoolDeleted => Disruption::Operator,
    }
}

/// Starts the RollingUpdate of `pool` to its template (`rollout/<cluster>/<pool>`) as
/// `options` say, from the pool's templates `history`, looking at the pool every `observe`;
/// returns the future of its end, or why it could not start and whether that is because
/// someone else's rollout of the pool runs. `automatic`: nodewright started it by itself (an
/// image update), so the maintenance windows gate it like one.
#[allow(clippy::too_many_arguments)]
pub async fn start_rollout(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    cluster: &ClusterName,
    pool: &ValidPool,
    options: &RolloutOptions,
    history: &PoolHistory,
    observe: std::time::Duration,
    automatic: bool,
) -> Result<Pin<Box<dyn Future<Output = RolloutEnd>>>, (String, bool)> {
    let workflow_id = WorkflowId::for_subject(Operation::Rollout, cluster, &pool.name);
    let request = RolloutRequest {
        cluster: cluster.clone(),
        pool: pool.clone(),
        canary: options.canary,
        history: history.clone(),
        rollback: options.rollback,
        observe_interval: observe,
        history_limit: nodewright_model::rollout::DEFAULT_HISTORY_LIMIT,
        resume: None,
        automatic,
    };
    let to = if options.rollback { "back to" } else { "to" };
    let canary = options
        .canary
        .map(|n| format!(", canary {n}"))
        .unwrap_or_default();
    let summary = format!(
        "controller of pool {}: roll {to} template {}{canary}",
        pool.name, pool.template_hash
    );
    let child = child_options(&workflow_id, summary);
    match ctx
        .start_child_workflow(RollingUpdateWorkflow::run, request, child)
        .await
    {
        Ok(started) => {
            let result = started.result();
            Ok(Box::pin(async move {
                match result.await {
                    Ok(done) if done.outcome == RolloutOutcome::Completed => {
                        RolloutEnd::Completed(done.history)
                    }
                    Ok(done) => RolloutEnd::Stopped(done.history),
                    Err(e) => RolloutEnd::Failed(child_failure_text(&e)),
                }
            }))
        }
        Err(error) => Err((start_failed(&workflow_id, &error), is_taken(&error))),
    }
}

/// Keeps a started child and the future of its end.
fn track<T, F>(children: &mut Vec<Child>, machine: String, kind: WorkKind, at: i64, result: F)
where
    F: Future<Output = Result<T, temporalio_sdk::ChildWorkflowExecutionError>> + 'static,
{
    children.push(Child {
        machine,
        work: Work { kind, since: at },
        zone: None,
        capacity: None,
        outcome: Box::pin(async move { end_of(result.await) }),
    });
}

fn end_of<T>(result: Result<T, temporalio_sdk::ChildWorkflowExecutionError>) -> End {
    match result {
        Ok(_) => End::Succeeded,
        Err(e) if was_canceled(&e) => End::Failed(format!("cancelled: {}", child_failure_text(&e))),
        Err(e) => End::Failed(child_failure_text(&e)),
    }
}

/// A child that could not start: one whose ID is taken (another run creates or deletes that
/// machine) is left to that run.
fn start_failed(
    workflow_id: &WorkflowId,
    error: &temporalio_sdk::ChildWorkflowStartError,
) -> String {
    if is_taken(error) {
        format!("{workflow_id} is already running (started by someone else); left to it")
    } else {
        format!("could not start {workflow_id}: {error}")
    }
}

/// Whether a child could not start because a run of its ID is running.
fn is_taken(error: &temporalio_sdk::ChildWorkflowStartError) -> bool {
    matches!(
        error,
        temporalio_sdk::ChildWorkflowStartError::StartFailed {
            cause: StartChildWorkflowExecutionFailedCause::WorkflowAlreadyExists,
            ..
        }
    )
}

/// The first child to finish (polled in order, so replays agree), with its index.
pub fn first_finished(children: &mut [Child]) -> impl Future<Output = (usize, End)> + '_ {
    std::future::poll_fn(move |cx| {
        for (index, child) in children.iter_mut().enumerate() {
            if let Poll::Ready(outcome) = child.outcome.as_mut().poll(cx) {
                return Poll::Ready((index, outcome));
            }
        }
        Poll::Pending
    })
}

/// The work in flight, by machine, as `model::controller::join` takes it.
pub fn work_of(children: &[Child]) -> Vec<(String, Work)> {
    children
        .iter()
        .map(|child| (child.machine.clone(), child.work))
        .collect()
}
