//! The rows "200-machine first rollout (creates only)", "200-machine replacement rollout,
//! maxSurge 10%, 5 ARM writes/s" and "worker RSS during a 200-machine rollout": a pool of `N`
//! machines brought from none to `N` by a first rollout, then every machine replaced by a
//! rollout to a new image version (maxSurge 10%, maxUnavailable 0, the default), both through
//! the CLI (`pool rollout --wait`, the rollout's default observe interval) on a worker of the
//! row's own cluster, subscription and resource group whose ARM write budget is
//! [`WRITES_PER_SECOND`], with the sandbox at its `short` latencies.
//!
//! A rollout's write floor is the ARM writes it made (PUT, PATCH, DELETE and POST requests of
//! the row's subscription in the sandbox's request log, Resource Graph queries aside) divided by
//! the budget: the least time the budget allows. Its makespan runs from the CLI's start to the
//! close of the rollout's last run (Temporal's visibility). The worker's resident memory and CPU
//! time, and its task slots in use (its Prometheus metrics), are read every second; the
//! details show where the time went: per 10-s bucket the writes made, by kind, the seconds
//! without a write, and the creates and deletes started and running.
//!
//! # Expected Flow
//! 1. The sandbox's latency profile read; set to `short` only when it is another one, and put
//!    back after the row, also after a failure.
//! 2. A cluster, subscription and resource group of the row's own, with the virtual network
//!    `nodes` and its subnet `nodes` (as `dev/stack` makes the stack's); a worker on a task
//!    queue of its own with `NODEWRIGHT_ARM_WRITES_PER_SECOND` at [`WRITES_PER_SECOND`].
//! 3. The first rollout: `pool rollout --pool <v1> --wait`, checked completed with `N` machines
//!    created and `N` Ready machines of its template.
//! 4. The replacement: the same to the image version after, checked completed with `N`
//!    created, `N` deleted and `N` Ready machines of the new template.
//! 5. The request log, both rollouts' runs and their children (visibility) read; per rollout
//!    its figures and timeline.
//! 6. Clean-up, also after a failure (or a panic): the rollout terminated, the pool rolled to
//!    0 replicas (what is left deleted by `machine delete --skip-drain`), the pool's Nodes,
//!    NICs and disks left and the virtual network deleted.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use chrono::{DateTime, Utc};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use nodewright_model::ownership::{LABEL_POOL, TAG_CLUSTER, TAG_POOL, TAG_TEMPLATE};
use nodewright_model::rollout::{RolloutOutcome, RolloutResult};
use nodewright_tests::Stack;
use nodewright_tests::documents::ResultDocument;
use nodewright_tests::identity::await_identity_recorded;
use nodewright_tests::kube_objects::{is_node_ready, unique_suffix};
use nodewright_tests::machines::{KillableWorker, Sandbox, cli, write_pool_file};
use nodewright_tests::sandbox_admin::get_json;
use nodewright_tests::stack::temporal_cli;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::worker_meters::{cpu_seconds, rss_bytes};
use serde::Deserialize;

/// The ARM write budget of the row's worker, writes per second (the default).
pub const WRITES_PER_SECOND: f64 = 5.0;
/// The sandbox's latency profile the row measures at.
const PROFILE: &str = "short";
/// maxSurge of both rollouts.
const MAX_SURGE: &str = "10%";
/// maxUnavailable of both rollouts (the default).
const MAX_UNAVAILABLE: &str = "0";
/// The image version of the first rollout, and of the replacement's.
const VERSIONS: [&str; 2] = ["24.04.1", "24.04.2"];
/// The width of a timeline bucket, in seconds.
const BUCKET_SECONDS: i64 = 10;
/// How often the worker's memory, CPU time and task slots are read.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// How often the request log is read while the row runs (its ring keeps 20,000 requests).
const LOG_EVERY: Duration = Duration::from_secs(5);
/// The address of the sandbox's virtual network `nodes` in a resource group, after the
/// subscription and resource group.
const NETWORK: &str = "providers/Microsoft.Network/virtualNetworks/nodes";
/// The API versions the clean-up reads and deletes with.
const NETWORK_API: &str = "2024-03-01";
const DISK_API: &str = "2024-03-02";
/// How many `machine delete` commands the clean-up runs at once.
const DELETES_AT_ONCE: usize = 20;
/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// What the row measured: both rollouts.
pub struct Rollouts {
    machines: usize,
    first: Phase,
    replacement: Phase,
}

impl Rollouts {
    /// The table cell of the first rollout: makespan against the write floor.
    pub fn first_summary(&self) -> String {
        self.first.summary(self.machines)
    }

    /// The table cell of the replacement rollout: makespan against the write floor.
    pub fn replacement_summary(&self) -> String {
        self.replacement.summary(self.machines)
    }

    /// The table cell of the worker's memory: the most resident memory seen in each rollout.
    pub fn rss_summary(&self) -> String {
        let first = self.first.max_rss();
        let replacement = self.replacement.max_rss();
        format!(
            "{:.0} MiB at most ({} machines; first rollout {:.0} MiB, replacement {:.0} MiB); worker CPU {:.0} s and {:.0} s",
            first.max(replacement) / MIB,
            self.machines,
            first / MIB,
            replacement / MIB,
            self.first.cpu_seconds(),
            self.replacement.cpu_seconds(),
        )
    }

    /// Each rollout's figures, the writes by kind, the children and the timeline.
    pub fn print_details(&self) {
        println!(
            "rollouts: a pool of {} machines, maxSurge {MAX_SURGE}, maxUnavailable {MAX_UNAVAILABLE}, \
             {WRITES_PER_SECOND} ARM writes/s, sandbox latencies {PROFILE}",
            self.machines
        );
        for phase in [&self.first, &self.replacement] {
            phase.print_details();
        }
    }
}

/// One rollout as measured.
struct Phase {
    name: &'static str,
    /// When the CLI started it.
    started: DateTime<Utc>,
    /// When its last run closed.
    ended: DateTime<Utc>,
    /// How long the CLI (`--wait`) ran.
    cli_seconds: f64,
    /// Its runs (continued as new), oldest first.
    runs: Vec<Listed>,
    /// Its CreateMachine and DeleteMachine children.
    children: Vec<Listed>,
    /// The ARM requests of the row's subscription from its start to its end.
    requests: Vec<Logged>,
    /// ARM writes after its end, before the next rollout or the clean-up (expected none).
    writes_after: usize,
    /// The worker's samples from its start to its end.
    samples: Vec<Sample>,
    /// The worker's latency histograms (sum and count by metric and task queue) at its start
    /// and end.
    histograms: (Histograms, Histograms),
    created: u32,
    deleted: u32,
}

/// `temporal workflow list` of one run.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    execution: Execution,
    start_time: DateTime<Utc>,
    #[serde(default)]
    close_time: Option<DateTime<Utc>>,
    #[serde(default)]
    status: String,
    #[serde(default)]
    history_length: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Execution {
    workflow_id: String,
}

/// One request of the sandbox's log.
#[derive(Debug, Clone, Deserialize)]
struct Logged {
    seq: u64,
    time: DateTime<Utc>,
    method: String,
    operation: String,
}

impl Logged {
    /// Whether it is an ARM write (what the write budget paces): PUT, PATCH, DELETE, POST; a
    /// Resource Graph query is a POST that reads.
    fn is_write(&self) -> bool {
        matches!(self.method.as_str(), "PUT" | "PATCH" | "DELETE" | "POST")
            && self.operation != "graph.query"
    }
}

/// The worker once a second.
#[derive(Debug, Clone)]
struct Sample {
    at: DateTime<Utc>,
    rss: u64,
    cpu: f64,
    /// Task slots in use by (worker type, task queue), from its metrics.
    slots: BTreeMap<(String, String), f64>,
}

/// Sum and count of the latency histograms, by (metric, task queue).
type Histograms = BTreeMap<(String, String), (f64, f64)>;

impl Phase {
    fn makespan(&self) -> f64 {
        seconds_between(self.started, self.ended)
    }

    fn writes(&self) -> Vec<&Logged> {
        self.requests.iter().filter(|r| r.is_write()).collect()
    }

    fn floor(&self) -> f64 {
        self.writes().len() as f64 / WRITES_PER_SECOND
    }

    fn max_rss(&self) -> f64 {
        self.samples.iter().map(|s| s.rss).max().unwrap_or(0) as f64
    }

    fn cpu_seconds(&self) -> f64 {
        match (self.samples.first(), self.samples.last()) {
            (Some(first), Some(last)) => last.cpu - first.cpu,
            _ => 0.0,
        }
    }

    /// Seconds since the start of each write, in whole seconds, counted.
    fn writes_per_second(&self) -> Vec<usize> {
        let seconds = self.makespan().ceil().max(1.0) as usize;
        let mut per = vec![0; seconds];
        for write in self.writes() {
            let at = seconds_between(self.started, write.time).floor();
            if at >= 0.0 && (at as usize) < seconds {
                per[at as usize] += 1;
            }
        }
        per
    }

    fn summary(&self, machines: usize) -> String {
        let floor = self.floor();
        let idle = self.writes_per_second().iter().filter(|n| **n == 0).count();
        format!(
            "{:.0} s for {machines} machines, {} ARM writes = {floor:.0} s write floor, {:.2}x; {idle} s without a write",
            self.makespan(),
            self.writes().len(),
            self.makespan() / floor.max(0.001),
        )
    }

    fn print_details(&self) {
        let writes = self.writes();
        let per_second = self.writes_per_second();
        let idle = per_second.iter().filter(|n| **n == 0).count();
        let full = per_second
            .iter()
            .filter(|n| **n as f64 >= WRITES_PER_SECOND)
            .count();
        let first_write = writes
            .first()
            .map(|w| seconds_between(self.started, w.time));
        let last_write = writes.last().map(|w| seconds_between(w.time, self.ended));
        let history: u64 = self
            .runs
            .iter()
            .filter_map(|run| run.history_length.as_deref()?.parse::<u64>().ok())
            .sum();
        println!(
            "\n### {}: {:.1} s (CLI --wait {:.1} s); {} ARM writes, floor {:.1} s, {:.2}x the floor",
            self.name,
            self.makespan(),
            self.cli_seconds,
            writes.len(),
            self.floor(),
            self.makespan() / self.floor().max(0.001)
        );
        println!(
            "- created {}, deleted {}; {} run(s) of the rollout (continued as new {} times), {history} history events in all",
            self.created,
            self.deleted,
            self.runs.len(),
            self.runs.len().saturating_sub(1)
        );
        println!(
            "- first write {} s after the start, last write {} s before the end; {idle} of {} seconds without a write, {full} at the budget ({WRITES_PER_SECOND}/s or more); {} ARM writes after the end",
            first_write.map_or_else(|| "-".to_owned(), |s| format!("{s:.1}")),
            last_write.map_or_else(|| "-".to_owned(), |s| format!("{s:.1}")),
            per_second.len(),
            self.writes_after
        );
        if let (Some(first), Some(last)) = (writes.first(), writes.last()) {
            let span = seconds_between(first.time, last.time).max(0.001);
            println!(
                "- between the first and the last write: {:.2} writes/s ({:.0}% of the budget)",
                writes.len() as f64 / span,
                100.0 * writes.len() as f64 / span / WRITES_PER_SECOND
            );
        }
        println!(
            "- worker: RSS at most {:.0} MiB, CPU {:.1} s ({:.2} core)",
            self.max_rss() / MIB,
            self.cpu_seconds(),
            self.cpu_seconds() / self.makespan().max(0.001)
        );
        self.print_slots();
        self.print_latencies();
        self.print_children();
        let mut by_operation: BTreeMap<&str, usize> = BTreeMap::new();
        for request in &self.requests {
            *by_operation.entry(request.operation.as_str()).or_default() += 1;
        }
        println!("\n| ARM operation | requests | writes |");
        println!("|---|---|---|");
        for (operation, count) in &by_operation {
            let writes = writes.iter().filter(|w| w.operation == *operation).count();
            println!("| {operation} | {count} | {writes} |");
        }
        self.print_timeline(&per_second);
    }

    /// The most task slots in use by worker type and task queue.
    fn print_slots(&self) {
        let mut most: BTreeMap<&(String, String), f64> = BTreeMap::new();
        for sample in &self.samples {
            for (key, used) in &sample.slots {
                let entry = most.entry(key).or_default();
                *entry = entry.max(*used);
            }
        }
        if most.is_empty() {
            println!("- task slots: not read (no metrics)");
            return;
        }
        let text: Vec<String> = most
            .iter()
            .map(|((kind, queue), used)| format!("{kind} on {} {used:.0}", queue_name(queue)))
            .collect();
        println!("- task slots in use at most: {}", text.join(", "));
    }

    /// Mean latencies over the rollout, from the histograms' sums and counts.
    fn print_latencies(&self) {
        let (before, after) = &self.histograms;
        let mut text = Vec::new();
        for (key, (sum, count)) in after {
            let (sum_before, count_before) = before.get(key).copied().unwrap_or((0.0, 0.0));
            let count = count - count_before;
            if count <= 0.0 {
                continue;
            }
            let mean = (sum - sum_before) / count;
            // The SDK's Prometheus histograms are in milliseconds unless named `_seconds`.
            let unit = if key.0.ends_with("_seconds") {
                "s"
            } else {
                "ms"
            };
            text.push(format!(
                "{} on {}: {count:.0}, mean {mean:.3} {unit}",
                key.0,
                queue_name(&key.1)
            ));
        }
        if !text.is_empty() {
            println!("- worker latencies:");
            for line in text {
                println!("  - {line}");
            }
        }
    }

    /// The children: how many, how long, and how soon after a child ended the next started.
    fn print_children(&self) {
        for (kind, prefix) in [("creates", "create/"), ("deletes", "delete/")] {
            let mut durations: Vec<f64> = self
                .children
                .iter()
                .filter(|c| c.execution.workflow_id.starts_with(prefix))
                .filter_map(|c| Some(seconds_between(c.start_time, c.close_time?)))
                .collect();
            if durations.is_empty() {
                continue;
            }
            durations.sort_by(f64::total_cmp);
            let failed = self
                .children
                .iter()
                .filter(|c| c.execution.workflow_id.starts_with(prefix))
                .filter(|c| !c.status.ends_with("COMPLETED"))
                .count();
            println!(
                "- {kind}: {} ({failed} not completed), each {:.1} s median, {:.1} s p90, {:.1} s at most",
                durations.len(),
                percentile(&durations, 0.5),
                percentile(&durations, 0.9),
                durations.last().copied().unwrap_or(0.0)
            );
        }
        // How long after the last child's end each child started (the first batch aside).
        let mut closes: Vec<DateTime<Utc>> =
            self.children.iter().filter_map(|c| c.close_time).collect();
        closes.sort();
        let mut reactions: Vec<f64> = self
            .children
            .iter()
            .filter_map(|child| {
                let before = closes.iter().rev().find(|c| **c <= child.start_time)?;
                Some(seconds_between(*before, child.start_time))
            })
            .collect();
        if !reactions.is_empty() {
            reactions.sort_by(f64::total_cmp);
            println!(
                "- a child started {:.2} s median, {:.2} s p90, {:.2} s at most after the child that ended last before it ({} children)",
                percentile(&reactions, 0.5),
                percentile(&reactions, 0.9),
                reactions.last().copied().unwrap_or(0.0),
                reactions.len()
            );
        }
        if let Some(first) = self.children.iter().map(|c| c.start_time).min() {
            let firsts: Vec<f64> = self
                .children
                .iter()
                .map(|c| seconds_between(self.started, c.start_time))
                .filter(|s| *s < seconds_between(self.started, first) + 30.0)
                .collect();
            println!(
                "- the first child started {:.1} s after the start; {} children started in its first 30 s, the last of them at {:.1} s",
                seconds_between(self.started, first),
                firsts.len(),
                firsts.iter().copied().fold(0.0, f64::max)
            );
        }
    }

    /// Per bucket: the writes by kind, the seconds without a write, the reads, the children
    /// started and running at the bucket's end.
    fn print_timeline(&self, per_second: &[usize]) {
        println!(
            "\n| t (s) | writes | NIC PUT | VM PUT | disk PATCH | VM DELETE | other writes | s without a write | reads | creates started | deletes started | creates running | deletes running |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        let buckets = (self.makespan() / BUCKET_SECONDS as f64).ceil().max(1.0) as i64;
        for bucket in 0..buckets {
            let from = self.started + chrono::Duration::seconds(bucket * BUCKET_SECONDS);
            let to = from + chrono::Duration::seconds(BUCKET_SECONDS);
            let inside: Vec<&Logged> = self
                .requests
                .iter()
                .filter(|r| r.time >= from && r.time < to)
                .collect();
            let writes: Vec<&&Logged> = inside.iter().filter(|r| r.is_write()).collect();
            let of = |operation: &str| writes.iter().filter(|w| w.operation == operation).count();
            let named = of("nic.put") + of("vm.put") + of("disk.patch") + of("vm.delete");
            let start = usize::try_from(bucket * BUCKET_SECONDS).unwrap_or(usize::MAX);
            let idle = per_second
                .iter()
                .skip(start)
                .take(BUCKET_SECONDS as usize)
                .filter(|n| **n == 0)
                .count();
            let started = |prefix: &str| {
                self.children
                    .iter()
                    .filter(|c| c.execution.workflow_id.starts_with(prefix))
                    .filter(|c| c.start_time >= from && c.start_time < to)
                    .count()
            };
            let running = |prefix: &str| {
                self.children
                    .iter()
                    .filter(|c| c.execution.workflow_id.starts_with(prefix))
                    .filter(|c| c.start_time < to && c.close_time.is_none_or(|end| end >= to))
                    .count()
            };
            println!(
                "| {}-{} | {} | {} | {} | {} | {} | {} | {idle} | {} | {} | {} | {} | {} |",
                bucket * BUCKET_SECONDS,
                (bucket + 1) * BUCKET_SECONDS,
                writes.len(),
                of("nic.put"),
                of("vm.put"),
                of("disk.patch"),
                of("vm.delete"),
                writes.len() - named,
                inside.len() - writes.len(),
                started("create/"),
                started("delete/"),
                running("create/"),
                running("delete/"),
            );
        }
    }
}

/// Measures both rollouts of a pool of `machines` machines, with the sandbox at its `short`
/// latencies (set only when it is at another profile, and put back).
pub async fn measure(stack: &Stack, sandbox: &Sandbox, machines: usize) -> Result<Rollouts> {
    let before = sandbox.latency().await?;
    if before != PROFILE {
        sandbox.set_latency(PROFILE).await?;
    }
    let measured = AssertUnwindSafe(measure_at_profile(stack, sandbox, machines))
        .catch_unwind()
        .await;
    if before != PROFILE
        && let Err(error) = sandbox.set_latency(&before).await
    {
        eprintln!("putting the sandbox's latency profile back to {before}: {error:#}");
    }
    measured.map_err(|_| anyhow!("the rollouts row panicked"))?
}

/// The row's own cluster, subscription, resource group, pool and worker.
struct Scene {
    stack: Stack,
    pool: String,
    task_queue: String,
    network: String,
}

async fn measure_at_profile(stack: &Stack, sandbox: &Sandbox, machines: usize) -> Result<Rollouts> {
    let suffix = unique_suffix();
    let mut stack = stack.clone();
    stack.cluster = format!("bench-{suffix}");
    stack.arm.subscription_id = uuid::Uuid::new_v4().to_string();
    stack.arm.resource_group = format!("nodewright-bench-{suffix}");
    let scene = Scene {
        network: format!(
            "/subscriptions/{}/resourceGroups/{}/{NETWORK}",
            stack.arm.subscription_id, stack.arm.resource_group
        ),
        pool: format!("br{}", &suffix[..6]),
        task_queue: unique_task_queue("bench-rollouts"),
        stack,
    };
    let writes = WRITES_PER_SECOND.to_string();
    let worker = KillableWorker::start_with_full_log_at(
        &scene.stack,
        &scene.task_queue,
        &[("NODEWRIGHT_ARM_WRITES_PER_SECOND", &writes)],
    )?;
    let outcome = AssertUnwindSafe(run(&scene, sandbox, &worker, machines))
        .catch_unwind()
        .await;
    clean_up(&scene, sandbox).await;
    drop(worker);
    match outcome {
        Ok(outcome) => outcome,
        Err(_) => bail!("the rollouts row panicked"),
    }
}

async fn run(
    scene: &Scene,
    sandbox: &Sandbox,
    worker: &KillableWorker,
    machines: usize,
) -> Result<Rollouts> {
    let stack = &scene.stack;
    sandbox
        .arm_put(
            &format!("{}?api-version={NETWORK_API}", scene.network),
            &serde_json::json!({
                "location": stack.arm.location,
                "properties": {
                    "addressSpace": {"addressPrefixes": ["10.224.0.0/12"]},
                    "subnets": [{"name": "nodes", "properties": {"addressPrefix": "10.224.0.0/16"}}],
                },
            }),
        )
        .await
        .context("creating the row's virtual network")?;
    let pid = worker.pid().context("the worker's process id")?;
    await_identity_recorded(&stack.cluster).await?;
    let metrics = metrics_url(worker).await;
    if metrics.is_none() {
        eprintln!("rollouts: the worker's metrics address is not in its log; no task slots");
    }
    let files = [
        pool_file(stack, &scene.pool, machines, VERSIONS[0])?,
        pool_file(stack, &scene.pool, machines, VERSIONS[1])?,
    ];
    println!(
        "rollouts: pool {} of {machines} machines (cluster {}, subscription {}), worker log {}",
        scene.pool,
        stack.cluster,
        stack.arm.subscription_id,
        worker.log_path().display()
    );

    let log = Collector::start(stack).await?;
    let sampler = Sampler::start(pid, metrics.clone());
    let outcome = both_rollouts(scene, machines, &files, metrics.as_deref()).await;
    let samples = sampler.stop().await;
    let requests = log.stop().await;
    let (mut first, mut replacement) = match outcome {
        Ok(phases) => phases,
        Err(error) => bail!("{error:#}\nworker log (last lines):\n{}", worker.log_tail()),
    };
    let requests = requests?;
    let end_of_all = Utc::now();
    for (phase, until) in [
        (&mut first, replacement.started),
        (&mut replacement, end_of_all),
    ] {
        phase.requests = requests
            .iter()
            .filter(|r| r.time >= phase.started && r.time <= phase.ended)
            .cloned()
            .collect();
        phase.writes_after = requests
            .iter()
            .filter(|r| r.time > phase.ended && r.time < until && r.is_write())
            .count();
        phase.samples = samples
            .iter()
            .filter(|s| s.at >= phase.started && s.at <= phase.ended)
            .cloned()
            .collect();
    }
    for phase in [&mut first, &mut replacement] {
        phase.children = children(stack, &scene.pool, phase.started, phase.ended).await?;
    }
    Ok(Rollouts {
        machines,
        first,
        replacement,
    })
}

/// The first rollout, then the replacement, each checked.
async fn both_rollouts(
    scene: &Scene,
    machines: usize,
    files: &[PathBuf; 2],
    metrics: Option<&str>,
) -> Result<(Phase, Phase)> {
    let stack = &scene.stack;
    let replicas = u32::try_from(machines)?;
    let first = roll(scene, "first rollout (creates only)", &files[0], metrics).await?;
    ensure!(
        first.created == replicas,
        "the first rollout created {} machines, not {machines}",
        first.created
    );
    let old = ensure_pool(stack, &scene.pool, machines).await?;
    println!(
        "rollouts: first rollout done in {:.1} s; replacing every machine",
        first.makespan()
    );
    let replacement = roll(
        scene,
        "replacement rollout (maxSurge 10%)",
        &files[1],
        metrics,
    )
    .await?;
    ensure!(
        replacement.created == replicas && replacement.deleted == replicas,
        "the replacement created {} and deleted {} machines, not {machines} each",
        replacement.created,
        replacement.deleted
    );
    let new = ensure_pool(stack, &scene.pool, machines).await?;
    ensure!(
        new != old,
        "the replacement left the pool at template {old}"
    );
    println!(
        "rollouts: replacement done in {:.1} s",
        replacement.makespan()
    );
    Ok((first, replacement))
}

/// One rollout through the CLI, timed, its result checked completed; the phase without its
/// requests, samples and children (filled in afterwards).
async fn roll(
    scene: &Scene,
    name: &'static str,
    file: &std::path::Path,
    metrics: Option<&str>,
) -> Result<Phase> {
    let stack = &scene.stack;
    let file = file.to_string_lossy().into_owned();
    let before = histograms(metrics).await;
    let started = Utc::now();
    let clock = Instant::now();
    let args = [
        "pool", "rollout", "--pool", &file, "--wait", "--output", "json",
    ];
    let answer = tokio::time::timeout(
        Duration::from_secs(3600),
        cli(stack, &scene.task_queue, &args),
    )
    .await
    .map_err(|_| anyhow!("{name} did not end within an hour"))??;
    let cli_seconds = clock.elapsed().as_secs_f64();
    answer.expect_code(0).with_context(|| name.to_owned())?;
    let document: ResultDocument<RolloutResult> = answer.parse()?;
    let result = document.result;
    ensure!(
        result.outcome == RolloutOutcome::Completed,
        "{name} ended {:?}: {}",
        result.outcome,
        result.status.summary.clone().unwrap_or_default()
    );
    let after = histograms(metrics).await;
    let runs = rollout_runs(stack, &scene.pool, started).await?;
    let ended = runs
        .iter()
        .filter_map(|run| run.close_time)
        .max()
        .context("the rollout's runs have no close time")?;
    Ok(Phase {
        name,
        started,
        ended,
        cli_seconds,
        runs,
        children: Vec::new(),
        requests: Vec::new(),
        writes_after: 0,
        samples: Vec::new(),
        histograms: (before, after),
        created: result.status.created,
        deleted: result.status.deleted,
    })
}

/// The pool file of `replicas` machines at image `version`, maxSurge 10%, maxUnavailable 0:
/// `target/e2e-pools/<pool>-<version>.yaml`.
fn pool_file(stack: &Stack, pool: &str, replicas: usize, version: &str) -> Result<PathBuf> {
    pool_file_with(stack, pool, replicas, version, MAX_SURGE)
}

/// [`pool_file`] with `max_surge`.
fn pool_file_with(
    stack: &Stack,
    pool: &str,
    replicas: usize,
    version: &str,
    max_surge: &str,
) -> Result<PathBuf> {
    let base = write_pool_file(stack, pool, "10m")?;
    let text = std::fs::read_to_string(&base)?;
    ensure!(
        text.contains("  replicas: 2\n") && text.contains("      version: latest\n"),
        "unexpected pool file:\n{text}"
    );
    let text = text
        .replace("  replicas: 2\n", &format!("  replicas: {replicas}\n"))
        .replace(
            "      version: latest\n",
            &format!("      version: \"{version}\"\n"),
        )
        .replace(
            "  timeouts:\n",
            &format!(
                "  strategy:\n    maxSurge: \"{max_surge}\"\n    maxUnavailable: \"{MAX_UNAVAILABLE}\"\n  timeouts:\n"
            ),
        );
    let path = base.with_file_name(format!("{pool}-{replicas}-{version}.yaml"));
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Checks that the pool has exactly `machines` VMs, all of one template, each with a Ready
/// Node; returns the template.
async fn ensure_pool(stack: &Stack, pool: &str, machines: usize) -> Result<String> {
    let mut templates: BTreeMap<String, usize> = BTreeMap::new();
    for vm in pool_vms(stack, pool).await? {
        *templates
            .entry(vm.tags.get(TAG_TEMPLATE).cloned().unwrap_or_default())
            .or_default() += 1;
    }
    let nodes: Api<Node> = Api::all(stack.kube_client().await?);
    let ready = nodes
        .list(&ListParams::default().labels(&format!("{LABEL_POOL}={pool}")))
        .await?
        .items
        .iter()
        .filter(|node| is_node_ready(node))
        .count();
    let template = templates.keys().next().cloned().unwrap_or_default();
    ensure!(
        templates.len() == 1 && templates.get(&template) == Some(&machines) && ready == machines,
        "pool {pool}: want {machines} Ready machines of one template, have VMs by template {templates:?} and {ready} Ready Nodes"
    );
    Ok(template)
}

/// The VMs of `pool` in the row's resource group, by the ownership tags.
async fn pool_vms(
    stack: &Stack,
    pool: &str,
) -> Result<Vec<nodewright_activities::azure::virtual_machines::VirtualMachine>> {
    Ok(stack
        .arm_client()?
        .list_vms()
        .await?
        .into_iter()
        .filter(|vm| {
            vm.tags.get(TAG_CLUSTER).map(String::as_str) == Some(stack.cluster.as_str())
                && vm.tags.get(TAG_POOL).map(String::as_str) == Some(pool)
        })
        .collect())
}

/// `temporal workflow list --query <query>`: every run it lists.
async fn list_runs(stack: &Stack, query: &str) -> Result<Vec<Listed>> {
    let mut command = std::process::Command::new(temporal_cli()?);
    command.args([
        "workflow",
        "list",
        "--query",
        query,
        "--limit",
        "100000",
        "--address",
        &stack.temporal_address,
        "--namespace",
        &stack.temporal_namespace,
        "--output",
        "json",
    ]);
    let output = tokio::task::spawn_blocking(move || command.output()).await??;
    ensure!(
        output.status.success(),
        "temporal workflow list --query {query}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(&text)
        .with_context(|| format!("temporal workflow list --query {query}: {text}"))
}

/// The runs of the pool's rollout started at or after `since`, oldest first, once visibility
/// shows them all closed and the newest completed.
async fn rollout_runs(stack: &Stack, pool: &str, since: DateTime<Utc>) -> Result<Vec<Listed>> {
    let query = format!("WorkflowId = 'rollout/{}/{pool}'", stack.cluster);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut runs: Vec<Listed> = list_runs(stack, &query)
            .await?
            .into_iter()
            .filter(|run| run.start_time >= since - chrono::Duration::seconds(1))
            .collect();
        runs.sort_by_key(|run| run.start_time);
        let closed = !runs.is_empty()
            && runs.iter().all(|run| run.close_time.is_some())
            && runs
                .last()
                .is_some_and(|run| run.status.ends_with("COMPLETED"));
        if closed {
            return Ok(runs);
        }
        if Instant::now() > deadline {
            bail!("the rollout's runs since {since} are not all closed in visibility: {runs:?}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The pool's CreateMachine and DeleteMachine runs started between `from` and `to`.
async fn children(
    stack: &Stack,
    pool: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<Listed>> {
    let mut all = Vec::new();
    for operation in ["create", "delete"] {
        let query = format!(
            "WorkflowId STARTS_WITH '{operation}/{}/{pool}-'",
            stack.cluster
        );
        all.extend(
            list_runs(stack, &query)
                .await?
                .into_iter()
                .filter(|run| run.start_time >= from && run.start_time <= to),
        );
    }
    all.sort_by_key(|run| run.start_time);
    Ok(all)
}

/// Reads the sandbox's request log of the row's subscription every [`LOG_EVERY`], so that
/// nothing leaves its ring before it is read.
struct Collector {
    stop: Arc<AtomicBool>,
    handle: tokio::task::JoinHandle<Result<Vec<Logged>>>,
}

impl Collector {
    async fn start(stack: &Stack) -> Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let body = get_json(&http, stack, "/sandbox/requests", &[], "the request log").await?;
        let mut since = body["requests"]
            .as_array()
            .and_then(|requests| requests.last())
            .and_then(|last| last["seq"].as_u64())
            .unwrap_or(0);
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, stack) = (stop.clone(), stack.clone());
        let handle = tokio::spawn(async move {
            let mut logged: Vec<Logged> = Vec::new();
            loop {
                let last = flag.load(Ordering::SeqCst);
                let query = [
                    ("contains", stack.arm.subscription_id.clone()),
                    ("since", since.to_string()),
                ];
                let body = get_json(
                    &http,
                    &stack,
                    "/sandbox/requests",
                    &query,
                    "the request log",
                )
                .await?;
                let new: Vec<Logged> = serde_json::from_value(body["requests"].clone())
                    .with_context(|| format!("the request log's records: {body}"))?;
                if let Some(newest) = new.last() {
                    since = newest.seq;
                }
                logged.extend(new);
                if last {
                    return Ok(logged);
                }
                tokio::time::sleep(LOG_EVERY).await;
            }
        });
        Ok(Self { stop, handle })
    }

    /// Reads once more and returns every request read.
    async fn stop(self) -> Result<Vec<Logged>> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .await
            .context("the request log reader panicked")?
    }
}

/// Reads the worker's memory, CPU time and task slots every [`SAMPLE_EVERY`].
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: tokio::task::JoinHandle<Vec<Sample>>,
}

impl Sampler {
    fn start(pid: u32, metrics: Option<String>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = tokio::spawn(async move {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .ok();
            let mut samples = Vec::new();
            while !flag.load(Ordering::SeqCst) {
                let at = Utc::now();
                if let (Ok(rss), Ok(cpu)) = (rss_bytes(pid), cpu_seconds(pid)) {
                    let slots = match (&http, &metrics) {
                        (Some(http), Some(url)) => slots_in_use(http, url).await,
                        _ => BTreeMap::new(),
                    };
                    samples.push(Sample {
                        at,
                        rss,
                        cpu,
                        slots,
                    });
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
            samples
        });
        Self { stop, handle }
    }

    async fn stop(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.await.unwrap_or_default()
    }
}

/// The worker's metrics URL, from the line its log has at start.
async fn metrics_url(worker: &KillableWorker) -> Option<String> {
    const SAID: &str = "serving Prometheus metrics at ";
    for _ in 0..60 {
        let text = worker.log_text();
        if let Some(at) = text.find(SAID) {
            let rest = &text[at + SAID.len()..];
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '"')
                .unwrap_or(rest.len());
            return Some(rest[..end].to_owned());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// One line of the Prometheus text format: the name, the labels and the value.
fn metric_line(line: &str) -> Option<(&str, BTreeMap<&str, &str>, f64)> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.trim().parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, rest.trim_end_matches('}')),
        None => (series, ""),
    };
    let mut parsed = BTreeMap::new();
    for pair in labels.split("\",") {
        if let Some((key, value)) = pair.split_once("=\"") {
            parsed.insert(key.trim_start_matches(','), value.trim_end_matches('"'));
        }
    }
    Some((name, parsed, value))
}

/// `temporal_worker_task_slots_used` by (worker type, task queue).
async fn slots_in_use(http: &reqwest::Client, url: &str) -> BTreeMap<(String, String), f64> {
    let mut slots = BTreeMap::new();
    let Some(text) = scrape(http, url).await else {
        return slots;
    };
    for (name, labels, value) in text.lines().filter_map(metric_line) {
        if name.ends_with("worker_task_slots_used") {
            let kind = labels.get("worker_type").copied().unwrap_or_default();
            let queue = labels.get("task_queue").copied().unwrap_or_default();
            *slots
                .entry((kind.to_owned(), queue.to_owned()))
                .or_default() += value;
        }
    }
    slots
}

/// The latency histograms' sums and counts by (metric, task queue): schedule-to-start of
/// activities and workflow tasks, and workflow task execution.
async fn histograms(url: Option<&str>) -> Histograms {
    let mut found = Histograms::new();
    let Some(url) = url else {
        return found;
    };
    let Ok(http) = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
    else {
        return found;
    };
    let Some(text) = scrape(&http, url).await else {
        return found;
    };
    for (name, labels, value) in text.lines().filter_map(metric_line) {
        let wanted = name.contains("schedule_to_start_latency")
            || name.contains("workflow_task_execution_latency")
            || name.contains("activity_execution_latency");
        let (base, is_sum) = if let Some(base) = name.strip_suffix("_sum") {
            (base, true)
        } else if let Some(base) = name.strip_suffix("_count") {
            (base, false)
        } else {
            continue;
        };
        if !wanted {
            continue;
        }
        let queue = labels.get("task_queue").copied().unwrap_or_default();
        let entry = found
            .entry((base.to_owned(), queue.to_owned()))
            .or_default();
        if is_sum {
            entry.0 += value;
        } else {
            entry.1 += value;
        }
    }
    found
}

async fn scrape(http: &reqwest::Client, url: &str) -> Option<String> {
    http.get(url).send().await.ok()?.text().await.ok()
}

/// A task queue as the details show it: the ARM-write queue by its suffix.
fn queue_name(queue: &str) -> &'static str {
    if queue.ends_with("-arm-writes") {
        "the ARM-write queue"
    } else if queue.starts_with("bench-rollouts") {
        "the main queue"
    } else {
        "a sticky queue"
    }
}

/// Ends what the row made, whether it passed or not; what it cannot end it says.
async fn clean_up(scene: &Scene, sandbox: &Sandbox) {
    let stack = &scene.stack;
    let pool = &scene.pool;
    let workflow_id = format!("rollout/{}/{pool}", stack.cluster);
    terminate(stack, &workflow_id).await;
    let started = Instant::now();
    // The pool rolled to 0 replicas: every machine deleted through its DeleteMachine.
    let scaled = async {
        let file = pool_file_with(stack, pool, 0, VERSIONS[1], "1")?;
        let file = file.to_string_lossy().into_owned();
        let args = ["pool", "rollout", "--pool", &file, "--wait"];
        tokio::time::timeout(
            Duration::from_secs(900),
            cli(stack, &scene.task_queue, &args),
        )
        .await
        .map_err(|_| anyhow!("no end within 15 minutes"))??
        .expect_code(0)
        .map(|_| ())
    };
    match scaled.await {
        Ok(()) => println!(
            "rollouts clean-up: pool {pool} rolled to 0 replicas in {:.0} s",
            started.elapsed().as_secs_f64()
        ),
        Err(error) => {
            eprintln!("rollouts clean-up: rolling pool {pool} to 0 replicas: {error:#}");
            terminate(stack, &workflow_id).await;
        }
    }
    delete_machines_left(scene).await;
    delete_nodes_left(stack, pool).await;
    delete_resources_left(stack, sandbox).await;
    if let Err(error) = sandbox
        .arm_delete(&format!("{}?api-version={NETWORK_API}", scene.network))
        .await
    {
        eprintln!("rollouts clean-up: deleting the virtual network: {error:#}");
    }
}

/// Terminates the workflow `workflow_id` if it still runs, quietly.
async fn terminate(stack: &Stack, workflow_id: &str) {
    let reason = "efficiency benchmark clean-up";
    let _ = nodewright_tests::stack::terminate_workflow(stack, workflow_id, reason).await;
}

/// Deletes every VM of the pool left (`machine delete --skip-drain --wait`,
/// [`DELETES_AT_ONCE`] at a time), for up to five minutes.
async fn delete_machines_left(scene: &Scene) {
    let (stack, pool) = (&scene.stack, &scene.pool);
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let names: Vec<String> = match pool_vms(stack, pool).await {
            Ok(vms) => vms.into_iter().filter_map(|vm| vm.name).collect(),
            Err(error) => {
                eprintln!("rollouts clean-up: listing pool {pool}: {error:#}");
                return;
            }
        };
        if names.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            eprintln!(
                "rollouts clean-up: {} machines of pool {pool} are left: {}",
                names.len(),
                names.join(", ")
            );
            return;
        }
        println!(
            "rollouts clean-up: deleting {} machines of pool {pool} left",
            names.len()
        );
        for chunk in names.chunks(DELETES_AT_ONCE) {
            let deletes = chunk.iter().map(|machine| async move {
                let args = ["machine", "delete", machine, "--skip-drain", "--wait"];
                (machine, cli(stack, &scene.task_queue, &args).await)
            });
            for (machine, outcome) in futures::future::join_all(deletes).await {
                match outcome {
                    // 5: a delete of that machine is already running.
                    Ok(result) if matches!(result.code, Some(0 | 5)) => {}
                    Ok(result) => eprintln!(
                        "rollouts clean-up: deleting {machine}: exit {:?}: {}",
                        result.code,
                        result.stderr.trim()
                    ),
                    Err(error) => eprintln!("rollouts clean-up: deleting {machine}: {error:#}"),
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Deletes the Nodes labelled with the pool that are left.
async fn delete_nodes_left(stack: &Stack, pool: &str) {
    let deleted = async {
        let nodes: Api<Node> = Api::all(stack.kube_client().await?);
        let left = nodes
            .list(&ListParams::default().labels(&format!("{LABEL_POOL}={pool}")))
            .await?;
        for node in &left.items {
            if let Some(name) = &node.metadata.name {
                nodes.delete(name, &DeleteParams::default()).await?;
            }
        }
        anyhow::Ok(left.items.len())
    };
    match deleted.await {
        Ok(0) => {}
        Ok(count) => println!("rollouts clean-up: deleted {count} Nodes of pool {pool} left"),
        Err(error) => eprintln!("rollouts clean-up: deleting the pool's Nodes: {error:#}"),
    }
}

/// Deletes the NICs and disks left in the row's resource group (it holds only the row's).
async fn delete_resources_left(stack: &Stack, sandbox: &Sandbox) {
    let listed = async {
        let arm = stack.arm_client()?;
        let mut ids: Vec<String> = Vec::new();
        ids.extend(arm.list_nics().await?.into_iter().filter_map(|nic| nic.id));
        ids.extend(
            arm.list_disks()
                .await?
                .into_iter()
                .filter_map(|disk| disk.id),
        );
        anyhow::Ok(ids)
    };
    let ids = match listed.await {
        Ok(ids) => ids,
        Err(error) => {
            eprintln!("rollouts clean-up: listing NICs and disks: {error:#}");
            return;
        }
    };
    if !ids.is_empty() {
        println!(
            "rollouts clean-up: deleting {} NICs and disks left",
            ids.len()
        );
    }
    for id in ids {
        let version = if id.contains("/Microsoft.Network/") {
            NETWORK_API
        } else {
            DISK_API
        };
        if let Err(error) = sandbox
            .arm_delete(&format!("{id}?api-version={version}"))
            .await
        {
            eprintln!("rollouts clean-up: deleting {id}: {error:#}");
        }
    }
}

fn seconds_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).as_seconds_f64()
}

/// The `share` percentile of `sorted` (nearest rank).
fn percentile(sorted: &[f64], share: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * share).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
