//! A machine whose Node never registers: `spec.timeouts.creation: 1m`, a pool of 2 (ladder
//! `[replace]`, `maxUnhealthy: 1`). Before the controller starts, a create of one machine of the
//! pool boots its VM but its Node never joins (the sandbox's `never_joins` fault) and the create
//! fails at its creation timeout, keeping the VM, NIC and disk (`--keep-on-failure`: CreateMachine
//! would remove them otherwise; the controller's own creates bound themselves). `pool apply`
//! then finds a VM of the pool without a Node past its creation timeout: the controller judges
//! it unhealthy ("its Node never registered within 1m"), replaces it (deleted, its VM, NIC and OS
//! disk gone: no leak) and the pool comes to 2 Ready machines.
//!
//! The controller's own create of a machine whose Node never joins is not judged by the
//! controller (a create in flight bounds itself): CreateMachine fails at its creation timeout
//! (`20s` here) and removes what it made; the controller books the failure, creates nothing for
//! the back-off (30 s after a first failure, by its own clock) and then creates another machine,
//! which joins.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use super::common::{apply, await_status, await_world, cli, controller_pool_file, delete_pool};

const UP: Duration = Duration::from_secs(300);

#[tokio::test]
async fn a_vm_whose_node_never_registered_is_replaced_and_nothing_of_it_is_left() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-never");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cv{}", unique_suffix());
    let stuck = format!("{pool}-bcdfg");
    let health = "  health:\n    maxUnhealthy: 1\n    remediation: [replace]\n";
    let file = controller_pool_file(&stack, &pool, 2, "24.04.1", health)?;
    let text = std::fs::read_to_string(&file)?;
    ensure!(
        text.contains("    creation: 3m\n"),
        "unexpected pool file:\n{text}"
    );
    std::fs::write(
        &file,
        text.replace("    creation: 3m\n", "    creation: 1m\n"),
    )?;
    let sandbox = Sandbox::new(&stack)?;
    let fault = sandbox
        .add_fault(json!({ "kind": "never_joins", "vm": stuck }))
        .await?;
    let outcome = scenario(&stack, &sandbox, &task_queue, &pool, &stuck, &file)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    if let Err(error) = sandbox.remove_fault(fault).await {
        eprintln!("cleanup: removing the never_joins fault of {stuck}: {error}");
    }
    drop(worker);
    outcome
}

async fn scenario(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    pool: &str,
    stuck: &str,
    file: &std::path::Path,
) -> Result<()> {
    let path = file.to_string_lossy();
    let created = cli(
        stack,
        task_queue,
        &[
            "machine",
            "create",
            "--pool",
            &path,
            "--name",
            stuck,
            "--wait",
            "--keep-on-failure",
        ],
    )
    .await?;
    created.expect_code(3)?;
    let left = sandbox.machine_resources(stuck).await?;
    ensure!(
        left.vms.len() == 1 && left.nics.len() == 1,
        "the failed create kept the VM and NIC of {stuck}: {} VM(s), {} NIC(s)",
        left.vms.len(),
        left.nics.len()
    );

    apply(stack, task_queue, file).await?;
    let judged = await_status(
        stack,
        task_queue,
        pool,
        "the machine without a Node judged unhealthy",
        UP,
        |d| {
            d.status
                .remediations
                .iter()
                .any(|r| r.machine == stuck && r.reason.contains("never registered"))
        },
    )
    .await?;
    let remediation = judged
        .status
        .remediations
        .iter()
        .find(|r| r.machine == stuck)
        .context("the remediation")?;
    ensure!(
        remediation.reason == "its Node never registered within 1m",
        "the reason: {remediation:?}"
    );

    let steady = await_world(
        stack,
        pool,
        "2 Ready machines without the stuck one",
        UP,
        |w| w.is_steady(2) && !w.vms.contains(stuck),
    )
    .await?;
    ensure!(steady.vms.len() == 2, "{steady:?}");
    let status = await_status(
        stack,
        task_queue,
        pool,
        "2 ready, nothing remediated",
        UP,
        |d| d.status.ready_replicas == 2 && d.status.remediations.is_empty(),
    )
    .await?;
    ensure!(
        status
            .status
            .last_actions
            .iter()
            .any(|a| a.text.starts_with("deleting machine") && a.text.contains(stuck)),
        "the last actions do not show {stuck} deleted: {:?}",
        status.status.last_actions
    );
    let left = sandbox.machine_resources(stuck).await?;
    ensure!(
        left.is_empty(),
        "{stuck} leaked: VMs {}, NICs {}, disks {}",
        serde_json::Value::from(left.vms.clone()),
        serde_json::Value::from(left.nics.clone()),
        serde_json::Value::from(left.disks.clone())
    );
    Ok(())
}

#[tokio::test]
async fn the_controllers_own_create_whose_node_never_joins_leaves_nothing_and_backs_off()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-nojoin");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cw{}", unique_suffix());
    let file = controller_pool_file(&stack, &pool, 1, "24.04.1", "")?;
    let text = std::fs::read_to_string(&file)?;
    ensure!(
        text.contains("    creation: 3m\n"),
        "unexpected pool file:\n{text}"
    );
    std::fs::write(
        &file,
        text.replace("    creation: 3m\n", "    creation: 20s\n"),
    )?;
    let sandbox = Sandbox::new(&stack)?;
    let fault = sandbox
        .add_fault(json!({ "kind": "never_joins", "vm": format!("{pool}-*") }))
        .await?;
    let mut fault_left = Some(fault);
    let outcome = own_create(&stack, &sandbox, &task_queue, &pool, &file, &mut fault_left)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    if let Some(fault) = fault_left
        && let Err(error) = sandbox.remove_fault(fault).await
    {
        eprintln!("cleanup: removing the never_joins fault of {pool}: {error}");
    }
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

/// Unix seconds of an action's RFC 3339 time.
fn action_time(at: &str) -> Result<i64> {
    Ok(chrono::DateTime::parse_from_rfc3339(at)
        .with_context(|| format!("not an RFC 3339 time: {at}"))?
        .timestamp())
}

async fn own_create(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
    fault: &mut Option<u64>,
) -> Result<()> {
    apply(stack, task_queue, file).await?;
    let failed = await_status(
        stack,
        task_queue,
        pool,
        "the first create failed",
        UP,
        |d| {
            d.status
                .last_actions
                .iter()
                .any(|a| a.text.starts_with("create of machine") && a.text.contains("failed"))
        },
    )
    .await?;
    let failure = failed
        .status
        .last_actions
        .iter()
        .find(|a| a.text.starts_with("create of machine") && a.text.contains("failed"))
        .context("the failure")?
        .clone();
    let Some(first) = failure
        .text
        .strip_prefix("create of machine ")
        .and_then(|rest| rest.split(' ').next())
        .map(str::to_owned)
    else {
        bail!("no machine named in {}", failure.text);
    };
    ensure!(
        failure.text.contains("next create in 30s"),
        "the first failure backs off 30 s: {}",
        failure.text
    );
    println!("{}: {}", failure.at, failure.text);
    if let Some(id) = fault.take() {
        sandbox.remove_fault(id).await?;
    }
    let left = sandbox.machine_resources(&first).await?;
    ensure!(
        left.is_empty(),
        "the failed create left {}: VMs {}, NICs {}, disks {}",
        first,
        serde_json::Value::from(left.vms.clone()),
        serde_json::Value::from(left.nics.clone()),
        serde_json::Value::from(left.disks.clone())
    );

    let steady = await_world(stack, pool, "a new machine Ready", UP, |w| {
        w.is_steady(1) && !w.vms.contains(&first)
    })
    .await?;
    let status = await_status(stack, task_queue, pool, "1 ready", UP, |d| {
        d.status.ready_replicas == 1
    })
    .await?;
    let failed_at = action_time(&failure.at)?;
    let next = status
        .status
        .last_actions
        .iter()
        .filter(|a| a.text.starts_with("creating machine(s)"))
        .map(|a| Ok((action_time(&a.at)?, a.text.clone())))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .find(|(at, _)| *at >= failed_at)
        .with_context(|| {
            format!(
                "no create after the failure: {:?}",
                status.status.last_actions
            )
        })?;
    ensure!(
        next.0 - failed_at >= 30,
        "created again {} s after the failure, inside the 30 s back-off: {}",
        next.0 - failed_at,
        next.1
    );
    println!(
        "created again {} s after the failure (back-off 30 s): {} -> {:?}",
        next.0 - failed_at,
        next.1,
        steady.vms
    );
    Ok(())
}
