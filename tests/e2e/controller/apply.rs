//! `pool apply` to a running controller: a file with a bad `spec.health` is refused before
//! anything is sent, naming the field; `--dry-run` of a new template says a rollout would start
//! and changes nothing; applying it starts a RollingUpdate child that replaces every machine
//! within the strategy (maxSurge 1, maxUnavailable 0: never fewer than 2 Ready, never more than
//! 3 machines), and the controller is back to Active with 2 updated machines.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, cli};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{
    OBSERVE, apply, await_status, await_world, controller_pool_file, delete_pool, status,
};
use crate::rollout::common::{Sampler, ensure_bounds, ensure_pool_is};

const UP: Duration = Duration::from_secs(300);

#[tokio::test]
async fn apply_refuses_a_bad_file_dry_runs_and_rolls_a_new_template_within_the_budget() -> Result<()>
{
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-apply");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("ca{}", unique_suffix());
    let outcome = scenario(&stack, &task_queue, &pool)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

async fn scenario(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let v1 = controller_pool_file(stack, pool, 2, "24.04.1", "")?;
    apply(stack, task_queue, &v1).await?;
    await_world(stack, pool, "2 Ready machines", UP, |w| w.is_steady(2)).await?;
    let before = status(stack, task_queue, pool).await?;

    // A bad file: refused by the CLI, naming the field; nothing sent.
    let bad = controller_pool_file(stack, pool, 2, "24.04.1", "  health:\n    maxInFlight: 0\n")?;
    let bad_path = bad.to_string_lossy();
    let refused = cli(stack, task_queue, &["pool", "apply", "-f", &bad_path]).await?;
    refused.expect_code(2)?;
    ensure!(
        refused.stderr.contains("spec.health.maxInFlight"),
        "the refusal does not name the field: {}",
        refused.stderr
    );

    // A dry run of a new template: a rollout would start; nothing changes.
    let v2 = controller_pool_file(stack, pool, 2, "24.04.2", "")?;
    let v2_path = v2.to_string_lossy();
    let dry = cli(
        stack,
        task_queue,
        &[
            "pool",
            "apply",
            "-f",
            &v2_path,
            "--dry-run",
            "--output",
            "json",
        ],
    )
    .await?
    .expect_code(0)?
    .json()?;
    ensure!(
        dry["changes"]["template"].is_array()
            && dry["lines"].to_string().contains("a rollout starts"),
        "the dry run said: {dry}"
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let unchanged = status(stack, task_queue, pool).await?;
    ensure!(
        unchanged.spec.template_hash == before.spec.template_hash,
        "a dry run changed the template: {} → {}",
        before.spec.template_hash,
        unchanged.spec.template_hash
    );

    // The new template: a rollout within the budget.
    let sampler = Sampler::start(stack, pool).await?;
    let applied = cli(
        stack,
        task_queue,
        &[
            "pool",
            "apply",
            "-f",
            &v2_path,
            "--observe-interval",
            OBSERVE,
            "--output",
            "json",
        ],
    )
    .await?
    .expect_code(0)?
    .json()?;
    let new_hash = applied["changes"]["template"][1]
        .as_str()
        .context("the apply names no new template")?
        .to_owned();
    let rolled = await_status(stack, task_queue, pool, "the rollout done", UP, |d| {
        d.status.phase == "Active"
            && d.status.updated_replicas == 2
            && d.status.ready_replicas == 2
            && d.spec.template_hash == new_hash
    })
    .await;
    let extremes = sampler.stop().await?;
    let rolled = rolled?;
    ensure_bounds(&extremes, 2, 3)?;
    ensure_pool_is(stack, pool, 2, &new_hash).await?;
    ensure!(
        rolled
            .status
            .last_actions
            .iter()
            .any(|a| a.text.contains("rolling pool") && a.text.contains(&new_hash)),
        "no rollout in the last actions: {:?}",
        rolled.status.last_actions
    );
    Ok(())
}
