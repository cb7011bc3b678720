//! A new template whose every VM fails to provision: the rollout pauses itself after
//! `maxFailures` (3) failed creates and says why; the old machines are all still there and
//! Ready, and no VM of the new template is left. With the fault gone, `resume` finishes it.
//! New machines whose Nodes never join: no progress for the progress deadline marks the rollout
//! stalled, and it keeps going.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::rollout::{ChildKind, RolloutPhase};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use super::common::{
    PoolShape, await_rollout, clean_up_pool, cli, ensure_pool_is, roll, rollout_document,
    rollout_pool_file, start_rollout,
};

const REPLICAS: u32 = 3;

#[tokio::test]
async fn every_create_failing_pauses_after_three_and_keeps_the_old_machines() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("rf");
    let pool = format!("rf{}", unique_suffix());
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let sandbox = Sandbox::new(&stack)?;
    let mut fault = None;
    let outcome = failing(&stack, &task_queue, &pool, &sandbox, &mut fault).await;
    if let Some(id) = fault {
        let _ = sandbox.remove_fault(id).await;
    }
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn failing(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    sandbox: &Sandbox,
    fault: &mut Option<u64>,
) -> Result<()> {
    let shape = PoolShape::new(REPLICAS, "1", "0");
    let v1 = rollout_pool_file(stack, pool, &shape)?;
    let built = roll(stack, task_queue, &v1, &[]).await?;
    let v1_hash = built.result.status.template_hash;

    // From now on every VM of the pool fails to provision (only new ones are created).
    *fault = Some(
        sandbox
            .add_fault(json!({
                "kind": "fail_operation", "operation": "vm.put", "vm": format!("{pool}-*"),
                "code": "AllocationFailed",
                "message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this region.",
            }))
            .await?,
    );
    let v2 = rollout_pool_file(stack, pool, &shape.version("24.04.2"))?;
    let v2_text = v2.to_string_lossy().into_owned();
    let waited = cli(
        stack,
        task_queue,
        &[
            "pool",
            "rollout",
            "--pool",
            &v2_text,
            "--wait",
            "--observe-interval",
            "1s",
        ],
    )
    .await?;
    waited.expect_code(3)?;
    ensure!(
        waited.stderr.contains("paused itself") && waited.stderr.contains("AllocationFailed"),
        "--wait ends saying why the rollout paused: {}",
        waited.stderr
    );

    let status = rollout_document(stack, task_queue, pool).await?;
    ensure!(status.status.phase == RolloutPhase::Paused, "{status}");
    let why = status
        .status
        .paused_because
        .as_deref()
        .with_context(|| format!("why it paused: {status}"))?;
    ensure!(
        why.contains("3 failed") && why.contains("AllocationFailed") && why.contains("resume"),
        "the status says why and what to do: {why}"
    );
    let failures = &status.status.failures;
    ensure!(
        failures.len() >= 3 && failures.iter().all(|f| f.kind == ChildKind::Create),
        "three failed creates recorded: {status}"
    );
    // Nothing new starts while paused; the old machines are all there and Ready.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = rollout_document(stack, task_queue, pool).await?;
    ensure!(
        later.status.in_flight.is_empty() && later.status.deleted == 0,
        "paused and nothing deleted: {later}"
    );
    ensure_pool_is(stack, pool, REPLICAS as usize, &v1_hash).await?;

    // The cause fixed, `resume` finishes the rollout.
    if let Some(id) = fault.take() {
        sandbox.remove_fault(id).await?;
    }
    cli(stack, task_queue, &["pool", "rollout", "resume", pool])
        .await?
        .expect_code(0)?;
    let done = await_rollout(
        stack,
        task_queue,
        pool,
        "the resumed rollout to complete",
        Duration::from_secs(180),
        |s| s.phase == RolloutPhase::Completed,
    )
    .await?;
    ensure_pool_is(stack, pool, REPLICAS as usize, &done.status.template_hash).await?;
    Ok(())
}

#[tokio::test]
async fn no_progress_for_the_deadline_marks_it_stalled_and_it_keeps_going() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("rt");
    let pool = format!("rt{}", unique_suffix());
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let sandbox = Sandbox::new(&stack)?;
    let mut fault = None;
    let outcome = stalling(&stack, &task_queue, &pool, &sandbox, &mut fault).await;
    if let Some(id) = fault {
        let _ = sandbox.remove_fault(id).await;
    }
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn stalling(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    sandbox: &Sandbox,
    fault: &mut Option<u64>,
) -> Result<()> {
    let mut shape = PoolShape::new(2, "1", "0");
    shape.creation_timeout = "20s";
    shape.progress_deadline = "10s";
    roll(
        stack,
        task_queue,
        &rollout_pool_file(stack, pool, &shape)?,
        &[],
    )
    .await?;
    // From now on the pool's new machines never register as Nodes.
    *fault = Some(
        sandbox
            .add_fault(json!({ "kind": "never_joins", "vm": format!("{pool}-*") }))
            .await?,
    );
    let v2 = rollout_pool_file(stack, pool, &shape.version("24.04.2"))?;
    start_rollout(stack, task_queue, &v2, &[]).await?;
    let wait = Duration::from_secs(120);
    let stalled = await_rollout(stack, task_queue, pool, "the rollout to stall", wait, |s| {
        s.stalled.is_some()
    })
    .await?;
    ensure!(
        stalled.status.phase == RolloutPhase::Progressing
            && stalled
                .status
                .stalled
                .as_deref()
                .is_some_and(|why| why.contains("no progress")),
        "stalled, still progressing: {stalled}"
    );
    // It keeps going: the create times out (and cleans up after itself), is counted, and the
    // next one starts.
    let going = await_rollout(
        stack,
        task_queue,
        pool,
        "a failure and the next create",
        wait,
        |s| !s.failures.is_empty() && !s.in_flight.is_empty(),
    )
    .await?;
    ensure!(going.status.deleted == 0, "no old machine went: {going}");
    Ok(())
}
