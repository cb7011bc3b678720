//! `pool rollout --wait` at scale (issue 26): a pool of 200 machines built by its first rollout
//! (200 creates in flight at once), followed through the CLI in a pipe with `COLUMNS=80`. Every
//! line it prints, on stdout and stderr, fits 80 columns (a link alone on its line aside: a link
//! is printed whole); the progress is summary lines with the counts (`N/200 done`), at a steady
//! pace (not one a second), naming at most the few slowest machines, and the last one and the
//! result say how it ended.
//!
//! The test runs under a cluster name of its own, with the sandbox at its `short` latencies (set
//! only when it is at another profile, and put back) and a worker whose ARM write budget is 20
//! writes a second, so that 200 machines take minutes, not ten. The pool is rolled to 0
//! replicas afterwards, whether the test passed or not.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{CliResult, KillableWorker, Sandbox, cli_with_env};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{PoolShape, clean_up_pool, rollout_pool_file, terminate};

/// The pool's machines.
const MACHINES: u32 = 200;
/// The terminal's width the CLI is told (`COLUMNS`).
const WIDTH: usize = 80;
/// The most machines a summary line names (the CLI's `SLOWEST`).
const NAMED_AT_MOST: usize = 3;
/// How long the rollout, and the clean-up's, may take.
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(900);
/// The sandbox's latency profile the test runs at.
const PROFILE: &str = "short";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_hundred_machine_rollout_s_wait_output_stays_within_80_columns() -> Result<()> {
    let mut stack = Stack::load()?;
    stack.cluster = format!("p26-{}", unique_suffix());
    let task_queue = unique_task_queue("p26");
    let pool = format!("ps{}", &unique_suffix()[..6]);
    let sandbox = Sandbox::new(&stack)?;
    let before = sandbox.latency().await?;
    if before != PROFILE {
        sandbox.set_latency(PROFILE).await?;
    }
    let worker = KillableWorker::start_with_env(
        &stack,
        &task_queue,
        &task_queue,
        &[("NODEWRIGHT_ARM_WRITES_PER_SECOND", "20")],
    )?;
    let outcome = scenario(&stack, &task_queue, &pool)
        .await
        .with_context(|| format!("worker log (last lines):\n{}", worker.log_tail()));
    // A rollout that did not end is ended first, so that the clean-up's can start.
    terminate(&stack, &format!("rollout/{}/{pool}", stack.cluster)).await;
    scale_to_zero(&stack, &task_queue, &pool).await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    if before != PROFILE
        && let Err(error) = sandbox.set_latency(&before).await
    {
        eprintln!("putting the sandbox's latency profile back to {before}: {error:#}");
    }
    outcome
}

async fn scenario(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let shape = PoolShape {
        max_failures: 20,
        creation_timeout: "10m",
        ..PoolShape::new(MACHINES, "10%", "0")
    };
    let file = rollout_pool_file(stack, pool, &shape)?;
    let file = file.to_string_lossy().into_owned();
    let args = [
        "pool",
        "rollout",
        "--pool",
        &file,
        "--wait",
        "--observe-interval",
        "2s",
    ];
    let started = Instant::now();
    let answer = tokio::time::timeout(
        ROLLOUT_TIMEOUT,
        cli_with_env(stack, task_queue, &args, &[("COLUMNS", "80")]),
    )
    .await
    .map_err(|_| anyhow!("the rollout did not end within {ROLLOUT_TIMEOUT:?}"))??;
    let took = started.elapsed();
    println!(
        "rollout of {MACHINES} machines: {:.0} s; stderr:\n{}\nstdout:\n{}",
        took.as_secs_f64(),
        answer.stderr,
        answer.stdout
    );
    ensure!(
        answer.code == Some(0),
        "the rollout completes: exit {:?}",
        answer.code
    );
    check_output(&answer, pool, took)
}

/// Every line within [`WIDTH`]; summary lines with the counts at a steady pace, naming at most
/// [`NAMED_AT_MOST`] machines; the last one and the result say it completed.
fn check_output(answer: &CliResult, pool: &str, took: Duration) -> Result<()> {
    let too_wide: Vec<(usize, &str)> = answer
        .stderr
        .lines()
        .chain(answer.stdout.lines())
        .filter(|line| !line.trim_start().starts_with("http"))
        .map(|line| (line.chars().count(), line))
        .filter(|(columns, _)| *columns > WIDTH)
        .collect();
    ensure!(
        too_wide.is_empty(),
        "lines wider than {WIDTH} columns: {too_wide:#?}"
    );
    let done = format!("/{MACHINES} done");
    let summaries: Vec<&str> = answer
        .stderr
        .lines()
        .filter(|line| line.contains(&done))
        .collect();
    ensure!(
        summaries.len() >= 2,
        "summary lines with the counts: {summaries:#?}"
    );
    // A line when the counts change, at most one every 10 s, one a minute at least; the first
    // and the last come at once.
    let at_most = usize::try_from(took.as_secs() / 10)? + 3;
    ensure!(
        summaries.len() <= at_most,
        "at most {at_most} summary lines in {took:?} (a steady pace): {}",
        summaries.len()
    );
    let named = format!("{pool}-");
    for line in &summaries {
        ensure!(
            line.matches(&named).count() <= NAMED_AT_MOST,
            "a summary names at most {NAMED_AT_MOST} machines: {line}"
        );
    }
    ensure!(
        summaries.iter().any(|line| line.contains(" creating")),
        "a summary counts the creates in flight: {summaries:#?}"
    );
    let last = summaries.last().copied().unwrap_or_default();
    ensure!(
        last.starts_with("completed") && last.contains(&format!("{MACHINES}/{MACHINES} done")),
        "the last summary says it completed with every machine done: {last}"
    );
    ensure!(
        answer
            .stdout
            .contains(&format!("pool {pool} runs template"))
            && answer.stdout.contains("temporal UI"),
        "the result says so, with its link: {}",
        answer.stdout
    );
    Ok(())
}

/// Rolls the pool to 0 replicas (every machine deleted through its DeleteMachine), quietly:
/// clean-up, whether the test passed or not.
async fn scale_to_zero(stack: &Stack, task_queue: &str, pool: &str) {
    let started = Instant::now();
    let scaled = async {
        let shape = PoolShape {
            creation_timeout: "10m",
            ..PoolShape::new(0, "1", "0").version("24.04.2")
        };
        let file = rollout_pool_file(stack, pool, &shape)?;
        let file = file.to_string_lossy().into_owned();
        let args = [
            "pool", "rollout", "--pool", &file, "--wait", "--output", "json",
        ];
        tokio::time::timeout(ROLLOUT_TIMEOUT, cli_with_env(stack, task_queue, &args, &[]))
            .await
            .map_err(|_| anyhow!("no end within {ROLLOUT_TIMEOUT:?}"))??
            .expect_code(0)
            .map(|_| ())
    };
    match scaled.await {
        Ok(()) => println!(
            "clean-up: pool {pool} rolled to 0 replicas in {:.0} s",
            started.elapsed().as_secs_f64()
        ),
        Err(error) => eprintln!("clean-up: rolling pool {pool} to 0 replicas: {error:#}"),
    }
}
