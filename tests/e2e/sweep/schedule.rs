//! The schedule: `sweep schedule --every 3s` creates a Temporal Schedule whose runs delete an
//! orphan; while one run waits for approval, the runs due meanwhile are skipped (overlap: skip);
//! `sweep schedule` again changes only the flags given and keeps the schedule's other settings;
//! `sweep unschedule` removes it.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use base64::Engine;
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
            "suffix": "-nic", "machineTag": true,
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
        sweep.exists("nic", &format!("{prefix}00000-nic")).await?,
        "deleted before approval"
    );
    sweep.cli(&["sweep", "approve"]).await?.expect_code(0)?;
    eventually(
        "the approved scheduled sweep to delete the eleven orphans",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || async { Ok((!sweep.exists("nic", &format!("{prefix}00010-nic")).await?).then_some(())) },
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_keeps_the_settings_not_given_again() -> Result<()> {
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    let result = keeps_settings(&sweep).await;
    let _ = sweep.cli(&["sweep", "unschedule"]).await;
    sweep.clean_up().await?;
    result
}

async fn keeps_settings(sweep: &SweepCluster) -> Result<()> {
    let created = schedule(
        sweep,
        &["--dry-run", "--max-deletions", "3", "--every", "1h"],
    )
    .await?;
    ensure!(
        created["updated"] == json!(false),
        "a new schedule: {created}"
    );
    ensure!(
        created["settings"]["dryRun"] == json!(true)
            && created["settings"]["maxDeletions"] == json!(3)
            && created["settings"]["every"] == json!("1h")
            && created["settings"]["parallelism"] == json!(5),
        "created with the flags and the defaults: {created}"
    );

    // Only --every: dry run and max deletions stay, as the CLI says and the schedule has.
    let changed = schedule(sweep, &["--every", "2h"]).await?;
    ensure!(changed["updated"] == json!(true), "updated: {changed}");
    let settings = &changed["settings"];
    ensure!(
        settings["every"] == json!("2h")
            && settings["dryRun"] == json!(true)
            && settings["maxDeletions"] == json!(3),
        "--every 2h kept dry run and max deletions: {changed}"
    );
    ensure!(
        changed["changed"] == json!(["every"]) && changed["was"] == json!({ "every": "1h" }),
        "only the interval changed, from 1h: {changed}"
    );
    let (every, request) = as_scheduled(sweep).await?;
    ensure!(
        every == "7200s" || every == "2h",
        "the schedule runs every {every}, not 2h"
    );
    ensure!(
        request["dryRun"] == json!(true) && request["maxDeletions"] == json!(3),
        "the schedule's request lost its settings: {request}"
    );

    // Dry run turned off, in text: the line says it changed and the others were kept.
    let text = sweep.cli(&["sweep", "schedule", "--dry-run=false"]).await?;
    text.expect_code(0)?;
    let line = |flag: &str| {
        text.stdout
            .lines()
            .find(|line| line.split_whitespace().next() == Some(flag))
            .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    ensure!(
        line("dry-run") == "dry-run false changed (was true)"
            && line("max-deletions") == "max-deletions 3 kept"
            && line("every") == "every 2h kept",
        "the text names what changed and what was kept:\n{}",
        text.stdout
    );
    let (every, request) = as_scheduled(sweep).await?;
    ensure!(
        (every == "7200s" || every == "2h")
            && request["dryRun"] == json!(false)
            && request["maxDeletions"] == json!(3),
        "after --dry-run=false the schedule runs every {every} with {request}"
    );

    sweep.cli(&["sweep", "unschedule"]).await?.expect_code(0)?;
    ensure!(
        describe(sweep).await.is_err(),
        "the schedule still exists after unschedule"
    );
    Ok(())
}

/// `sweep schedule --output json` with `flags`: what it printed.
async fn schedule(sweep: &SweepCluster, flags: &[&str]) -> Result<Value> {
    let mut args = vec!["--output", "json", "sweep", "schedule"];
    args.extend_from_slice(flags);
    let result = sweep.cli(&args).await?;
    result.expect_code(0)?;
    serde_json::from_str(result.stdout.trim())
        .with_context(|| format!("sweep schedule printed no JSON: {}", result.stdout))
}

/// The schedule as Temporal has it: its interval and the sweep request its runs start with.
async fn as_scheduled(sweep: &SweepCluster) -> Result<(String, Value)> {
    let described = describe(sweep).await?;
    let schedule = &described["schedule"];
    let every = schedule["spec"]["interval"][0]["interval"]
        .as_str()
        .with_context(|| format!("no interval in {schedule}"))?
        .to_owned();
    // The workflow input as stored: one JSON payload, base64 in the CLI's JSON.
    let input = &schedule["action"]["startWorkflow"]["input"]["payloads"][0];
    let Some(data) = input["data"].as_str() else {
        bail!("no sweep request in the schedule's action: {schedule}")
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .context("the schedule's input is not base64")?;
    let request: Value =
        serde_json::from_slice(&bytes).context("the schedule's input is not JSON")?;
    ensure!(
        request["cluster"] == json!(sweep.cluster),
        "the schedule's request is of another cluster: {request}"
    );
    Ok((every, request))
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
