//! RollingUpdate's eyes and hands on the pool: observing its VMs and Nodes, planning from what
//! was seen (`model::rollout::plan`), and setting or removing the outdated taint on Nodes
//! (`model::rollout::round` picks which).

use std::collections::BTreeSet;
use std::time::Duration;

use nodewright_activities::azure::machines::{ArmReadActivities, ArmScope, ListPoolVms, VmSource};
use nodewright_activities::kube::{KubeActivities, ListPoolNodes, MachineNode, MarkOutdated};
use nodewright_model::listing::{Since, apply};
use nodewright_model::rollout::{
    Budget, HeldMachine, ObservedMachine, Plan, PlanInput, PoolNode, PoolVm, RolloutRequest,
    Running, canary_target, held_now, observe, plan, to_clear_outdated, to_mark_outdated,
};
use temporalio_sdk::{ActivityOptions, WorkflowContext};

use super::state::HasRollout;
use super::status::note;
use crate::activity_options;
use crate::cancellation;
use crate::progress::activity_failure_text;

/// Observes the pool: its VMs and Nodes, joined with the work in flight.
pub async fn look<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    running: &[Running<'_>],
) -> Result<Vec<ObservedMachine>, String> {
    look_with(ctx, request, running, activity_options::read()).await
}

/// [`look`] with the reads' `options`.
pub async fn look_with<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    running: &[Running<'_>],
    options: ActivityOptions,
) -> Result<Vec<ObservedMachine>, String> {
    if ctx.patched(OBSERVE_CHANGES_PATCH) {
        let (vms, nodes) = list_changes(ctx, request, options).await?;
        return Ok(observe(&vms, &nodes, running, &request.pool.template_hash));
    }
    let vms = ctx
        .execute_activity(
            ArmReadActivities::list_pool_vms,
            ListPoolVms {
                cluster: request.cluster.clone(),
                pool: request.pool.name.clone(),
                instance_view: false,
                source: VmSource::ResourceGroup,
                expected: Vec::new(),
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
                lease_timeout_secs: None,
            },
            options,
        )
        .await
        .map_err(|e| activity_failure_text(&e))?;
    Ok(observe(&vms, &nodes, running, &request.pool.template_hash))
}

/// Patch marker: a look asks for the pool's VMs and Nodes changed since the lists it holds
/// (`azure.list_pool_vms_since`, `kube.list_pool_nodes_since`), so its history records what
/// changed rather than the whole pool at every look (runs recorded before it listed it whole).
const OBSERVE_CHANGES_PATCH: &str = "rollout-observes-changes";

/// The pool's VMs and Nodes, asked as the changes since the lists this run holds and applied
/// to them (`model::listing`); a listing that does not apply (another worker answered from a
/// list it never sent, a digest that does not match) drops what is held, and the next look asks
/// for the whole lists.
async fn list_changes<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    options: ActivityOptions,
) -> Result<(Vec<PoolVm>, Vec<PoolNode>), String> {
    let (known_vms, known_nodes) = ctx.state(|s| {
        let rollout = s.rollout();
        (rollout.known_vms.clone(), rollout.known_nodes.clone())
    });
    let vms = ctx
        .execute_activity(
            ArmReadActivities::list_pool_vms_since,
            Since {
                of: ListPoolVms {
                    cluster: request.cluster.clone(),
                    pool: request.pool.name.clone(),
                    instance_view: false,
                    source: VmSource::ResourceGroup,
                    expected: Vec::new(),
                },
                since: known_vms.as_ref().map(|(digest, _)| digest.clone()),
            },
            activity_options::paged(options.clone()),
        )
        .await
        .map_err(|e| activity_failure_text(&e))?;
    let nodes = ctx
        .execute_activity(
            KubeActivities::list_pool_nodes_since,
            Since {
                of: ListPoolNodes {
                    pool: request.pool.name.clone(),
                    lease_timeout_secs: None,
                },
                since: known_nodes.as_ref().map(|(digest, _)| digest.clone()),
            },
            options,
        )
        .await
        .map_err(|e| activity_failure_text(&e))?;
    let applied = apply(held(&known_vms), vms)
        .and_then(|vms| apply(held(&known_nodes), nodes).map(|nodes| (vms, nodes)));
    match applied {
        Ok(((vms, vm_digest), (nodes, node_digest))) => {
            let kept = (vms.clone(), nodes.clone());
            ctx.state_mut(|s| {
                let rollout = s.rollout_mut();
                rollout.known_vms = Some((vm_digest, kept.0));
                rollout.known_nodes = Some((node_digest, kept.1));
            });
            Ok((vms, nodes))
        }
        Err(error) => {
            ctx.state_mut(|s| {
                let rollout = s.rollout_mut();
                rollout.known_vms = None;
                rollout.known_nodes = None;
            });
            Err(format!("{error}; asking for the whole lists"))
        }
    }
}

/// A list held and its digest, as `model::listing::apply` takes them.
fn held<T>(known: &Option<(String, Vec<T>)>) -> Option<(&str, &[T])> {
    known
        .as_ref()
        .map(|(digest, list)| (digest.as_str(), list.as_slice()))
}

/// The plan for what a look saw at `at` (Unix seconds), under the strategy in force (its
/// minReadySeconds included) and the canary's state. Its `next_available_at` is when the loop
/// should look again at the latest ([`RolloutRequest::wait_after_look`]): a machine warming up
/// then counts available.
pub fn decide<W: HasRollout>(
    ctx: &WorkflowContext<W>,
    request: &RolloutRequest,
    machines: &[ObservedMachine],
    at: i64,
) -> Plan {
    let (strategy, approved, held, held_firmly, replicas) = ctx.state(|s| {
        let rollout = s.rollout();
        let status = rollout.status.as_ref();
        (
            rollout.strategy_in_force(),
            status.is_some_and(|st| st.approved_by.is_some()),
            status.map(|st| held_now(&st.held, at)).unwrap_or_default(),
            status
                .map(|st| held_after_failed_deletes(&st.held, at))
                .unwrap_or_default(),
            rollout.replicas_in_force(request.pool.replicas),
        )
    });
    plan(&PlanInput {
        replicas,
        template_hash: &request.pool.template_hash,
        budget: Budget::resolve(strategy.max_surge, strategy.max_unavailable, replicas),
        new_target: canary_target(request.canary, approved, replicas),
        machines,
        now: at,
        health_timeout_secs: secs(request.pool.timeouts.health),
        held: &held,
        held_firmly: &held_firmly,
        min_ready_secs: strategy.min_ready_secs(),
    })
}

/// Taints the Nodes of outdated machines `nodewright.io/outdated:PreferNoSchedule` (once per
/// machine and run; a failure is noted and tried again at the next look).
pub async fn mark_outdated<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    scope: &ArmScope,
    machines: &[ObservedMachine],
    tainted: &mut BTreeSet<String>,
) {
    let nodes = machine_nodes(
        scope,
        &to_mark_outdated(machines, &request.pool.template_hash, tainted),
    );
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
pub async fn clear_outdated<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    scope: &ArmScope,
    machines: &[ObservedMachine],
) {
    let nodes = machine_nodes(scope, &to_clear_outdated(machines));
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

/// Each machine's Node and the VM it must belong to.
fn machine_nodes(scope: &ArmScope, machines: &[&ObservedMachine]) -> Vec<MachineNode> {
    machines
        .iter()
        .map(|m| MachineNode {
            node: m.name.clone(),
            vm_id: scope.vm_id(&m.name),
        })
        .collect()
}

/// The machines held at `at` because a delete of theirs failed before the cordon: held even
/// when unhealthy, until their back-off passed.
fn held_after_failed_deletes(held: &[HeldMachine], at: i64) -> BTreeSet<String> {
    held.iter()
        .filter(|hold| hold.after_failed_delete && hold.recheck_at > at)
        .map(|hold| hold.machine.clone())
        .collect()
}

fn secs(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}
