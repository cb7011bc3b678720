//! A worker killed mid-reconcile, and continue-as-new: `pool apply` of 3 machines with a history
//! limit of 80 events; the worker is killed while the creates are in flight and started again.
//! The pool reaches 3 Ready machines, and the sandbox saw VM creates for exactly 3 machine names
//! (no machine created twice: the children are named by machine); the controller continued as
//! new (a new run under the same workflow ID) and the new run carried the last actions.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox, cli};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{OBSERVE, await_status, await_world, controller_pool_file, delete_pool};

const UP: Duration = Duration::from_secs(300);

#[tokio::test]
async fn a_worker_killed_mid_reconcile_creates_no_machine_twice_and_the_state_survives_continue_as_new()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-crash");
    let mut worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("ck{}", unique_suffix());
    let file = controller_pool_file(&stack, &pool, 3, "24.04.1", "")?;
    let outcome = scenario(&stack, &task_queue, &pool, &file, &mut worker)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

async fn run_id(stack: &Stack, workflow_id: &str) -> Result<String> {
    let described = nodewright_tests::stack::describe_workflow(stack, workflow_id).await?;
    described["workflowExecutionInfo"]["execution"]["runId"]
        .as_str()
        .map(str::to_owned)
        .context("no run ID")
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
    worker: &mut KillableWorker,
) -> Result<()> {
    let path = file.to_string_lossy();
    cli(
        stack,
        task_queue,
        &[
            "pool",
            "apply",
            "-f",
            &path,
            "--observe-interval",
            OBSERVE,
            "--history-limit",
            "80",
        ],
    )
    .await?
    .expect_code(0)?;
    let workflow_id = format!("pool/{}/{pool}", stack.cluster);
    let first_run = run_id(stack, &workflow_id).await?;
    await_status(stack, task_queue, pool, "creates in flight", UP, |d| {
        d.status
            .last_actions
            .iter()
            .any(|a| a.text.starts_with("creating machine(s)"))
    })
    .await?;
    worker.kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    worker.restart()?;

    let steady = await_world(stack, pool, "3 Ready machines", UP, |w| w.is_steady(3)).await?;
    let puts = Sandbox::new(stack)?
        .requests(&format!("virtualMachines/{pool}-"))
        .await?;
    let created: BTreeSet<String> = puts
        .iter()
        .filter(|r| r["operation"] == "vm.put" && r["method"] == "PUT")
        .filter_map(|r| r["path"].as_str())
        .filter_map(|path| path.split("virtualMachines/").nth(1))
        .map(|rest| rest.split(['?', '/']).next().unwrap_or_default().to_owned())
        .collect();
    ensure!(
        created == steady.vms,
        "VM creates were sent for {created:?}, but the pool is {:?}: a machine was created twice",
        steady.vms
    );

    // Continue-as-new: a new run, which still shows the first run's actions.
    let deadline = tokio::time::Instant::now() + UP;
    loop {
        if run_id(stack, &workflow_id).await? != first_run {
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the controller never continued as new"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let carried = await_status(stack, task_queue, pool, "the carried status", UP, |d| {
        d.status.ready_replicas == 3
    })
    .await?;
    ensure!(
        carried
            .status
            .last_actions
            .iter()
            .any(|a| a.text.starts_with("creating machine(s)")),
        "the new run lost the last actions: {:?}",
        carried.status.last_actions
    );
    ensure!(
        carried
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True"),
        "{:?}",
        carried.status.conditions
    );
    Ok(())
}
