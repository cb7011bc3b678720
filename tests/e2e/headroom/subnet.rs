//! A rollout whose surge is larger than the subnet's free addresses: a pool of 4 in a /28
//! (11 usable addresses) beside 4 NICs of someone else leaves 3 free; a rollout with
//! maxSurge 10 wants 4 new machines at once. It starts 3 (the status names the subnet), the
//! fourth once an old machine's address is free: never more than 7 machines, no create
//! failed, no NIC refused with `SubnetIsFull`, and the rollout completes. Before headroom was
//! checked, the fourth NIC was refused and counted as a failed machine.

use std::time::Duration;

use anyhow::{Result, ensure};
use nodewright_model::rollout::RolloutOutcome;
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::{pool_file_in, remove_network, small_network, subnet_usage};
use crate::rollout::common::{
    PoolShape, Sampler, await_rollout, clean_up_pool, ensure_bounds, ensure_pool_is, roll,
};

const REPLICAS: u32 = 4;
const FOREIGN: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_surge_larger_than_the_free_addresses_never_creates_what_cannot_get_one() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("hrs");
    let suffix = unique_suffix();
    let pool = format!("hrs{suffix}");
    let network = format!("hrs{suffix}");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = match small_network(&stack, &sandbox, &network, "10.201.0.0/28", FOREIGN).await {
        Ok(subnet) => surge_in(&stack, &sandbox, &task_queue, &pool, &network, &subnet).await,
        Err(error) => Err(error),
    };
    clean_up_pool(&stack, &task_queue, &pool).await;
    remove_network(&stack, &sandbox, &network, FOREIGN).await;
    outcome.map_err(|error| error.context(worker.log_tail()))
}

async fn surge_in(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    pool: &str,
    network: &str,
    subnet: &str,
) -> Result<()> {
    let first = PoolShape::new(REPLICAS, "10", "0");
    let file = pool_file_in(stack, pool, &first, subnet, "Standard_D2s_v5")?;
    let built = roll(stack, task_queue, &file, &[]).await?.result;
    ensure!(
        built.outcome == RolloutOutcome::Completed,
        "the pool is built: {built:?}"
    );
    let (used, usable) = subnet_usage(stack, network).await?;
    ensure!(
        (used, usable) == (8, 11),
        "4 machines and 4 foreign NICs use 8 of the subnet's 11 addresses, found {used} of {usable}"
    );

    let next = PoolShape::new(REPLICAS, "10", "0").version("24.04.2");
    let file = pool_file_in(stack, pool, &next, subnet, "Standard_D2s_v5")?;
    let sampler = Sampler::start(stack, pool).await?;
    let rolling = {
        let (stack, task_queue, file) = (stack.clone(), task_queue.to_owned(), file.clone());
        tokio::spawn(async move { roll(&stack, &task_queue, &file, &[]).await })
    };
    let cut = await_rollout(
        stack,
        task_queue,
        pool,
        "the batch cut to the subnet",
        Duration::from_secs(120),
        |s| s.capacity.is_some(),
    )
    .await?;
    let limit = cut.status.capacity.clone().unwrap_or_default();
    // The first cut reads "3 free addresses, 4 needed"; a later look may already show the
    // fourth waiting ("0 free addresses, 1 needed").
    ensure!(
        limit.starts_with("subnet small: ") && limit.contains(" free addresses, "),
        "the status names the subnet's limit: {limit}"
    );
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
    ensure_bounds(&extremes, 0, REPLICAS as usize + 3)?;
    ensure_pool_is(stack, pool, REPLICAS as usize, &result.status.template_hash).await?;
    let refused: Vec<_> = sandbox
        .requests(pool)
        .await?
        .into_iter()
        .filter(|r| r["code"] == "SubnetIsFull")
        .collect();
    ensure!(
        refused.is_empty(),
        "no NIC was refused for a full subnet: {refused:?}"
    );
    Ok(())
}
