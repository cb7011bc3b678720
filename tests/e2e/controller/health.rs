//! Machine health: 2 of 3 VMs powered off with `maxUnhealthy: 40%` (1 of 3): both are counted
//! unhealthy, none is remediated and `RemediationAllowed` is False with the counts in its
//! message; one powered on again leaves 1 unhealthy, within the limit: it is replaced (the
//! default ladder, `[replace]`): its machine deleted, a new one Ready, back to 3.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, vm_action};
use nodewright_tests::scrape::scrape_until;
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{await_status, await_world, controller_pool_file, delete_pool, world};

const UP: Duration = Duration::from_secs(240);
/// Two of the worker's reads of the controllers' status, and some.
const METRICS: Duration = Duration::from_secs(75);

#[tokio::test]
async fn above_max_unhealthy_nothing_is_remediated_and_within_it_the_machine_is_replaced()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-health");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("ch{}", unique_suffix());
    let health = "  health:\n    maxUnhealthy: 40%\n";
    let file = controller_pool_file(&stack, &pool, 3, "24.04.1", health)?;
    let outcome = scenario(&stack, &task_queue, &pool, &file, &worker)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
    worker: &KillableWorker,
) -> Result<()> {
    super::common::apply(stack, task_queue, file).await?;
    let first = await_world(stack, pool, "3 Ready machines", UP, |w| w.is_steady(3)).await?;
    let mut names = first.vms.iter();
    let (a, b) = (
        names.next().context("a VM")?.clone(),
        names.next().context("a second VM")?.clone(),
    );
    // Both go down while the controller is paused, so that it sees them down together (not
    // one, remediated at once within maxUnhealthy, then the other).
    super::common::cli(stack, task_queue, &["pool", "pause", pool])
        .await?
        .expect_code(0)?;
    // The pause is taken only once the controller shows it: a resume sent in the same workflow
    // task would undo it before any look.
    await_status(stack, task_queue, pool, "the controller paused", UP, |d| {
        d.status.phase == "Paused"
    })
    .await?;
    vm_action(stack, &a, "powerOff").await?;
    vm_action(stack, &b, "powerOff").await?;
    super::common::cli(stack, task_queue, &["pool", "resume", pool])
        .await?
        .expect_code(0)?;

    let held = await_status(
        stack,
        task_queue,
        pool,
        "2 unhealthy, remediation not allowed",
        UP,
        |d| {
            d.status.unhealthy_replicas == 2
                && d.status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "RemediationAllowed" && c.status == "False")
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
        condition.message.contains('2') && condition.message.contains('3'),
        "the message does not give the counts: {condition:?}"
    );
    ensure!(
        held.status
            .unhealthy
            .iter()
            .all(|u| u.reason.contains("stop") || u.reason.contains("deallocat")),
        "reasons: {:?}",
        held.status.unhealthy
    );
    // The worker's gauges say the same (read from the controller's status every 30 s).
    let metrics = worker.metrics_address()?;
    scrape_until(
        metrics,
        "the short-circuit in the pool's gauges",
        METRICS,
        |m| {
            let condition = [
                ("pool", pool),
                ("type", "RemediationAllowed"),
                ("status", "False"),
            ];
            m.sum("nodewright_pool_condition", &condition) == 1.0
                && m.sum(
                    "nodewright_pool_replicas",
                    &[("pool", pool), ("state", "unhealthy")],
                ) == 2.0
                && m.sum(
                    "nodewright_pool_replicas",
                    &[("pool", pool), ("state", "desired")],
                ) == 3.0
        },
    )
    .await?;
    // Three more observe intervals: nothing remediated (the same 3 VMs, no delete started).
    tokio::time::sleep(Duration::from_secs(10)).await;
    let still = world(stack, pool).await?;
    ensure!(
        still.vms == first.vms,
        "a machine was remediated above maxUnhealthy: {still:?}"
    );

    // One comes back: 1 of 3 unhealthy is within 40% of 3 (1): it is replaced.
    vm_action(stack, &a, "start").await?;
    let healed = await_world(stack, pool, "the stopped machine replaced", UP, |w| {
        w.is_steady(3) && !w.vms.contains(&b) && w.vms.contains(&a)
    })
    .await?;
    ensure!(healed.vms.len() == 3, "{healed:?}");
    // The Node's story says why it went.
    let events = crate::drain::common::node_events(stack, &b)?;
    ensure!(
        events.iter().any(|event| {
            event["reason"] == "Remediated"
                && event["note"]
                    .as_str()
                    .is_some_and(|note| note.contains("rung replace"))
        }),
        "no Remediated (replace) Event about {b}: {events:?}"
    );
    scrape_until(metrics, "the replacement counted", METRICS, |m| {
        m.sum(
            "nodewright_remediations_total",
            &[("pool", pool), ("action", "replace")],
        ) == 1.0
    })
    .await?;
    await_status(
        stack,
        task_queue,
        pool,
        "no unhealthy and remediation allowed",
        UP,
        |d| {
            d.status.unhealthy_replicas == 0
                && d.status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "RemediationAllowed" && c.status == "True")
        },
    )
    .await?;
    Ok(())
}
