//! What the benchmark reads at the start and the end of each window ([`Reading`]), and the
//! differences between two readings ([`Window`]):
//!
//! - ARM: the sandbox's request log filtered by the benchmark's own subscription (every request
//!   of its worker carries it in the path: the worker's alone, though the stack is shared), and
//!   `/sandbox/stats` (the whole sandbox, every client of the shared stack);
//! - the apiserver: the worker's own requests, from its log
//!   ([`nodewright_tests::worker_meters::apiserver_requests`]), and `/metrics`'
//!   `apiserver_request_total` for Nodes and Leases (the whole apiserver: kwok's heartbeats,
//!   other tests);
//! - the worker's CPU time ([`nodewright_tests::worker_meters::cpu_seconds`]);
//! - the controller's history length (`temporal workflow describe`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nodewright_tests::Stack;
use nodewright_tests::sandbox_admin::get_json;
use nodewright_tests::stack::{describe_workflow, kubectl};
use nodewright_tests::worker_meters::{apiserver_requests, cpu_seconds};
use serde_json::Value;

/// Counts by name (an ARM operation, or `VERB resource` for the apiserver).
pub type Counts = BTreeMap<String, f64>;

/// The ARM requests of the benchmark's subscription, as the sandbox's request log lists them.
/// The log keeps the last 20,000 requests of every client, so it is read every few seconds
/// while a window runs ([`ArmLog::collect`]) and kept here.
pub struct ArmLog {
    http: reqwest::Client,
    stack: Stack,
    /// Operation names by sequence number.
    seen: BTreeMap<u64, String>,
}

impl ArmLog {
    /// The log of `stack`'s subscription (the benchmark's own).
    pub fn new(stack: &Stack) -> Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()?,
            stack: stack.clone(),
            seen: BTreeMap::new(),
        })
    }

    /// Reads the requests logged since the last call; returns the newest sequence number seen.
    pub async fn collect(&mut self) -> Result<u64> {
        let since = self.last_seq();
        let mut query = vec![("contains", self.stack.arm.subscription_id.clone())];
        if since > 0 {
            query.push(("since", since.to_string()));
        }
        let body = get_json(
            &self.http,
            &self.stack,
            "/sandbox/requests",
            &query,
            "the sandbox's request log",
        )
        .await?;
        for record in body["requests"].as_array().into_iter().flatten() {
            let (Some(seq), Some(operation)) =
                (record["seq"].as_u64(), record["operation"].as_str())
            else {
                bail!("a request log record without seq or operation: {record}");
            };
            self.seen.insert(seq, operation.to_owned());
        }
        Ok(self.last_seq())
    }

    /// The requests with a sequence number in `(after, up_to]`, by operation.
    pub fn between(&self, after: u64, up_to: u64) -> Counts {
        let mut counts = Counts::new();
        if up_to <= after {
            return counts;
        }
        for operation in self.seen.range(after + 1..=up_to).map(|(_, op)| op) {
            *counts.entry(operation.clone()).or_default() += 1.0;
        }
        counts
    }

    fn last_seq(&self) -> u64 {
        self.seen.keys().next_back().copied().unwrap_or(0)
    }
}

/// Everything read at one moment.
pub struct Reading {
    /// When.
    pub at: Instant,
    /// The newest request of the benchmark's subscription in the sandbox's log.
    pub arm_seq: u64,
    /// `/sandbox/stats` by operation (every status summed): the whole sandbox.
    pub arm_all: Counts,
    /// `apiserver_request_total` for Nodes and Leases, by `VERB resource[/subresource]`.
    pub apiserver: Counts,
    /// `apiserver_longrunning_requests` (open WATCHes) on Nodes and Leases, by resource.
    pub open_watches: Counts,
    /// The length of the worker's log file, in bytes.
    pub log_len: usize,
    /// The worker's utime + stime, in seconds.
    pub cpu_seconds: f64,
    /// The controller's run id and history length, once it runs.
    pub history: Option<(String, u64)>,
}

/// What a reading needs to know of the worker and the controller.
pub struct Subject<'a> {
    /// The worker's process id.
    pub pid: u32,
    /// The worker's whole log so far.
    pub log: String,
    /// The controller's workflow id, once it runs.
    pub controller: Option<&'a str>,
}

/// Reads everything now.
pub async fn read(stack: &Stack, arm_log: &mut ArmLog, subject: Subject<'_>) -> Result<Reading> {
    let arm_seq = arm_log.collect().await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let stats = get_json(&http, stack, "/sandbox/stats", &[], "the sandbox's stats").await?;
    let metrics = apiserver_metrics(stack).await?;
    let history = match subject.controller {
        Some(workflow_id) => Some(history_length(stack, workflow_id).await?),
        None => None,
    };
    Ok(Reading {
        at: Instant::now(),
        arm_seq,
        arm_all: stats_by_operation(&stats),
        apiserver: request_totals(&metrics),
        open_watches: open_watches(&metrics),
        log_len: subject.log.len(),
        cpu_seconds: cpu_seconds(subject.pid)?,
        history,
    })
}

/// The differences between two readings, per minute (apiserver figures also per second).
pub struct Window {
    /// The window's length.
    pub minutes: f64,
    /// The worker's ARM requests, by operation, per minute.
    pub arm_own: Counts,
    /// The whole sandbox's ARM requests, by operation, per minute.
    pub arm_all: Counts,
    /// The worker's apiserver requests, by `VERB resource`, per minute.
    pub kube_own: Counts,
    /// The whole apiserver's requests on Nodes and Leases, by `VERB resource`, per second.
    pub apiserver: Counts,
    /// Open WATCHes on Nodes and Leases at the window's end, by resource.
    pub open_watches: Counts,
    /// The worker's CPU seconds per minute.
    pub cpu_per_minute: f64,
    /// The controller's history events per minute, and whether it continued as new meanwhile.
    pub history_per_minute: Option<(f64, bool)>,
}

impl Window {
    /// The window from `start` to `end`; `log` is the worker's whole log at `end`.
    pub fn between(start: &Reading, end: &Reading, arm_log: &ArmLog, log: &str) -> Self {
        let minutes = end.at.duration_since(start.at).as_secs_f64() / 60.0;
        let per_minute = |counts: Counts| -> Counts {
            counts.into_iter().map(|(k, v)| (k, v / minutes)).collect()
        };
        let log_part = log.get(start.log_len..end.log_len).unwrap_or_default();
        let history_per_minute = match (&start.history, &end.history) {
            (Some((run_start, length_start)), Some((run_end, length_end))) => {
                let continued = run_start != run_end;
                let events = if continued {
                    *length_end
                } else {
                    length_end.saturating_sub(*length_start)
                };
                Some((events as f64 / minutes, continued))
            }
            _ => None,
        };
        Self {
            minutes,
            arm_own: per_minute(arm_log.between(start.arm_seq, end.arm_seq)),
            arm_all: per_minute(difference(&start.arm_all, &end.arm_all)),
            kube_own: per_minute(apiserver_requests(log_part)),
            apiserver: difference(&start.apiserver, &end.apiserver)
                .into_iter()
                .map(|(k, v)| (k, v / (minutes * 60.0)))
                .collect(),
            open_watches: end.open_watches.clone(),
            cpu_per_minute: (end.cpu_seconds - start.cpu_seconds) / minutes,
            history_per_minute,
        }
    }
}

/// `end - start` for every name of either (a counter that went down, reset by someone, counts
/// from zero).
fn difference(start: &Counts, end: &Counts) -> Counts {
    end.iter()
        .map(|(name, value)| {
            let before = start.get(name).copied().unwrap_or(0.0);
            let delta = if *value >= before {
                value - before
            } else {
                *value
            };
            (name.clone(), delta)
        })
        .filter(|(_, delta)| *delta > 0.0)
        .collect()
}

/// `{"by_operation":{"vm.list":{"200":3}}}` → `vm.list: 3`.
fn stats_by_operation(stats: &Value) -> Counts {
    stats["by_operation"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(operation, by_status)| {
            let total = by_status
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(_, count)| count.as_f64())
                .sum();
            (operation.clone(), total)
        })
        .collect()
}

/// The apiserver's `/metrics`, through the stack's kubectl and admin kubeconfig.
async fn apiserver_metrics(stack: &Stack) -> Result<String> {
    let kubectl = kubectl()?;
    let kubeconfig = stack.kubeconfig.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["get", "--raw", "/metrics"])
            .output()
    })
    .await??;
    if !output.status.success() {
        bail!(
            "reading the apiserver's /metrics: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The resources the apiserver figures are kept for.
const RESOURCES: [&str; 2] = ["nodes", "leases"];

/// `apiserver_request_total` of Nodes and Leases, summed over codes, by `VERB resource`.
fn request_totals(metrics: &str) -> Counts {
    let mut counts = Counts::new();
    for (labels, value) in samples(metrics, "apiserver_request_total") {
        let resource = labels.get("resource").map(String::as_str).unwrap_or("");
        if !RESOURCES.contains(&resource) {
            continue;
        }
        let verb = labels.get("verb").map(String::as_str).unwrap_or("?");
        let name = match labels.get("subresource").map(String::as_str) {
            Some(sub) if !sub.is_empty() => format!("{verb} {resource}/{sub}"),
            _ => format!("{verb} {resource}"),
        };
        *counts.entry(name).or_default() += value;
    }
    counts
}

/// `apiserver_longrunning_requests` WATCHes of Nodes and Leases, by resource.
fn open_watches(metrics: &str) -> Counts {
    let mut counts = Counts::new();
    for (labels, value) in samples(metrics, "apiserver_longrunning_requests") {
        let resource = labels.get("resource").map(String::as_str).unwrap_or("");
        if RESOURCES.contains(&resource) && labels.get("verb").map(String::as_str) == Some("WATCH")
        {
            *counts.entry(resource.to_owned()).or_default() += value;
        }
    }
    counts
}

/// The samples of metric `name` in Prometheus' text format: their labels and values.
fn samples(metrics: &str, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let prefix = format!("{name}{{");
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix(prefix.as_str()))
        .filter_map(|rest| {
            let (labels, value) = rest.rsplit_once("} ")?;
            let value: f64 = value.trim().parse().ok()?;
            let labels = labels
                .split("\",")
                .filter_map(|pair| {
                    let (key, value) = pair.split_once("=\"")?;
                    Some((key.to_owned(), value.trim_end_matches('"').to_owned()))
                })
                .collect();
            Some((labels, value))
        })
        .collect()
}

/// The controller's current run id and history length.
async fn history_length(stack: &Stack, workflow_id: &str) -> Result<(String, u64)> {
    let described = describe_workflow(stack, workflow_id).await?;
    let info = &described["workflowExecutionInfo"];
    let run_id = info["execution"]["runId"]
        .as_str()
        .context("no workflowExecutionInfo.execution.runId in the description")?;
    let length = &info["historyLength"];
    let length = length
        .as_u64()
        .or_else(|| length.as_str().and_then(|text| text.parse().ok()))
        .with_context(|| format!("historyLength is not a number: {length}"))?;
    Ok((run_id.to_owned(), length))
}
