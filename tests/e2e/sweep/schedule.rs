//! The schedule: `sweep schedule --every 3s` creates a Temporal Schedule whose runs delete an
//! orphan; while one run waits for approval, the runs due meanwhile are skipped (overlap: skip);
//! `sweep unschedule` removes it.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::poll::eventually;
use nodewright_tests::stack::temporal_cli;
use serde_json::{Value, json};

use super::common::{OLD, SweepCluster, await_approval_wait};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_sweep_fires_and_skips_runs_that_would_overlap() -> Result<()> {
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    let result = scheduled(&sweep).await;
    let _ = sweep.cli(&["sweep", "unschedule"]).await;
    let _ = sweep.cli(&["sweep", "approve"]).await;
    sweep.clean_up().await?;
    result
}

async fn scheduled(sweep: &SweepCluster) -> Result<()> {
    let lone = format!("{}-nic", sweep.machine("sched"));
    sweep
        .seed(vec![json!({ "type": "nic", "name": lone, "tags": sweep.ours(&sweep.machine("sched"), OLD) })])
        .await?;
    sweep
        .cli(&["sweep", "schedule", "--every", "3s"])
        .await?
        .expect_code(0)?;
    eventually(
        "a scheduled sweep to delete the orphan NIC",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || async { Ok((!sweep.exists("nic", &lone).await?).then_some(())) },
    )
    .await?;

    // Eleven orphans: the next run waits for approval, and the runs due meanwhile are skipped.
    let prefix = format!("{}-ovl", sweep.pool);
    sweep
        .sandbox
        .seed(json!({ "generate": [{
            "type": "nic", "prefix": prefix, "count": 11,
            "tags": sweep.ours(&sweep.machine("ovlap"), OLD),
        }]}))
        .await?;
    let skipped_before = overlap_skipped(sweep).await?;
    await_approval_wait(sweep).await?;
    let skipped = eventually(
        "the schedule to skip a run that would overlap",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || async {
            let now = overlap_skipped(sweep).await?;
            Ok((now > skipped_before).then_some(now))
        },
    )
    .await?;
    ensure!(
        sweep.exists("nic", &format!("{prefix}00000")).await?,
        "deleted before approval"
    );
    sweep.cli(&["sweep", "approve"]).await?.expect_code(0)?;
    eventually(
        "the approved scheduled sweep to delete the eleven orphans",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || async { Ok((!sweep.exists("nic", &format!("{prefix}00010")).await?).then_some(())) },
    )
    .await?;
    println!("schedule skipped {skipped} overlapping runs while one waited for approval");

    sweep.cli(&["sweep", "unschedule"]).await?.expect_code(0)?;
    ensure!(
        describe(sweep).await.is_err(),
        "the schedule still exists after unschedule"
    );
    Ok(())
}

/// `temporal schedule describe` of the cluster's schedule, as JSON.
async fn describe(sweep: &SweepCluster) -> Result<Value> {
    let cli = temporal_cli()?;
    let schedule_id = format!("sweep/{}", sweep.cluster);
    let (address, namespace) = (
        sweep.stack.temporal_address.clone(),
        sweep.stack.temporal_namespace.clone(),
    );
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(cli)
            .args([
                "schedule",
                "describe",
                "--schedule-id",
                &schedule_id,
                "--output",
                "json",
                "--address",
                &address,
                "--namespace",
                &namespace,
            ])
            .output()
    })
    .await??;
    ensure!(
        output.status.success(),
        "describe failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).context("describe printed no JSON")
}

/// How many runs the schedule skipped because one was still running.
async fn overlap_skipped(sweep: &SweepCluster) -> Result<u64> {
    let described = describe(sweep).await?;
    let info = &described["info"];
    Ok(info["overlapSkipped"]
        .as_u64()
        .or_else(|| info["overlapSkipped"].as_str().and_then(|s| s.parse().ok()))
        .unwrap_or(0))
}
