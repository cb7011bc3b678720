//! The pool controller at zero headroom: a pool of 1 machine of `Standard_D2ds_v5` (a family
//! no other test uses) applied while the family's vCPU quota is 0. The controller starts no
//! create; its `CapacityAvailable` condition is False and names the quota. Raised to 2 vCPUs,
//! the machine is created by itself and the condition turns True (`Fits`).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::{pool_file_in, set_family_quota, subnet_id};
use crate::controller::common::{apply, await_status, await_world, delete_pool, world};
use crate::rollout::common::PoolShape;

const SIZE: &str = "Standard_D2ds_v5";
const FAMILY: &str = "standardDDSv5Family";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_waits_at_zero_headroom_and_creates_when_the_quota_is_raised() -> Result<()>
{
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("hrc");
    let pool = format!("hrc{}", unique_suffix());
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = match set_family_quota(&sandbox, FAMILY, Some(0)).await {
        Ok(()) => scenario(&stack, &sandbox, &task_queue, &pool).await,
        Err(error) => Err(error),
    };
    delete_pool(&stack, &task_queue, &pool).await;
    if let Err(error) = set_family_quota(&sandbox, FAMILY, None).await {
        eprintln!("clean-up: the {FAMILY} quota: {error:#}");
    }
    outcome.with_context(|| format!("worker log:\n{}", worker.log_tail()))
}

async fn scenario(stack: &Stack, sandbox: &Sandbox, task_queue: &str, pool: &str) -> Result<()> {
    let subnet = subnet_id(stack, "nodes", "nodes");
    let file = pool_file_in(stack, pool, &PoolShape::new(1, "1", "0"), &subnet, SIZE)?;
    apply(stack, task_queue, &file).await?;
    let full = await_status(
        stack,
        task_queue,
        pool,
        "CapacityAvailable False",
        Duration::from_secs(120),
        |doc| {
            doc.status
                .conditions
                .iter()
                .any(|c| c.type_ == "CapacityAvailable" && c.status == "False")
        },
    )
    .await?;
    let condition = full
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "CapacityAvailable")
        .context("the condition")?;
    ensure!(
        condition.reason == "QuotaExhausted"
            && condition.message
                == format!(
                    "quota {FAMILY} vCPUs: 0 free, 2 needed; 1 new machines wait until room returns"
                ),
        "the condition names the quota: {} {}",
        condition.reason,
        condition.message
    );
    let seen = world(stack, pool).await?;
    ensure!(
        seen.vms.is_empty(),
        "no VM is created at zero headroom: {seen:?}"
    );

    set_family_quota(sandbox, FAMILY, Some(2)).await?;
    await_world(
        stack,
        pool,
        "the machine created once the quota is raised",
        Duration::from_secs(300),
        |w| w.is_steady(1),
    )
    .await?;
    await_status(
        stack,
        task_queue,
        pool,
        "CapacityAvailable True (Fits)",
        Duration::from_secs(60),
        |doc| {
            doc.status
                .conditions
                .iter()
                .any(|c| c.type_ == "CapacityAvailable" && c.status == "True" && c.reason == "Fits")
        },
    )
    .await?;
    Ok(())
}
