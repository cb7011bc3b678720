//! Issue 25's efficiency figures, measured on the local stack and printed; nothing about speed
//! is asserted (the machines here are noisy). `dev/bench` brings the stack up and runs it.
//!
//! Run: `cargo bench -p nodewright-tests --bench efficiency` with the local stack up
//! (`dev/stack up`) and the binaries built (`cargo build --workspace --bins`; add `--profile
//! dev` to reuse the debug build).
//!
//! # Expected Flow
//! 1. Check the stack answers and the binaries exist.
//! 2. Each row in turn ([`machine_life`] today), under a cluster, subscription and resource group
//!    of its own, with the sandbox at its `realistic` latency profile (the profile it had is put
//!    back at the end, also after a failure).
//! 3. Print every row of the table: the figure measured in this run, its target, and the
//!    rows not measured yet said so.
//!
//! # Errors
//! Exits non-zero with the reason when the stack is down or a row's runs fail (a correctness
//! failure: a machine not created or not deleted), never because a figure misses its target.
//!
//! Run by `cargo test --benches` (without cargo bench's `--bench` flag) it only says how to run
//! it.

#[path = "efficiency/machine_life.rs"]
mod machine_life;
#[path = "efficiency/request_log.rs"]
mod request_log;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use nodewright_tests::Stack;
use nodewright_tests::binaries::binary;
use nodewright_tests::machines::Sandbox;

/// The variable that sets how many machines the machine-life row creates and deletes at once.
const MACHINES_VARIABLE: &str = "NODEWRIGHT_BENCH_MACHINES";
/// The machines of the machine-life row when the variable is unset.
const DEFAULT_MACHINES: usize = 4;

fn main() -> ExitCode {
    nodewright_tests::bench::main("efficiency", "the local stack and about 10 minutes", run())
}

async fn run() -> Result<()> {
    let stack = Stack::load()?;
    for name in ["nodewright-worker", "nodewright"] {
        binary(name).context("the benchmark runs the workspace's binaries")?;
    }
    let sandbox = Sandbox::new(&stack)?;
    let before = tokio::time::timeout(Duration::from_secs(10), sandbox.latency())
        .await
        .map_err(|_| anyhow::anyhow!("the sandbox did not answer in 10 s"))?
        .context("the sandbox (ARM) does not answer: start the stack with `dev/stack up`")?;
    sandbox.set_latency("realistic").await?;
    let machines = machines()?;
    let life = machine_life::measure(&stack, machines).await;
    if let Err(error) = sandbox.set_latency(&before).await {
        eprintln!("putting the sandbox's latency profile back to {before}: {error:#}");
    }
    let life = life?;

    println!("\n## Efficiency (issue 25), measured {}", machine_note());
    println!("\n| figure | measured | target |");
    println!("|---|---|---|");
    println!(
        "| ARM requests for one machine's life (create + delete), realistic durations | {} | <= 20, completion noticed within 10 s or 10% |",
        life.summary()
    );
    for (figure, target) in [
        (
            "200 drains all waiting on one PodDisruptionBudget",
            "<= 5 requests/s, worker <= 0.05 core",
        ),
        (
            "1,000 concurrent waiting drains on one worker",
            "RSS <= 500 MB, CPU <= 0.2 core",
        ),
        (
            "200-machine replacement rollout, maxSurge 10%, 5 ARM writes/s",
            "<= 1.15x the write floor",
        ),
        (
            "200-machine first rollout (creates only)",
            "<= 1.05x the write floor",
        ),
        ("worker RSS during a 200-machine rollout", "keep (102 MB)"),
    ] {
        println!("| {figure} | not measured yet (issue 25, next slices) | {target} |");
    }
    println!();
    life.print_details();
    Ok(())
}

/// The machines of the machine-life row, from [`MACHINES_VARIABLE`].
fn machines() -> Result<usize> {
    match std::env::var(MACHINES_VARIABLE) {
        Ok(text) => text
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=8).contains(n))
            .with_context(|| {
                format!("{MACHINES_VARIABLE} is '{text}': give a number of machines from 1 to 8")
            }),
        Err(_) => Ok(DEFAULT_MACHINES),
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
