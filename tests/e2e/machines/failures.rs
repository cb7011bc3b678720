//! Creates that cannot finish clean up after themselves and say why: a VM whose provisioning
//! ends `AllocationFailed`, and a VM whose node never joins within the creation timeout.

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::machines::{
    KillableWorker, Sandbox, allocation_failure, create_machine, write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use super::{assert_nothing_left, unique_pool};

#[tokio::test]
async fn allocation_failure_fails_the_run_with_the_arm_code_and_leaves_nothing() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("alloc");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("a");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-f4x2k");
    let rule = sandbox.add_fault(allocation_failure(&pool)).await?;

    let created = create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])?;
    sandbox.remove_fault(rule).await?;
    created.expect_code(3).with_context(|| worker.log_tail())?;
    ensure!(
        created.stderr.contains("AllocationFailed") && created.stderr.contains("provision-vm"),
        "the failure names the step and the ARM code: {}",
        created.stderr
    );
    assert_nothing_left(&stack, &sandbox, &machine).await
}

#[tokio::test]
async fn a_node_that_never_joins_fails_at_the_creation_timeout_and_leaves_nothing() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("nojoin");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("n");
    let pool_file = write_pool_file(&stack, &pool, "20s")?;
    let machine = format!("{pool}-q7w9z");
    let rule = sandbox
        .add_fault(json!({ "kind": "never_joins", "vm": format!("{pool}-*") }))
        .await?;

    let created = create_machine(
        &stack,
        &task_queue,
        &pool_file,
        &machine,
        &["--wait", "--output", "json"],
    )?;
    sandbox.remove_fault(rule).await?;
    created.expect_code(3).with_context(|| worker.log_tail())?;
    ensure!(
        created.stderr.contains("register-node")
            && created.stderr.contains("within the creation timeout 20s"),
        "the failure names the step and the timeout: {}",
        created.stderr
    );
    assert_nothing_left(&stack, &sandbox, &machine).await
}
