//! UncordonNode cancelled before any worker picked it up: a cordoned machine, its worker
//! stopped, `machine uncordon` waiting, then `machine cancel --wait`… with the worker back the
//! run ends Canceled at once (the request cut its first read short) and the Node is still
//! cordoned: nothing changed. Then an uncordon with the worker running finishes as usual.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::machines::{KillableWorker, cli, create_machine, write_pool_file};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::set_unschedulable;
use nodewright_tests::{Stack, eventually};

use super::{run_status, state_of};
use crate::drain::common::delete_machines;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncordon_cancelled_before_a_worker_took_it_changes_nothing() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("cancel-uncordon");
    let mut worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cu{}", nodewright_tests::kube_objects::unique_suffix());
    let pool_file = write_pool_file(&stack, &pool, "10m")?;
    let machine = format!("{pool}-u1zzz");
    let result = scenario(&stack, &task_queue, &mut worker, &pool_file, &machine)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    if !worker.is_running() {
        worker.restart()?;
    }
    delete_machines(&stack, &task_queue, std::slice::from_ref(&machine)).await;
    drop(worker);
    result
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    worker: &mut KillableWorker,
    pool_file: &std::path::Path,
    machine: &str,
) -> Result<()> {
    create_machine(stack, task_queue, pool_file, machine, &["--wait"])?.expect_code(0)?;
    let kube = stack.kube_client().await?;
    set_unschedulable(&kube, machine, true).await?;

    // No worker: the uncordon waits to be picked up, and is cancelled meanwhile.
    worker.kill();
    let uncordoning = tokio::spawn({
        let (stack, task_queue, machine) =
            (stack.clone(), task_queue.to_owned(), machine.to_owned());
        async move { cli(&stack, &task_queue, &["machine", "uncordon", &machine]).await }
    });
    let workflow_id = format!("uncordon/{}/{machine}", stack.cluster);
    eventually(
        &format!("{workflow_id} to start"),
        WAIT,
        Duration::from_millis(300),
        || async {
            Ok(run_status(stack, &workflow_id)
                .await
                .ok()
                .filter(|s| s == "RUNNING" || s == "Running"))
        },
    )
    .await?;
    let canceling = tokio::spawn({
        let (stack, task_queue, machine) =
            (stack.clone(), task_queue.to_owned(), machine.to_owned());
        async move {
            cli(
                &stack,
                &task_queue,
                &["machine", "cancel", &machine, "--wait"],
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    worker.restart()?;
    let canceled = canceling.await??;
    canceled.expect_code(0)?;
    ensure!(
        canceled
            .stdout
            .contains(&format!("asked {workflow_id} to cancel"))
            && canceled.stdout.contains(&format!("{workflow_id} canceled")),
        "machine cancel cancelled the uncordon: {}",
        canceled.stdout
    );
    let uncordoned = uncordoning.await??;
    ensure!(
        uncordoned.code == Some(3)
            && uncordoned
                .stderr
                .contains(&format!("{workflow_id} was canceled: canceled during none")),
        "machine uncordon says its run was canceled before it changed anything: code {:?}, stderr {}",
        uncordoned.code,
        uncordoned.stderr
    );
    let status = run_status(stack, &workflow_id).await?;
    ensure!(
        status == "CANCELED" || status == "Canceled",
        "{workflow_id} ended {status}"
    );
    ensure!(
        state_of(stack, machine).await?.unschedulable,
        "{machine} is still cordoned: the cancelled uncordon changed nothing"
    );

    // With the worker there, an uncordon does its one write.
    cli(stack, task_queue, &["machine", "uncordon", machine])
        .await?
        .expect_code(0)?;
    ensure!(
        !state_of(stack, machine).await?.unschedulable,
        "{machine} is schedulable after the uncordon"
    );
    Ok(())
}
