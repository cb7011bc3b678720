//! A delete that fails during a rollout is tried again (issue 32 item 2): every DELETE of the
//! old machine's VM ends `Failed` until the first DeleteMachine gives up, leaving the machine
//! drained with its draining taint. With maxUnavailable 0 the rollout used to wait for it for
//! ever; now the status names it as stranded, the failure counts, and 30 s later the machine is
//! deleted again and the rollout completes with the new template only. Its history limit is
//! low, so it continues as new on the way, the delete in flight.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::rollout::{ChildKind, RolloutPhase};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use super::common::{
    PoolShape, await_rollout, clean_up_pool, ensure_pool_is, pool_machines, roll,
    rollout_pool_file, start_rollout,
};

#[tokio::test]
async fn a_failed_delete_is_tried_again_and_the_rollout_completes() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("rdr");
    let pool = format!("rdr{}", unique_suffix());
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let sandbox = Sandbox::new(&stack)?;
    let mut fault = None;
    let outcome = retried(&stack, &task_queue, &pool, &sandbox, &mut fault)
        .await
        .with_context(|| worker.log_tail());
    if let Some(id) = fault {
        let _ = sandbox.remove_fault(id).await;
    }
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn retried(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    sandbox: &Sandbox,
    fault: &mut Option<u64>,
) -> Result<()> {
    let shape = PoolShape::new(1, "1", "0");
    let v1 = rollout_pool_file(stack, pool, &shape)?;
    roll(stack, task_queue, &v1, &[]).await?;
    let old = pool_machines(stack, pool).await?;
    let [old] = old.as_slice() else {
        anyhow::bail!("one machine of v1 expected: {old:?}");
    };

    // Every DeleteMachine sends a failed DELETE four times before it fails: the first one fails,
    // the second finds the rule spent.
    let rule = sandbox
        .add_fault(json!({
            "kind": "fail_operation", "operation": "vm.delete", "vm": old,
            "code": "InternalExecutionError", "message": "Please retry later", "count": 4,
        }))
        .await?;
    *fault = Some(rule);
    let v2 = rollout_pool_file(stack, pool, &shape.version("24.04.2"))?;
    // A short history: the rollout continues as new while the failing delete runs, and the
    // next run finds it again (issue 32 item 3) and books its failure.
    start_rollout(stack, task_queue, &v2, &["--history-limit", "100"]).await?;

    let stranded = await_rollout(
        stack,
        task_queue,
        pool,
        "the failed delete's machine named as stranded",
        Duration::from_secs(240),
        |s| {
            s.retries
                .iter()
                .any(|r| &r.machine == old && r.failures == 1)
        },
    )
    .await?;
    let failure = stranded
        .status
        .failures
        .iter()
        .find(|f| f.kind == ChildKind::Delete && &f.machine == old)
        .with_context(|| format!("the failed delete is listed: {stranded}"))?;
    ensure!(
        failure.reason.contains("InternalExecutionError") && stranded.status.failures_counted >= 1,
        "the failure says why and counts: {stranded}"
    );
    let retry = stranded
        .status
        .retries
        .iter()
        .find(|r| &r.machine == old)
        .with_context(|| format!("{stranded}"))?;
    ensure!(
        !retry.left_alone && retry.reason.contains("its delete failed"),
        "{stranded}"
    );

    let done = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout to complete after the delete was tried again",
        Duration::from_secs(240),
        |s| s.phase == RolloutPhase::Completed,
    )
    .await?;
    let fired = sandbox.fault(rule).await?.and_then(|r| r["fired"].as_u64());
    ensure!(fired == Some(4), "the rule fired four times: {fired:?}");
    ensure!(
        done.status.continuation >= 1,
        "the rollout continued as new on the way: {done}"
    );
    ensure!(
        done.status.retries.is_empty() && done.status.deleted == 1,
        "the retried delete finished and nothing is left stranded: {done}"
    );
    ensure_pool_is(stack, pool, 1, &done.status.template_hash).await?;
    let left = pool_machines(stack, pool).await?;
    ensure!(!left.contains(old), "the old VM is gone: {left:?}");
    Ok(())
}
