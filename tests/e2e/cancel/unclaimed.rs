//! Runs cancelled before any worker took them: with the worker stopped, a create, a delete, a
//! drain and an uncordon are started (each of its own machine; the uncordon's is cordoned by
//! hand), and each is cancelled with `nodewright machine cancel`. With the worker back every run
//! ends Canceled at once, at step `none`, and nothing changed: no VM, NIC, disk or Node of the
//! create; the delete's machine is there and schedulable; the drain's Node schedulable and
//! untainted (it was never cordoned); the uncordon's Node still cordoned, and `machine
//! uncordon`, which waited, says its run was canceled before it changed anything. Then an
//! uncordon with the worker running does its one write.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::documents::MachineRunDocument;
use nodewright_tests::machines::{KillableWorker, Sandbox, cli, create_machine, write_pool_file};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::set_unschedulable;
use nodewright_tests::{Stack, eventually};

use super::{NodeState, run_status, state_of};
use crate::drain::common::{create_machines, delete_machines};
use crate::machines::assert_nothing_left;

const WAIT: Duration = Duration::from_secs(60);

/// A machine back in service, as it was before the run.
const IN_SERVICE: NodeState = NodeState {
    unschedulable: false,
    draining_taint: false,
    terminating: false,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_cancelled_before_a_worker_took_them_change_nothing() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("cancel-unclaimed");
    let mut worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cw{}", nodewright_tests::kube_objects::unique_suffix());
    let pool_file = write_pool_file(&stack, &pool, "10m")?;
    let existing = [
        format!("{pool}-d1zzz"),
        format!("{pool}-n2zzz"),
        format!("{pool}-u3zzz"),
    ];
    let new = format!("{pool}-c4zzz");
    let result = scenario(
        &stack,
        &task_queue,
        &mut worker,
        &pool_file,
        &existing,
        &new,
    )
    .await
    .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    if !worker.is_running() {
        worker.restart()?;
    }
    let mut all = existing.to_vec();
    all.push(new);
    delete_machines(&stack, &task_queue, &all).await;
    drop(worker);
    result
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    worker: &mut KillableWorker,
    pool_file: &std::path::Path,
    existing: &[String; 3],
    new: &str,
) -> Result<()> {
    let [to_delete, to_drain, to_uncordon] = existing;
    create_machines(stack, task_queue, pool_file, existing).await?;
    let kube = stack.kube_client().await?;
    set_unschedulable(&kube, to_uncordon, true).await?;

    // No worker: every run waits to be taken up, and is cancelled meanwhile.
    worker.kill();
    create_machine(stack, task_queue, pool_file, new, &[])?.expect_code(0)?;
    cli(stack, task_queue, &["machine", "delete", to_delete])
        .await?
        .expect_code(0)?;
    cli(stack, task_queue, &["machine", "drain", to_drain])
        .await?
        .expect_code(0)?;
    let uncordoning = tokio::spawn({
        let (stack, task_queue, machine) =
            (stack.clone(), task_queue.to_owned(), to_uncordon.clone());
        async move { cli(&stack, &task_queue, &["machine", "uncordon", &machine]).await }
    });
    let runs = [
        ("create", new),
        ("delete", to_delete.as_str()),
        ("drain", to_drain.as_str()),
        ("uncordon", to_uncordon.as_str()),
    ];
    for (operation, machine) in runs {
        let workflow_id = format!("{operation}/{}/{machine}", stack.cluster);
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
        let asked = cli(stack, task_queue, &["machine", "cancel", machine]).await?;
        asked.expect_code(0)?;
        ensure!(
            asked
                .stdout
                .contains(&format!("asked {workflow_id} to cancel")),
            "machine cancel {machine} asked {workflow_id}: {}",
            asked.stdout
        );
    }

    worker.restart()?;
    for (operation, machine) in runs {
        let workflow_id = format!("{operation}/{}/{machine}", stack.cluster);
        let ended = eventually(
            &format!("{workflow_id} to end"),
            WAIT,
            Duration::from_millis(500),
            || async {
                let status = run_status(stack, &workflow_id).await?;
                Ok((status != "RUNNING" && status != "Running").then_some(status))
            },
        )
        .await?;
        ensure!(
            ended == "CANCELED" || ended == "Canceled",
            "{workflow_id} ended {ended}"
        );
        if operation == "uncordon" {
            // `machine status` shows creates, drains and deletes; the uncordon's CLI says below.
            continue;
        }
        let status: MachineRunDocument = cli(
            stack,
            task_queue,
            &["machine", "status", machine, "--output", "json"],
        )
        .await?
        .expect_code(0)?
        .parse()?;
        ensure!(
            status
                .run()
                .canceled
                .as_ref()
                .is_some_and(|c| c.at_step == "none"),
            "{workflow_id} was canceled before its first step: {status}"
        );
    }

    let uncordoned = uncordoning.await??;
    let uncordon_id = format!("uncordon/{}/{to_uncordon}", stack.cluster);
    ensure!(
        uncordoned.code == Some(3)
            && uncordoned
                .stderr
                .contains(&format!("{uncordon_id} was canceled: canceled during none")),
        "machine uncordon says its run was canceled before it changed anything: code {:?}, stderr {}",
        uncordoned.code,
        uncordoned.stderr
    );

    // Nothing changed.
    assert_nothing_left(stack, &Sandbox::new(stack)?, new).await?;
    let vms = Sandbox::new(stack)?.machine_resources(to_delete).await?.vms;
    ensure!(vms.len() == 1, "{to_delete}'s VM is still there: {vms:?}");
    for machine in [to_delete, to_drain] {
        ensure!(
            state_of(stack, machine).await? == IN_SERVICE,
            "{machine} is in service as before"
        );
    }
    ensure!(
        state_of(stack, to_uncordon).await?.unschedulable,
        "{to_uncordon} is still cordoned: the cancelled uncordon changed nothing"
    );

    // With the worker there, an uncordon does its one write.
    cli(stack, task_queue, &["machine", "uncordon", to_uncordon])
        .await?
        .expect_code(0)?;
    ensure!(
        !state_of(stack, to_uncordon).await?.unschedulable,
        "{to_uncordon} is schedulable after the uncordon"
    );
    Ok(())
}
