//! The rows "200 drains all waiting on one PodDisruptionBudget" and "1,000 concurrent waiting
//! drains on one worker": `N` maintenance drains on one worker of the row's own, every one
//! waiting on one budget that allows no disruption, measured over a steady window: the worker's
//! own apiserver requests (from its log, by verb and resource), its CPU (utime + stime over the
//! wall time, in cores) and its resident memory (the most seen), and the ARM requests of the
//! row's subscription (none are expected).
//!
//! # Expected Flow
//! 1. The scene ([`Scene`]): the worker, `N` Nodes Ready with a pod Running on each under the
//!    budget, a drain of every Node started with the CLI, all waiting on the budget.
//! 2. [`SETTLE`] more (one PDB retry interval), so that the start-up's work is done.
//! 3. The window: the worker's log length, CPU time and the sandbox's last request read at its
//!    start and end; its resident memory read every [`SAMPLE_EVERY`].
//! 4. Every drain queried again: still running, its pod still refused.
//! 5. The scene removed, also after a failure (or a panic).

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::FutureExt;
use nodewright_model::machine::Outcome;
use nodewright_tests::Stack;
use nodewright_tests::worker_meters::{
    apiserver_requests, cpu_seconds, ensure_requests_logged, rss_bytes,
};

use super::drain_scene::{AT_ONCE, STARTS_AT_ONCE, Scene, SetUp};
use super::request_log::RequestLog;

/// How long the drains settle after all wait, before the window: one PDB retry interval.
pub const SETTLE: Duration = Duration::from_secs(20);
/// How often the worker's resident memory is read during the window.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(2);
/// The drains' PDB retry interval (the default: the Nodes carry no drain-policy annotation).
const PDB_RETRY_SECONDS: f64 = 20.0;
/// How many kinds of apiserver request the details list (the rest summed).
const TOP_REQUESTS: usize = 10;
/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// One drain row's settings.
pub struct Row {
    /// The row's name in `NODEWRIGHT_BENCH_ROWS`, and its pool's prefix.
    pub name: &'static str,
    /// The pool name's prefix (two letters).
    pub prefix: &'static str,
    /// How many Nodes, pods and drains.
    pub drains: usize,
    /// The measured window.
    pub window: Duration,
}

/// What a drain row measured.
pub struct Waiting {
    name: &'static str,
    drains: usize,
    set_up: SetUp,
    seconds: f64,
    requests: BTreeMap<String, f64>,
    cpu_seconds: f64,
    rss_start: u64,
    rss_max: u64,
    rss_end: u64,
    arm: BTreeMap<String, usize>,
    evictions: (u32, u32),
    still_blocked: usize,
    worker_log: String,
}

impl Waiting {
    /// The worker's apiserver requests per second over the window.
    fn requests_per_second(&self) -> f64 {
        self.requests.values().sum::<f64>() / self.seconds
    }

    /// The worker's CPU over the window, in cores.
    fn cores(&self) -> f64 {
        self.cpu_seconds / self.seconds
    }

    /// The table cell of the row "N drains all waiting on one PodDisruptionBudget": requests
    /// per second and CPU.
    pub fn requests_summary(&self) -> String {
        format!(
            "{:.2} requests/s, worker {:.3} core ({} drains, {:.0} s window)",
            self.requests_per_second(),
            self.cores(),
            self.drains,
            self.seconds
        )
    }

    /// The table cell of the row "N concurrent waiting drains on one worker": RSS and CPU.
    pub fn memory_summary(&self) -> String {
        format!(
            "RSS {:.0} MiB (most seen), CPU {:.3} core ({} drains, {:.0} s window)",
            self.rss_max as f64 / MIB,
            self.cores(),
            self.drains,
            self.seconds
        )
    }

    /// The set-up's durations, every meter, and the requests by verb and resource.
    pub fn print_details(&self) {
        let SetUp {
            nodes_ready,
            pods_running,
            drains_started,
            all_waiting,
        } = &self.set_up;
        println!(
            "\n{} ({} drains on one worker, one budget): {} Nodes Ready in {:.0} s and their pods \
             Running in {:.0} s ({AT_ONCE} creates at once); the drains started in {:.0} s \
             ({STARTS_AT_ONCE} CLI processes at once), all waiting {:.0} s after the last; window \
             of {:.0} s after {} s settling; worker log {}",
            self.name,
            self.drains,
            self.drains,
            nodes_ready.as_secs_f64(),
            pods_running.as_secs_f64(),
            drains_started.as_secs_f64(),
            all_waiting.as_secs_f64(),
            self.seconds,
            SETTLE.as_secs(),
            self.worker_log
        );
        println!(
            "worker: {:.3} core; RSS {:.0} MiB at the window's start, {:.0} MiB most, {:.0} MiB \
             at its end; {:.2} apiserver requests/s; {} ARM requests{}",
            self.cores(),
            self.rss_start as f64 / MIB,
            self.rss_max as f64 / MIB,
            self.rss_end as f64 / MIB,
            self.requests_per_second(),
            self.arm.values().sum::<usize>(),
            if self.arm.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    self.arm
                        .iter()
                        .map(|(operation, count)| format!("{operation} {count}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
        let rounds = self.seconds / PDB_RETRY_SECONDS;
        println!(
            "\n| apiserver request | in the window | per second | per drain per {PDB_RETRY_SECONDS:.0} s retry interval |"
        );
        println!("|---|---|---|---|");
        let mut by_count: Vec<(&String, &f64)> = self.requests.iter().collect();
        by_count.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
        let per_drain_round = |count: f64| count / self.drains as f64 / rounds;
        for (request, count) in by_count.iter().take(TOP_REQUESTS) {
            println!(
                "| {request} | {count:.0} | {:.2} | {:.2} |",
                *count / self.seconds,
                per_drain_round(**count)
            );
        }
        let rest: f64 = by_count.iter().skip(TOP_REQUESTS).map(|(_, c)| **c).sum();
        if rest > 0.0 {
            println!(
                "| {} others | {rest:.0} | {:.2} | {:.2} |",
                by_count.len() - TOP_REQUESTS,
                rest / self.seconds,
                per_drain_round(rest)
            );
        }
        let total: f64 = self.requests.values().sum();
        println!(
            "| all | {total:.0} | {:.2} | {:.2} |",
            total / self.seconds,
            per_drain_round(total)
        );
        println!(
            "\nafter the window: {} of {} pods still refused by the budget; evictions per drain \
             since its start: {} to {}",
            self.still_blocked, self.drains, self.evictions.0, self.evictions.1
        );
    }
}

/// Sets the row's scene up, measures it, and removes it (also after a failure or a panic).
pub async fn measure(stack: &Stack, row: &Row) -> Result<Waiting> {
    println!(
        "{}: {} Nodes, pods and drains waiting on one budget, then a {} s window",
        row.name,
        row.drains,
        row.window.as_secs()
    );
    let mut scene = Scene::plan(stack, row.prefix, row.drains).await?;
    let outcome = match AssertUnwindSafe(measure_scene(&mut scene, row))
        .catch_unwind()
        .await
    {
        Ok(outcome) => outcome,
        Err(_) => Err(anyhow::anyhow!("the row {} panicked (see above)", row.name)),
    };
    let outcome = match (outcome, scene.worker()) {
        (Err(error), Ok(worker)) => {
            Err(error.context(format!("worker log (last lines):\n{}", worker.log_tail())))
        }
        (outcome, _) => outcome,
    };
    scene.clean_up().await;
    outcome.with_context(|| format!("the row {}", row.name))
}

/// Steps 1 to 4 of the module doc, the clean-up aside.
async fn measure_scene(scene: &mut Scene, row: &Row) -> Result<Waiting> {
    ensure_requests_logged(&scene.worker()?.log_text())?;
    scene.populate().await?;
    scene.start_drains().await?;
    scene.await_waiting().await?;
    println!(
        "{}: all {} drains waiting on the budget; settling {} s",
        row.name,
        row.drains,
        SETTLE.as_secs()
    );
    tokio::time::sleep(SETTLE).await;

    let arm_log = RequestLog::new(&scene.stack)?;
    let arm_since = arm_log.last_seq().await?;
    let worker = scene.worker()?;
    let pid = worker.pid().context("the worker has no process id")?;
    let log_start = worker.log_text().len();
    let cpu_start = cpu_seconds(pid)?;
    let started = Instant::now();
    let rss_start = rss_bytes(pid)?;
    let mut rss_max = rss_start;
    let ends = started + row.window;
    loop {
        let now = Instant::now();
        if now >= ends {
            break;
        }
        tokio::time::sleep(SAMPLE_EVERY.min(ends - now)).await;
        if !worker.is_running() {
            bail!("the worker exited during the window");
        }
        rss_max = rss_max.max(rss_bytes(pid)?);
    }
    let cpu_end = cpu_seconds(pid)?;
    let seconds = started.elapsed().as_secs_f64();
    let rss_end = rss_bytes(pid)?;
    let log = worker.log_text();
    let requests = apiserver_requests(log.get(log_start..).unwrap_or_default());
    let mut arm = BTreeMap::new();
    for request in arm_log.since(arm_since).await? {
        *arm.entry(request.operation).or_default() += 1;
    }

    let statuses = scene.statuses(&scene.nodes).await?;
    if statuses.len() != scene.nodes.len() {
        bail!(
            "only {} of {} drains answered their status query after the window",
            statuses.len(),
            scene.nodes.len()
        );
    }
    if let Some((node, status)) = statuses
        .iter()
        .find(|(_, status)| status.run.outcome != Outcome::Running)
    {
        bail!(
            "the drain of {node} ended during the window: {}",
            status.run.failure.as_deref().unwrap_or("no failure given")
        );
    }
    let still_blocked = statuses
        .iter()
        .filter(|(node, status)| scene.is_waiting(node, status))
        .count();
    let evictions: Vec<u32> = statuses
        .iter()
        .flat_map(|(_, status)| status.pods.iter().map(|pod| pod.evictions))
        .collect();
    let evictions = (
        evictions.iter().copied().min().unwrap_or(0),
        evictions.iter().copied().max().unwrap_or(0),
    );
    let worker_log = scene.worker()?.log_path().display().to_string();
    Ok(Waiting {
        name: row.name,
        drains: row.drains,
        set_up: scene.set_up.clone(),
        seconds,
        requests,
        cpu_seconds: cpu_end - cpu_start,
        rss_start,
        rss_max,
        rss_end,
        arm,
        evictions,
        still_blocked,
        worker_log,
    })
}
