//! Replicas kept: `pool apply` of 3 machines brings 3 Ready; a VM deleted in the sandbox out of
//! band is replaced (a new machine, Ready) and its Node removed, back to 3; `pool delete
//! --wait` drains and deletes every machine and the controller ends `deleted`.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{
    apply, await_status, await_world, controller_pool_file, delete_pool, status, world,
};

const UP: Duration = Duration::from_secs(240);

#[tokio::test]
async fn apply_keeps_three_ready_and_replaces_a_vm_deleted_out_of_band() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-replicas");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cr{}", unique_suffix());
    let file = controller_pool_file(&stack, &pool, 3, "24.04.1", "")?;
    let outcome = scenario(&stack, &task_queue, &pool, &file)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    if outcome.is_err() {
        delete_pool(&stack, &task_queue, &pool).await;
    }
    drop(worker);
    outcome
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
) -> Result<()> {
    let applied = apply(stack, task_queue, file).await?;
    ensure!(
        applied["started"] == true
            && applied["lines"][0]
                .as_str()
                .is_some_and(|l| l.contains("3 machine(s) to create")),
        "pool apply said: {applied}"
    );
    let first = await_world(stack, pool, "3 Ready machines", UP, |w| w.is_steady(3)).await?;
    let ready = await_status(stack, task_queue, pool, "readyReplicas 3", UP, |d| {
        d.status.ready_replicas == 3 && d.status.replicas == 3 && d.spec.replicas == 3
    })
    .await?;
    let available = ready
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Available")
        .context("no Available condition")?;
    ensure!(available.status == "True", "Available: {available:?}");

    // A VM deleted out of band: replaced within an observe interval plus a create.
    let victim = first.vms.iter().next().context("a VM")?.clone();
    stack.arm_client()?.delete_vm(&victim, false).await?;
    let healed = await_world(
        stack,
        pool,
        "the deleted VM replaced and its Node removed",
        UP,
        |w| w.is_steady(3) && !w.nodes.contains(&victim),
    )
    .await?;
    let new: Vec<&String> = healed.vms.difference(&first.vms).collect();
    ensure!(
        new.len() == 1,
        "expected one new machine, got {new:?} ({healed:?})"
    );
    let document = status(stack, task_queue, pool).await?;
    ensure!(
        document
            .status
            .last_actions
            .iter()
            .any(|a| a.text.contains(&victim)),
        "the last actions do not name {victim}: {:?}",
        document.status.last_actions
    );

    // Delete: every machine drained and deleted, the controller ended.
    let deleted = nodewright_tests::machines::cli(
        stack,
        task_queue,
        &["pool", "delete", pool, "--wait", "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .json()?;
    ensure!(
        deleted["result"]["ended"] == "deleted",
        "pool delete said: {deleted}"
    );
    let gone = world(stack, pool).await?;
    ensure!(
        gone.vms.is_empty() && gone.nodes.is_empty(),
        "after pool delete: {gone:?}"
    );
    Ok(())
}
