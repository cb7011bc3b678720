//! Evictions (issue 29 item 3): a Spot machine Azure evicts (the sandbox's `simulateEviction`,
//! which announces a Preempt and evicts after the notice) is replaced at once by the pool
//! controller, without waiting for health timeouts; what is left of it goes (under
//! `Deallocate` the stopped VM, its NIC and disk and its Node; under `Delete` the Node and NIC
//! Azure left), and the status and metric count the eviction by zone.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox, vm_action};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::with_capacity;
use crate::controller::common::{
    apply, await_status, await_world, controller_pool_file, delete_pool, world,
};

const UP: Duration = Duration::from_secs(300);

/// Azure's Spot eviction notice, the sandbox's default.
const AZURE_NOTICE_SECONDS: u64 = 30;

#[tokio::test]
async fn an_evicted_spot_machine_deallocated_is_replaced_at_once_and_removed() -> Result<()> {
    evicted_and_replaced("Deallocate").await
}

#[tokio::test]
async fn an_evicted_spot_machine_deleted_by_azure_is_replaced_and_its_node_removed() -> Result<()> {
    evicted_and_replaced("Delete").await
}

async fn evicted_and_replaced(policy: &str) -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("spot-evict");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("se{}", unique_suffix());
    let file = controller_pool_file(&stack, &pool, 2, "24.04.1", "")?;
    with_capacity(
        &file,
        &format!("    capacityTypes: [spot]\n    spot:\n      evictionPolicy: {policy}\n"),
    )?;
    let outcome = scenario(&stack, &sandbox, &task_queue, &pool, &file)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

async fn scenario(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
) -> Result<()> {
    apply(stack, task_queue, file).await?;
    let before = await_world(stack, pool, "2 Ready machines", UP, |w| w.is_steady(2)).await?;
    let victim = before
        .vms
        .iter()
        .next()
        .cloned()
        .context("a machine to evict")?;
    // Azure's notice is 30 s; the sandbox's is set short for this eviction (no agent drains in
    // this test), then back to Azure's (an eviction's NotBefore is fixed when it is announced).
    sandbox.set_eviction_notice(2).await?;
    let evicted = vm_action(stack, &victim, "simulateEviction").await;
    sandbox.set_eviction_notice(AZURE_NOTICE_SECONDS).await?;
    evicted?;

    // Replaced: two Ready machines again, the victim gone with everything it had.
    let after = await_world(stack, pool, "the victim replaced", UP, |w| {
        w.is_steady(2) && !w.vms.contains(&victim) && !w.nodes.contains(&victim)
    })
    .await?;
    ensure!(
        after.vms.len() == 2,
        "two machines after the eviction: {after:?}"
    );
    let left = sandbox.machine_resources(&victim).await?;
    ensure!(left.is_empty(), "the evicted {victim} left {left:#?}");
    let status = await_status(stack, task_queue, pool, "the eviction counted", UP, |d| {
        d.status.evictions.values().sum::<u32>() == 1
    })
    .await?;
    ensure!(
        status.status.last_actions.iter().any(|a| a
            .text
            .contains(&format!("machine {victim} was evicted by Azure"))),
        "the controller says it replaced an evicted machine: {:?}",
        status.status.last_actions
    );
    // The other machine was not touched.
    let kept: Vec<&String> = before.vms.iter().filter(|vm| **vm != victim).collect();
    let now = world(stack, pool).await?;
    ensure!(
        kept.iter().all(|vm| now.vms.contains(*vm)),
        "the machine Azure did not evict stays: before {before:?}, now {now:?}"
    );
    Ok(())
}
