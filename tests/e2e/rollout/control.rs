//! Steering a rollout while it runs: a canary of 1 that waits for `approve`, `pause` that stops
//! new children within one loop, `set-strategy` that changes the pace, `resume`, and `abort`
//! that leaves a consistent mixed pool and says so. Pools of 4 machines without workloads.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::rollout::{
    ChildKind, Health, RolloutOutcome, RolloutPhase, RolloutResult, RolloutStatus,
};
use nodewright_tests::Stack;
use nodewright_tests::documents::{PoolStatusDocument, ResultDocument};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{
    PoolShape, await_rollout, clean_up_pool, cli, ensure_pool_is, roll, rollout_document,
    rollout_pool_file, sample_pool, start_rollout,
};

const REPLICAS: u32 = 4;
/// How long a phase of a rollout may take to show.
const WAIT: Duration = Duration::from_secs(180);

/// Builds a 4-machine pool (maxSurge 1, maxUnavailable 0); returns the v2 pool file and the
/// v1 template hash.
async fn built_pool(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
) -> Result<(std::path::PathBuf, String)> {
    let shape = PoolShape::new(REPLICAS, "1", "0");
    let v1 = rollout_pool_file(stack, pool, &shape)?;
    let built = roll(stack, task_queue, &v1, &[]).await?;
    let v1_hash = built.result.status.template_hash;
    ensure_pool_is(stack, pool, REPLICAS as usize, &v1_hash).await?;
    let v2 = rollout_pool_file(stack, pool, &shape.version("24.04.2"))?;
    Ok((v2, v1_hash))
}

/// The workflow IDs of the children in flight.
fn in_flight(status: &RolloutStatus) -> BTreeSet<String> {
    status
        .in_flight
        .iter()
        .map(|c| c.workflow_id.clone())
        .collect()
}

/// How many creates are in flight.
fn creating(status: &RolloutStatus) -> usize {
    status
        .in_flight
        .iter()
        .filter(|c| c.kind == ChildKind::Create)
        .count()
}

#[tokio::test]
async fn canary_approve_pause_set_strategy_resume() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("rc");
    let pool = format!("rc{}", unique_suffix());
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = steer(&stack, &task_queue, &pool).await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn steer(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let (v2, v1_hash) = built_pool(stack, task_queue, pool).await?;
    start_rollout(stack, task_queue, &v2, &["--canary", "1"]).await?;

    // The canary: one machine replaced, then it waits.
    let waiting = await_rollout(
        stack,
        task_queue,
        pool,
        "the canary to wait for approval",
        WAIT,
        |s| s.phase == RolloutPhase::AwaitingApproval,
    )
    .await?;
    let counts = &waiting.status.counts;
    ensure!(
        counts.updated == 1 && counts.old == 3 && counts.total == 4,
        "canary 1: {waiting}"
    );
    // A second rollout of the pool is refused and says how to follow the running one.
    let v2_text = v2.to_string_lossy().into_owned();
    let second = cli(stack, task_queue, &["pool", "rollout", "--pool", &v2_text]).await?;
    second.expect_code(5)?;
    ensure!(
        second
            .stderr
            .contains(&format!("nodewright pool rollout status {pool}")),
        "the refusal says how to follow the running rollout: {}",
        second.stderr
    );
    // `pool status` shows the mixed pool.
    let inspected: PoolStatusDocument = cli(
        stack,
        task_queue,
        &["pool", "status", pool, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()?;
    let machines = &inspected.report.machines;
    let on_v1 = machines
        .iter()
        .filter(|m| m.template_hash == v1_hash)
        .count();
    ensure!(
        machines.len() == 4 && on_v1 == 3 && machines.iter().all(|m| m.health == Health::Ready),
        "pool status: 4 Ready machines, 3 on the old template: {inspected}"
    );
    ensure!(
        inspected
            .rollout
            .as_ref()
            .is_some_and(|r| r.phase == RolloutPhase::AwaitingApproval),
        "pool status shows the rollout: {inspected}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = rollout_document(stack, task_queue, pool).await?;
    ensure!(
        still.status.phase == RolloutPhase::AwaitingApproval
            && in_flight(&still.status).is_empty()
            && still.status.counts.updated == 1,
        "nothing moves before approval: {still}"
    );

    // Approve, then pause as soon as a child runs: no new child after the next loop.
    cli(stack, task_queue, &["pool", "rollout", "approve", pool])
        .await?
        .expect_code(0)?;
    await_rollout(
        stack,
        task_queue,
        pool,
        "a child after approval",
        WAIT,
        |s| !in_flight(s).is_empty(),
    )
    .await?;
    cli(stack, task_queue, &["pool", "rollout", "pause", pool])
        .await?
        .expect_code(0)?;
    let paused = await_rollout(stack, task_queue, pool, "the pause", WAIT, |s| {
        s.phase == RolloutPhase::Paused
    })
    .await?;
    let running_at_pause = in_flight(&paused.status);
    let drained = await_rollout(
        stack,
        task_queue,
        pool,
        "children in flight to finish",
        WAIT,
        |s| in_flight(s).is_empty(),
    )
    .await?;
    let (created, deleted) = (drained.status.created, drained.status.deleted);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let quiet = rollout_document(stack, task_queue, pool).await?;
    ensure!(
        in_flight(&quiet.status).is_empty()
            && quiet.status.created == created
            && quiet.status.deleted == deleted
            && quiet.status.phase == RolloutPhase::Paused,
        "paused: nothing new starts (in flight at the pause: {running_at_pause:?}): {quiet}"
    );
    ensure!(
        quiet
            .status
            .paused_because
            .as_deref()
            .is_some_and(|why| why.contains("paused by")),
        "says who paused: {quiet}"
    );

    // A wider surge while paused, then resume: creates run three at a time.
    cli(
        stack,
        task_queue,
        &["pool", "rollout", "set-strategy", pool, "--max-surge", "3"],
    )
    .await?
    .expect_code(0)?;
    let widened = rollout_document(stack, task_queue, pool).await?;
    ensure!(
        widened.status.strategy.budget.surge == 3,
        "set-strategy: {widened}"
    );
    cli(stack, task_queue, &["pool", "rollout", "resume", pool])
        .await?
        .expect_code(0)?;
    let mut most_creating = 0;
    let done = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout to complete",
        WAIT,
        |s| {
            most_creating = most_creating.max(creating(s));
            s.phase == RolloutPhase::Completed
        },
    )
    .await;
    let done = done?;
    ensure!(
        most_creating >= 2,
        "with maxSurge 3 several creates run at once (saw at most {most_creating}): {done}"
    );
    let v2_hash = done.status.template_hash.as_str();
    ensure!(v2_hash != v1_hash, "{done}");
    ensure_pool_is(stack, pool, REPLICAS as usize, v2_hash).await?;

    // Rollback: back to the template before the last completed rollout.
    let back: ResultDocument<RolloutResult> = cli(
        stack,
        task_queue,
        &["pool", "rollback", pool, "--wait", "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()?;
    ensure!(
        back.result.outcome == RolloutOutcome::Completed
            && back.result.status.template_hash == v1_hash
            && back
                .result
                .history
                .previous
                .as_ref()
                .is_some_and(|p| p.template_hash == v2_hash),
        "rollback to {v1_hash}: {back}"
    );
    ensure_pool_is(stack, pool, REPLICAS as usize, &v1_hash).await?;
    Ok(())
}

#[tokio::test]
async fn abort_leaves_a_consistent_mixed_pool() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ra");
    let pool = format!("ra{}", unique_suffix());
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = abort(&stack, &task_queue, &pool).await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn abort(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let (v2, v1_hash) = built_pool(stack, task_queue, pool).await?;
    start_rollout(stack, task_queue, &v2, &[]).await?;
    await_rollout(
        stack,
        task_queue,
        pool,
        "one machine replaced and a child running",
        WAIT,
        |s| s.counts.updated >= 1 && s.deleted >= 1 && !s.in_flight.is_empty(),
    )
    .await?;
    cli(stack, task_queue, &["pool", "rollout", "abort", pool])
        .await?
        .expect_code(0)?;
    let ended = await_rollout(stack, task_queue, pool, "the abort", WAIT, |s| {
        s.phase == RolloutPhase::Aborted
    })
    .await?;
    ensure!(
        ended.status.in_flight.is_empty(),
        "in-flight children finished first: {ended}"
    );
    let summary = ended
        .status
        .summary
        .as_deref()
        .with_context(|| format!("an aborted rollout's summary: {ended}"))?;
    ensure!(
        summary.starts_with("aborted"),
        "the summary reports the pool: {ended}"
    );

    // Consistent: every machine Ready, none half-made, between replicas and replicas + surge
    // (a create in flight at the abort finishes; nothing new deletes the machine it replaces),
    // some of each template, exactly as the status reports.
    let kube = stack.kube_client().await?;
    let arm = stack.arm_client()?;
    let sample = sample_pool(stack, &kube, &arm, pool).await?;
    let v2_hash = ended.status.template_hash.as_str();
    let new = sample.by_template.get(v2_hash).copied().unwrap_or_default();
    let old = sample
        .by_template
        .get(&v1_hash)
        .copied()
        .unwrap_or_default();
    let replicas = REPLICAS as usize;
    ensure!(
        (replicas..=replicas + 1).contains(&sample.machines)
            && sample.ready_nodes == sample.machines,
        "4 or 5 machines, all Ready, after the abort: {sample:?}"
    );
    ensure!(
        new >= 1 && old >= 1 && new + old == sample.machines,
        "a mixed pool: {sample:?}"
    );
    let counts = &ended.status.counts;
    ensure!(
        usize::try_from(counts.updated)? == new
            && usize::try_from(counts.old)? == old
            && usize::try_from(counts.total)? == sample.machines,
        "the status reports the mix ({sample:?}): {ended}"
    );
    ensure!(
        summary.contains(&format!("{} machines", sample.machines)),
        "the summary counts the machines: {summary}"
    );
    Ok(())
}
