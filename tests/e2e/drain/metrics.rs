//! The worker's `/metrics` follow what it did: two machines created, a drain held by a
//! PodDisruptionBudget and then let go, the machines deleted; each step moves its
//! `nodewright_*` series by what happened (and the Temporal SDK's are served beside them).

use anyhow::{Result, bail, ensure};
use nodewright_model::machine::Outcome;
use nodewright_tests::documents::DrainStatusDocument;
use nodewright_tests::scrape::{Samples, scrape};

use super::common::{DrainScene, delete_machines, wait_drain};

const WAIT: std::time::Duration = std::time::Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_with_creates_a_blocked_drain_and_deletes() -> Result<()> {
    let scene = DrainScene::<2>::start(
        "drain-metrics",
        "dm",
        &[("timeout", "5m"), ("pdbRetryInterval", "2s")],
    )
    .await?;
    let result = scenario(&scene).await;
    scene.finish(result).await
}

fn scraped(scene: &DrainScene<2>) -> Result<Samples> {
    scrape(scene.worker.metrics_address()?)
}

async fn scenario(scene: &DrainScene<2>) -> Result<()> {
    let [node_a, node_b] = &scene.machines;
    let pool = scene.pool.as_str();
    scene.create_machines().await?;

    let after_create = scraped(scene)?;
    let creates = after_create.sum(
        "nodewright_machine_create_duration_seconds_count",
        &[("pool", pool), ("result", "succeeded")],
    );
    ensure!(
        creates == 2.0,
        "two creates of pool {pool} measured, not {creates}:\n{}",
        after_create.text
    );
    let vm_puts = after_create.sum(
        "nodewright_arm_requests_total",
        &[("operation", "virtualMachines.put")],
    );
    ensure!(
        vm_puts >= 2.0,
        "at least two VM PUTs counted, not {vm_puts}"
    );
    ensure!(
        after_create.sum(
            "nodewright_arm_requests_total",
            &[("operation", "operations.get")]
        ) + after_create.sum(
            "nodewright_arm_requests_total",
            &[("operation", "virtualMachines.get")]
        ) > 0.0,
        "the creates' polls are counted"
    );
    ensure!(
        after_create.sum("nodewright_kube_requests_total", &[("resource", "nodes")]) > 0.0,
        "the Node reads are counted"
    );
    ensure!(
        after_create.has(
            "nodewright_arm_ratelimit_remaining",
            &[("scope", "subscription_writes")]
        ),
        "ARM's remaining writes are read from its answers"
    );
    ensure!(
        after_create.sum("nodewright_arm_write_budget_per_second", &[]) > 0.0,
        "the write budget is served"
    );
    ensure!(
        after_create
            .samples
            .iter()
            .any(|sample| sample.name.starts_with("temporal_")),
        "the Temporal SDK's metrics are served beside nodewright's"
    );

    // web's one pod on A, under a budget that refuses its eviction; the drain is held.
    let key = scene.hold_web_on(node_a, node_b).await?;
    let blocked_before = after_create.sum(
        "nodewright_evictions_total",
        &[("result", "blocked_by_pdb")],
    );
    scene.drain_until_held(node_a, &key).await?;
    let held = scraped(scene)?;
    let blocked = held.sum(
        "nodewright_evictions_total",
        &[("result", "blocked_by_pdb")],
    );
    ensure!(
        blocked > blocked_before,
        "the refused evictions are counted as blocked_by_pdb ({blocked_before} → {blocked})"
    );
    ensure!(
        held.sum("nodewright_drain_duration_seconds_count", &[("pool", pool)]) == 0.0,
        "a drain still running is not measured yet"
    );

    // The budget lets the pod go: the drain evicts it and ends.
    scene.workloads.set_min_available("web", 0).await?;
    let done = |doc: &DrainStatusDocument| {
        doc.run_status == "completed" && doc.status.run.outcome == Outcome::Succeeded
    };
    wait_drain(
        &scene.stack,
        &scene.task_queue,
        node_a,
        "the drain's end",
        WAIT,
        done,
    )
    .await?;
    let drained = scraped(scene)?;
    ensure!(
        drained.sum("nodewright_evictions_total", &[("result", "evicted")]) >= 1.0,
        "the accepted eviction is counted:\n{}",
        drained.text
    );
    let drains =
        eventually_count(scene, "nodewright_drain_duration_seconds_count", pool, 1.0).await?;
    ensure!(drains == 1.0, "one drain measured");

    delete_machines(&scene.stack, &scene.task_queue, &scene.machines).await;
    let deletes = eventually_count(
        scene,
        "nodewright_machine_delete_duration_seconds_count",
        pool,
        2.0,
    )
    .await?;
    ensure!(deletes == 2.0, "two deletes measured");
    let deleted = scraped(scene)?;
    ensure!(
        deleted.sum(
            "nodewright_arm_requests_total",
            &[("operation", "virtualMachines.delete")]
        ) >= 2.0,
        "the VM deletes are counted"
    );
    Ok(())
}

/// The count of `name` for `pool` with result succeeded, once it reaches `expected` (a run's
/// end is measured as its last workflow task completes, just after its result is readable).
async fn eventually_count(
    scene: &DrainScene<2>,
    name: &str,
    pool: &str,
    expected: f64,
) -> Result<f64> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let samples = scraped(scene)?;
        let count = samples.sum(name, &[("pool", pool), ("result", "succeeded")]);
        if count >= expected {
            return Ok(count);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "{name} of pool {pool} stayed at {count}, not {expected}:\n{}",
                samples.text
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}
