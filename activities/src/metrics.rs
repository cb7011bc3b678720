//! nodewright's own Prometheus metrics (`nodewright_*`), served by the worker on `/metrics`
//! beside the Temporal SDK's `temporal_*` ones.
//!
//! Every value is recorded where the thing happens, outside workflow code: by the activities
//! (evictions, volume moves, ARM and apiserver requests, sweep deletions), by the worker's view
//! of run endings (create, delete and drain durations) and by the worker's status queries
//! (pools and rollouts). Labels stay few-valued (pool, result, operation, kind); no machine name
//! is ever a label.
//!
//! The worker calls [`install`] once at start; until then (in-process test workers) recording
//! does nothing.

use std::sync::OnceLock;

use prometheus::core::Collector;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
};

/// Buckets of whole-run durations (creates, deletes, drains): 5 s to 2 h.
const RUN_BUCKETS: [f64; 13] = [
    5.0, 15.0, 30.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
];

/// Buckets of volume detach and reattach waits: 1 s to 30 min.
const VOLUME_BUCKETS: [f64; 11] = [
    1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
];

/// Buckets of single ARM requests: 10 ms to 30 s.
const REQUEST_BUCKETS: [f64; 11] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// Every `nodewright_*` metric the worker serves.
pub struct Metrics {
    registry: Registry,
    /// `nodewright_build_info{version}`.
    build_info: GaugeVec,
    /// `nodewright_machine_create_duration_seconds{pool,result}`.
    create_duration: HistogramVec,
    /// `nodewright_machine_delete_duration_seconds{pool,result}`.
    delete_duration: HistogramVec,
    /// `nodewright_drain_duration_seconds{pool,result}`.
    drain_duration: HistogramVec,
    /// `nodewright_evictions_total{result}`.
    evictions: IntCounterVec,
    /// `nodewright_pod_force_deletions_total`.
    force_deletions: IntCounterVec,
    /// `nodewright_volume_detach_duration_seconds{pool}`.
    volume_detach: HistogramVec,
    /// `nodewright_volume_reattach_duration_seconds{pool}`.
    volume_reattach: HistogramVec,
    /// `nodewright_volume_moves_total{pool}`.
    volume_moves: IntCounterVec,
    /// `nodewright_pool_replicas{pool,state}`.
    pool_replicas: GaugeVec,
    /// `nodewright_pool_machines{pool,phase}`.
    pool_machines: GaugeVec,
    /// `nodewright_pool_condition{pool,type,status}`.
    pool_condition: GaugeVec,
    /// `nodewright_pool_spot_evictions{pool,zone}`.
    pool_spot_evictions: GaugeVec,
    /// `nodewright_remediations_total{pool,action}`.
    remediations: IntCounterVec,
    /// `nodewright_rollout_machines{pool,state}`.
    rollout_machines: GaugeVec,
    /// `nodewright_rollout_paused{pool}`.
    rollout_paused: GaugeVec,
    /// `nodewright_status_queries_total{workflow,result}`.
    status_queries: IntCounterVec,
    /// `nodewright_sweep_deletions_total{kind}`.
    sweep_deletions: IntCounterVec,
    /// `nodewright_sweep_runs_total{outcome}`.
    sweep_runs: IntCounterVec,
    /// `nodewright_sweep_findings{kind,rule,action}`.
    sweep_findings: GaugeVec,
    /// `nodewright_sweep_freeze_check_timestamp_seconds{result}`.
    freeze_check: GaugeVec,
    /// `nodewright_arm_requests_total{operation,code}`.
    arm_requests: IntCounterVec,
    /// `nodewright_arm_request_duration_seconds{operation}`.
    arm_request_duration: HistogramVec,
    /// `nodewright_arm_ratelimit_remaining{scope}`.
    arm_ratelimit_remaining: GaugeVec,
    /// `nodewright_arm_write_budget_per_second`.
    arm_write_budget: GaugeVec,
    /// `nodewright_arm_write_backlog{stage}`.
    arm_write_backlog: GaugeVec,
    /// `nodewright_arm_write_backlog_age_seconds`.
    arm_write_backlog_age: GaugeVec,
    /// `nodewright_arm_write_dispatch_per_second`.
    arm_write_dispatch: GaugeVec,
    /// `nodewright_arm_write_rate_limit_per_second`.
    arm_write_rate_limit: GaugeVec,
    /// `nodewright_kube_requests_total{verb,resource,code}`.
    kube_requests: IntCounterVec,
    /// `nodewright_node_events_total{reason}`.
    node_events: IntCounterVec,
}

/// How a run ended, as the `result` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunResult {
    /// Completed.
    Succeeded,
    /// Failed.
    Failed,
    /// Cancelled.
    Canceled,
}

impl RunResult {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RunResult::Succeeded => "succeeded",
            RunResult::Failed => "failed",
            RunResult::Canceled => "canceled",
        }
    }
}

/// The runs whose durations are histograms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimedRun {
    /// CreateMachine.
    Create,
    /// DeleteMachine.
    Delete,
    /// DrainNode.
    Drain,
}

/// How one eviction call ended, as the `result` label of `nodewright_evictions_total` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionResult {
    /// The pod is being evicted.
    Evicted,
    /// Refused by a PodDisruptionBudget (429).
    BlockedByPdb,
    /// Refused otherwise (an admission policy or webhook, a forbidden request).
    Refused,
    /// The pod was already gone.
    Gone,
    /// The call failed (transport, server error).
    Error,
}

impl EvictionResult {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionResult::Evicted => "evicted",
            EvictionResult::BlockedByPdb => "blocked_by_pdb",
            EvictionResult::Refused => "refused",
            EvictionResult::Gone => "gone",
            EvictionResult::Error => "error",
        }
    }
}

/// One metric as `nodewright-worker --list-metrics` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// The family's name.
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// Its labels, in order.
    pub labels: Vec<String>,
    /// Its help text.
    pub help: String,
}

static INSTALLED: OnceLock<Metrics> = OnceLock::new();

/// Builds the metrics (once) and starts recording; `version` is `nodewright_build_info`'s.
pub fn install(version: &str) -> Result<&'static Metrics, prometheus::Error> {
    if let Some(metrics) = INSTALLED.get() {
        return Ok(metrics);
    }
    let metrics = Metrics::new()?;
    metrics.build_info.with_label_values(&[version]).set(1.0);
    // Series that exist from the start (at 0), so that rates over them are right from the first
    // event on.
    metrics.force_deletions.with_label_values::<&str>(&[]);
    for result in [
        EvictionResult::Evicted,
        EvictionResult::BlockedByPdb,
        EvictionResult::Refused,
        EvictionResult::Gone,
        EvictionResult::Error,
    ] {
        metrics.evictions.with_label_values(&[result.as_str()]);
    }
    for kind in ["vm", "nic", "disk", "node"] {
        metrics.sweep_deletions.with_label_values(&[kind]);
    }
    Ok(INSTALLED.get_or_init(|| metrics))
}

/// The installed metrics, if the worker installed them.
fn installed() -> Option<&'static Metrics> {
    INSTALLED.get()
}

fn counter(name: &str, help: &str, labels: &[&str]) -> Result<IntCounterVec, prometheus::Error> {
    IntCounterVec::new(Opts::new(name, help), labels)
}

fn gauge(name: &str, help: &str, labels: &[&str]) -> Result<GaugeVec, prometheus::Error> {
    GaugeVec::new(Opts::new(name, help), labels)
}

fn histogram(
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: &[f64],
) -> Result<HistogramVec, prometheus::Error> {
    HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
}

impl Metrics {
    /// Every metric, registered in a registry of its own.
    pub fn new() -> Result<Self, prometheus::Error> {
        let metrics = Metrics {
            registry: Registry::new(),
            build_info: gauge(
                "nodewright_build_info",
                "Always 1; `version` is the worker's version.",
                &["version"],
            )?,
            create_duration: histogram(
                "nodewright_machine_create_duration_seconds",
                "How long CreateMachine runs took, from their start to their end (result: succeeded, failed, canceled).",
                &["pool", "result"],
                &RUN_BUCKETS,
            )?,
            delete_duration: histogram(
                "nodewright_machine_delete_duration_seconds",
                "How long DeleteMachine runs took, drain included (result: succeeded, failed, canceled).",
                &["pool", "result"],
                &RUN_BUCKETS,
            )?,
            drain_duration: histogram(
                "nodewright_drain_duration_seconds",
                "How long DrainNode runs took (result: succeeded, failed, canceled).",
                &["pool", "result"],
                &RUN_BUCKETS,
            )?,
            evictions: counter(
                "nodewright_evictions_total",
                "Eviction calls by how they ended: evicted, blocked_by_pdb, refused (admission or RBAC), gone, error.",
                &["result"],
            )?,
            force_deletions: counter(
                "nodewright_pod_force_deletions_total",
                "Pods deleted without an eviction by a drain in force mode.",
                &[],
            )?,
            volume_detach: histogram(
                "nodewright_volume_detach_duration_seconds",
                "How long a drained Node's volumes took to detach after their pod left.",
                &["pool"],
                &VOLUME_BUCKETS,
            )?,
            volume_reattach: histogram(
                "nodewright_volume_reattach_duration_seconds",
                "How long a drained pod's volumes took to attach to its new Node.",
                &["pool"],
                &VOLUME_BUCKETS,
            )?,
            volume_moves: counter(
                "nodewright_volume_moves_total",
                "Volumes a drain saw attached to another Node after their pod moved.",
                &["pool"],
            )?,
            pool_replicas: gauge(
                "nodewright_pool_replicas",
                "A controlled pool's replicas as its controller last saw them (state: desired, current, ready, available, updated, unhealthy).",
                &["pool", "state"],
            )?,
            pool_machines: gauge(
                "nodewright_pool_machines",
                "A controlled pool's machines by phase (ready, not_ready, unhealthy, remediating).",
                &["pool", "phase"],
            )?,
            pool_condition: gauge(
                "nodewright_pool_condition",
                "1 for each condition of a controlled pool's status (type: Available, Progressing, RemediationAllowed; status: True, False, Unknown).",
                &["pool", "type", "status"],
            )?,
            pool_spot_evictions: gauge(
                "nodewright_pool_spot_evictions",
                "Spot machines of a controlled pool that Azure evicted, since its controller started (carried across its runs), by zone (none: a pool without zones).",
                &["pool", "zone"],
            )?,
            remediations: counter(
                "nodewright_remediations_total",
                "Remediations of unhealthy machines carried out, by action (restart, redeploy, replace: the machine deleted to be made anew).",
                &["pool", "action"],
            )?,
            rollout_machines: gauge(
                "nodewright_rollout_machines",
                "A running rollout's machines (state: desired, updated, in_flight, failed, remaining).",
                &["pool", "state"],
            )?,
            rollout_paused: gauge(
                "nodewright_rollout_paused",
                "1 while a pool's running rollout is paused, else 0.",
                &["pool"],
            )?,
            status_queries: counter(
                "nodewright_status_queries_total",
                "The worker's status queries of running pool controllers and rollouts, behind the pool and rollout gauges (result: ok, error).",
                &["workflow", "result"],
            )?,
            sweep_deletions: counter(
                "nodewright_sweep_deletions_total",
                "Orphans the sweep deleted (kind: vm, nic, disk, node).",
                &["kind"],
            )?,
            sweep_runs: counter(
                "nodewright_sweep_runs_total",
                "Orphan sweeps ended, by outcome (completed, dry-run, frozen, not-approved, braked, skipped, refused, canceled).",
                &["outcome"],
            )?,
            sweep_findings: gauge(
                "nodewright_sweep_findings",
                "What the last sweep this worker ran acted on or reported, by kind (vm, nic, disk, node), rule and action (delete, replace, report, untaint).",
                &["kind", "rule", "action"],
            )?,
            freeze_check: gauge(
                "nodewright_sweep_freeze_check_timestamp_seconds",
                "When the orphan sweep's freeze check last answered (result: ok, frozen), in Unix seconds.",
                &["result"],
            )?,
            arm_requests: counter(
                "nodewright_arm_requests_total",
                "Azure Resource Manager requests by operation (e.g. virtualMachines.put, operations.get) and HTTP code (or transport).",
                &["operation", "code"],
            )?,
            arm_request_duration: histogram(
                "nodewright_arm_request_duration_seconds",
                "How long Azure Resource Manager requests took to answer.",
                &["operation"],
                &REQUEST_BUCKETS,
            )?,
            arm_ratelimit_remaining: gauge(
                "nodewright_arm_ratelimit_remaining",
                "The subscription's ARM requests left in the current window, as ARM's last answer said (scope: subscription_reads, subscription_writes).",
                &["scope"],
            )?,
            arm_write_budget: gauge(
                "nodewright_arm_write_budget_per_second",
                "The ARM write budget every worker shares (azure.arm_writes_per_second).",
                &[],
            )?,
            arm_write_backlog: gauge(
                "nodewright_arm_write_backlog",
                "ARM writes waiting for the write budget in the ARM-write task queue, by stage (finishing, building, starting), as Temporal last said.",
                &["stage"],
            )?,
            arm_write_backlog_age: gauge(
                "nodewright_arm_write_backlog_age_seconds",
                "How long the oldest ARM write waiting for the budget has waited, as Temporal last said.",
                &[],
            )?,
            arm_write_dispatch: gauge(
                "nodewright_arm_write_dispatch_per_second",
                "ARM writes the ARM-write task queue hands to workers per second, as Temporal last said: at the rate limit while writes wait, the budget is spent in full.",
                &[],
            )?,
            arm_write_rate_limit: gauge(
                "nodewright_arm_write_rate_limit_per_second",
                "The ARM-write task queue's rate limit the Temporal server enforces (the workers' azure.arm_writes_per_second, or an operator's override).",
                &[],
            )?,
            kube_requests: counter(
                "nodewright_kube_requests_total",
                "Kubernetes apiserver requests by verb, resource and HTTP code (or transport).",
                &["verb", "resource", "code"],
            )?,
            node_events: counter(
                "nodewright_node_events_total",
                "Kubernetes Events nodewright recorded about Nodes, by reason (a repeat counts too).",
                &["reason"],
            )?,
        };
        for (_, collector) in metrics.collectors() {
            metrics.registry.register(collector)?;
        }
        Ok(metrics)
    }

    fn collectors(&self) -> Vec<(&'static str, Box<dyn Collector>)> {
        vec![
            ("gauge", Box::new(self.build_info.clone())),
            ("histogram", Box::new(self.create_duration.clone())),
            ("histogram", Box::new(self.delete_duration.clone())),
            ("histogram", Box::new(self.drain_duration.clone())),
            ("counter", Box::new(self.evictions.clone())),
            ("counter", Box::new(self.force_deletions.clone())),
            ("histogram", Box::new(self.volume_detach.clone())),
            ("histogram", Box::new(self.volume_reattach.clone())),
            ("counter", Box::new(self.volume_moves.clone())),
            ("gauge", Box::new(self.pool_replicas.clone())),
            ("gauge", Box::new(self.pool_machines.clone())),
            ("gauge", Box::new(self.pool_condition.clone())),
            ("gauge", Box::new(self.pool_spot_evictions.clone())),
            ("counter", Box::new(self.remediations.clone())),
            ("gauge", Box::new(self.rollout_machines.clone())),
            ("gauge", Box::new(self.rollout_paused.clone())),
            ("counter", Box::new(self.status_queries.clone())),
            ("counter", Box::new(self.sweep_deletions.clone())),
            ("counter", Box::new(self.sweep_runs.clone())),
            ("gauge", Box::new(self.sweep_findings.clone())),
            ("gauge", Box::new(self.freeze_check.clone())),
            ("counter", Box::new(self.arm_requests.clone())),
            ("histogram", Box::new(self.arm_request_duration.clone())),
            ("gauge", Box::new(self.arm_ratelimit_remaining.clone())),
            ("gauge", Box::new(self.arm_write_budget.clone())),
            ("gauge", Box::new(self.arm_write_backlog.clone())),
            ("gauge", Box::new(self.arm_write_backlog_age.clone())),
            ("gauge", Box::new(self.arm_write_dispatch.clone())),
            ("gauge", Box::new(self.arm_write_rate_limit.clone())),
            ("counter", Box::new(self.kube_requests.clone())),
            ("counter", Box::new(self.node_events.clone())),
        ]
    }

    /// Every metric's name, type, labels and help, in registration order.
    pub fn describe(&self) -> Vec<Described> {
        self.collectors()
            .iter()
            .flat_map(|(kind, collector)| {
                collector
                    .desc()
                    .into_iter()
                    .map(|desc| Described {
                        name: desc.fq_name.clone(),
                        kind,
                        labels: desc.variable_labels.clone(),
                        help: desc.help.clone(),
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Every series in Prometheus' text format (version 0.0.4).
    pub fn encode(&self) -> String {
        let mut buffer = Vec::new();
        // Only a family with a sample is written; encoding into memory cannot fail.
        if let Err(error) = TextEncoder::new().encode(&self.registry.gather(), &mut buffer) {
            tracing::warn!(%error, "cannot encode nodewright's metrics");
        }
        String::from_utf8_lossy(&buffer).into_owned()
    }

    /// Sets the ARM write budget (`azure.arm_writes_per_second`).
    pub fn set_arm_write_budget(&self, per_second: f64) {
        self.arm_write_budget
            .with_label_values::<&str>(&[])
            .set(per_second);
    }

    /// Sets the ARM-write task queue's gauges from what Temporal said of it.
    pub fn set_write_queue(&self, queue: &WriteQueueGauges) {
        self.arm_write_backlog.reset();
        for (stage, backlog) in &queue.backlog {
            self.arm_write_backlog
                .with_label_values(&[stage])
                .set(*backlog);
        }
        self.arm_write_backlog_age
            .with_label_values::<&str>(&[])
            .set(queue.backlog_age_seconds);
        self.arm_write_dispatch
            .with_label_values::<&str>(&[])
            .set(queue.dispatch_per_second);
        match queue.rate_limit_per_second {
            Some(limit) => self
                .arm_write_rate_limit
                .with_label_values::<&str>(&[])
                .set(limit),
            None => self.arm_write_rate_limit.reset(),
        }
    }

    /// Replaces the pool gauges with `pools` (the pools whose controllers answered), keeping
    /// no series of a pool that is gone.
    pub fn set_pools(&self, pools: &[PoolGauges]) {
        self.pool_replicas.reset();
        self.pool_machines.reset();
        self.pool_condition.reset();
        self.pool_spot_evictions.reset();
        for pool in pools {
            for (zone, count) in &pool.spot_evictions {
                self.pool_spot_evictions
                    .with_label_values(&[pool.pool.as_str(), zone.as_str()])
                    .set(f64::from(*count));
            }
            for (state, value) in &pool.replicas {
                self.pool_replicas
                    .with_label_values(&[pool.pool.as_str(), state])
                    .set(f64::from(*value));
            }
            for (phase, value) in &pool.machines {
                self.pool_machines
                    .with_label_values(&[pool.pool.as_str(), phase])
                    .set(f64::from(*value));
            }
            for (type_, status) in &pool.conditions {
                self.pool_condition
                    .with_label_values(&[pool.pool.as_str(), type_.as_str(), status.as_str()])
                    .set(1.0);
            }
        }
    }

    /// Replaces the rollout gauges with `rollouts` (the running rollouts that answered).
    pub fn set_rollouts(&self, rollouts: &[RolloutGauges]) {
        self.rollout_machines.reset();
        self.rollout_paused.reset();
        for rollout in rollouts {
            for (state, value) in &rollout.machines {
                self.rollout_machines
                    .with_label_values(&[rollout.pool.as_str(), state])
                    .set(f64::from(*value));
            }
            self.rollout_paused
                .with_label_values(&[rollout.pool.as_str()])
                .set(if rollout.paused { 1.0 } else { 0.0 });
        }
    }
}

/// A pool's gauges, from its controller's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolGauges {
    /// The pool.
    pub pool: String,
    /// `(state, replicas)`.
    pub replicas: Vec<(&'static str, u32)>,
    /// `(phase, machines)`.
    pub machines: Vec<(&'static str, u32)>,
    /// `(type, status)` of each condition.
    pub conditions: Vec<(String, String)>,
    /// `(zone, Spot machines evicted)`.
    pub spot_evictions: Vec<(String, u32)>,
}

/// The ARM-write task queue's gauges, from Temporal's description of it.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteQueueGauges {
    /// `(stage, writes waiting)`.
    pub backlog: Vec<(&'static str, f64)>,
    /// How long the oldest has waited.
    pub backlog_age_seconds: f64,
    /// Writes handed out per second.
    pub dispatch_per_second: f64,
    /// The rate limit the server enforces, when it says.
    pub rate_limit_per_second: Option<f64>,
}

/// A running rollout's gauges, from its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutGauges {
    /// The pool.
    pub pool: String,
    /// `(state, machines)`.
    pub machines: Vec<(&'static str, u32)>,
    /// Whether it is paused.
    pub paused: bool,
}

/// The pool a machine's name says (`<pool>-<5 characters>`), or `""` for a name of another
/// shape: the `pool` label of a machine's metrics.
pub fn pool_label(machine: &str) -> String {
    nodewright_model::MachineName::parse("machine", machine)
        .ok()
        .and_then(|name| name.pool_of().map(str::to_owned))
        .unwrap_or_default()
}

/// Records how long a create, delete or drain run took.
pub fn run_ended(run: TimedRun, pool: &str, result: RunResult, seconds: f64) {
    if let Some(metrics) = installed() {
        let histogram = match run {
            TimedRun::Create => &metrics.create_duration,
            TimedRun::Delete => &metrics.delete_duration,
            TimedRun::Drain => &metrics.drain_duration,
        };
        histogram
            .with_label_values(&[pool, result.as_str()])
            .observe(seconds.max(0.0));
    }
}

/// Counts one eviction call.
pub fn eviction(result: EvictionResult) {
    if let Some(metrics) = installed() {
        metrics
            .evictions
            .with_label_values(&[result.as_str()])
            .inc();
    }
}

/// Counts one pod deleted in force mode.
pub fn force_deletion() {
    if let Some(metrics) = installed() {
        metrics.force_deletions.with_label_values::<&str>(&[]).inc();
    }
}

/// Records how long a Node's volumes took to detach.
pub fn volumes_detached(pool: &str, seconds: f64) {
    if let Some(metrics) = installed() {
        metrics
            .volume_detach
            .with_label_values(&[pool])
            .observe(seconds.max(0.0));
    }
}

/// Records how long `volumes` volumes took to attach elsewhere.
pub fn volumes_reattached(pool: &str, volumes: usize, seconds: f64) {
    if let Some(metrics) = installed() {
        metrics
            .volume_reattach
            .with_label_values(&[pool])
            .observe(seconds.max(0.0));
        metrics
            .volume_moves
            .with_label_values(&[pool])
            .inc_by(u64::try_from(volumes).unwrap_or(u64::MAX));
    }
}

/// Counts one remediation started (`action`: restart, redeploy, replace).
pub fn remediation(pool: &str, action: &str) {
    if let Some(metrics) = installed() {
        metrics
            .remediations
            .with_label_values(&[pool, action])
            .inc();
    }
}

/// Counts one status query behind the pool and rollout gauges.
pub fn status_query(workflow: &str, ok: bool) {
    if let Some(metrics) = installed() {
        metrics
            .status_queries
            .with_label_values(&[workflow, if ok { "ok" } else { "error" }])
            .inc();
    }
}

/// Counts one orphan the sweep deleted (`kind`: vm, nic, disk, node).
pub fn sweep_deletion(kind: &str) {
    if let Some(metrics) = installed() {
        metrics.sweep_deletions.with_label_values(&[kind]).inc();
    }
}

/// Counts a sweep's end and replaces the findings with its.
pub fn sweep_ended(findings: &nodewright_model::sweep::SweepFindings) {
    if let Some(metrics) = installed() {
        metrics
            .sweep_runs
            .with_label_values(&[findings.outcome.as_str()])
            .inc();
        metrics.sweep_findings.reset();
        for finding in &findings.findings {
            metrics
                .sweep_findings
                .with_label_values(&[
                    finding.kind.as_str(),
                    finding.rule.as_str(),
                    finding.action.as_str(),
                ])
                .set(f64::from(finding.count));
        }
    }
}

/// Records the sweep's freeze check answering `frozen` or not, now.
pub fn freeze_check(frozen: bool) {
    if let Some(metrics) = installed() {
        let now = chrono::Utc::now().timestamp_millis() as f64 / 1000.0;
        metrics
            .freeze_check
            .with_label_values(&[if frozen { "frozen" } else { "ok" }])
            .set(now);
    }
}

/// Counts one ARM request (`code`: the HTTP status, or `transport`) and its latency.
pub fn arm_request(operation: &str, code: &str, seconds: f64) {
    if let Some(metrics) = installed() {
        metrics
            .arm_requests
            .with_label_values(&[operation, code])
            .inc();
        metrics
            .arm_request_duration
            .with_label_values(&[operation])
            .observe(seconds.max(0.0));
    }
}

/// Records what ARM said is left of the subscription's `scope` budget.
pub fn arm_ratelimit_remaining(scope: &str, remaining: f64) {
    if let Some(metrics) = installed() {
        metrics
            .arm_ratelimit_remaining
            .with_label_values(&[scope])
            .set(remaining);
    }
}

/// Counts one apiserver request (`code`: the HTTP status, or `transport`).
pub fn kube_request(verb: &str, resource: &str, code: &str) {
    if let Some(metrics) = installed() {
        metrics
            .kube_requests
            .with_label_values(&[verb, resource, code])
            .inc();
    }
}

/// Counts one Event recorded about a Node.
pub fn node_event(reason: &str) {
    if let Some(metrics) = installed() {
        metrics.node_events.with_label_values(&[reason]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_named_in_prometheus_conventions() {
        let metrics = Metrics::new().expect("valid definitions");
        let described = metrics.describe();
        assert_eq!(described.len(), metrics.collectors().len());
        for metric in &described {
            assert!(metric.name.starts_with("nodewright_"), "{}", metric.name);
            assert!(
                !metric
                    .labels
                    .iter()
                    .any(|label| label == "machine" || label == "node")
            );
            match metric.kind {
                "counter" => assert!(metric.name.ends_with("_total")),
                "histogram" => assert!(metric.name.ends_with("_seconds")),
                _ => assert!(!metric.name.ends_with("_total")),
            }
            assert!(!metric.help.is_empty());
        }
        for required in [
            "nodewright_machine_create_duration_seconds",
            "nodewright_machine_delete_duration_seconds",
            "nodewright_drain_duration_seconds",
            "nodewright_evictions_total",
            "nodewright_pool_replicas",
            "nodewright_remediations_total",
            "nodewright_sweep_deletions_total",
            "nodewright_arm_requests_total",
        ] {
            assert!(described.iter().any(|m| m.name == required), "{required}");
        }
    }

    #[test]
    fn recorded_values_are_encoded_and_gone_pools_leave_no_series() {
        let metrics = Metrics::new().expect("valid definitions");
        metrics
            .create_duration
            .with_label_values(&["blue", "succeeded"])
            .observe(42.0);
        metrics.set_pools(&[PoolGauges {
            pool: "blue".into(),
            replicas: vec![("desired", 3), ("ready", 2)],
            machines: vec![("creating", 1)],
            conditions: vec![("RemediationAllowed".into(), "False".into())],
            spot_evictions: vec![("2".into(), 4)],
        }]);
        let text = metrics.encode();
        assert!(text.contains(
            "nodewright_machine_create_duration_seconds_bucket{pool=\"blue\",result=\"succeeded\",le=\"60\"} 1"
        ), "{text}");
        assert!(text.contains("nodewright_pool_replicas{pool=\"blue\",state=\"desired\"} 3"));
        assert!(text.contains(
            "nodewright_pool_condition{pool=\"blue\",status=\"False\",type=\"RemediationAllowed\"} 1"
        ), "{text}");
        assert!(
            text.contains("nodewright_pool_spot_evictions{pool=\"blue\",zone=\"2\"} 4"),
            "{text}"
        );
        metrics.set_pools(&[]);
        assert!(!metrics.encode().contains("nodewright_pool_replicas"));
        assert!(!metrics.encode().contains("nodewright_pool_spot_evictions"));
    }

    #[test]
    fn a_machine_name_gives_its_pool_and_any_other_name_none() {
        assert_eq!(pool_label("blue-bcdfg"), "blue");
        assert_eq!(pool_label("not a machine"), "");
    }
}
