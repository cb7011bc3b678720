//! RollingUpdate cancelled with its creates in flight: a pool of 2 replicas rolled out from
//! nothing, its VMs held before they join (`never_joins`). `pool rollout cancel POOL` ends the
//! rollout Canceled: both creates are cancelled with it and remove what they made, the status
//! says `canceled` with each child among the failures (not counted against maxFailures), no
//! new create starts after the request, and nothing of the pool is left.
//!
//! And with a delete in flight: a pool of 2 rolled to a new template (maxSurge 1,
//! maxUnavailable 0), its first delete held while it sends its VM delete (throttled). The
//! rollout cancelled then ends Canceled once its delete has finished the deletion (past its
//! point of no return), counting it as deleted (not as a failure), and the pool has 2
//! machines, one of each template, within maxSurge/maxUnavailable.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::rollout::{ChildKind, RolloutPhase};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use crate::rollout::common::{
    PoolShape, Sampler, await_rollout, clean_up_pool, cli, ensure_bounds, pool_machines, roll,
    rollout_pool_file, start_rollout,
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
    let creating = await_rollout(
        stack,
        task_queue,
        pool,
        "two creates in flight",
        WAIT,
        |s| s.in_flight.len() == 2,
    )
    .await?;
    let workflow_ids: Vec<String> = creating
        .status
        .in_flight
        .iter()
        .map(|c| c.workflow_id.clone())
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
    let ended = await_rollout(stack, task_queue, pool, "the rollout to end", WAIT, |s| {
        s.phase == RolloutPhase::Canceled
    })
    .await?;
    let status = &ended.status;
    ensure!(
        status.created == 0 && status.in_flight.is_empty(),
        "nothing created, nothing in flight: {ended}"
    );
    let failures = &status.failures;
    ensure!(
        failures.len() == 2 && failures.iter().all(|f| f.reason.starts_with("canceled")),
        "both creates are recorded as cancelled: {ended}"
    );
    ensure!(
        status.failures_counted == 0,
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_cancelled_with_a_delete_in_flight_stays_within_its_budget() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("cancel-rollout-delete");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cq{}", unique_suffix());
    let sandbox = Sandbox::new(&stack)?;
    let mut rule = None;
    let result = async {
        let shape = PoolShape::new(2, "1", "0");
        let v1 = rollout_pool_file(&stack, &pool, &shape)?;
        roll(&stack, &task_queue, &v1, &[]).await?;
        rule = Some(
            sandbox
                .add_fault(json!({ "kind": "throttle", "operation": "vm.delete",
                                   "vm": format!("{pool}-*"), "count": 3, "retry_after": 10 }))
                .await?,
        );
        let sampler = Sampler::start(&stack, &pool).await?;
        let v2 = rollout_pool_file(&stack, &pool, &shape.clone().version("24.04.2"))?;
        start_rollout(&stack, &task_queue, &v2, &[]).await?;
        await_rollout(&stack, &task_queue, &pool, "a delete in flight", WAIT, |s| {
            s.in_flight.iter().any(|c| c.kind == ChildKind::Delete)
        })
        .await?;
        // Past its drain: the delete is sending its VM delete (throttled), its point of no
        // return.
        let held = rule.context("the throttle rule")?;
        nodewright_tests::eventually(
            "the delete to send its VM delete",
            WAIT,
            Duration::from_millis(300),
            || async {
                Ok(sandbox
                    .fault(held)
                    .await?
                    .is_some_and(|r| r["fired"].as_u64() >= Some(1))
                    .then_some(()))
            },
        )
        .await?;
        cli(&stack, &task_queue, &["pool", "rollout", "cancel", &pool])
            .await?
            .expect_code(0)?;
        let ended = await_rollout(&stack, &task_queue, &pool, "the rollout to end", WAIT, |s| {
            s.phase == RolloutPhase::Canceled
        })
        .await?;
        let extremes = sampler.stop().await?;
        ensure_bounds(&extremes, 2, 3)?;
        let status = &ended.status;
        ensure!(status.in_flight.is_empty(), "nothing in flight: {ended}");
        ensure!(
            status.created == 1 && status.deleted == 1 && status.failures.is_empty(),
            "the delete that finished past its point of no return counts as deleted, not as a failure: {ended}"
        );
        let machines = pool_machines(&stack, &pool).await?;
        ensure!(
            machines.len() == 2,
            "the delete finished past its point of no return and nothing new started: {machines:?} {ended}"
        );
        Ok(())
    }
    .await
    .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    if let Some(rule) = rule {
        sandbox.remove_fault(rule).await?;
    }
    clean_up_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    result
}
