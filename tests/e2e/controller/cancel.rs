//! `temporal workflow cancel` of a running controller (what the Temporal UI's "Request
//! Cancellation" sends), as its runbook's Cancellation section says it behaves:
//!
//! - **Idle** (a pool of 1, steady): the controller ends Canceled, the machine is kept as it is
//!   (the same VM, its Node Ready), `pool status` shows the pool without a controller (the
//!   InspectPool report) and `pool pause` says none runs; `pool apply` starts it again and it
//!   takes the machine as it is (no create).
//! - **A create in flight** (a pool of 2 whose VMs boot but whose Nodes do not join yet, the
//!   sandbox's `never_joins` fault): the controller ends Canceled while both CreateMachine
//!   children wait for their Nodes; the children (abandoned) still run; the fault removed, they
//!   finish: each VM with its NIC and a Ready Node of the pool, no NIC without its VM. `pool
//!   status` shows no controller.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::ownership::{TAG_CLUSTER, TAG_MACHINE, TAG_POOL};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};
use serde_json::{Value, json};

use super::common::{
    World, apply, await_status, await_world, cli, controller_pool_file, delete_pool, world,
};
use crate::cancel::{run_status, temporal_cancel};

const UP: Duration = Duration::from_secs(300);

#[tokio::test]
async fn a_cancelled_controller_ends_canceled_and_keeps_its_machines_and_creates_in_flight()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-cancel");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let sandbox = Sandbox::new(&stack)?;
    let idle_pool = format!("cy{}", unique_suffix());
    let busy_pool = format!("cz{}", unique_suffix());
    let idle_file = controller_pool_file(&stack, &idle_pool, 1, "24.04.1", "")?;
    let busy_file = controller_pool_file(&stack, &busy_pool, 2, "24.04.1", "")?;
    let fault = sandbox
        .add_fault(json!({ "kind": "never_joins", "vm": format!("{busy_pool}-*") }))
        .await?;
    let mut fault_left = Some(fault);
    let outcome = async {
        idle(&stack, &task_queue, &idle_pool, &idle_file).await?;
        in_flight(
            &stack,
            &sandbox,
            &task_queue,
            &busy_pool,
            &busy_file,
            &mut fault_left,
        )
        .await
    }
    .await
    .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    if let Some(fault) = fault_left
        && let Err(error) = sandbox.remove_fault(fault).await
    {
        eprintln!("cleanup: removing the never_joins fault of {busy_pool}: {error}");
    }
    // A cancelled controller is started again to delete its machines.
    for (pool, file) in [(&idle_pool, &idle_file), (&busy_pool, &busy_file)] {
        if let Err(error) = apply(&stack, &task_queue, file).await {
            eprintln!("cleanup: pool apply {pool}: {error}");
        }
        delete_pool(&stack, &task_queue, pool).await;
    }
    drop(worker);
    outcome
}

fn controller_id(stack: &Stack, pool: &str) -> String {
    format!("pool/{}/{pool}", stack.cluster)
}

/// Cancels the pool's controller and waits until its run ended Canceled.
async fn cancel_controller(stack: &Stack, pool: &str) -> Result<()> {
    let workflow_id = controller_id(stack, pool);
    let asked = tokio::time::Instant::now();
    temporal_cancel(stack, &workflow_id).await?;
    let ended = eventually(
        &format!("{workflow_id} to end Canceled"),
        Duration::from_secs(90),
        Duration::from_millis(500),
        || async {
            let status = run_status(stack, &workflow_id).await?;
            ensure!(
                status == "RUNNING" || status == "CANCELED",
                "{workflow_id} ended {status}, not Canceled"
            );
            Ok((status == "CANCELED").then_some(()))
        },
    )
    .await;
    println!(
        "{workflow_id}: Canceled {:.1} s after the request",
        asked.elapsed().as_secs_f64()
    );
    ended
}

/// `pool status` shows the pool without a controller (InspectPool's report, no controller
/// document) and `pool pause` says no controller runs.
async fn no_controller(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let shown = cli(
        stack,
        task_queue,
        &["pool", "status", pool, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .json()?;
    ensure!(
        shown.get("report").is_some()
            && shown.get("workflowId").is_none()
            && shown.get("spec").is_none(),
        "pool status still shows a controller: {shown}"
    );
    let paused = cli(stack, task_queue, &["pool", "pause", pool]).await?;
    ensure!(
        paused.code != Some(0)
            && paused
                .stderr
                .contains(&format!("no controller of pool {pool} is running")),
        "pool pause after the cancellation: exit {:?}: {}",
        paused.code,
        paused.stderr
    );
    Ok(())
}

async fn idle(stack: &Stack, task_queue: &str, pool: &str, file: &std::path::Path) -> Result<()> {
    apply(stack, task_queue, file).await?;
    await_world(stack, pool, "1 Ready machine", UP, |w| w.is_steady(1)).await?;
    await_status(stack, task_queue, pool, "idle: 1 available", UP, |d| {
        d.status.available_replicas == 1 && d.status.remediations.is_empty()
    })
    .await?;
    let before = world(stack, pool).await?;
    cancel_controller(stack, pool).await?;
    let after = world(stack, pool).await?;
    ensure!(
        after == before,
        "the machines changed with the cancellation: before {before:?}, after {after:?}"
    );
    no_controller(stack, task_queue, pool).await?;

    // Started again, it takes the machine as it is.
    apply(stack, task_queue, file).await?;
    let again = await_status(
        stack,
        task_queue,
        pool,
        "the new run sees 1 ready",
        UP,
        |d| d.status.ready_replicas == 1,
    )
    .await?;
    ensure!(
        !again
            .status
            .last_actions
            .iter()
            .any(|a| a.text.starts_with("creating machine(s)")),
        "the controller started again created a machine: {:?}",
        again.status.last_actions
    );
    ensure!(
        world(stack, pool).await? == before,
        "the machine changed after pool apply"
    );
    Ok(())
}

/// The create runs of `machines` and their run status.
async fn create_runs(stack: &Stack, machines: &BTreeSet<String>) -> Result<Vec<(String, String)>> {
    let mut runs = Vec::new();
    for machine in machines {
        let workflow_id = format!("create/{}/{machine}", stack.cluster);
        let status = run_status(stack, &workflow_id).await?;
        runs.push((workflow_id, status));
    }
    Ok(runs)
}

async fn in_flight(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
    fault: &mut Option<u64>,
) -> Result<()> {
    apply(stack, task_queue, file).await?;
    let booted = await_world(stack, pool, "2 VMs, no Node yet", UP, |w| {
        w.vms.len() == 2 && w.nodes.is_empty()
    })
    .await?;
    let running = create_runs(stack, &booted.vms).await?;
    ensure!(
        running.iter().all(|(_, status)| status == "RUNNING"),
        "the creates are in flight: {running:?}"
    );
    cancel_controller(stack, pool).await?;

    // The children were abandoned: they still run, and the VMs are kept.
    let still = create_runs(stack, &booted.vms).await?;
    ensure!(
        still.iter().all(|(_, status)| status == "RUNNING"),
        "the creates in flight were cut short with the controller: {still:?}"
    );
    let kept = world(stack, pool).await?;
    ensure!(kept.vms == booted.vms, "the VMs changed: {kept:?}");
    no_controller(stack, task_queue, pool).await?;

    // The Nodes may join now: the creates finish on their own.
    if let Some(id) = fault.take() {
        sandbox.remove_fault(id).await?;
    }
    let joined: World = await_world(stack, pool, "both creates finished", UP, |w| {
        w.is_steady(2) && w.vms == booted.vms
    })
    .await?;
    let ended = eventually(
        "the create runs to end",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || async {
            let runs = create_runs(stack, &joined.vms).await?;
            Ok(runs
                .iter()
                .all(|(_, status)| status != "RUNNING")
                .then_some(runs))
        },
    )
    .await?;
    ensure!(
        ended.iter().all(|(_, status)| status == "COMPLETED"),
        "the creates in flight did not complete: {ended:?}"
    );

    // Consistent: every VM has its NIC, every NIC of the pool its VM.
    let arm = stack.arm_client()?;
    let nics: BTreeSet<String> = arm
        .list_nics()
        .await?
        .into_iter()
        .filter(|nic| {
            nic.tags.get(TAG_CLUSTER) == Some(&stack.cluster)
                && nic.tags.get(TAG_POOL).map(String::as_str) == Some(pool)
        })
        .filter_map(|nic| nic.tags.get(TAG_MACHINE).cloned())
        .collect();
    ensure!(
        nics == joined.vms,
        "NICs of machines {nics:?} but VMs {:?}",
        joined.vms
    );
    for machine in &joined.vms {
        let resources = sandbox.machine_resources(machine).await?;
        ensure!(
            resources.vms.len() == 1 && resources.nics.len() == 1,
            "{machine}: VMs {}, NICs {}",
            Value::from(resources.vms.clone()),
            Value::from(resources.nics.clone())
        );
    }
    no_controller(stack, task_queue, pool).await?;
    Ok(())
}
