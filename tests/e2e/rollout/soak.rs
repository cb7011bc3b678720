//! The soak between batches (`strategy.soak`). With 10s, a pool of 2 rolled with maxSurge 1
//! creates one new machine, and once it is available keeps both old machines and starts nothing
//! for the soak (the status shows the batch and until when), then goes on and completes, each
//! batch soaked. With 2m, the first batch's VM is powered off as its soak starts: once its Node
//! is NotReady the rollout pauses itself naming the machine, both old machines still there;
//! aborted, it ends with them kept.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::rollout::{Holdup, RolloutPhase};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, vm_action};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{
    PoolShape, await_rollout, clean_up_pool, cli, ensure_pool_is, roll, rollout_pool_file,
    sample_pool, start_rollout,
};

const UP: Duration = Duration::from_secs(240);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_batch_soaks_before_the_rollout_goes_on() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("soak");
    let pool = format!("sk{}", unique_suffix());
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = soaks(&stack, &task_queue, &pool)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_turns_not_ready_during_its_soak_pauses_the_rollout() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("soakbad");
    let pool = format!("sb{}", unique_suffix());
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = stops(&stack, &task_queue, &pool)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

/// The pool file of `shape` with `soak` in its strategy.
fn with_soak(
    stack: &Stack,
    pool: &str,
    shape: &PoolShape,
    soak: &str,
) -> Result<std::path::PathBuf> {
    let path = rollout_pool_file(stack, pool, shape)?;
    let text = std::fs::read_to_string(&path)?;
    ensure!(
        text.contains("  strategy:\n"),
        "unexpected pool file:\n{text}"
    );
    std::fs::write(
        &path,
        text.replacen(
            "  strategy:\n",
            &format!("  strategy:\n    soak: {soak}\n"),
            1,
        ),
    )?;
    Ok(path)
}

/// Builds a pool of 2 and starts its rollout to a new image with `soak`; waits for the first
/// batch's soak and checks that nothing moves for a few looks. Returns the old template and
/// the batch's machine.
async fn first_soak(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    soak: &str,
) -> Result<(String, String)> {
    let built = roll(
        stack,
        task_queue,
        &rollout_pool_file(stack, pool, &PoolShape::new(2, "1", "0"))?,
        &[],
    )
    .await?
    .result;
    let old = built.status.template_hash.clone();
    let file = with_soak(
        stack,
        pool,
        &PoolShape::new(2, "1", "0").version("24.04.2"),
        soak,
    )?;
    start_rollout(stack, task_queue, &file, &[]).await?;
    let soaking = await_rollout(
        stack,
        task_queue,
        pool,
        "the first batch soaking",
        UP,
        |s| s.soak.is_some() && s.holdup == Some(Holdup::Soak),
    )
    .await?;
    let soak = soaking.status.soak.clone().context("the soak")?;
    ensure!(
        soak.machines.len() == 1,
        "the batch is the one new machine: {soak:?}"
    );
    let (kube, arm) = (stack.kube_client().await?, stack.arm_client()?);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let sample = sample_pool(stack, &kube, &arm, pool).await?;
        ensure!(
            sample.machines == 3 && sample.by_template.get(&old) == Some(&2),
            "nothing moves while the batch soaks: {sample:?}"
        );
    }
    Ok((old, soak.machines[0].clone()))
}

async fn soaks(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    first_soak(stack, task_queue, pool, "10s").await?;
    let done = await_rollout(stack, task_queue, pool, "the rollout completed", UP, |s| {
        s.phase == RolloutPhase::Completed
    })
    .await?;
    ensure!(
        done.status.failures_counted == 0 && done.status.soaked_through > 0,
        "completed without failures, having soaked: {:?}",
        done.status.failures
    );
    ensure_pool_is(stack, pool, 2, &done.status.template_hash).await?;
    Ok(())
}

async fn stops(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    // Long enough for the Node lifecycle controller to mark the powered-off Node NotReady.
    let (old, canary) = first_soak(stack, task_queue, pool, "2m").await?;
    vm_action(stack, &canary, "powerOff").await?;
    let paused = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout paused by the soak",
        UP,
        |s| s.phase == RolloutPhase::Paused,
    )
    .await?;
    let why = paused.status.paused_because.clone().unwrap_or_default();
    ensure!(
        why.contains(&canary) && why.contains("soak"),
        "the pause names the machine and the soak: {why}"
    );
    let (kube, arm) = (stack.kube_client().await?, stack.arm_client()?);
    let sample = sample_pool(stack, &kube, &arm, pool).await?;
    ensure!(
        sample.by_template.get(&old) == Some(&2),
        "both old machines are kept: {sample:?}"
    );
    cli(stack, task_queue, &["pool", "rollout", "abort", pool])
        .await?
        .expect_code(0)?;
    let aborted = await_rollout(stack, task_queue, pool, "the rollout aborted", UP, |s| {
        s.phase == RolloutPhase::Aborted
    })
    .await?;
    ensure!(
        aborted.status.counts.old == 2,
        "aborted with both old machines: {:?}",
        aborted.status.counts
    );
    Ok(())
}
