//! Issue 25's efficiency figures, measured on the local stack and printed; nothing about speed
//! is asserted (the machines here are noisy). `dev/bench` brings the stack up and runs it.
//!
//! Run: `cargo bench -p nodewright-tests --bench efficiency` with the local stack up
//! (`dev/stack up`) and the binaries built (`cargo build --workspace --bins`; add `--profile
//! dev` to reuse the debug build).
//!
//! Variables:
//!
//! - `NODEWRIGHT_BENCH_ROWS`: the rows to measure, comma-separated, of `machine-life`, `drains`,
//!   `waiting-drains` and `rollouts` (default: all four); the others print "not measured in this
//!   run".
//! - `NODEWRIGHT_BENCH_MACHINES`: machines created and deleted at once by the machine-life row
//!   (1-8, default 4).
//! - `NODEWRIGHT_BENCH_DRAINS`: drains of the `drains` row (default 200).
//! - `NODEWRIGHT_BENCH_WAITING_DRAINS`: drains of the `waiting-drains` row (default 1000).
//! - `NODEWRIGHT_BENCH_WINDOW_SECONDS`: the measured window of both drain rows (default 120).
//! - `NODEWRIGHT_BENCH_ROLLOUT_MACHINES`: the pool of the `rollouts` row (1-1000, default 200).
//!
//! # Expected Flow
//! 1. Check the stack answers and the binaries exist.
//! 2. Each row asked for in turn, each under a cluster, subscription and resource group of its
//!    own: [`machine_life`] with the sandbox at its `realistic` latency profile (the profile it
//!    had is put back right after the row, also after a failure; the other rows leave the
//!    profile alone), then the two rows of [`drains`]: `drains` (N drains on one worker all
//!    waiting on one PodDisruptionBudget: the worker's apiserver requests per second and CPU)
//!    and `waiting-drains` (the same with 1,000 drains: the worker's RSS and CPU); then
//!    [`rollouts`] with the sandbox at its `short` latencies (set only when it is at another
//!    profile, and put back): a pool's first rollout and its replacement rollout (maxSurge 10%,
//!    5 ARM writes/s) against their write floors, and the worker's RSS.
//! 3. Print every row of the table: the figure measured in this run, its target, and the
//!    rows not measured (yet, or in this run) said so; then each measured row's details.
//!
//! # Errors
//! Exits non-zero with the reason when the stack is down or a row's runs fail (a correctness
//! failure: a machine not created or not deleted, a Node, pod or budget not made, a drain not
//! started or not waiting), never because a figure misses its target.
//!
//! Run by `cargo test --benches` (without cargo bench's `--bench` flag) it only says how to run
//! it.

#[path = "efficiency/drain_scene.rs"]
mod drain_scene;
#[path = "efficiency/drains.rs"]
mod drains;
#[path = "efficiency/machine_life.rs"]
mod machine_life;
#[path = "efficiency/request_log.rs"]
mod request_log;
#[path = "efficiency/rollouts.rs"]
mod rollouts;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use nodewright_tests::Stack;
use nodewright_tests::binaries::binary;
use nodewright_tests::machines::Sandbox;

/// The variable that names the rows to measure.
const ROWS_VARIABLE: &str = "NODEWRIGHT_BENCH_ROWS";
/// The variable that sets how many machines the machine-life row creates and deletes at once.
const MACHINES_VARIABLE: &str = "NODEWRIGHT_BENCH_MACHINES";
/// The machines of the machine-life row when the variable is unset.
const DEFAULT_MACHINES: usize = 4;
/// The variable that sets the drains of the `drains` row.
const DRAINS_VARIABLE: &str = "NODEWRIGHT_BENCH_DRAINS";
/// The variable that sets the drains of the `waiting-drains` row.
const WAITING_DRAINS_VARIABLE: &str = "NODEWRIGHT_BENCH_WAITING_DRAINS";
/// The variable that sets the drain rows' window, in seconds.
const WINDOW_VARIABLE: &str = "NODEWRIGHT_BENCH_WINDOW_SECONDS";
/// The variable that sets the machines of the `rollouts` row's pool.
const ROLLOUT_MACHINES_VARIABLE: &str = "NODEWRIGHT_BENCH_ROLLOUT_MACHINES";
/// The most drains a drain row makes (Nodes, pods and runs on the shared stack).
const MAX_DRAINS: usize = 5000;

/// The rows the benchmark can measure, by their name in [`ROWS_VARIABLE`].
const ROWS: [&str; 4] = ["machine-life", "drains", "waiting-drains", "rollouts"];

fn main() -> ExitCode {
    nodewright_tests::bench::main("efficiency", "the local stack and about 25 minutes", run())
}

async fn run() -> Result<()> {
    let rows = rows()?;
    let measured = |row: &str| rows.contains(&row);
    // Every setting is read before the first row runs: a typo fails at once.
    let machines = machines()?;
    let window = Duration::from_secs(number(WINDOW_VARIABLE, 120, 10..=3600)?);
    let pdb_row = drains::Row {
        name: "drains",
        prefix: "bd",
        drains: number(DRAINS_VARIABLE, 200, 1..=MAX_DRAINS as u64)?.try_into()?,
        window,
    };
    let waiting_row = drains::Row {
        name: "waiting-drains",
        prefix: "bw",
        drains: number(WAITING_DRAINS_VARIABLE, 1000, 1..=MAX_DRAINS as u64)?.try_into()?,
        window,
    };
    let rollout_machines: usize = number(ROLLOUT_MACHINES_VARIABLE, 200, 1..=1000)?.try_into()?;
    let stack = Stack::load()?;
    for name in ["nodewright-worker", "nodewright"] {
        binary(name).context("the benchmark runs the workspace's binaries")?;
    }
    let sandbox = Sandbox::new(&stack)?;
    let before = tokio::time::timeout(Duration::from_secs(10), sandbox.latency())
        .await
        .map_err(|_| anyhow::anyhow!("the sandbox did not answer in 10 s"))?
        .context("the sandbox (ARM) does not answer: start the stack with `dev/stack up`")?;
    println!(
        "rows: {} ({ROWS_VARIABLE}); binaries: {}",
        rows.join(", "),
        binary("nodewright-worker")?.display()
    );

    let life = if measured("machine-life") {
        sandbox.set_latency("realistic").await?;
        let life = machine_life::measure(&stack, machines).await;
        if let Err(error) = sandbox.set_latency(&before).await {
            eprintln!("putting the sandbox's latency profile back to {before}: {error:#}");
        }
        Some(life.context("the row machine-life")?)
    } else {
        None
    };
    let pdb = if measured(pdb_row.name) {
        Some(drains::measure(&stack, &pdb_row).await?)
    } else {
        None
    };
    let waiting = if measured(waiting_row.name) {
        Some(drains::measure(&stack, &waiting_row).await?)
    } else {
        None
    };

    let rollouts = if measured("rollouts") {
        Some(
            rollouts::measure(&stack, &sandbox, rollout_machines)
                .await
                .context("the row rollouts")?,
        )
    } else {
        None
    };

    let not_in_this_run = format!("not measured in this run ({ROWS_VARIABLE})");
    println!("\n## Efficiency (issue 25), measured {}", machine_note());
    println!("\n| figure | measured | target |");
    println!("|---|---|---|");
    println!(
        "| ARM requests for one machine's life (create + delete), realistic durations | {} | <= 20, completion noticed within 10 s or 10% |",
        life.as_ref()
            .map_or_else(|| not_in_this_run.clone(), machine_life::Life::summary)
    );
    println!(
        "| 200 drains all waiting on one PodDisruptionBudget | {} | <= 5 requests/s, worker <= 0.05 core |",
        pdb.as_ref().map_or_else(
            || not_in_this_run.clone(),
            drains::Waiting::requests_summary
        )
    );
    println!(
        "| 1,000 concurrent waiting drains on one worker | {} | RSS <= 500 MB, CPU <= 0.2 core |",
        waiting
            .as_ref()
            .map_or_else(|| not_in_this_run.clone(), drains::Waiting::memory_summary)
    );
    for (figure, cell_of, target) in [
        (
            "200-machine replacement rollout, maxSurge 10%, 5 ARM writes/s",
            rollouts::Rollouts::replacement_summary as fn(&rollouts::Rollouts) -> String,
            "<= 1.15x the write floor (1.46x before)",
        ),
        (
            "200-machine first rollout (creates only)",
            rollouts::Rollouts::first_summary,
            "<= 1.05x the write floor (1.10x before)",
        ),
        (
            "worker RSS during a 200-machine rollout",
            rollouts::Rollouts::rss_summary,
            "keep (102 MB)",
        ),
    ] {
        let cell = rollouts
            .as_ref()
            .map_or_else(|| not_in_this_run.clone(), cell_of);
        println!("| {figure} | {cell} | {target} |");
    }
    println!();
    if let Some(life) = &life {
        life.print_details();
    }
    for row in [&pdb, &waiting].into_iter().flatten() {
        row.print_details();
    }
    if let Some(rollouts) = &rollouts {
        rollouts.print_details();
    }
    Ok(())
}

/// The rows named in [`ROWS_VARIABLE`] (all of [`ROWS`] when it is unset or empty), in the
/// order of [`ROWS`].
fn rows() -> Result<Vec<&'static str>> {
    let Ok(text) = std::env::var(ROWS_VARIABLE) else {
        return Ok(ROWS.to_vec());
    };
    let asked: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect();
    if asked.is_empty() {
        return Ok(ROWS.to_vec());
    }
    if let Some(unknown) = asked.iter().find(|name| !ROWS.contains(name)) {
        bail!(
            "{ROWS_VARIABLE} names the row '{unknown}': give a comma-separated list of {}",
            ROWS.join(", ")
        );
    }
    Ok(ROWS
        .iter()
        .copied()
        .filter(|row| asked.contains(row))
        .collect())
}

/// The machines of the machine-life row, from [`MACHINES_VARIABLE`].
fn machines() -> Result<usize> {
    Ok(number(MACHINES_VARIABLE, DEFAULT_MACHINES as u64, 1..=8)?.try_into()?)
}

/// The whole number in the variable `name`, `default` when it is unset; fails when it is not a
/// number in `range`.
fn number(name: &str, default: u64, range: std::ops::RangeInclusive<u64>) -> Result<u64> {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| range.contains(n))
            .with_context(|| {
                format!(
                    "{name} is '{text}': give a whole number from {} to {}",
                    range.start(),
                    range.end()
                )
            }),
        Err(_) => Ok(default),
    }
}

/// The machine the figures come from: cores and memory, as the README states them.
fn machine_note() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or_else(String::new, |kb| format!(", {} GiB", kb / (1024 * 1024)));
    format!(
        "{} on {cores} cores{memory}",
        chrono::Utc::now().format("%Y-%m-%d")
    )
}
