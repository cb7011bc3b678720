//! A rollout that meets an exhausted vCPU quota: a pool of 2 machines of `Standard_D2as_v4`
//! (a family no other test uses) with the family's quota at 4 vCPUs. Rolled to a new image
//! with maxSurge 2, it wants 2 new machines and has room for none: it waits (holdup
//! `Capacity`, the status names the quota) and creates nothing. Raised to 6, it goes on one
//! machine at a time and completes: never more than 3 machines, no create failed.

use std::time::Duration;

use anyhow::{Result, ensure};
use nodewright_model::rollout::{Holdup, RolloutOutcome};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::{pool_file_in, set_family_quota, subnet_id};
use crate::rollout::common::{
    PoolShape, Sampler, await_rollout, clean_up_pool, ensure_bounds, ensure_pool_is, roll,
    sample_pool,
};

const SIZE: &str = "Standard_D2as_v4";
const FAMILY: &str = "standardDASv4Family";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_waits_for_an_exhausted_quota_and_finishes_once_it_is_raised() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("hrq");
    let pool = format!("hrq{}", unique_suffix());
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = match set_family_quota(&sandbox, FAMILY, Some(4)).await {
        Ok(()) => waits_for_quota(&stack, &sandbox, &task_queue, &pool).await,
        Err(error) => Err(error),
    };
    clean_up_pool(&stack, &task_queue, &pool).await;
    if let Err(error) = set_family_quota(&sandbox, FAMILY, None).await {
        eprintln!("clean-up: the {FAMILY} quota: {error:#}");
    }
    outcome.map_err(|error| error.context(worker.log_tail()))
}

async fn waits_for_quota(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    pool: &str,
) -> Result<()> {
    let subnet = subnet_id(stack, "nodes", "nodes");
    let first = PoolShape::new(2, "2", "0");
    let file = pool_file_in(stack, pool, &first, &subnet, SIZE)?;
    let built = roll(stack, task_queue, &file, &[]).await?.result;
    ensure!(
        built.outcome == RolloutOutcome::Completed,
        "the pool is built: {built:?}"
    );

    let next = PoolShape::new(2, "2", "0").version("24.04.2");
    let file = pool_file_in(stack, pool, &next, &subnet, SIZE)?;
    let sampler = Sampler::start(stack, pool).await?;
    let rolling = {
        let (stack, task_queue, file) = (stack.clone(), task_queue.to_owned(), file.clone());
        tokio::spawn(async move { roll(&stack, &task_queue, &file, &[]).await })
    };
    let waiting = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout waiting for the quota",
        Duration::from_secs(120),
        |s| s.holdup == Some(Holdup::Capacity),
    )
    .await?;
    let limit = waiting.status.capacity.clone().unwrap_or_default();
    ensure!(
        limit == format!("quota {FAMILY} vCPUs: 0 free, 4 needed"),
        "the status names the quota: {limit}"
    );
    // It keeps waiting: a few more looks start no create.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let kube = stack.kube_client().await?;
    let arm = stack.arm_client()?;
    let machines = sample_pool(stack, &kube, &arm, pool).await?.machines;
    ensure!(
        machines == 2,
        "no machine is created while the quota is exhausted: {machines} machines"
    );

    set_family_quota(sandbox, FAMILY, Some(6)).await?;
    let result = rolling.await??.result;
    let extremes = sampler.stop().await?;
    ensure!(
        result.outcome == RolloutOutcome::Completed
            && result.status.failures_counted == 0
            && result.status.failures.is_empty(),
        "the rollout completes without a failed machine: {:?} {:?}",
        result.outcome,
        result.status.failures
    );
    ensure_bounds(&extremes, 0, 3)?;
    ensure_pool_is(stack, pool, 2, &result.status.template_hash).await?;
    Ok(())
}
