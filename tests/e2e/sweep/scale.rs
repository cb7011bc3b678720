//! The scale benchmark (ignored by default; run it alone, it prints figures):
//! 10,000 VMs + 10,000 NICs + 10,000 disks of this cluster in the sandbox — every machine young
//! with its NIC and OS disk attached (one with its Node, so the brake does not hold the plan), plus
//! ten orphans of each kind — swept once. Prints the
//! wall time, the ARM requests by operation (list pages, no per-resource GET), the worker's peak
//! memory and the audit's size, against a baseline measured in the same run: the three paged
//! lists alone.
//!
//! `cargo test -p nodewright-tests --test e2e -- --ignored sweep::scale --nocapture`

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use serde_json::{Value, json};

use super::common::{OLD, SweepCluster, joined_node, outcome, own_removals, remove_nodes};

const MACHINES: usize = 10_000;
const ORPHANS_PER_KIND: usize = 10;
const SEED_CHUNK: usize = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run alone with --ignored --nocapture"]
async fn sweep_of_ten_thousand_machines() -> Result<()> {
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    let result = benchmark(&sweep).await;
    remove_nodes(&sweep, &[format!("{}-00000", sweep.pool)]).await?;
    sweep.clean_up().await?;
    result
}

async fn benchmark(sweep: &SweepCluster) -> Result<()> {
    let young = Duration::from_secs(60);
    let mut resources = Vec::new();
    for i in 0..MACHINES {
        let machine = format!("{}-{i:05}", sweep.pool);
        let tags = sweep.ours(&machine, young);
        resources.push(json!({ "type": "vm", "name": machine, "tags": tags }));
        resources.push(json!({ "type": "nic", "name": format!("{machine}-nic"), "tags": tags, "attachedTo": machine }));
        resources.push(json!({ "type": "disk", "name": format!("{machine}-osdisk"), "tags": tags, "attachedTo": machine }));
    }
    for i in 0..ORPHANS_PER_KIND {
        let machine = format!("{}-orp{i:02}", sweep.pool);
        let tags = sweep.ours(&machine, OLD);
        resources.push(json!({ "type": "vm", "name": machine, "tags": tags }));
        let lone = format!("{}-lon{i:02}", sweep.pool);
        let lone_tags = sweep.ours(&lone, OLD);
        resources.push(json!({ "type": "nic", "name": format!("{lone}-nic"), "tags": lone_tags }));
        resources
            .push(json!({ "type": "disk", "name": format!("{lone}-osdisk"), "tags": lone_tags }));
    }
    let seeding = Instant::now();
    for chunk in resources.chunks(SEED_CHUNK) {
        sweep.seed(chunk.to_vec()).await?;
    }
    println!(
        "seeded {} resources in {:.1} s",
        resources.len(),
        seeding.elapsed().as_secs_f64()
    );
    // One machine has joined: a sweep that sees no Node for any VM brakes (see `brake.rs`).
    joined_node(sweep, &format!("{}-00000", sweep.pool)).await?;

    // Baseline: the three lists alone, side by side, from this process (the least any sweep
    // must do).
    let arm = sweep.stack.arm_client()?;
    let listing = Instant::now();
    let (vms, nics, disks) = tokio::join!(arm.list_vms(), arm.list_nics(), arm.list_disks());
    let baseline = listing.elapsed();
    let listed = vms?.len() + nics?.len() + disks?.len();

    let dry_started = Instant::now();
    let (code, dry) = sweep.sweep(&["--dry-run"]).await?;
    let dry_wall = dry_started.elapsed();
    ensure!(
        code == Some(0) && outcome(&dry) == "dry-run",
        "dry run {code:?}: {}",
        shown(&dry.outcome)
    );

    let http = reqwest::Client::new();
    let admin = |path: &str| format!("{}{path}", sweep.stack.arm.endpoint.trim_end_matches('/'));
    http.post(admin("/sandbox/stats/reset"))
        .bearer_auth(&sweep.stack.arm.token)
        .send()
        .await?
        .error_for_status()?;
    let started = Instant::now();
    let (code, audit) = sweep.sweep(&["--max-deletions", "50"]).await?;
    let wall = started.elapsed();
    let stats: Value = http
        .get(admin("/sandbox/stats"))
        .bearer_auth(&sweep.stack.arm.token)
        .send()
        .await?
        .json()
        .await?;
    ensure!(
        code == Some(0),
        "sweep exit {code:?}: {}",
        shown(&audit.outcome)
    );
    ensure!(outcome(&audit) == "completed");
    let own = own_removals(&audit, &sweep.pool);
    ensure!(own.len() == 3 * ORPHANS_PER_KIND, "removals {own:?}");
    ensure!(
        own.values().all(|(_, result)| result == "deleted"),
        "{own:?}"
    );
    let seen = &audit.seen;
    ensure!(
        usize::try_from(seen.vms)? >= MACHINES + ORPHANS_PER_KIND,
        "seen {}",
        shown(seen)
    );

    let peak = worker_peak_memory(sweep).unwrap_or_else(|e| format!("unknown ({e})"));
    let audit_bytes = serde_json::to_string(&audit)?.len();
    println!("sweep of {MACHINES} machines (+{ORPHANS_PER_KIND} orphans of each kind):");
    println!(
        "  wall time (sweep run --wait, CLI start to audit): {:.1} s",
        wall.as_secs_f64()
    );
    println!(
        "  baseline (the three paged lists alone, in parallel, {listed} resources): {:.1} s; ratio {:.2}",
        baseline.as_secs_f64(),
        wall.as_secs_f64() / baseline.as_secs_f64().max(0.001)
    );
    println!(
        "  dry run (inventory + classification, no deletion): {:.1} s; ratio to the baseline {:.2}",
        dry_wall.as_secs_f64(),
        dry_wall.as_secs_f64() / baseline.as_secs_f64().max(0.001)
    );
    println!("  seen: {}", shown(seen));
    println!("  ARM requests: {} in all", stats["total"]);
    if let Some(by_operation) = stats["by_operation"].as_object() {
        for (operation, statuses) in by_operation {
            println!("    {operation}: {statuses}");
        }
    }
    println!("  worker peak memory (VmHWM): {peak}");
    println!("  audit size: {} KiB", audit_bytes / 1024);
    Ok(())
}

/// The worker's peak resident memory, from `/proc/<pid>/status` (found by its task queue).
fn worker_peak_memory(sweep: &SweepCluster) -> Result<String> {
    let wanted = format!("NODEWRIGHT_TASK_QUEUE={}", sweep.task_queue);
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let path = entry.path();
        let Ok(environ) = std::fs::read(path.join("environ")) else {
            continue;
        };
        let ours = environ
            .split(|b| *b == 0)
            .any(|var| var == wanted.as_bytes());
        let cmdline = std::fs::read(path.join("cmdline")).unwrap_or_default();
        if ours && String::from_utf8_lossy(&cmdline).contains("nodewright-worker") {
            let status = std::fs::read_to_string(path.join("status"))?;
            return status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .map(|value| value.trim().to_owned())
                .context("no VmHWM");
        }
    }
    anyhow::bail!("no worker process with {wanted}")
}
