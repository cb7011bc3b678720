//! RollingUpdate cancelled with its creates in flight: a pool of 2 replicas rolled out from
//! nothing, its VMs held before they join (`never_joins`). `pool rollout cancel POOL` ends the
//! rollout Canceled: both creates are cancelled with it and remove what they made, the status
//! says `canceled` with each child among the failures (not counted against maxFailures), no
//! new create starts after the request, and nothing of the pool is left.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::{Value, json};

use crate::rollout::common::{
    PoolShape, clean_up_pool, cli, num, pool_machines, rollout_pool_file, start_rollout,
    wait_rollout,
};

const WAIT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_rollout_cancels_its_creates_and_leaves_nothing_they_made() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("cancel-rollout");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cr{}", unique_suffix());
    let sandbox = Sandbox::new(&stack)?;
    let rule = sandbox
        .add_fault(json!({ "kind": "never_joins", "vm": format!("{pool}-*") }))
        .await?;
    let result = scenario(&stack, &task_queue, &pool)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    sandbox.remove_fault(rule).await?;
    clean_up_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    result
}

async fn scenario(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let file = rollout_pool_file(stack, pool, &PoolShape::new(2, "1", "0"))?;
    start_rollout(stack, task_queue, &file, &[]).await?;
    let creating = wait_rollout(
        stack,
        task_queue,
        pool,
        "two creates in flight",
        WAIT,
        |doc| in_flight(doc) == 2,
    )
    .await?;
    let workflow_ids: Vec<String> = creating["inFlight"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["workflowId"].as_str().map(str::to_owned))
        .collect();
    // The creates are waiting for their Nodes: their VMs exist.
    nodewright_tests::eventually(
        "the pool's VMs to exist",
        WAIT,
        Duration::from_millis(500),
        || async { Ok((pool_machines(stack, pool).await?.len() == 2).then_some(())) },
    )
    .await?;

    let canceled = cli(stack, task_queue, &["pool", "rollout", "cancel", pool]).await?;
    canceled.expect_code(0)?;
    ensure!(
        canceled.stdout.contains("to cancel"),
        "pool rollout cancel says what it asked: {}",
        canceled.stdout
    );
    let ended = wait_rollout(stack, task_queue, pool, "the rollout to end", WAIT, |doc| {
        doc["phase"] == "canceled"
    })
    .await?;
    let status = &ended;
    ensure!(
        num(&status["created"]) == 0 && in_flight(&ended) == 0,
        "nothing created, nothing in flight: {ended}"
    );
    let failures = status["failures"].as_array().cloned().unwrap_or_default();
    ensure!(
        failures.len() == 2
            && failures.iter().all(|f| f["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("canceled"))),
        "both creates are recorded as cancelled: {ended}"
    );
    ensure!(
        num(&status["failuresCounted"]) == 0,
        "cancelled creates are not counted as failures: {ended}"
    );
    for workflow_id in &workflow_ids {
        let machine = workflow_id.rsplit('/').next().unwrap_or_default();
        let left = Sandbox::new(stack)?.machine_resources(machine).await?;
        ensure!(left.is_empty(), "{machine} leaked: {left:#?}");
    }
    ensure!(
        pool_machines(stack, pool).await?.is_empty(),
        "no VM of pool {pool} is left"
    );
    Ok(())
}

fn in_flight(doc: &Value) -> usize {
    doc["inFlight"].as_array().map_or(0, Vec::len)
}
