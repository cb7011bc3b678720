//! Every workflow's input checked where it is used: one pure `check` per input type, with the
//! same rules the CLI applies before it starts a run (the pool file's in [`crate::pool`], the
//! maxima of [`crate::limits`], machine names of [`crate::machine_name`]), and
//! [`check_cluster`], which refuses an input for another cluster, and [`check_subject`], which
//! refuses an input for another machine or pool than its workflow ID names.
//!
//! Anything that may start a workflow on the Temporal namespace can hand it any input; a
//! workflow therefore checks its input before its first step and fails at once, non-retryable
//! with the type [`INVALID_INPUT`], naming every field that breaks a rule and its fix. The CLI
//! calls the same `check` on the input it built, so the two cannot drift apart.
//!
//! The checks still trust whoever may start a run with a valid input: namespace authorization
//! decides who that is.

use std::fmt;
use std::time::Duration;

use crate::ClusterName;
use crate::drain::DrainRequest;
use crate::isolation::cluster_of_workflow_id;
use crate::limits::{self, short};
use crate::machine::{CreateMachineRequest, DeleteMachineRequest, UncordonRequest};
use crate::machine_name::MachineName;
use crate::pool::FieldError;
use crate::pool::validate_received as received;
use crate::rollout::{InspectPoolRequest, RolloutRequest};
use crate::sweep::SweepRequest;
use crate::text::quoted;
use crate::workflow_type;

/// The failure type of a run refused for its input. Non-retryable: the input has to change.
pub const INVALID_INPUT: &str = "InvalidInput";

/// A workflow input with at least one value that breaks a rule. Displays one problem per
/// line, each `field: problem (got value); fix`, after a line naming the workflow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InputError {
    /// The workflow type whose input this is, e.g. `CreateMachine`.
    pub workflow: String,
    /// Every problem found, in the order of the input; never empty.
    pub errors: Vec<FieldError>,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} refused its input before its first step (nothing was changed):",
            self.workflow
        )?;
        for error in &self.errors {
            write!(f, "\n{error}")?;
        }
        Ok(())
    }
}

/// The problems of one input, gathered field by field.
#[derive(Debug)]
struct Problems {
    workflow: &'static str,
    errors: Vec<FieldError>,
}

impl Problems {
    fn new(workflow: &'static str) -> Self {
        Self {
            workflow,
            errors: Vec::new(),
        }
    }

    fn push(
        &mut self,
        field: impl Into<String>,
        value: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.errors.push(FieldError {
            field: field.into(),
            value: value.into(),
            problem: problem.into(),
            fix: fix.into(),
        });
    }

    fn extend(&mut self, errors: Vec<FieldError>) {
        self.errors.extend(errors);
    }

    /// A machine (or Node) name at `field`, by the rules of [`MachineName::parse`].
    fn machine(&mut self, field: &str, name: &str) {
        if let Err(invalid) = MachineName::parse(field, name) {
            self.push(
                field,
                quoted(name),
                invalid.problem,
                "give the name of one of nodewright's machines, e.g. \"workers-x7k2q\" (`nodewright pool status` lists them)",
            );
        }
    }

    /// A duration at `field` of at most `max` (and at least `min`), as the CLI's `flag` checks it.
    fn duration(&mut self, field: &str, flag: &str, value: Duration, min: Duration, max: Duration) {
        if value < min || value > max {
            self.push(
                field,
                format!("{}s", value.as_secs()),
                format!("is not from {} to {}", short(min), short(max)),
                format!(
                    "give {flag} from {} to {} (e.g. 90s, 20m, 1h)",
                    short(min),
                    short(max)
                ),
            );
        }
    }

    /// A count at `field` from `min` to `max`, as the CLI's `flag` checks it.
    fn count(&mut self, field: &str, flag: &str, value: u32, min: u32, max: u32) {
        if value < min || value > max {
            self.push(
                field,
                value.to_string(),
                format!("is not from {min} to {max}"),
                format!("give {flag} from {min} to {max}"),
            );
        }
    }

    /// The knobs of a workflow that looks again and again (`--observe-interval`,
    /// `--history-limit`): the interval at most [`limits::MAX_OBSERVE_INTERVAL`], the limit from
    /// 1 to [`limits::MAX_HISTORY_LIMIT`].
    fn loop_knobs(&mut self, observe_interval: Duration, history_limit: u32) {
        if observe_interval > limits::MAX_OBSERVE_INTERVAL {
            self.duration(
                "observeInterval",
                "--observe-interval",
                observe_interval,
                Duration::ZERO,
                limits::MAX_OBSERVE_INTERVAL,
            );
        }
        self.count(
            "historyLimit",
            "--history-limit",
            history_limit,
            1,
            limits::MAX_HISTORY_LIMIT,
        );
    }

    fn finish(self) -> Result<(), InputError> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(InputError {
                workflow: self.workflow.to_owned(),
                errors: self.errors,
            })
        }
    }
}

/// Whether a run of `workflow` whose input names `cluster` may run here: the input's cluster
/// must be the cluster its workflow ID names (`create/<cluster>/<machine>`, which the CLI builds
/// and the worker's activity guard admits only for its own cluster), and the cluster of the
/// worker running it, when the caller knows it (`worker_cluster`).
///
/// # Errors
///
/// [`InputError`] at the field `cluster`, naming both clusters and the fix.
pub fn check_cluster(
    workflow: &'static str,
    cluster: &ClusterName,
    workflow_id: &str,
    worker_cluster: Option<&ClusterName>,
) -> Result<(), InputError> {
    let mut problems = Problems::new(workflow);
    match cluster_of_workflow_id(workflow_id) {
        None => problems.push(
            "cluster",
            quoted(cluster.as_str()),
            format!("cannot be checked: the workflow ID {workflow_id} is not one nodewright builds, so it names no cluster"),
            "start runs with the nodewright CLI, or with the workflow ID it uses (e.g. create/<cluster>/<machine>)",
        ),
        Some(named) if &named != cluster => problems.push(
            "cluster",
            quoted(cluster.as_str()),
            format!(
                "is not the cluster the workflow ID {workflow_id} names ({})",
                quoted(named.as_str())
            ),
            "give the same cluster in the input and in the workflow ID (the nodewright CLI does)",
        ),
        Some(_) => {}
    }
    if let Some(worker) = worker_cluster
        && worker != cluster
    {
        problems.push(
            "cluster",
            quoted(cluster.as_str()),
            format!(
                "is another cluster than the one this worker manages ({}, its Kubernetes API and Azure resource group)",
                quoted(worker.as_str())
            ),
            "start the run on that cluster's task queue (nodewright-<cluster> unless configured), with that cluster's settings",
        );
    }
    problems.finish()
}

/// Whether the machine, Node or pool an input of `workflow` acts on (`value`, at `field`) is
/// the one its workflow ID names (`delete/<cluster>/<machine>`): Temporal runs one run per
/// workflow ID at a time, so only then is there one run per machine (or pool) at a time. An ID
/// without a subject (`sweep/<cluster>`) or that nodewright does not build (refused by
/// [`check_cluster`]) passes here.
///
/// # Errors
///
/// [`InputError`] at `field`, naming the ID's subject and the fix.
pub fn check_subject(
    workflow: &'static str,
    field: &str,
    value: &str,
    workflow_id: &str,
) -> Result<(), InputError> {
    let mut problems = Problems::new(workflow);
    if cluster_of_workflow_id(workflow_id).is_some()
        && let Some((_, subject)) = workflow_id.rsplit_once('/')
        && workflow_id.matches('/').count() == 2
        && subject != value
    {
        problems.push(
            field,
            quoted(value),
            format!(
                "is not the subject of the workflow ID {workflow_id} ({})",
                quoted(subject)
            ),
            "give the same name in the input and in the workflow ID (the nodewright CLI does): only then does Temporal keep to one run per machine or pool",
        );
    }
    problems.finish()
}

impl CreateMachineRequest {
    /// Checks the input of CreateMachine with the rules `machine create` applies: the pool's
    /// name, the machine's name, the template and creation timeout by the pool file's rules, the
    /// drain settings by `spec.drain`'s bounds.
    ///
    /// # Errors
    ///
    /// [`InputError`] listing every value that breaks a rule.
    pub fn check(&self) -> Result<(), InputError> {
        let mut problems = Problems::new(workflow_type::CREATE_MACHINE);
        problems.extend(received::pool_name("pool", &self.pool));
        problems.machine("machine", &self.machine);
        problems.extend(received::template(
            "template",
            &self.template,
            self.creation_timeout,
            "creationTimeout",
        ));
        if self.template_hash.is_empty()
            || self.template_hash.len() > 63
            || !self
                .template_hash
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            problems.push(
                "templateHash",
                quoted(&self.template_hash),
                "is not a template hash",
                "give the template's hash as `nodewright pool validate` prints it",
            );
        }
        problems.extend(received::creation_timeout(
            "creationTimeout",
            self.creation_timeout,
        ));
        problems.extend(received::drain("drain", &self.drain));
        if let Some(zone) = &self.zone
            && !self.template.zones.contains(zone)
        {
            let fix = if self.template.zones.is_empty() {
                "leave zone out: the template has no zones".to_owned()
            } else {
                format!(
                    "give one of the template's zones ({}) or leave zone out",
                    self.template.zones.join(", ")
                )
            };
            problems.push(
                "zone",
                quoted(zone),
                "is not one of the template's zones",
                fix,
            );
        }
        let allowed = self.template.allowed_capacity_types();
        if let Some(capacity) = self.capacity_type
            && !allowed.contains(&capacity)
        {
            let names: Vec<&str> = allowed.iter().map(|kind| kind.as_str()).collect();
            problems.push(
                "capacityType",
                quoted(capacity.as_str()),
                "is not one of the template's capacity types",
                format!(
                    "give one of the template's capacityTypes ({}) or leave capacityType out",
                    names.join(", ")
                ),
            );
        }
        problems.finish()
    }
}

impl DeleteMachineRequest {
    /// Checks the input of DeleteMachine with the rules `machine delete` applies: the machine's
    /// name, drain settings given instead of the Node's by `spec.drain`'s bounds, and the hook
    /// timeout within [`limits::MAX_HOOK_TIMEOUT`].
    ///
    /// # Errors
    ///
    /// [`InputError`] listing every value that breaks a rule.
    pub fn check(&self) -> Result<(), InputError> {
        let mut problems = Problems::new(workflow_type::DELETE_MACHINE);
        problems.machine("machine", &self.machine);
        if let Some(policy) = &self.drain_policy {
            problems.extend(received::drain("drainPolicy", policy));
        }
        if let Some(timeout) = self.hook_timeout {
            problems.duration(
                "hookTimeout",
                "--hook-timeout",
                timeout,
                Duration::from_secs(1),
                limits::MAX_HOOK_TIMEOUT,
            );
        }
        problems.finish()
    }
}

impl UncordonRequest {
    /// Checks the input of UncordonNode: the machine's name.
    ///
    /// # Errors
    ///
    /// [`InputError`] when the name is not a machine name.
    pub fn check(&self) -> Result<(), InputError> {
        let mut problems = Problems::new(workflow_type::UNCORDON_NODE);
        problems.machine("machine", &self.machine);
        problems.finish()
    }
}

impl DrainRequest {
    /// Checks the input of DrainNode with the rules `machine drain` applies: the Node's name,
    /// and drain settings (given, or carried over by a continued run) by `spec.drain`'s bounds.
    ///
    /// # Errors
    ///
    /// [`InputError`] listing every value that breaks a rule.
    pub fn check(&self) -> Result<(), InputError> {
        let mut problems = Problems::new(workflow_type::DRAIN_NODE);
        problems.machine("node", &self.node);
        if let Some(policy) = &self.policy {
            problems.extend(received::drain("policy", policy));
        }
        if let Some(resume) = &self.resume {
            problems.extend(received::drain("resume.policy", &resume.policy));
        }
        if let Some(limit) = self.history_limit {
            problems.count(
                "historyLimit",
                "--history-limit",
                limit,
                crate::drain::MIN_DRAIN_HISTORY_LIMIT,
                limits::MAX_HISTORY_LIMIT,
            );
        }
        problems.finish()
    }
}

impl RolloutRequest {
    /// Checks the input of RollingUpdate with the rules `pool rollout` applies: the pool by
    /// every rule of the pool file, the canary within the replicas, and the test knobs within
    /// their maxima. The history's templates are only carried into the result (a rollback
    /// starts a rollout with one as its pool's template, checked then); checking them here
    /// would stop every rollout of a pool whose earlier template a newer rule refuses.
    ///
    /// # Errors
    ///
    /// [`InputError`] listing every value that breaks a rule.
    pub fn check(&self) -> Result<(), InputError> {
        let mut problems = Problems::new(workflow_type::ROLLING_UPDATE);
        problems.extend(received::pool("pool", &self.pool));
        if let Some(canary) = self.canary {
            problems.count("canary", "--canary", canary, 1, self.pool.replicas.max(1));
        }
        problems.loop_knobs(self.observe_interval, self.history_limit);
        problems.finish()
    }
}

impl crate::controller::ControllerRequest {
    /// Checks the input of PoolController with the rules of a pool file and the bounds of
    /// `pool apply`'s flags.
    ///
    /// # Errors
    ///
    /// [`InputError`] listing every value that breaks a rule.
    pub fn check(&self) -> Result<(), InputError> {
        let mut problems = Problems::new(workflow_type::POOL_CONTROLLER);
        problems.extend(received::pool("pool", &self.pool));
        problems.loop_knobs(self.observe_interval, self.history_limit);
        problems.finish()
    }
}

/// Checks the pools a preflight run is asked about: at most
/// [`crate::preflight::MAX_PREFLIGHT_POOLS`], each by the rules of a pool file's name,
/// replicas, placement (VM size, subnet, zones) and headroom buffer.
///
/// # Errors
///
/// [`InputError`] listing every value that breaks a rule.
pub fn check_preflight_pools(pools: &[crate::preflight::PreflightPool]) -> Result<(), InputError> {
    let mut problems = Problems::new(workflow_type::PREFLIGHT);
    let max = crate::preflight::MAX_PREFLIGHT_POOLS;
    if pools.len() > max {
        problems.push(
            "pools",
            pools.len().to_string(),
            format!("is more than {max} pool files"),
            format!("give at most {max} --pool files per preflight run"),
        );
    }
    for (index, pool) in pools.iter().take(max).enumerate() {
        let field = format!("pools[{index}]");
        problems.extend(received::pool_name(&format!("{field}.pool"), &pool.pool));
        let most = limits::MAX_REPLICAS;
        problems.count(
            &format!("{field}.replicas"),
            "spec.replicas",
            pool.replicas,
            0,
            most,
        );
        problems.count(
            &format!("{field}.surge"),
            "spec.strategy.maxSurge",
            pool.surge,
            0,
            most,
        );
        problems.extend(received::placement(
            &format!("{field}.question"),
            &pool.question,
            &format!("{field}.headroom"),
            &pool.buffer,
        ));
    }
    problems.finish()
}

/// Checks a pool a running PoolController is handed (`pool apply`) with the rules of a pool
/// file.
///
/// # Errors
///
/// [`InputError`] listing every value that breaks a rule.
pub fn check_pool_update(pool: &crate::pool::ValidPool) -> Result<(), InputError> {
    let mut problems = Problems::new(workflow_type::POOL_CONTROLLER);
    problems.extend(received::pool("pool", pool));
    problems.finish()
}

impl InspectPoolRequest {
    /// Checks the input of InspectPool: the pool's name.
    ///
    /// # Errors
    ///
    /// [`InputError`] when the name is not a pool name.
    pub fn check(&self) -> Result<(), InputError> {
        let mut problems = Problems::new(workflow_type::INSPECT_POOL);
        problems.extend(received::pool_name("pool", &self.pool));
        problems.finish()
    }
}

impl SweepRequest {
    /// Checks the input of OrphanSweep with the bounds of `sweep`'s flags.
    ///
    /// # Errors
    ///
    /// [`InputError`] listing every value that breaks a rule.
    pub fn check(&self) -> Result<(), InputError> {
        let mut problems = Problems::new(workflow_type::ORPHAN_SWEEP);
        problems.duration(
            "grace",
            "--grace",
            self.grace,
            limits::MIN_SWEEP_GRACE,
            limits::MAX_SWEEP_GRACE,
        );
        problems.duration(
            "healthTimeout",
            "--health-timeout",
            self.health_timeout,
            limits::MIN_SWEEP_HEALTH_TIMEOUT,
            limits::MAX_SWEEP_HEALTH_TIMEOUT,
        );
        problems.duration(
            "approvalTimeout",
            "--approval-timeout",
            self.approval_timeout,
            Duration::from_secs(1),
            limits::MAX_APPROVAL_TIMEOUT,
        );
        problems.count(
            "parallelism",
            "--parallelism",
            self.parallelism,
            1,
            limits::MAX_SWEEP_PARALLELISM,
        );
        problems.count(
            "brakePercent",
            "--brake-percent",
            self.brake_percent,
            0,
            limits::MAX_SWEEP_BRAKE_PERCENT,
        );
        problems.finish()
    }
}

#[cfg(test)]
mod tests;
