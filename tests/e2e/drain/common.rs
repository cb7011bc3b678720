//! What the drain tests share: a test's scene (worker, pool, machines, namespace) and its
//! clean-up, pool files with drain settings, the CLI off the async threads, the drain's `status`
//! as a typed document, machines made and removed with the CLI.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use nodewright_model::drain::PodState;
use nodewright_tests::Stack;
use nodewright_tests::documents::DrainLookup;
use nodewright_tests::documents::DrainStatusDocument;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, create_machine, write_pool_file};
use nodewright_tests::stack::temporal_cli;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{Placement, Workload, Workloads, set_unschedulable};
use serde_json::Value;

/// How long a scene's helper waits for a pod to run or a drain to reach a state.
const SCENE_WAIT: Duration = Duration::from_secs(90);

/// The machines' names after the pool's: `<pool>-b2c4d`, `<pool>-f5g6h`, ...
const MACHINE_SUFFIXES: [&str; 3] = ["b2c4d", "f5g6h", "k7m8n"];

/// One drain test's world: a worker on its own task queue, a pool with drain settings, `N`
/// machines named (not made: [`DrainScene::create_machines`]) and a namespace for its
/// workloads. [`DrainScene::finish`] cleans up whatever the test came to.
pub(crate) struct DrainScene<const N: usize> {
    pub stack: Stack,
    pub task_queue: String,
    pub worker: KillableWorker,
    pub pool: String,
    pub pool_file: PathBuf,
    pub machines: [String; N],
    pub workloads: Workloads,
}

impl<const N: usize> DrainScene<N> {
    /// Starts the worker on a task queue named after `name`, writes the pool file of a pool
    /// `<prefix><unique suffix>` with `settings` as `spec.drain`, and makes the namespace
    /// (named after `name` too).
    pub async fn start(name: &str, prefix: &str, settings: &[(&str, &str)]) -> Result<Self> {
        Self::start_with(name, prefix, settings, None).await
    }

    /// [`DrainScene::start`], with the worker's Kubernetes API reached through `kubeconfig`
    /// (the test's own clients keep the stack's).
    pub async fn start_with(
        name: &str,
        prefix: &str,
        settings: &[(&str, &str)],
        worker_kubeconfig: Option<PathBuf>,
    ) -> Result<Self> {
        let stack = Stack::load()?;
        let task_queue = unique_task_queue(name);
        let mut worker_stack = stack.clone();
        if let Some(kubeconfig) = worker_kubeconfig {
            worker_stack.kubeconfig = kubeconfig;
        }
        let worker = KillableWorker::start(&worker_stack, &task_queue)?;
        let pool = format!("{prefix}{}", unique_suffix());
        let pool_file = drain_pool_file(&stack, &pool, settings)?;
        let machines = std::array::from_fn(|i| format!("{pool}-{}", MACHINE_SUFFIXES[i % 3]));
        let workloads = Workloads::create(&stack, name).await?;
        Ok(Self {
            stack,
            task_queue,
            worker,
            pool,
            pool_file,
            machines,
            workloads,
        })
    }

    /// Creates the machines with the CLI, in parallel, and waits for them.
    pub async fn create_machines(&self) -> Result<()> {
        create_machines(
            &self.stack,
            &self.task_queue,
            &self.pool_file,
            &self.machines,
        )
        .await
    }

    /// A Deployment `web` of one pod placed by the pool, running on `node` (the caller keeps
    /// the other machines cordoned meanwhile), under a budget with `minAvailable` 1 that
    /// refuses its eviction; returns the pod's `namespace/name`.
    pub async fn web_under_budget(&self, node: &str) -> Result<String> {
        let workloads = &self.workloads;
        workloads
            .deployment(&Workload::new("web", 1, Placement::pool(&self.pool)))
            .await?;
        let web = workloads
            .wait_app_running("web", 1, Some(node), SCENE_WAIT)
            .await?;
        let name = web
            .first()
            .and_then(|p| p.metadata.name.clone())
            .context("web's pod")?;
        workloads.pod_disruption_budget("web", "web", 1).await?;
        Ok(format!("{}/{name}", workloads.namespace()))
    }

    /// [`Self::web_under_budget`] on `node`, `other` cordoned meanwhile (so the pod lands on
    /// `node`) and open again after; returns the pod's `namespace/name`.
    pub async fn hold_web_on(&self, node: &str, other: &str) -> Result<String> {
        let kube = self.workloads.client();
        set_unschedulable(kube, other, true).await?;
        let key = self.web_under_budget(node).await?;
        set_unschedulable(kube, other, false).await?;
        Ok(key)
    }

    /// `machine drain NODE --local-data evict`, then waits until the pod `key` is held by its
    /// budget (the drain runs on, asking again every PDB retry interval).
    pub async fn drain_until_held(&self, node: &str, key: &str) -> Result<()> {
        let (stack, task_queue) = (&self.stack, self.task_queue.as_str());
        let args = ["machine", "drain", node, "--local-data", "evict"];
        cli(stack, task_queue, &args).await?.expect_code(0)?;
        let held = |doc: &DrainStatusDocument| {
            doc.status
                .pod(key)
                .is_some_and(|p| p.state == PodState::Blocked)
        };
        let what = format!("{key} held by its budget");
        wait_drain(stack, task_queue, node, &what, SCENE_WAIT, held).await?;
        Ok(())
    }

    /// Cleans up: pods and volumes first (the attachments must go while the Nodes exist), the
    /// drains still running after a failure, then the machines; `result` gets the worker's log.
    pub async fn finish(self, result: Result<()>) -> Result<()> {
        let result = result.with_context(|| format!("worker log:\n{}", self.worker.log_tail()));
        self.workloads.clean_up().await;
        if result.is_err() {
            terminate_drains(&self.stack, &self.machines).await;
        }
        delete_machines(&self.stack, &self.task_queue, &self.machines).await;
        drop(self.worker);
        result
    }
}

/// Terminates the drains of `machines` still running (after a failure), quietly.
pub(crate) async fn terminate_drains(stack: &Stack, machines: &[String]) {
    let Ok(cli) = temporal_cli() else { return };
    for machine in machines {
        let mut command = std::process::Command::new(&cli);
        command.args([
            "workflow",
            "terminate",
            "--workflow-id",
            &format!("drain/{}/{machine}", stack.cluster),
            "--reason",
            "e2e cleanup after a failure",
            "--address",
            &stack.temporal_address,
            "--namespace",
            &stack.temporal_namespace,
        ]);
        let _ = tokio::task::spawn_blocking(move || command.output()).await;
    }
}

/// How often a drain's status is read while waiting for it.
pub(super) const POLL: Duration = Duration::from_millis(500);

/// A pool file as [`write_pool_file`] writes it, with `spec.drain` set to `settings`.
pub(crate) fn drain_pool_file(
    stack: &Stack,
    pool: &str,
    settings: &[(&str, &str)],
) -> Result<PathBuf> {
    let path = write_pool_file(stack, pool, "5m")?;
    let text = std::fs::read_to_string(&path)?;
    let mut drain = String::from("  drain:\n");
    for (key, value) in settings {
        drain.push_str(&format!("    {key}: {value}\n"));
    }
    ensure!(
        text.contains("\n  timeouts:\n"),
        "unexpected pool file:\n{text}"
    );
    let text = text.replace("\n  timeouts:\n", &format!("\n{drain}  timeouts:\n"));
    std::fs::write(&path, text)?;
    Ok(path)
}

pub(super) use nodewright_tests::machines::cli;

/// `machine status NAME --output json`, typed as `T`: the machine's latest create, drain or
/// delete run.
pub(crate) async fn machine_status<T: serde::de::DeserializeOwned>(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
) -> Result<T> {
    cli(
        stack,
        task_queue,
        &["machine", "status", machine, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()
}

/// `machine status NAME --output json` of a machine whose latest run is its drain, typed: a
/// field the drain's status requires that is missing or renamed fails here.
pub(crate) async fn drain_document(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
) -> Result<DrainStatusDocument> {
    let doc: DrainStatusDocument = machine_status(stack, task_queue, machine).await?;
    let expected = format!("drain/{}/{machine}", stack.cluster);
    ensure!(doc.workflow_id == expected, "status of {expected}: {doc}");
    Ok(doc)
}

/// Polls `machine status` until it shows the machine's drain and `done` holds; the error shows
/// the last answer.
pub(crate) async fn wait_drain(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(&DrainStatusDocument) -> bool,
) -> Result<DrainStatusDocument> {
    let deadline = tokio::time::Instant::now() + timeout;
    let expected = format!("drain/{}/{machine}", stack.cluster);
    loop {
        let doc: DrainStatusDocument = machine_status(stack, task_queue, machine).await?;
        // Until the drain has started, `machine status` shows the machine's latest other run
        // (its create): a wait begun beside `machine drain` keeps asking.
        if doc.workflow_id == expected && done(&doc) {
            return Ok(doc);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "timed out after {timeout:?} waiting for {what} of {expected}; last status: {doc}"
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Creates the machines with the CLI, in parallel, and waits for them.
pub(crate) async fn create_machines(
    stack: &Stack,
    task_queue: &str,
    pool_file: &Path,
    machines: &[String],
) -> Result<()> {
    let creates = machines.iter().map(|machine| {
        let (stack, task_queue, pool_file, machine) = (
            stack.clone(),
            task_queue.to_owned(),
            pool_file.to_path_buf(),
            machine.clone(),
        );
        tokio::task::spawn_blocking(move || {
            create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])
        })
    });
    for created in futures::future::join_all(creates).await {
        created??.expect_code(0)?;
    }
    Ok(())
}

/// Deletes the machines without draining, in parallel; reports failures without failing.
pub(crate) async fn delete_machines(stack: &Stack, task_queue: &str, machines: &[String]) {
    let deletes = machines.iter().map(|machine| async move {
        let args = ["machine", "delete", machine, "--skip-drain", "--wait"];
        let outcome = cli(stack, task_queue, &args).await;
        (machine, outcome)
    });
    for (machine, outcome) in futures::future::join_all(deletes).await {
        if let Err(error) = outcome.and_then(|r| r.expect_code(0).map(|_| ())) {
            eprintln!("cleanup: deleting machine {machine}: {error:#}");
        }
    }
}

/// The Events about `node` (events.k8s.io/v1), oldest first.
pub(crate) fn node_events(stack: &Stack, node: &str) -> Result<Vec<Value>> {
    let selector = format!("regarding.kind=Node,regarding.name={node}");
    let output = std::process::Command::new(nodewright_tests::stack::kubectl()?)
        .env("KUBECONFIG", &stack.kubeconfig)
        .args([
            "get",
            "events.v1.events.k8s.io",
            "--namespace",
            "default",
            "--field-selector",
            &selector,
            "--output",
            "json",
        ])
        .output()?;
    ensure!(
        output.status.success(),
        "kubectl get events: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let document: Value = serde_json::from_slice(&output.stdout)?;
    let mut events = document["items"]
        .as_array()
        .context("an event list")?
        .clone();
    events.sort_by_key(|event| event["eventTime"].as_str().unwrap_or_default().to_owned());
    Ok(events)
}
