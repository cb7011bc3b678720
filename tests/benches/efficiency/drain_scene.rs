//! The world of a drain row: a cluster, subscription and resource group of the row's own on the
//! shared stack, a worker of that cluster on its own task queue, `N` kwok Nodes that are machines
//! of the cluster, one pod on each (all of one app) under one PodDisruptionBudget that allows no
//! disruption, and a maintenance drain of every Node; and its removal.
//!
//! # Expected Flow
//! 1. [`Scene::plan`] names everything and starts the worker, logging its apiserver requests
//!    (kube-client at debug level, JSON lines), and waits until it has checked its cluster's
//!    identity.
//! 2. [`Scene::populate`]: the Nodes, [`AT_ONCE`] at a time, each as a kubelet registers it plus
//!    what CreateMachine gives it that a drain checks (the providerID naming the VM, the
//!    `nodewright.io/machine` label) and no drain-policy annotation, so the drains use the
//!    defaults (PDB retry 20 s, timeout 2 h); kwok makes them Ready. Then a namespace, one pod
//!    of app `waiting` bound to each Node (kwok makes them Running), and the budget
//!    (`minAvailable` = N): every eviction is refused with 429.
//! 3. [`Scene::start_drains`]: `nodewright machine drain NODE --local-data evict` for every Node
//!    (the pods have no controller), [`STARTS_AT_ONCE`] CLI processes at a time.
//! 4. [`Scene::await_waiting`]: every drain's `status` query until all run with their pod
//!    `blocked` by the budget (bounded).
//! 5. [`Scene::clean_up`], also after a failure: the drains started are terminated, the worker
//!    stopped, the namespace (pods, budget) deleted, then the Nodes and their Leases.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use nodewright_model::drain::{DrainStatus, PodState};
use nodewright_model::machine::Outcome;
use nodewright_model::ownership::{LABEL_CLUSTER, LABEL_MACHINE, LABEL_POOL, provider_id};
use nodewright_model::{ClusterName, MachineName, Operation, WorkflowId};
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use nodewright_tests::identity::await_identity_recorded;
use nodewright_tests::kube_objects::{is_node_ready, kwok_node, unique_suffix};
use nodewright_tests::machines::{KillableWorker, cli};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{TEST_LABEL, Workloads, is_running};
use nodewright_workflows::DrainNodeWorkflow;
use serde_json::json;
use temporalio_client::{WorkflowQueryOptions, WorkflowTerminateOptions};

/// How many Nodes, pods or Leases are created or deleted at once.
pub const AT_ONCE: usize = 32;
/// How many `nodewright machine drain` processes run at once.
pub const STARTS_AT_ONCE: usize = 8;
/// How many `status` queries or terminations are in flight at once.
const QUERIES_AT_ONCE: usize = 16;
/// How long the Nodes may take to be Ready, the pods Running, the budget counted.
const READY_LIMIT: Duration = Duration::from_secs(180);
/// How often the Nodes, pods and budget are read while waiting for them.
const POLL: Duration = Duration::from_secs(2);
/// How long the drains may take to all wait on the budget after the last one started, at least.
const WAITING_LIMIT: Duration = Duration::from_secs(180);
/// ... and at least this long per drain (1,000 drains starting at once took more than 5
/// minutes on 2 cores: the worker, Temporal, the apiserver and kwok share them).
const WAITING_PER_DRAIN: Duration = Duration::from_secs(1);
/// How often the drains not yet waiting are queried.
const WAITING_POLL: Duration = Duration::from_secs(5);
/// The app label of the pods and the budget's name.
const APP: &str = "waiting";
/// What the worker logs: info, and kube-client's one debug line per request.
const WORKER_LOG_FILTER: &str = "info,kube_client=debug";

/// How long each part of the set-up took.
#[derive(Debug, Clone, Default)]
pub struct SetUp {
    /// From the first Node created to all Ready.
    pub nodes_ready: Duration,
    /// From the first pod created to all Running and counted healthy by the budget.
    pub pods_running: Duration,
    /// From the first `machine drain` to the last one's exit.
    pub drains_started: Duration,
    /// From the last drain started to every drain waiting on the budget.
    pub all_waiting: Duration,
}

/// One drain row's world (see the module doc).
pub struct Scene {
    /// The stack with the row's own cluster, subscription and resource group.
    pub stack: Stack,
    /// The worker's task queue.
    pub task_queue: String,
    /// The Nodes (machine names), one drain and one pod each.
    pub nodes: Vec<String>,
    cluster: ClusterName,
    kube: kube::Client,
    worker: Option<KillableWorker>,
    workloads: Option<Workloads>,
    /// The Nodes whose drain `machine drain` started.
    started: Vec<String>,
    /// The set-up's durations so far.
    pub set_up: SetUp,
}

impl Scene {
    /// Names a cluster (`bench-<suffix>`), subscription, resource group and pool
    /// (`<prefix><suffix>`) of the row's own and `drains` Nodes of that pool; starts the worker.
    pub async fn plan(stack: &Stack, prefix: &str, drains: usize) -> Result<Self> {
        let suffix = unique_suffix();
        let mut stack = stack.clone();
        stack.cluster = format!("bench-{suffix}");
        stack.arm.subscription_id = uuid::Uuid::new_v4().to_string();
        stack.arm.resource_group = format!("nodewright-bench-{suffix}");
        let cluster = ClusterName::parse("cluster", &stack.cluster)?;
        let pool = format!("{prefix}{}", &suffix[..6]);
        // Randoms below the suffix space give distinct names.
        let nodes = (0..drains as u64)
            .map(|index| MachineName::generate(&pool, index).to_string())
            .collect();
        let kube = stack.kube_client().await?;
        let task_queue = unique_task_queue(&format!("bench-{prefix}"));
        let mut scene = Self {
            stack,
            task_queue,
            nodes,
            cluster,
            kube,
            worker: None,
            workloads: None,
            started: Vec::new(),
            set_up: SetUp::default(),
        };
        let worker = KillableWorker::start_with_full_log_at(
            &scene.stack,
            &scene.task_queue,
            &[
                ("RUST_LOG", WORKER_LOG_FILTER),
                ("NODEWRIGHT_LOG_FORMAT", "json"),
            ],
        )?;
        scene.worker = Some(worker);
        await_identity_recorded(&scene.stack.cluster).await?;
        Ok(scene)
    }

    /// The worker.
    pub fn worker(&mut self) -> Result<&mut KillableWorker> {
        self.worker.as_mut().context("the worker was not started")
    }

    /// The label selector of the row's Nodes.
    fn node_selector(&self) -> String {
        format!("{LABEL_CLUSTER}={}", self.cluster)
    }

    /// Step 2: the Nodes Ready, a pod Running on each, the budget refusing every eviction.
    pub async fn populate(&mut self) -> Result<()> {
        let started = Instant::now();
        let nodes: Api<Node> = Api::all(self.kube.clone());
        let objects = self
            .nodes
            .iter()
            .map(|name| self.machine_node(name))
            .collect::<Result<Vec<Node>>>()?;
        let created: Vec<Result<()>> = futures::stream::iter(objects)
            .map(|node| {
                let nodes = nodes.clone();
                async move {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    nodes
                        .create(&PostParams::default(), &node)
                        .await
                        .with_context(|| format!("creating Node {name}"))?;
                    Ok(())
                }
            })
            .buffer_unordered(AT_ONCE)
            .collect()
            .await;
        created.into_iter().collect::<Result<Vec<()>>>()?;
        let selector = ListParams::default().labels(&self.node_selector());
        let count = self.nodes.len();
        poll_until(
            &format!("{count} Nodes Ready (is kwok running?)"),
            || async {
                let listed = nodes.list(&selector).await?.items;
                let ready = listed.iter().filter(|node| is_node_ready(node)).count();
                Ok((ready == count, format!("{ready} Ready")))
            },
        )
        .await?;
        self.set_up.nodes_ready = started.elapsed();

        let started = Instant::now();
        let workloads = Workloads::create(&self.stack, "bench-drains").await?;
        let namespace = workloads.namespace().to_owned();
        self.workloads = Some(workloads);
        let pods: Api<Pod> = Api::namespaced(self.kube.clone(), &namespace);
        let created: Vec<Result<()>> = futures::stream::iter(&self.nodes)
            .map(|name| {
                let pods = pods.clone();
                async move {
                    pods.create(&PostParams::default(), &pod_on(name)?)
                        .await
                        .with_context(|| format!("creating pod {name}"))?;
                    Ok(())
                }
            })
            .buffer_unordered(AT_ONCE)
            .collect()
            .await;
        created.into_iter().collect::<Result<Vec<()>>>()?;
        poll_until(
            &format!("{count} pods Running (is kwok running?)"),
            || async {
                let listed = pods.list(&ListParams::default()).await?.items;
                let running = listed.iter().filter(|pod| is_running(pod)).count();
                Ok((running == count, format!("{running} Running")))
            },
        )
        .await?;
        let workloads = self.workloads.as_ref().context("no namespace")?;
        let min_available = i32::try_from(count).context("too many pods for minAvailable")?;
        workloads
            .pod_disruption_budget(APP, APP, min_available)
            .await?;
        let budgets: Api<PodDisruptionBudget> = Api::namespaced(self.kube.clone(), &namespace);
        poll_until(
            &format!("the budget to count {count} healthy pods and allow no disruption"),
            || async {
                let status = budgets.get(APP).await?.status.unwrap_or_default();
                let counts =
                    |value: Option<i32>| value.and_then(|n| usize::try_from(n).ok()) == Some(count);
                let counted = counts(status.current_healthy)
                    && counts(status.expected_pods)
                    && status.disruptions_allowed == Some(0);
                Ok((counted, shown(&status)))
            },
        )
        .await?;
        self.set_up.pods_running = started.elapsed();
        Ok(())
    }

    /// The Node of machine `name`: as a kubelet registers it (kwok manages it), with the
    /// providerID of the VM the drain expects and the ownership labels.
    fn machine_node(&self, name: &str) -> Result<Node> {
        let mut node = kwok_node(name)?;
        let labels = node.metadata.labels.get_or_insert_default();
        labels.insert(LABEL_CLUSTER.to_owned(), self.cluster.to_string());
        if let Some(pool) = MachineName::parse("node", name)?.pool_of() {
            labels.insert(LABEL_POOL.to_owned(), pool.to_owned());
        }
        labels.insert(LABEL_MACHINE.to_owned(), name.to_owned());
        let arm = &self.stack.arm;
        node.spec = Some(NodeSpec {
            provider_id: Some(provider_id(&arm.subscription_id, &arm.resource_group, name)),
            ..NodeSpec::default()
        });
        Ok(node)
    }

    /// Step 3: `machine drain NODE --local-data evict` for every Node; fails naming the first
    /// that did not start (the others started are remembered for the clean-up).
    pub async fn start_drains(&mut self) -> Result<()> {
        let started = Instant::now();
        let (stack, task_queue) = (&self.stack, self.task_queue.as_str());
        let outcomes: Vec<(String, Result<()>)> = futures::stream::iter(&self.nodes)
            .map(|node| async move {
                let args = ["machine", "drain", node, "--local-data", "evict"];
                let outcome = cli(stack, task_queue, &args)
                    .await
                    .and_then(|answer| answer.expect_code(0).map(|_| ()));
                (node.clone(), outcome)
            })
            .buffer_unordered(STARTS_AT_ONCE)
            .collect()
            .await;
        let mut failures = Vec::new();
        for (node, outcome) in outcomes {
            match outcome {
                Ok(()) => self.started.push(node),
                Err(error) => failures.push(format!("{node}: {error:#}")),
            }
        }
        self.set_up.drains_started = started.elapsed();
        if let Some(first) = failures.first() {
            bail!(
                "{} of {} drains did not start; the first: {first}",
                failures.len(),
                self.nodes.len()
            );
        }
        Ok(())
    }

    /// The `status` query of every drain, [`QUERIES_AT_ONCE`] at a time, by Node; a drain that
    /// does not answer is left out.
    pub async fn statuses(&self, nodes: &[String]) -> Result<Vec<(String, DrainStatus)>> {
        let client = self.stack.temporal_client().await?;
        let answers: Vec<(String, Option<DrainStatus>)> = futures::stream::iter(nodes)
            .map(|node| {
                let handle =
                    client.get_workflow_handle::<DrainNodeWorkflow>(self.workflow_id(node));
                async move {
                    let status = handle
                        .query(
                            DrainNodeWorkflow::status,
                            (),
                            WorkflowQueryOptions::default(),
                        )
                        .await
                        .ok();
                    (node.clone(), status)
                }
            })
            .buffer_unordered(QUERIES_AT_ONCE)
            .collect()
            .await;
        Ok(answers
            .into_iter()
            .filter_map(|(node, status)| status.map(|status| (node, status)))
            .collect())
    }

    /// Step 4: queries the drains not yet waiting until every one runs with its pod blocked by
    /// the budget; fails when one ended, or when some are not waiting by the limit.
    pub async fn await_waiting(&mut self) -> Result<()> {
        let started = Instant::now();
        let limit = WAITING_LIMIT.max(WAITING_PER_DRAIN * u32::try_from(self.nodes.len())?);
        let mut pending: BTreeSet<String> = self.nodes.iter().cloned().collect();
        loop {
            let asked: Vec<String> = pending.iter().cloned().collect();
            let mut last = None;
            for (node, status) in self.statuses(&asked).await? {
                if status.run.outcome != Outcome::Running {
                    bail!(
                        "the drain of {node} ended ({}) instead of waiting on the budget: {}",
                        status.run.failure.as_deref().unwrap_or("no failure given"),
                        shown(&status)
                    );
                }
                if self.is_waiting(&node, &status) {
                    pending.remove(&node);
                } else {
                    last = Some((node, status));
                }
            }
            if pending.is_empty() {
                self.set_up.all_waiting = started.elapsed();
                return Ok(());
            }
            if started.elapsed() >= limit {
                let example = last.map_or_else(
                    || "none of them answered its status query".to_owned(),
                    |(node, status)| format!("{node}: {}", shown(&status)),
                );
                bail!(
                    "{} of {} drains were not waiting on the budget {}s after the last started; \
                     e.g. {example}",
                    pending.len(),
                    self.nodes.len(),
                    limit.as_secs()
                );
            }
            tokio::time::sleep(WAITING_POLL).await;
        }
    }

    /// Whether the drain of `node` has its pod refused by the budget.
    pub fn is_waiting(&self, node: &str, status: &DrainStatus) -> bool {
        let key = format!("{}/{node}", self.namespace());
        status
            .pods
            .iter()
            .any(|pod| pod.pod == key && pod.state == PodState::Blocked)
    }

    fn namespace(&self) -> &str {
        self.workloads
            .as_ref()
            .map_or("", |workloads| workloads.namespace())
    }

    fn workflow_id(&self, node: &str) -> String {
        WorkflowId::for_subject(Operation::Drain, &self.cluster, node).to_string()
    }

    /// Step 5: terminates the drains started, stops the worker, deletes the namespace, waits
    /// (a minute at most) for its pods to go, then deletes the Nodes and their Leases. Every
    /// failure is printed; none stops the rest.
    pub async fn clean_up(mut self) {
        self.terminate_drains().await;
        self.worker = None;
        if let Some(workloads) = &self.workloads {
            workloads.clean_up().await;
            let pods: Api<Pod> = Api::namespaced(self.kube.clone(), workloads.namespace());
            let gone = poll_until_within(
                "the namespace's pods to go",
                Duration::from_secs(60),
                || async {
                    let left = pods.list(&ListParams::default()).await?.items.len();
                    Ok((left == 0, format!("{left} left")))
                },
            )
            .await;
            if let Err(error) = gone {
                eprintln!("clean-up: {error:#}");
            }
        }
        let nodes: Api<Node> = Api::all(self.kube.clone());
        let selector = ListParams::default().labels(&self.node_selector());
        match nodes
            .delete_collection(&DeleteParams::default(), &selector)
            .await
        {
            Ok(_) => println!(
                "clean-up: the {} Nodes of cluster {} deleted",
                self.nodes.len(),
                self.cluster
            ),
            Err(error) => eprintln!("clean-up: deleting the Nodes: {error}"),
        }
        let leases: Api<Lease> = Api::namespaced(self.kube.clone(), "kube-node-lease");
        let failures: Vec<String> = futures::stream::iter(&self.nodes)
            .map(|name| {
                let leases = leases.clone();
                async move {
                    match leases.delete(name, &DeleteParams::default()).await {
                        Ok(_) => None,
                        Err(kube::Error::Api(status)) if status.code == 404 => None,
                        Err(error) => Some(format!("{name}: {error}")),
                    }
                }
            })
            .buffer_unordered(AT_ONCE)
            .filter_map(|failure| async move { failure })
            .collect()
            .await;
        if let Some(first) = failures.first() {
            eprintln!(
                "clean-up: {} Leases not deleted; the first: {first}",
                failures.len()
            );
        }
    }

    /// Terminates every drain `machine drain` started (one that ended already is left).
    async fn terminate_drains(&self) {
        if self.started.is_empty() {
            return;
        }
        let client = match self.stack.temporal_client().await {
            Ok(client) => client,
            Err(error) => {
                eprintln!("clean-up: no Temporal client, drains left running: {error:#}");
                return;
            }
        };
        let failures: Vec<String> = futures::stream::iter(&self.started)
            .map(|node| {
                let handle =
                    client.get_workflow_handle::<DrainNodeWorkflow>(self.workflow_id(node));
                async move {
                    let options = WorkflowTerminateOptions::builder()
                        .reason("efficiency benchmark clean-up".to_owned())
                        .build();
                    handle
                        .terminate(options)
                        .await
                        .err()
                        .map(|error| format!("{node}: {error}"))
                }
            })
            .buffer_unordered(QUERIES_AT_ONCE)
            .filter_map(|failure| async move { failure })
            .collect()
            .await;
        println!(
            "clean-up: {} of {} drains terminated",
            self.started.len() - failures.len(),
            self.started.len()
        );
        if let Some(first) = failures.first() {
            eprintln!("clean-up: the first drain not terminated: {first}");
        }
    }
}

/// A pod of app [`APP`] named `node`, bound to `node` (no scheduler, no controller).
fn pod_on(node: &str) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": node, "labels": { "app": APP, TEST_LABEL.0: TEST_LABEL.1 } },
        "spec": {
            "nodeName": node,
            "containers": [{ "name": APP, "image": format!("registry.invalid/{APP}:1") }],
        },
    }))?)
}

/// Polls `check` (done, and what it saw) every [`POLL`] until done, at most [`READY_LIMIT`].
async fn poll_until<F, Fut>(what: &str, check: F) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(bool, String)>>,
{
    poll_until_within(what, READY_LIMIT, check).await
}

/// [`poll_until`] with the limit `limit`; the error names `what` and the last thing seen.
async fn poll_until_within<F, Fut>(what: &str, limit: Duration, check: F) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(bool, String)>>,
{
    let started = Instant::now();
    loop {
        let (done, seen) = check().await?;
        if done {
            return Ok(());
        }
        if started.elapsed() >= limit {
            bail!(
                "timed out after {}s waiting for {what}; last seen: {seen}",
                limit.as_secs()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}
