//! Maintenance windows over a rollout (`spec.maintenance`, `applyTo: all`): a pool of 2 rolled
//! to a new image while its only window (daily, UTC) opens in one to two minutes waits: its
//! status says `closed; opens …` with holdup `MaintenanceWindow`, and nothing is created. When
//! the window opens the rollout goes on by itself and completes.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::rollout::{Holdup, RolloutPhase};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{
    PoolShape, await_rollout, clean_up_pool, ensure_pool_is, roll, rollout_pool_file, sample_pool,
    start_rollout,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_waits_for_its_maintenance_window_and_goes_on_when_it_opens() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("window");
    let pool = format!("mw{}", unique_suffix());
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = waits(&stack, &task_queue, &pool)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn waits(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let built = roll(
        stack,
        task_queue,
        &rollout_pool_file(stack, pool, &PoolShape::new(2, "1", "0"))?,
        &[],
    )
    .await?
    .result;
    let old = built.status.template_hash.clone();

    // A daily window opening at the start of the minute after next, UTC.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let opens = (now / 60 + 2) * 60;
    let (minute, hour) = ((opens / 60) % 60, (opens / 3600) % 24);
    let path = rollout_pool_file(stack, pool, &PoolShape::new(2, "1", "0").version("24.04.2"))?;
    let text = std::fs::read_to_string(&path)?;
    ensure!(
        text.contains("  strategy:\n"),
        "unexpected pool file:\n{text}"
    );
    let window = format!(
        "  maintenance:\n    applyTo: all\n    windows:\n      - {{ schedule: \"{minute} {hour} * * *\", duration: 30m }}\n  strategy:\n"
    );
    std::fs::write(&path, text.replacen("  strategy:\n", &window, 1))?;
    start_rollout(stack, task_queue, &path, &[]).await?;

    let waiting = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout waiting for its window",
        Duration::from_secs(60),
        |s| s.holdup == Some(Holdup::MaintenanceWindow),
    )
    .await?;
    let words = waiting.status.window.clone().unwrap_or_default();
    ensure!(
        words.starts_with("closed; opens "),
        "the status says when the window opens: {words}"
    );
    let (kube, arm) = (stack.kube_client().await?, stack.arm_client()?);
    let sample = sample_pool(stack, &kube, &arm, pool).await?;
    ensure!(
        sample.machines == 2 && sample.by_template.get(&old) == Some(&2),
        "nothing is created before the window opens: {sample:?}"
    );
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    ensure!(
        before < opens,
        "the window had not opened yet when the pool was looked at"
    );

    let done = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout completed in its window",
        Duration::from_secs(400),
        |s| s.phase == RolloutPhase::Completed,
    )
    .await?;
    let words = done.status.window.clone().unwrap_or_default();
    ensure!(
        words.starts_with("open until "),
        "the window is open: {words}"
    );
    ensure!(
        done.status.failures_counted == 0,
        "no failure: {:?}",
        done.status.failures
    );
    ensure_pool_is(stack, pool, 2, &done.status.template_hash).await?;
    Ok(())
}
