//! PoolController's eyes: the pool's VMs, listed at most once per observe interval (and after
//! a child ended or a Node changed) with one Azure Resource Graph query that carries their power
//! states (runs from before patch `controller-lists-by-resource-graph`: the resource group's
//! list, with power states only while a VM's Node is missing or not Ready,
//! `model::controller::needs_power_states`), and its Nodes, listed once and then watched
//! (`kube.watch_pool_nodes` answers when a Node's projected state changes, or "unchanged" after
//! the interval). Both are asked as the changes since the list the run holds
//! (`model::listing`), so the history records what changed, not the whole pool at every look.

use std::time::Duration;

use nodewright_activities::azure::machines::{ArmReadActivities, ListPoolVms, VmSource};
use nodewright_activities::kube::{KubeActivities, ListPoolNodes, WatchPoolNodes};
use nodewright_model::ClusterName;
use nodewright_model::listing::{Listing, Since, apply};
use nodewright_model::rollout::{PoolNode, PoolVm};
use temporalio_sdk::{ActivityExecutionError, WorkflowContext};

use super::PoolControllerWorkflow;
use crate::activity_options;
use crate::progress::activity_failure_text;

/// The lease timeout of the pool's health policy, in seconds, as the Node listings take it.
fn lease_timeout_secs(ctx: &WorkflowContext<PoolControllerWorkflow>) -> Option<u64> {
    ctx.state(|s| {
        s.state
            .pool
            .as_ref()
            .and_then(|pool| pool.health.lease_timeout)
            .map(|timeout| timeout.as_secs())
    })
}

/// Lists the pool's VMs (with their power states when `power_states`) from `source` as the
/// changes since the list held, and keeps the result. From Resource Graph, each of `expected`
/// (Nodes without a listed VM, `model::controller::unlisted_nodes`) the index lacks is read with
/// a GET. A listing that does not apply drops what is held (the next look asks for the whole
/// list).
pub async fn list_vms(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    cluster: &ClusterName,
    pool: &str,
    power_states: bool,
    source: VmSource,
    expected: Vec<String>,
) -> Result<(), String> {
    let since = ctx.state(|s| s.state.known_vms.as_ref().map(|(digest, _)| digest.clone()));
    let answer = ctx
        .execute_activity(
            ArmReadActivities::list_pool_vms_since,
            Since {
                of: ListPoolVms {
                    cluster: cluster.clone(),
                    pool: pool.to_owned(),
                    instance_view: power_states,
                    source,
                    expected,
                },
                since,
            },
            activity_options::paged(activity_options::read()),
        )
        .await;
    keep(ctx, answer, |s| &mut s.state.known_vms)
}

/// Lists the pool's Nodes at once, as the changes since the list held.
pub async fn list_nodes(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    pool: &str,
) -> Result<(), String> {
    let since = ctx.state(|s| {
        s.state
            .known_nodes
            .as_ref()
            .map(|(digest, _)| digest.clone())
    });
    let lease_timeout_secs = lease_timeout_secs(ctx);
    let answer = ctx
        .execute_activity(
            KubeActivities::list_pool_nodes_since,
            Since {
                of: ListPoolNodes {
                    pool: pool.to_owned(),
                    lease_timeout_secs,
                },
                since,
            },
            activity_options::read(),
        )
        .await;
    keep(ctx, answer, |s| &mut s.state.known_nodes)
}

/// The input of a Node watch that answers when the pool's Nodes differ from the list held, or
/// after `max_wait`.
pub fn watch_input(
    ctx: &WorkflowContext<PoolControllerWorkflow>,
    pool: &str,
    max_wait: Duration,
) -> Since<WatchPoolNodes> {
    let since = ctx.state(|s| {
        s.state
            .known_nodes
            .as_ref()
            .map(|(digest, _)| digest.clone())
    });
    Since {
        of: WatchPoolNodes {
            pool: pool.to_owned(),
            lease_timeout_secs: lease_timeout_secs(ctx),
            max_wait_secs: max_wait.as_secs().max(1),
        },
        since,
    }
}

/// Keeps what a Node watch answered.
pub fn keep_watched(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    answer: Result<Listing<PoolNode>, ActivityExecutionError>,
) -> Result<(), String> {
    keep(ctx, answer, |s| &mut s.state.known_nodes)
}

/// A list held and its digest.
type Held<T> = Option<(String, Vec<T>)>;

/// Applies a listing to the list held in `slot` (or drops the list held when it does not
/// apply).
fn keep<T>(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    answer: Result<Listing<T>, ActivityExecutionError>,
    slot: fn(&mut PoolControllerWorkflow) -> &mut Held<T>,
) -> Result<(), String>
where
    T: Clone + nodewright_model::listing::Keyed + serde::Serialize + 'static,
{
    let listing = answer.map_err(|e| activity_failure_text(&e))?;
    ctx.state_mut(|s| {
        let held = slot(s).take();
        let held_ref = held
            .as_ref()
            .map(|(digest, list)| (digest.as_str(), list.as_slice()));
        match apply(held_ref, listing) {
            Ok((list, digest)) => {
                *slot(s) = Some((digest, list));
                Ok(())
            }
            Err(error) => Err(format!("{error}; asking for the whole list")),
        }
    })
}

/// The VMs and Nodes held now.
pub fn held(ctx: &WorkflowContext<PoolControllerWorkflow>) -> (Vec<PoolVm>, Vec<PoolNode>) {
    ctx.state(|s| {
        (
            s.state
                .known_vms
                .as_ref()
                .map(|(_, list)| list.clone())
                .unwrap_or_default(),
            s.state
                .known_nodes
                .as_ref()
                .map(|(_, list)| list.clone())
                .unwrap_or_default(),
        )
    })
}
