//! The row "ARM requests for one machine's life": machines created and deleted through the CLI
//! (`machine create --wait`, then `machine delete --wait`) by a worker of the benchmark's own
//! cluster, subscription and resource group, with the sandbox at its realistic latencies. Every
//! ARM request of that subscription is counted, per machine and by operation; and for every
//! operation polled, how long after its end the last poll noticed it, against the bound (10 s,
//! or 10% of the operation's duration when that is longer).

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use nodewright_tests::Stack;
use nodewright_tests::identity::await_identity_recorded;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{CliResult, KillableWorker, create_machine, write_pool_file};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::request_log::{Request, RequestLog};

/// Machine name suffixes (five characters of Kubernetes' generated-name alphabet).
const SUFFIXES: [&str; 8] = [
    "b2c4d", "b2c4f", "b2c4g", "b2c4h", "b2c4j", "b2c4k", "b2c4l", "b2c4m",
];
/// The latency bound's floor, in seconds, as issue 25 states it.
const BOUND_FLOOR_SECONDS: f64 = 10.0;
/// The latency bound's share of the operation's duration.
const BOUND_SHARE: f64 = 0.1;

/// What the row measured.
pub struct Life {
    machines: usize,
    seconds: f64,
    by_operation: BTreeMap<String, usize>,
    noticed: Vec<Noticed>,
}

/// One polled operation: how long it ran and how late its end was noticed.
struct Noticed {
    polls: usize,
    duration: f64,
    lag: f64,
}

impl Noticed {
    fn bound(&self) -> f64 {
        BOUND_FLOOR_SECONDS.max(self.duration * BOUND_SHARE)
    }

    fn within_bound(&self) -> bool {
        self.lag <= self.bound()
    }
}

impl Life {
    fn total(&self) -> usize {
        self.by_operation.values().sum()
    }

    fn per_machine(&self, count: usize) -> f64 {
        count as f64 / self.machines as f64
    }

    /// The table cell: requests per machine, the polls among them, and the noticing.
    pub fn summary(&self) -> String {
        let polls = self
            .by_operation
            .get("operation.status")
            .copied()
            .unwrap_or(0)
            + self
                .by_operation
                .get("operation.result")
                .copied()
                .unwrap_or(0);
        let within = self.noticed.iter().filter(|n| n.within_bound()).count();
        format!(
            "{:.1} ({:.1} of them operation polls); {within} of {} operations noticed within the bound",
            self.per_machine(self.total()),
            self.per_machine(polls),
            self.noticed.len()
        )
    }

    /// The requests by operation and each polled operation's figures.
    pub fn print_details(&self) {
        println!(
            "machine life: {} machines created and deleted at once in {:.0} s; {} ARM requests",
            self.machines,
            self.seconds,
            self.total()
        );
        println!("\n| operation | requests per machine |");
        println!("|---|---|");
        for (operation, count) in &self.by_operation {
            println!("| {operation} | {:.2} |", self.per_machine(*count));
        }
        println!(
            "\n| polled operation | duration (s) | polls | noticed after its end (s) | bound (s) |"
        );
        println!("|---|---|---|---|---|");
        let mut noticed: Vec<&Noticed> = self.noticed.iter().collect();
        noticed.sort_by(|a, b| a.duration.total_cmp(&b.duration));
        for (i, n) in noticed.iter().enumerate() {
            println!(
                "| {} | {:.1} | {} | {:.1} | {:.1} |",
                i + 1,
                n.duration,
                n.polls,
                n.lag,
                n.bound()
            );
        }
    }
}

/// Creates and deletes `machines` machines at once and counts what it cost.
pub async fn measure(stack: &Stack, machines: usize) -> Result<Life> {
    let suffix = unique_suffix();
    let mut stack = stack.clone();
    stack.cluster = format!("bench-{suffix}");
    stack.arm.subscription_id = uuid::Uuid::new_v4().to_string();
    stack.arm.resource_group = format!("nodewright-bench-{suffix}");
    let log = RequestLog::new(&stack)?;
    let since = log.last_seq().await?;
    let task_queue = unique_task_queue("bench-life");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    await_identity_recorded(&stack.cluster).await?;
    let pool = format!("bl{}", &suffix[..6]);
    let file = write_pool_file(&stack, &pool, "20m")?;
    println!(
        "machine life: {machines} machines of pool {pool} (subscription {}), realistic latencies; \
         a create takes 1-2 minutes, a delete 4-6",
        stack.arm.subscription_id
    );
    let started = Instant::now();
    let runs = SUFFIXES.iter().take(machines).map(|suffix| {
        let stack = stack.clone();
        let task_queue = task_queue.clone();
        let file = file.clone();
        let machine = format!("{pool}-{suffix}");
        tokio::task::spawn_blocking(move || -> Result<()> {
            create_machine(&stack, &task_queue, &file, &machine, &["--wait"])?
                .expect_code(0)
                .with_context(|| format!("creating {machine}"))?;
            CliResult::run(
                &stack,
                &task_queue,
                &["machine", "delete", &machine, "--wait"],
            )?
            .expect_code(0)
            .with_context(|| format!("deleting {machine}"))?;
            Ok(())
        })
    });
    let outcomes = futures::future::join_all(runs).await;
    let seconds = started.elapsed().as_secs_f64();
    for outcome in outcomes {
        if let Err(error) = outcome.context("a create-and-delete task panicked")? {
            bail!("{error:#}\nworker log (last lines):\n{}", worker.log_tail());
        }
    }
    let requests = log.since(since).await?;
    let mut by_operation = BTreeMap::new();
    for request in &requests {
        *by_operation.entry(request.operation.clone()).or_default() += 1;
    }
    let noticed = noticed(&log, &requests).await?;
    Ok(Life {
        machines,
        seconds,
        by_operation,
        noticed,
    })
}

/// For every operation polled through its `Azure-AsyncOperation` URL: its duration (from the
/// operation resource) and how long after its end the last poll came.
async fn noticed(log: &RequestLog, requests: &[Request]) -> Result<Vec<Noticed>> {
    let mut polls: BTreeMap<&str, (usize, DateTime<Utc>)> = BTreeMap::new();
    for request in requests
        .iter()
        .filter(|r| r.operation == "operation.status")
    {
        let entry = polls.entry(&request.path).or_insert((0, request.time));
        entry.0 += 1;
        entry.1 = entry.1.max(request.time);
    }
    let mut noticed = Vec::new();
    for (path, (count, last)) in polls {
        let operation = log.operation(path).await?;
        let time = |field: &str| {
            operation[field]
                .as_str()
                .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
                .map(|time| time.with_timezone(&Utc))
        };
        let (Some(start), Some(end)) = (time("startTime"), time("endTime")) else {
            bail!("operation {path} has no start or end time: {operation}");
        };
        noticed.push(Noticed {
            polls: count,
            duration: (end - start).as_seconds_f64(),
            lag: (last - end).as_seconds_f64().max(0.0),
        });
    }
    Ok(noticed)
}
