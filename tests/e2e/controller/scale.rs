//! Scale 3 → 5 → 2 with the documented victims: after 5 Ready, the oldest machine's Node is
//! annotated `nodewright.io/delete-priority: "-1"`; scaling to 2 deletes it first, then the
//! newest of the others (the documented tie-break), and keeps the two oldest; `pool pause`
//! stops the controller from acting (a VM deleted out of band is not replaced) until
//! `pool resume`. The five machines are spread 3 and 2 over the pool's two zones.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::ownership::{TAG_CLUSTER, TAG_CREATED, TAG_POOL};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, cli};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{
    apply, await_status, await_world, controller_pool_file, delete_pool, scale, world,
};

const UP: Duration = Duration::from_secs(300);

#[tokio::test]
async fn scale_three_to_five_to_two_deletes_the_documented_victims_and_pause_holds_it() -> Result<()>
{
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-scale");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cs{}", unique_suffix());
    let file = controller_pool_file(&stack, &pool, 3, "24.04.1", "")?;
    let outcome = scenario(&stack, &task_queue, &pool, &file)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

/// The pool's VMs by creation (oldest first, then by name).
async fn by_age(stack: &Stack, pool: &str) -> Result<Vec<(String, String)>> {
    let mut vms = Vec::new();
    for vm in stack.arm_client()?.list_vms().await? {
        let tag = |key: &str| vm.tags.get(key).cloned().unwrap_or_default();
        if tag(TAG_CLUSTER) == stack.cluster.as_str() && tag(TAG_POOL) == pool {
            vms.push((tag(TAG_CREATED), vm.name.clone().unwrap_or_default()));
        }
    }
    vms.sort();
    Ok(vms)
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
) -> Result<()> {
    apply(stack, task_queue, file).await?;
    await_world(stack, pool, "3 Ready machines", UP, |w| w.is_steady(3)).await?;
    scale(stack, task_queue, pool, 5).await?;
    await_world(stack, pool, "5 Ready machines", UP, |w| w.is_steady(5)).await?;
    await_status(stack, task_queue, pool, "5 ready", UP, |d| {
        d.status.ready_replicas == 5
    })
    .await?;
    // Spread over the pool's zones 1 and 2 (the emptiest first), not where names hash.
    let zones = crate::rollout::zone_balance::vms_per_zone(stack, pool).await?;
    let (fewest, most) = (zones.values().min(), zones.values().max());
    ensure!(
        zones.len() == 2 && matches!((fewest, most), (Some(2), Some(3))),
        "5 machines over zones 1 and 2 should be 3 and 2: {zones:?}"
    );

    // The oldest machine goes first by its priority; then the newest of the others.
    let aged = by_age(stack, pool).await?;
    ensure!(aged.len() == 5, "{aged:?}");
    let marked = aged[0].1.clone();
    let nodes: Api<Node> = Api::all(stack.kube_client().await?);
    let annotation = serde_json::json!({
        "metadata": { "annotations": { "nodewright.io/delete-priority": "-1" } }
    });
    nodes
        .patch(&marked, &PatchParams::default(), &Patch::Merge(&annotation))
        .await?;
    // The next look must see the annotation before the scale-down decides.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut others: Vec<(String, String)> = aged[1..].to_vec();
    // Newest first: created descending, then name.
    others.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let expected_victims: Vec<String> = std::iter::once(marked.clone())
        .chain(others.iter().take(2).map(|(_, name)| name.clone()))
        .collect();
    scale(stack, task_queue, pool, 2).await?;
    let two = await_world(stack, pool, "2 Ready machines", UP, |w| w.is_steady(2)).await?;
    for victim in &expected_victims {
        ensure!(
            !two.vms.contains(victim),
            "{victim} should have been deleted (victims in order {expected_victims:?}); left {two:?}; ages {aged:?}"
        );
    }

    // Paused: a VM deleted out of band is not replaced.
    cli(stack, task_queue, &["pool", "pause", pool])
        .await?
        .expect_code(0)?;
    await_status(stack, task_queue, pool, "paused", UP, |d| d.spec.paused).await?;
    let gone = two.vms.iter().next().context("a VM")?.clone();
    stack.arm_client()?.delete_vm(&gone, false).await?;
    tokio::time::sleep(Duration::from_secs(12)).await;
    let held = world(stack, pool).await?;
    ensure!(held.vms.len() == 1, "a paused controller acted: {held:?}");
    cli(stack, task_queue, &["pool", "resume", pool])
        .await?
        .expect_code(0)?;
    await_world(stack, pool, "2 Ready machines after resume", UP, |w| {
        w.is_steady(2) && !w.nodes.contains(&gone)
    })
    .await?;
    Ok(())
}
