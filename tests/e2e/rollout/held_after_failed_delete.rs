//! A delete that fails before the cordon is not tried again at every look (issue 32, finding 9
//! of the review): a pool of 2 (maxSurge 1, maxUnavailable 0, maxFailures 3) whose old VMs'
//! `nodewright.io-machine` tags were changed, so each DeleteMachine refuses at its owner check
//! and gives the machine back untouched. The rollout keeps each machine's failure record, holds
//! it out of the plan until its back-off has passed (30 s, then 60 s), names it under `held`, and
//! pauses itself once maxFailures failures are counted. Without the hold the same machine failed
//! again at the next look, a second or two later.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::arm::poll_schedule::OperationKind;
use nodewright_model::ownership::TAG_MACHINE;
use nodewright_model::rollout::{ChildKind, RolloutPhase, retry::backoff_secs};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use super::common::{
    PoolShape, await_rollout, clean_up_pool, cli, pool_machines, roll, rollout_pool_file,
    start_rollout,
};

const WAIT: Duration = Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_refused_before_the_cordon_waits_out_its_back_off() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("rhf");
    let pool = format!("rhf{}", unique_suffix());
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let mut retagged = Vec::new();
    let outcome = scenario(&stack, &task_queue, &pool, &mut retagged)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    // Give the VMs their tags back, so the clean-up's deletes are not refused too.
    for machine in &retagged {
        if let Err(error) = set_machine_tag(&stack, machine, machine).await {
            eprintln!("cleanup: retagging {machine}: {error:#}");
        }
    }
    let _ = cli(&stack, &task_queue, &["pool", "rollout", "cancel", &pool]).await;
    let _ = await_rollout(&stack, &task_queue, &pool, "the cancellation", WAIT, |s| {
        s.phase == RolloutPhase::Canceled
    })
    .await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    retagged: &mut Vec<String>,
) -> Result<()> {
    let shape = PoolShape::new(2, "1", "0");
    let v1 = rollout_pool_file(stack, pool, &shape)?;
    roll(stack, task_queue, &v1, &[]).await?;
    let old = pool_machines(stack, pool).await?;
    ensure!(old.len() == 2, "two machines built: {old:?}");
    for machine in &old {
        set_machine_tag(stack, machine, "someone-else").await?;
        retagged.push(machine.clone());
    }
    let v2 = rollout_pool_file(stack, pool, &shape.version("24.04.2"))?;
    start_rollout(stack, task_queue, &v2, &[]).await?;

    // The first refusal: the machine is held until its back-off has passed, and named.
    let held = await_rollout(
        stack,
        task_queue,
        pool,
        "a failed delete and its machine held",
        WAIT,
        |s| s.failures_counted >= 1 && s.held.iter().any(|h| h.after_failed_delete),
    )
    .await?;
    let hold = held
        .status
        .held
        .iter()
        .find(|h| h.after_failed_delete)
        .context("a held machine")?;
    let failure = held
        .status
        .failures
        .iter()
        .find(|f| f.machine == hold.machine)
        .with_context(|| format!("the failure of {}: {held}", hold.machine))?;
    ensure!(
        failure.kind == ChildKind::Delete && failure.reason.contains("someone-else"),
        "the delete was refused at its owner check: {held}"
    );
    ensure!(
        hold.recheck_at == failure.at + backoff_secs(1) && hold.reason.contains("1 failed delete"),
        "held until 30 s after the failure, and says why: {held}"
    );

    // maxFailures (3) refusals pause the rollout; each machine's next try came only after its
    // back-off.
    let paused = await_rollout(stack, task_queue, pool, "the self-pause", WAIT, |s| {
        s.phase == RolloutPhase::Paused
    })
    .await?;
    let mut by_machine: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for failure in &paused.status.failures {
        by_machine
            .entry(failure.machine.as_str())
            .or_default()
            .push(failure.at);
    }
    ensure!(
        by_machine.values().any(|times| times.len() >= 2),
        "a machine was tried again: {paused}"
    );
    for times in by_machine.values() {
        for (tries, pair) in times.windows(2).enumerate() {
            let failures = u32::try_from(tries + 1)?;
            ensure!(
                pair[1] - pair[0] >= backoff_secs(failures),
                "a machine tried again before its back-off ({}s) passed: {paused}",
                backoff_secs(failures)
            );
        }
    }
    ensure!(
        paused
            .status
            .retries
            .iter()
            .any(|r| r.failures >= 2 && old.contains(&r.machine)),
        "the failure records are kept, counting on: {paused}"
    );
    ensure!(
        pool_machines(stack, pool).await?.len() == 3,
        "the old machines are untouched beside the new one: {paused}"
    );
    Ok(())
}

/// Sets the VM `vm`'s `nodewright.io-machine` tag to `machine`, its other tags kept.
async fn set_machine_tag(stack: &Stack, vm: &str, machine: &str) -> Result<()> {
    let arm = stack.arm_client()?;
    let mut tags = arm.get_vm(vm).await?.tags;
    tags.insert(TAG_MACHINE.to_owned(), machine.to_owned());
    let submitted = arm.patch_vm(vm, &json!({ "tags": tags })).await?;
    if let Some(operation) = submitted.operation {
        arm.wait(&operation, OperationKind::VmAction, Duration::from_secs(60))
            .await?;
    }
    let tags = arm.get_vm(vm).await?.tags;
    ensure!(
        tags.get(TAG_MACHINE).map(String::as_str) == Some(machine),
        "VM {vm} tagged {TAG_MACHINE}={machine}: {tags:?}"
    );
    Ok(())
}
