//! What the sweep reads before it decides: whether another sweep runs, whether the Kubernetes
//! API can be trusted, the worker's Azure scope, and the inventory (ARM resources page by page,
//! Nodes, the disks volumes use, the running workflows). Any failure is a reason to freeze.

use nodewright_activities::azure::inventory::{InventoryPage, ListInventoryPage};
use nodewright_activities::azure::machines::{ArmReadActivities, ArmScope};
use nodewright_activities::kube::{KubeActivities, ListNodesPage, NodesPage};
use nodewright_activities::temporal::{ListRunning, TemporalActivities};
use nodewright_model::sweep::{
    ArmResource, Decision, Inventory, NodeRecord, PageGuard, PageStep, ResourceKind,
    RunningWorkflow, SweepOutcome, SweepPhase, SweepPolicy, SweepRequest, api_verdict, classify,
    yield_to_running_sweep,
};
use nodewright_model::{Operation, WorkflowId};
use temporalio_sdk::WorkflowContext;
use temporalio_sdk::workflows::join_all;

use super::state::{Ctx, OrphanSweepWorkflow, set_status};
use crate::activity_options;
use crate::progress::{activity_failure_text, now};

/// Resources per ARM inventory call (whole pages).
const ARM_ITEMS_PER_CALL: u32 = 1000;
/// Nodes per Kubernetes list page.
const NODES_PER_PAGE: u32 = 500;

/// A scheduled run that finds another sweep of the cluster running ends at once (an
/// on-demand run never gives way); the outcome when it does.
pub(super) async fn another_sweep_runs(
    ctx: &mut Ctx,
    request: &SweepRequest,
) -> Option<SweepOutcome> {
    let own = ctx.workflow_id().to_owned();
    if own == WorkflowId::for_cluster(Operation::Sweep, &request.cluster).as_str() {
        return None;
    }
    let listed = ctx
        .execute_activity(
            TemporalActivities::running_workflows,
            ListRunning {
                cluster: request.cluster.clone(),
            },
            activity_options::read(),
        )
        .await;
    match listed {
        Ok(running) => yield_to_running_sweep(&request.cluster, &own, &running)
            .map(|reason| SweepOutcome::Skipped { reason }),
        Err(e) => Some(SweepOutcome::Frozen {
            reason: format!(
                "listing the running sweeps failed: {}",
                activity_failure_text(&e)
            ),
        }),
    }
}

/// `Ok` when the Kubernetes API is healthy, else why not.
pub(super) async fn kube_health(ctx: &mut Ctx) -> Result<(), String> {
    set_status(
        ctx,
        SweepPhase::Checking,
        "checking the Kubernetes API".to_owned(),
        |_| {},
    );
    match ctx
        .execute_activity(KubeActivities::api_health, (), activity_options::probe())
        .await
    {
        Ok(health) => api_verdict(health.healthy, &health.detail),
        Err(e) => Err(format!(
            "the Kubernetes API could not be checked: {}",
            activity_failure_text(&e)
        )),
    }
}

/// The subscription and resource group the worker manages, else why it could not be read.
pub(super) async fn azure_scope(ctx: &mut Ctx) -> Result<ArmScope, String> {
    crate::scope::read(ctx, activity_options::read())
        .await
        .map_err(|e| {
            format!(
                "reading the worker's Azure scope failed: {}",
                activity_failure_text(&e)
            )
        })
}

/// After an approval wait: everything listed again and classified again at the new time.
pub(super) async fn fresh_decisions(
    ctx: &mut Ctx,
    request: &SweepRequest,
    policy: &SweepPolicy,
) -> Result<Vec<Decision>, String> {
    set_status(
        ctx,
        SweepPhase::Listing,
        "approved: listing again before acting".to_owned(),
        |_| {},
    );
    let inventory = take_inventory(ctx, request).await?;
    let mut later = policy.clone();
    later.now = now(ctx).timestamp();
    Ok(classify(&inventory, &later))
}

/// Lists everything: ARM (paged, the three kinds side by side), Nodes (paged), volumes, and
/// the running workflows (last, so that it sees the most). Any failure is the reason to freeze.
pub(super) async fn take_inventory(
    ctx: &mut Ctx,
    request: &SweepRequest,
) -> Result<Inventory, String> {
    let lists = ResourceKind::ALL.map(|kind| list_kind(ctx, kind));
    let mut resources = Vec::new();
    for listed in join_all(lists).await {
        resources.extend(listed?);
    }
    let nodes = list_nodes(ctx).await?;
    let volume_disks = ctx
        .execute_activity(KubeActivities::volume_disks, (), activity_options::read())
        .await
        .map_err(|e| {
            format!(
                "listing PersistentVolumes failed: {}",
                activity_failure_text(&e)
            )
        })?;
    let running = running_workflows(ctx, request).await?;
    Ok(Inventory {
        resources,
        nodes,
        volume_disks,
        running,
    })
}

/// Every resource of `kind`, a bounded number of pages per activity.
async fn list_kind(
    ctx: &WorkflowContext<OrphanSweepWorkflow>,
    kind: ResourceKind,
) -> Result<Vec<ArmResource>, String> {
    let mut resources = Vec::new();
    let mut next_link = None;
    let mut guard = PageGuard::new();
    loop {
        let page: InventoryPage = ctx
            .execute_activity(
                ArmReadActivities::inventory_page,
                ListInventoryPage {
                    kind,
                    next_link: next_link.take(),
                    max_items: ARM_ITEMS_PER_CALL,
                },
                activity_options::paged(activity_options::read()),
            )
            .await
            .map_err(|e| format!("listing {kind}s failed: {}", activity_failure_text(&e)))?;
        resources.extend(page.resources);
        match guard.after_page(&format!("{kind}s"), page.next_link) {
            PageStep::Follow(link) => next_link = Some(link),
            PageStep::Done => return Ok(resources),
            PageStep::Stop(reason) => return Err(reason),
        }
    }
}

/// Every Node, page by page.
async fn list_nodes(ctx: &mut Ctx) -> Result<Vec<NodeRecord>, String> {
    let mut nodes = Vec::new();
    let mut continue_token = None;
    let mut guard = PageGuard::new();
    loop {
        let page: NodesPage = ctx
            .execute_activity(
                KubeActivities::list_nodes_page,
                ListNodesPage {
                    continue_token: continue_token.take(),
                    limit: NODES_PER_PAGE,
                },
                activity_options::paged(activity_options::read()),
            )
            .await
            .map_err(|e| format!("listing Nodes failed: {}", activity_failure_text(&e)))?;
        nodes.extend(page.nodes);
        match guard.after_page("Nodes", page.continue_token) {
            PageStep::Follow(token) => continue_token = Some(token),
            PageStep::Done => return Ok(nodes),
            PageStep::Stop(reason) => return Err(reason),
        }
    }
}

/// The nodewright workflows running in the cluster, other sweeps left out.
async fn running_workflows(
    ctx: &mut Ctx,
    request: &SweepRequest,
) -> Result<Vec<RunningWorkflow>, String> {
    let running = ctx
        .execute_activity(
            TemporalActivities::running_workflows,
            ListRunning {
                cluster: request.cluster.clone(),
            },
            activity_options::read(),
        )
        .await
        .map_err(|e| {
            format!(
                "listing the running nodewright workflows failed: {}",
                activity_failure_text(&e)
            )
        })?;
    Ok(running
        .into_iter()
        .filter(|w| w.operation != Operation::Sweep.as_str())
        .collect())
}
