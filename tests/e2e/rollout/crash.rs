//! The worker is killed (SIGKILL) three times during a rollout that also continues as new
//! (history limit 150 events): the rollout completes with the same invariants — never fewer
//! than 4 Ready nodes of the pool nor more than 5 machines — and every machine on the new
//! template.

use std::time::Duration;

use anyhow::{Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{
    PoolShape, Sampler, await_rollout, clean_up_pool, ensure_bounds, ensure_pool_is, roll,
    rollout_pool_file, start_rollout,
};
use nodewright_model::rollout::RolloutPhase;
use nodewright_tests::documents::shown;

const REPLICAS: u32 = 4;

#[tokio::test]
async fn killed_three_times_it_completes_within_the_budget() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("rk");
    let pool = format!("rk{}", unique_suffix());
    let mut worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = killed(&stack, &task_queue, &pool, &mut worker).await;
    if outcome.is_err() {
        eprintln!("worker log:\n{}", worker.log_tail());
    }
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn killed(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    worker: &mut KillableWorker,
) -> Result<()> {
    let shape = PoolShape::new(REPLICAS, "1", "0");
    let v1 = rollout_pool_file(stack, pool, &shape)?;
    roll(stack, task_queue, &v1, &[]).await?;

    let sampler = Sampler::start(stack, pool).await?;
    let v2 = rollout_pool_file(stack, pool, &shape.version("24.04.2"))?;
    start_rollout(stack, task_queue, &v2, &["--history-limit", "150"]).await?;

    // Kill the worker while the first, second and third new machines are being made. A step
    // lost with the worker is retried within the 15 s heartbeat timeout (waits and ARM writes
    // heartbeat, `activities/src/lifetime.rs`) or the 30 s start-to-close of a Kubernetes write
    // or a read; each wait leaves room for that and a machine's creation on a loaded machine.
    let wait = Duration::from_secs(300);
    for (kill, created) in [(1, 0), (2, 1), (3, 2)] {
        let status = await_rollout(stack, task_queue, pool, "a child running", wait, |s| {
            s.created >= created && !s.in_flight.is_empty()
        })
        .await?;
        println!(
            "kill {kill}: {} updated, in flight {}",
            status.status.counts.updated,
            shown(&status.status.in_flight)
        );
        worker.kill();
        tokio::time::sleep(Duration::from_secs(3)).await;
        worker.restart()?;
    }
    let done = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout to complete",
        Duration::from_secs(600),
        |s| s.phase == RolloutPhase::Completed,
    )
    .await;
    let extremes = sampler.stop().await?;
    let done = done?;
    ensure_bounds(&extremes, REPLICAS as usize, REPLICAS as usize + 1)?;
    ensure_pool_is(stack, pool, REPLICAS as usize, &done.status.template_hash).await?;
    ensure!(
        done.status.created == REPLICAS && done.status.deleted == REPLICAS,
        "each machine replaced once: {done}"
    );
    ensure!(
        done.status.continuation >= 1,
        "the rollout continued as new at least once: {done}"
    );
    Ok(())
}
