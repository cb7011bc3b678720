//! What the sweep tests share: a cluster of their own (its own name, so the sweep sees only
//! what the test seeded as "ours" and everything else in the resource group as not ours), a
//! worker for it, seeding helpers, `sweep run --wait`, and reading the audit and the status as
//! the model's types (`SweepAudit`, `SweepStatus`): a field they require that is missing or
//! renamed fails the test instead of reading as empty.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use chrono::{SecondsFormat, Utc};
use nodewright_model::arm::Disposition;
use nodewright_model::ownership::{
    TAG_CLUSTER, TAG_CREATED, TAG_CREATION_DEADLINE, TAG_MACHINE, TAG_POOL,
};
use nodewright_model::sweep::{Action, AuditEntry, Outcome, SweepAudit, SweepOutcome, SweepPhase};
use nodewright_tests::Stack;
use nodewright_tests::documents::{SweepAuditDocument, SweepStatusDocument};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{CliResult, KillableWorker, Sandbox, cli};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::{Value, json};

/// A cluster name of its own, a worker and a CLI for it, on the shared stack.
pub struct SweepCluster {
    /// The stack, with this cluster's name (and, for the freeze test, its own kubeconfig).
    pub stack: Stack,
    /// The worker's task queue.
    pub task_queue: String,
    /// The cluster's name (`sweep-<suffix>`).
    pub cluster: String,
    /// A pool name for the machines seeded (`sw<suffix>`); every seeded ARM name starts with it.
    pub pool: String,
    /// The sandbox.
    pub sandbox: Sandbox,
    worker: Option<KillableWorker>,
}

impl SweepCluster {
    /// A new cluster name on `stack`, with a worker running for it.
    pub fn start(stack: &Stack, kubeconfig: Option<std::path::PathBuf>) -> Result<Self> {
        let suffix = unique_suffix();
        let mut stack = stack.clone();
        stack.cluster = format!("sweep-{suffix}");
        if let Some(kubeconfig) = kubeconfig {
            stack.kubeconfig = kubeconfig;
        }
        let task_queue = unique_task_queue("sweep");
        let worker = KillableWorker::start(&stack, &task_queue)?;
        Ok(Self {
            sandbox: Sandbox::new(&stack)?,
            cluster: stack.cluster.clone(),
            pool: format!("sw{}", &suffix[..6]),
            stack,
            task_queue,
            worker: Some(worker),
        })
    }

    /// Where the cluster's worker serves `/metrics`.
    pub fn metrics_address(&self) -> Result<std::net::SocketAddr> {
        self.worker
            .as_ref()
            .context("the sweep cluster's worker is gone")?
            .metrics_address()
    }

    /// Runs the CLI for this cluster.
    pub async fn cli(&self, args: &[&str]) -> Result<CliResult> {
        cli(&self.stack, &self.task_queue, args).await
    }

    /// `sweep run --wait --output json` plus `extra`: the exit code and the audit.
    pub async fn sweep(&self, extra: &[&str]) -> Result<(Option<i32>, SweepAuditDocument)> {
        let mut args = vec!["--output", "json", "sweep", "run", "--wait"];
        args.extend_from_slice(extra);
        let result = self
            .cli(&args)
            .await
            .with_context(|| format!("worker log:\n{}", self.worker_log()))?;
        let audit: SweepAuditDocument =
            serde_json::from_str(result.stdout.trim()).with_context(|| {
                format!(
                    "sweep run printed no audit (exit {:?}): {}\n{}\nworker log:\n{}",
                    result.code,
                    result.stdout,
                    result.stderr,
                    self.worker_log()
                )
            })?;
        Ok((result.code, audit))
    }

    /// Whether the worker process still runs.
    pub fn worker_running(&mut self) -> bool {
        self.worker.as_mut().is_some_and(KillableWorker::is_running)
    }

    /// The end of the worker's log, for failure messages.
    pub fn worker_log(&self) -> String {
        self.worker
            .as_ref()
            .map(KillableWorker::log_tail)
            .unwrap_or_default()
    }

    /// The ownership tags of machine `machine` of this cluster's pool, created `age` ago by a
    /// create with the default creation timeout (20m).
    pub fn ours(&self, machine: &str, age: Duration) -> Value {
        let age = chrono::Duration::from_std(age).unwrap_or_default();
        let created = Utc::now() - age;
        let deadline = created + chrono::Duration::minutes(20);
        json!({
            TAG_CLUSTER: self.cluster,
            TAG_POOL: self.pool,
            TAG_MACHINE: machine,
            TAG_CREATED: created.to_rfc3339_opts(SecondsFormat::Secs, true),
            TAG_CREATION_DEADLINE: deadline.to_rfc3339_opts(SecondsFormat::Secs, true),
        })
    }

    /// `<pool>-<five letters>`.
    pub fn machine(&self, five: &str) -> String {
        format!("{}-{five}", self.pool)
    }

    /// Seeds resources in the sandbox (`{"type","name","tags",...}` each).
    pub async fn seed(&self, resources: Vec<Value>) -> Result<()> {
        self.sandbox.seed(json!({ "resources": resources })).await?;
        Ok(())
    }

    /// Whether the VM, NIC or disk `name` exists in ARM.
    pub async fn exists(&self, kind: &str, name: &str) -> Result<bool> {
        let arm = self.stack.arm_client()?;
        let found = match kind {
            "vm" => arm.get_vm(name).await.map(|_| ()),
            "nic" => arm.get_nic(name).await.map(|_| ()),
            "disk" => arm.get_disk(name).await.map(|_| ()),
            other => bail!("no ARM kind {other}"),
        };
        match found {
            Ok(()) => Ok(true),
            Err(error) if error.disposition() == Disposition::Gone => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// Removes everything seeded under this cluster's pool prefix and stops the worker.
    pub async fn clean_up(mut self) -> Result<()> {
        self.sandbox.remove_seeded(&self.pool).await?;
        self.worker = None;
        Ok(())
    }
}

/// RFC 3339 of `age` ago.
pub fn ago(age: Duration) -> String {
    let age = chrono::Duration::from_std(age).unwrap_or_default();
    (Utc::now() - age).to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// An hour: old enough for any grace period the tests use.
pub const OLD: Duration = Duration::from_secs(2 * 3600);

/// The audit's removals: (kind, name) → (rule, outcome word; `none` when the entry has none).
pub fn removals(audit: &SweepAudit) -> BTreeMap<(String, String), (String, String)> {
    audit
        .entries
        .iter()
        .filter(|e| matches!(e.decision.action, Action::Delete | Action::Replace))
        .map(|e| {
            let decision = &e.decision;
            (
                (decision.kind.as_str().to_owned(), decision.name.clone()),
                (
                    decision.rule.as_str().to_owned(),
                    e.outcome.as_ref().map_or("none", Outcome::word).to_owned(),
                ),
            )
        })
        .collect()
}

/// The removals whose name starts with `prefix` (the test's own).
pub fn own_removals(
    audit: &SweepAudit,
    prefix: &str,
) -> BTreeMap<(String, String), (String, String)> {
    removals(audit)
        .into_iter()
        .filter(|((_, name), _)| name.starts_with(prefix))
        .collect()
}

/// The rule that kept `kind` `name`, from the kept groups (`not-ours` from the foreign groups).
pub fn kept_rule(audit: &SweepAudit, kind: &str, name: &str) -> Option<String> {
    let listed = |names: &[String]| names.iter().any(|n| n == name);
    let kept = audit
        .kept
        .iter()
        .find(|g| g.kind.as_str() == kind && listed(&g.names))
        .map(|g| g.rule.as_str().to_owned());
    kept.or_else(|| {
        audit
            .not_ours
            .iter()
            .find(|g| g.kind.as_str() == kind && listed(&g.names))
            .map(|_| "not-ours".to_owned())
    })
}

/// The cluster tag a foreign `kind` `name` was grouped under (`Some(None)`: no tag).
pub fn foreign_tag(audit: &SweepAudit, kind: &str, name: &str) -> Option<Option<String>> {
    audit
        .not_ours
        .iter()
        .find(|g| g.kind.as_str() == kind && g.names.iter().any(|n| n == name))
        .map(|g| g.cluster_tag.clone())
}

/// The reason the audit's outcome gives (`frozen`, `braked`, `refused`, `skipped`, a
/// `canceled` with one), `None` for an outcome without one.
pub fn outcome_reason(audit: &SweepAudit) -> Option<&str> {
    match &audit.outcome {
        SweepOutcome::Frozen { reason }
        | SweepOutcome::Braked { reason }
        | SweepOutcome::Refused { reason }
        | SweepOutcome::Skipped { reason } => Some(reason),
        SweepOutcome::Canceled { reason } => reason.as_deref(),
        SweepOutcome::Completed | SweepOutcome::DryRun | SweepOutcome::NotApproved { .. } => None,
    }
}

/// The audit's entry about `name` (a resource or Node it did not keep).
pub fn entry<'a>(audit: &'a SweepAudit, name: &str) -> Option<&'a AuditEntry> {
    audit.entries.iter().find(|e| e.decision.name == name)
}

/// `sweep report --output json` plus `extra`: the newest (or the named) finished sweep's audit;
/// `None` while the CLI has none to show (it exits non-zero), a printed audit must parse.
pub async fn report(sweep: &SweepCluster, extra: &[&str]) -> Result<Option<SweepAuditDocument>> {
    let mut args = vec!["--output", "json", "sweep", "report"];
    args.extend_from_slice(extra);
    let answer = sweep.cli(&args).await?;
    if answer.code != Some(0) {
        return Ok(None);
    }
    Ok(Some(answer.parse()?))
}

/// The audit's outcome word (`completed`, `dry-run`, `frozen`, `not-approved`).
pub fn outcome(audit: &SweepAudit) -> &'static str {
    audit.outcome.word()
}

/// Waits until the cluster's running sweep waits for approval (`sweep status`).
pub async fn await_approval_wait(sweep: &SweepCluster) -> Result<()> {
    await_phase(sweep, SweepPhase::AwaitingApproval)
        .await
        .map(|_| ())
}

/// Waits until the cluster's running sweep is in `phase`; its `sweep status --output json`.
/// While none runs (the CLI's `{"runStatus":"none",…}`) or the CLI cannot tell, it asks again;
/// a running sweep's status that does not parse fails.
pub async fn await_phase(sweep: &SweepCluster, phase: SweepPhase) -> Result<SweepStatusDocument> {
    nodewright_tests::poll::eventually(
        &format!("a sweep to be {}", phase.as_str()),
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let answer = sweep.cli(&["--output", "json", "sweep", "status"]).await?;
            if answer.code != Some(0) {
                return Ok(None);
            }
            // The one raw read: the document the CLI prints when no sweep runs.
            let document: Value = answer.json()?;
            if document["runStatus"] == "none" {
                return Ok(None);
            }
            let status: SweepStatusDocument = serde_json::from_value(document)
                .with_context(|| format!("sweep status: {}", answer.stdout))?;
            Ok((status.status.phase == phase).then_some(status))
        },
    )
    .await
}

/// Starts `sweep run --wait --output json` plus `extra` in the background: its exit code and
/// audit when it ends.
pub fn sweep_in_background(
    sweep: &SweepCluster,
    extra: &[&str],
) -> tokio::task::JoinHandle<Result<(Option<i32>, SweepAuditDocument)>> {
    let (stack, task_queue) = (sweep.stack.clone(), sweep.task_queue.clone());
    let mut args: Vec<String> = ["--output", "json", "sweep", "run", "--wait"]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    tokio::spawn(async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let result = cli(&stack, &task_queue, &args).await?;
        let audit: SweepAuditDocument =
            serde_json::from_str(result.stdout.trim()).with_context(|| {
                format!(
                    "no audit (exit {:?}): {} {}",
                    result.code, result.stdout, result.stderr
                )
            })?;
        Ok((result.code, audit))
    })
}

/// Registers a Node for this cluster's VM `name` (providerID naming it), Ready, heard from now:
/// the machine has joined.
pub async fn joined_node(sweep: &SweepCluster, name: &str) -> Result<()> {
    use k8s_openapi::api::core::v1::Node;
    use kube::Api;
    use kube::api::{Patch, PatchParams, PostParams};

    let nodes: Api<Node> = Api::all(sweep.stack.kube_client().await?);
    let provider_id = format!(
        "azure:///subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines/{name}",
        sweep.stack.arm.subscription_id, sweep.stack.arm.resource_group
    );
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": { "nodewright.io/machine": name, "nodewright.io/pool": sweep.pool },
        },
        "spec": { "providerID": provider_id },
    }))?;
    nodes.create(&PostParams::default(), &node).await?;
    let now = ago(Duration::ZERO);
    let status = json!({ "status": { "conditions": [{
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .context("writing the Node's status")?;
    Ok(())
}

/// Deletes the Nodes `names` (clean-up; a missing one is no error).
pub async fn remove_nodes(sweep: &SweepCluster, names: &[String]) -> Result<()> {
    use k8s_openapi::api::core::v1::Node;
    use kube::Api;
    use kube::api::DeleteParams;

    let nodes: Api<Node> = Api::all(sweep.stack.kube_client().await?);
    for name in names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
    Ok(())
}
