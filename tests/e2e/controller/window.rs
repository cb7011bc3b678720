//! Maintenance windows with `applyTo: all` under a controller: outside a window an unhealthy
//! machine (its VM powered off) is not remediated — `RemediationAllowed` is False with reason
//! `MaintenanceWindowClosed` — and a scale-down removes nothing; the same file without the
//! window lets both happen at once.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, vm_action};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{
    apply, await_status, await_world, cli, controller_pool_file, delete_pool, world,
};

const UP: Duration = Duration::from_secs(240);

#[tokio::test]
async fn outside_a_window_nothing_is_remediated_or_scaled_down() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-window");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cw{}", unique_suffix());
    let outcome = scenario(&stack, &task_queue, &pool)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

async fn scenario(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    // A daily hour-long window opening twelve hours from now (UTC): closed for the whole test.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let hour = (now / 3600 + 12) % 24;
    // maxUnhealthy 100%: only the window holds the remediation.
    let window = format!(
        "  health:\n    maxUnhealthy: 100%\n  maintenance:\n    applyTo: all\n    windows:\n      - {{ schedule: \"0 {hour} * * *\", duration: 1h }}\n"
    );
    let gated = controller_pool_file(stack, pool, 2, "24.04.1", &window)?;
    apply(stack, task_queue, &gated).await?;
    let first = await_world(stack, pool, "2 Ready machines", UP, |w| w.is_steady(2)).await?;
    let down = first.vms.iter().next().context("a VM")?.clone();
    vm_action(stack, &down, "powerOff").await?;

    let held = await_status(
        stack,
        task_queue,
        pool,
        "1 unhealthy, held by the window",
        UP,
        |d| {
            d.status.unhealthy_replicas == 1
                && d.status.conditions.iter().any(|c| {
                    c.type_ == "RemediationAllowed" && c.reason == "MaintenanceWindowClosed"
                })
        },
    )
    .await?;
    let condition = held
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "RemediationAllowed")
        .context("RemediationAllowed")?;
    ensure!(
        condition.status == "False" && condition.message.contains("no maintenance window is open"),
        "the condition says why: {condition:?}"
    );

    // A scale-down waits too.
    cli(
        stack,
        task_queue,
        &["pool", "scale", pool, "--replicas", "1"],
    )
    .await?
    .expect_code(0)?;
    // Several looks (the tests' controllers look every 3 s).
    tokio::time::sleep(Duration::from_secs(15)).await;
    let still = world(stack, pool).await?;
    ensure!(
        still.vms == first.vms,
        "outside a window no machine goes: {still:?}"
    );

    // Without the window the unhealthy machine goes first, as the scale-down's victim.
    let open = controller_pool_file(
        stack,
        pool,
        1,
        "24.04.1",
        "  health:\n    maxUnhealthy: 100%\n",
    )?;
    apply(stack, task_queue, &open).await?;
    let after = await_world(stack, pool, "1 Ready machine", UP, |w| w.is_steady(1)).await?;
    ensure!(
        !after.vms.contains(&down),
        "the unhealthy machine is the one that went: {after:?}"
    );
    Ok(())
}
