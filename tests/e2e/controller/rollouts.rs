//! Rollouts of a pool under a controller go through it: `pool rollout --canary 1` is handed to
//! the controller (which starts `rollout/<cluster>/<pool>` as its child), `pool scale` during the
//! canary is passed to the rollout (it plans with the new replicas, as a Deployment does),
//! `approve` finishes it at the new size, and `pool rollback --wait` rolls back through the
//! controller too. A rollout aborted by the operator is not started again by the controller; a
//! new template applied during a rollout aborts it and rolls to the newest one.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::controller::PoolStatusDocument;
use nodewright_model::rollout::RolloutPhase;
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, cli};
use nodewright_tests::scrape::scrape_until;
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{apply, await_status, await_world, controller_pool_file, delete_pool};
use crate::rollout::common::{await_rollout, ensure_pool_is, rollout_document};

const UP: Duration = Duration::from_secs(300);
/// Two of the worker's reads of the rollouts' and controllers' status, and some.
const METRICS: Duration = Duration::from_secs(75);

#[tokio::test]
async fn a_rollout_goes_through_the_controller_scaled_mid_canary_then_rolled_back() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-roll");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("ct{}", unique_suffix());
    let outcome = through_the_controller(&stack, &task_queue, &pool, &worker)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

#[tokio::test]
async fn an_aborted_rollout_stays_aborted_and_a_new_template_rolls_over_one_in_flight() -> Result<()>
{
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-over");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("co{}", unique_suffix());
    let outcome = abort_and_rollover(&stack, &task_queue, &pool)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

async fn through_the_controller(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    worker: &KillableWorker,
) -> Result<()> {
    let v1 = controller_pool_file(stack, pool, 2, "24.04.1", "")?;
    apply(stack, task_queue, &v1).await?;
    await_world(stack, pool, "2 Ready machines", UP, |w| w.is_steady(2)).await?;
    let v1_hash = spec_template(stack, task_queue, pool).await?;

    // `pool rollout` is handed to the controller.
    let v2 = controller_pool_file(stack, pool, 2, "24.04.2", "")?;
    let handed = rollout_cli(stack, task_queue, &v2, &["--canary", "1"]).await?;
    ensure!(
        handed["controller"]
            .as_str()
            .is_some_and(|c| c.starts_with("pool/")),
        "the rollout was not handed to the controller: {handed}"
    );
    let v2_hash = handed["templateHash"]
        .as_str()
        .context("no template hash")?
        .to_owned();
    await_rollout(stack, task_queue, pool, "the canary", UP, |s| {
        s.phase == RolloutPhase::AwaitingApproval
    })
    .await?;
    let rolling = await_status(stack, task_queue, pool, "RollingOut", UP, |d| {
        d.status.phase == "RollingOut"
    })
    .await?;
    ensure!(
        rolling.spec.template_hash == v2_hash,
        "the controller's spec is not the rolled-to pool: {}",
        rolling.spec.template_hash
    );
    // A second rollout while one runs is refused (the CLI's check, exit 5).
    let again = cli(
        stack,
        task_queue,
        &["pool", "rollout", "--pool", &v2.to_string_lossy()],
    )
    .await?;
    again.expect_code(5)?;

    // Scaled during the canary: the rollout plans with 3.
    cli(
        stack,
        task_queue,
        &["pool", "scale", pool, "--replicas", "3"],
    )
    .await?
    .expect_code(0)?;
    await_rollout(stack, task_queue, pool, "the rollout at 3", UP, |s| {
        s.desired == 3
    })
    .await?;
    // The worker's rollout gauges follow it (read from its status every 30 s): waiting for
    // the approval counts as paused, so it is not taken for stalled.
    let metrics = worker.metrics_address()?;
    scrape_until(metrics, "the canary in the rollout gauges", METRICS, |m| {
        let state = |state| {
            m.sum(
                "nodewright_rollout_machines",
                &[("pool", pool), ("state", state)],
            )
        };
        state("desired") == 3.0
            && state("updated") >= 1.0
            && state("remaining") == 3.0 - state("updated")
            && m.sum("nodewright_rollout_paused", &[("pool", pool)]) == 1.0
    })
    .await?;
    cli(stack, task_queue, &["pool", "rollout", "approve", pool])
        .await?
        .expect_code(0)?;
    let done = await_status(stack, task_queue, pool, "3 updated machines", UP, |d| {
        d.status.phase == "Active"
            && d.spec.replicas == 3
            && d.status.updated_replicas == 3
            && d.status.ready_replicas == 3
    })
    .await?;
    ensure_pool_is(stack, pool, 3, &v2_hash).await?;
    // The rollout's gauges are gone with it; its creates and deletes were measured.
    scrape_until(metrics, "the rollout's end in /metrics", METRICS, |m| {
        let runs = |name| m.sum(name, &[("pool", pool), ("result", "succeeded")]);
        !m.has("nodewright_rollout_machines", &[("pool", pool)])
            && runs("nodewright_machine_create_duration_seconds_count") >= 5.0
            && runs("nodewright_machine_delete_duration_seconds_count") >= 2.0
            && m.sum(
                "nodewright_pool_replicas",
                &[("pool", pool), ("state", "updated")],
            ) == 3.0
            // The server enforces the workers' write budget on the ARM-write queue.
            && m.has("nodewright_arm_write_backlog", &[])
            && m.sum("nodewright_arm_write_rate_limit_per_second", &[])
                == m.sum("nodewright_arm_write_budget_per_second", &[])
    })
    .await?;
    ensure_action(&done, "now rolls 3 machines")?;
    ensure_action(&done, &format!("to template {v2_hash} completed"))?;

    // `pool rollback --wait` goes through the controller (its last actions say so below) and
    // follows the rollout it starts to its end.
    let back = cli(
        stack,
        task_queue,
        &["pool", "rollback", pool, "--wait", "--output", "json"],
    )
    .await?;
    back.expect_code(0)?;
    ensure_pool_is(stack, pool, 3, &v1_hash).await?;
    let after = await_status(stack, task_queue, pool, "Active on v1", UP, |d| {
        d.status.phase == "Active" && d.status.updated_replicas == 3
    })
    .await?;
    ensure!(
        after.spec.template_hash == v1_hash,
        "after the rollback the controller keeps template {}, not {v1_hash}",
        after.spec.template_hash
    );
    ensure_action(
        &after,
        &format!("rolling pool {pool} back to template {v1_hash}"),
    )?;
    Ok(())
}

async fn abort_and_rollover(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let v1 = controller_pool_file(stack, pool, 2, "24.04.1", "")?;
    apply(stack, task_queue, &v1).await?;
    await_world(stack, pool, "2 Ready machines", UP, |w| w.is_steady(2)).await?;

    // A canary aborted by the operator stays aborted: the controller does not roll again.
    let v2 = controller_pool_file(stack, pool, 2, "24.04.2", "")?;
    rollout_cli(stack, task_queue, &v2, &["--canary", "1"]).await?;
    await_rollout(stack, task_queue, pool, "the canary", UP, |s| {
        s.phase == RolloutPhase::AwaitingApproval
    })
    .await?;
    cli(stack, task_queue, &["pool", "rollout", "abort", pool])
        .await?
        .expect_code(0)?;
    await_status(stack, task_queue, pool, "Active after the abort", UP, |d| {
        d.status.phase == "Active"
            && d.status
                .last_actions
                .iter()
                .any(|a| a.text.contains("stopped without completing"))
    })
    .await?;
    // Three observe intervals later the rollout is still the aborted one.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let still = rollout_document(stack, task_queue, pool).await?;
    ensure!(
        still.status.phase == RolloutPhase::Aborted,
        "the controller rolled again after the abort: {still}"
    );
    ensure!(
        world_templates(stack, pool).await? == 2,
        "the aborted canary should leave both templates"
    );

    // A new template during a canary: the rollout in flight is aborted and the newest rolls.
    let v3 = controller_pool_file(stack, pool, 2, "24.04.3", "")?;
    rollout_cli(stack, task_queue, &v3, &["--canary", "1"]).await?;
    await_rollout(stack, task_queue, pool, "the v3 canary", UP, |s| {
        s.phase == RolloutPhase::AwaitingApproval
    })
    .await?;
    // Back to v1's file: a template other than the one in flight (the images the sandbox
    // publishes are 24.04.1 to .3).
    let applied = apply(stack, task_queue, &v1).await?;
    let newest = applied["changes"]["template"][1]
        .as_str()
        .context("the apply names no new template")?
        .to_owned();
    let rolled = await_status(stack, task_queue, pool, "2 machines of v1", UP, |d| {
        d.status.phase == "Active"
            && d.status.updated_replicas == 2
            && d.status.ready_replicas == 2
            && d.spec.template_hash == newest
    })
    .await?;
    ensure_pool_is(stack, pool, 2, &newest).await?;
    ensure_action(&rolled, "for the newer template")?;
    ensure_action(&rolled, &format!("to template {newest} completed"))?;
    Ok(())
}

/// `pool rollout --pool FILE --output json` plus `extra`, expected to succeed.
async fn rollout_cli(
    stack: &Stack,
    task_queue: &str,
    file: &Path,
    extra: &[&str],
) -> Result<serde_json::Value> {
    let file = file.to_string_lossy().into_owned();
    let mut args = vec!["pool", "rollout", "--pool", &file, "--output", "json"];
    args.extend_from_slice(extra);
    cli(stack, task_queue, &args).await?.expect_code(0)?.json()
}

/// The template the controller keeps.
async fn spec_template(stack: &Stack, task_queue: &str, pool: &str) -> Result<String> {
    Ok(super::common::status(stack, task_queue, pool)
        .await?
        .spec
        .template_hash)
}

/// How many templates the pool's VMs run.
async fn world_templates(stack: &Stack, pool: &str) -> Result<usize> {
    let kube = stack.kube_client().await?;
    let arm = stack.arm_client()?;
    let sample = crate::rollout::common::sample_pool(stack, &kube, &arm, pool).await?;
    Ok(sample.by_template.len())
}

fn ensure_action(document: &PoolStatusDocument, fragment: &str) -> Result<()> {
    ensure!(
        document
            .status
            .last_actions
            .iter()
            .any(|a| a.text.contains(fragment)),
        "no last action says {fragment:?}: {:?}",
        document.status.last_actions
    );
    Ok(())
}
