//! What the rollout tests share: pool files with replicas, strategy and image version, a pool
//! built by a first rollout, the sampler that watches the pool's Ready nodes and machines for
//! the whole test, and the rollout's status and result through the CLI, typed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use nodewright_model::ownership::{LABEL_POOL, TAG_CLUSTER, TAG_POOL, TAG_TEMPLATE};
use nodewright_model::rollout::{RolloutResult, RolloutStatus};
use nodewright_tests::Stack;
use nodewright_tests::documents::{ResultDocument, RolloutStatusDocument};
use nodewright_tests::kube_objects::is_node_ready;
use nodewright_tests::machines::write_pool_file;
use tokio::task::JoinHandle;

pub(crate) use nodewright_tests::machines::cli;

/// How often the sampler looks.
const SAMPLE: Duration = Duration::from_millis(250);
/// How often a status is read while waiting for it.
pub(crate) const POLL: Duration = Duration::from_millis(500);

/// A pool's rollout strategy and template version, as a test writes them in its pool file.
#[derive(Debug, Clone)]
pub(crate) struct PoolShape {
    pub replicas: u32,
    pub max_surge: &'static str,
    pub max_unavailable: &'static str,
    /// The image version: changing it changes the template hash.
    pub image_version: &'static str,
    pub max_failures: u32,
    pub progress_deadline: &'static str,
    pub creation_timeout: &'static str,
}

impl PoolShape {
    pub(crate) fn new(
        replicas: u32,
        max_surge: &'static str,
        max_unavailable: &'static str,
    ) -> Self {
        Self {
            replicas,
            max_surge,
            max_unavailable,
            image_version: "24.04.1",
            max_failures: 3,
            progress_deadline: "10m",
            creation_timeout: "3m",
        }
    }

    pub(crate) fn version(mut self, version: &'static str) -> Self {
        self.image_version = version;
        self
    }
}

/// Writes the pool file `target/e2e-pools/<pool>-<version>.yaml` with `shape` and quick drain
/// settings (PDB retry 2 s).
pub(crate) fn rollout_pool_file(stack: &Stack, pool: &str, shape: &PoolShape) -> Result<PathBuf> {
    let base = write_pool_file(stack, pool, shape.creation_timeout)?;
    let text = std::fs::read_to_string(&base)?;
    ensure!(
        text.contains("  replicas: 2\n") && text.contains("      version: latest\n"),
        "unexpected pool file:\n{text}"
    );
    let extra = format!(
        "  strategy:\n    maxSurge: {:?}\n    maxUnavailable: {:?}\n    maxFailures: {}\n    progressDeadline: {}\n  drain:\n    timeout: 3m\n    pdbRetryInterval: 2s\n    volumeDetachTimeout: 1m\n    volumeAttachTimeout: 1m\n  timeouts:\n",
        shape.max_surge, shape.max_unavailable, shape.max_failures, shape.progress_deadline
    );
    let text = text
        .replace(
            "  replicas: 2\n",
            &format!("  replicas: {}\n", shape.replicas),
        )
        .replace(
            "      version: latest\n",
            &format!("      version: \"{}\"\n", shape.image_version),
        )
        .replace("  timeouts:\n", &extra);
    let path = base.with_file_name(format!("{pool}-{}.yaml", shape.image_version));
    std::fs::write(&path, text)?;
    Ok(path)
}

/// `pool rollout status POOL --output json`, typed: a field the rollout's status requires that
/// is missing or renamed fails here.
pub(crate) async fn rollout_document(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
) -> Result<RolloutStatusDocument> {
    cli(
        stack,
        task_queue,
        &["pool", "rollout", "status", pool, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()
}

/// Polls [`rollout_document`] until `done` holds for its status; the error shows the last
/// answer. A status the CLI cannot read (no worker to answer the query while one is restarted)
/// is asked again; one it prints that does not parse fails.
pub(crate) async fn await_rollout(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    what: &str,
    timeout: Duration,
    mut done: impl FnMut(&RolloutStatus) -> bool,
) -> Result<RolloutStatusDocument> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let answer = cli(
            stack,
            task_queue,
            &["pool", "rollout", "status", pool, "--output", "json"],
        )
        .await?;
        let last = if answer.code == Some(0) {
            let document: RolloutStatusDocument = answer.parse()?;
            if done(&document.status) {
                return Ok(document);
            }
            document.to_string()
        } else {
            format!("exit {:?}: {}", answer.code, answer.stderr.trim())
        };
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}; last status: {last}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// What the pool looks like now: Ready Nodes of the pool, and its VMs by template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PoolSample {
    pub ready_nodes: usize,
    pub machines: usize,
    pub by_template: BTreeMap<String, usize>,
}

/// Looks at the pool once: Nodes labelled with it that are Ready, VMs tagged with it.
pub(crate) async fn sample_pool(
    stack: &Stack,
    kube: &kube::Client,
    arm: &nodewright_activities::azure::ArmClient,
    pool: &str,
) -> Result<PoolSample> {
    let nodes: Api<Node> = Api::all(kube.clone());
    let listed = nodes
        .list(&ListParams::default().labels(&format!("{LABEL_POOL}={pool}")))
        .await?;
    let ready_nodes = listed.items.iter().filter(|n| is_node_ready(n)).count();
    let mut sample = PoolSample {
        ready_nodes,
        ..PoolSample::default()
    };
    for vm in arm.list_vms().await? {
        let tag = |key: &str| vm.tags.get(key).map(String::as_str);
        if tag(TAG_CLUSTER) == Some(stack.cluster.as_str()) && tag(TAG_POOL) == Some(pool) {
            sample.machines += 1;
            *sample
                .by_template
                .entry(tag(TAG_TEMPLATE).unwrap_or_default().to_owned())
                .or_default() += 1;
        }
    }
    Ok(sample)
}

/// The extremes the sampler saw.
#[derive(Debug, Clone, Default)]
pub(crate) struct Extremes {
    pub samples: usize,
    pub min_ready: usize,
    pub max_machines: usize,
    /// Changes of (ready, machines), with seconds since the sampler started, for messages.
    pub changes: Vec<(f64, usize, usize)>,
    pub errors: usize,
}

/// Samples the pool every 250 ms from start to [`Sampler::stop`].
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Extremes>,
}

impl Sampler {
    pub(crate) async fn start(stack: &Stack, pool: &str) -> Result<Self> {
        let kube = stack.kube_client().await?;
        let arm = stack.arm_client()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (stack, pool, flag) = (stack.clone(), pool.to_owned(), stop.clone());
        let handle = tokio::spawn(async move {
            let started = Instant::now();
            let mut extremes = Extremes {
                min_ready: usize::MAX,
                ..Extremes::default()
            };
            let mut last = None;
            while !flag.load(Ordering::SeqCst) {
                match sample_pool(&stack, &kube, &arm, &pool).await {
                    Ok(sample) => {
                        extremes.samples += 1;
                        extremes.min_ready = extremes.min_ready.min(sample.ready_nodes);
                        extremes.max_machines = extremes.max_machines.max(sample.machines);
                        let now = (sample.ready_nodes, sample.machines);
                        if last != Some(now) {
                            extremes
                                .changes
                                .push((started.elapsed().as_secs_f64(), now.0, now.1));
                            last = Some(now);
                        }
                    }
                    Err(_) => extremes.errors += 1,
                }
                tokio::time::sleep(SAMPLE).await;
            }
            extremes
        });
        Ok(Self { stop, handle })
    }

    pub(crate) async fn stop(self) -> Result<Extremes> {
        self.stop.store(true, Ordering::SeqCst);
        Ok(self.handle.await?)
    }
}

/// Checks the sampler's extremes against the budget: never fewer than `min_ready` Ready nodes,
/// never more than `max_machines` machines.
pub(crate) fn ensure_bounds(
    extremes: &Extremes,
    min_ready: usize,
    max_machines: usize,
) -> Result<()> {
    let changes: Vec<String> = extremes
        .changes
        .iter()
        .map(|(t, r, m)| format!("{t:.1}s ready={r} machines={m}"))
        .collect();
    println!(
        "sampler: {} samples, min ready {}, max machines {}, {} errors",
        extremes.samples, extremes.min_ready, extremes.max_machines, extremes.errors
    );
    ensure!(
        extremes.samples > 20,
        "the sampler looked only {} times",
        extremes.samples
    );
    ensure!(
        extremes.min_ready >= min_ready && extremes.max_machines <= max_machines,
        "bounds broken: min ready {} (want >= {min_ready}), max machines {} (want <= {max_machines}); changes:\n{}",
        extremes.min_ready,
        extremes.max_machines,
        changes.join("\n")
    );
    Ok(())
}

/// Terminates the workflow `workflow_id` if it still runs (cleanup after a failure), quietly.
pub(crate) async fn terminate(stack: &Stack, workflow_id: &str) {
    let _ = nodewright_tests::stack::terminate_workflow(stack, workflow_id, "e2e cleanup").await;
}

/// Ends what a test leaves behind, whether it passed or not: its rollout terminated (children
/// are abandoned and finish by themselves), then every machine of the pool deleted without a
/// drain.
pub(crate) async fn clean_up_pool(stack: &Stack, task_queue: &str, pool: &str) {
    terminate(stack, &format!("rollout/{}/{pool}", stack.cluster)).await;
    delete_machines_of(stack, task_queue, pool).await;
    // The pool's revisions, which every rollout writes (the pool is gone).
    match stack.kube_client().await {
        Ok(kube) => {
            let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
                kube::Api::namespaced(kube, REVISIONS_NAMESPACE);
            let name = nodewright_model::rollout::revisions::config_map_name(pool);
            if let Err(error) = config_maps
                .delete(&name, &kube::api::DeleteParams::default())
                .await
                && !matches!(&error, kube::Error::Api(answer) if answer.code == 404)
            {
                eprintln!("cleanup: deleting ConfigMap {REVISIONS_NAMESPACE}/{name}: {error:#}");
            }
        }
        Err(error) => eprintln!("cleanup: a Kubernetes client: {error:#}"),
    }
}

/// The namespace of the stack's identity ConfigMap, where pools' revisions live.
pub(crate) const REVISIONS_NAMESPACE: &str = "nodewright";

/// Deletes every machine of `pool` (`machine delete --skip-drain --wait`), letting abandoned
/// creates finish first, for up to two minutes.
async fn delete_machines_of(stack: &Stack, task_queue: &str, pool: &str) {
    // Let abandoned creates finish (or compensate) so their VMs are seen and deleted.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let machines = match pool_machines(stack, pool).await {
            Ok(machines) => machines,
            Err(error) => {
                eprintln!("cleanup: listing pool {pool}: {error:#}");
                return;
            }
        };
        if machines.is_empty() || Instant::now() > deadline {
            return;
        }
        let deletes = machines.iter().map(|machine| async move {
            let args = ["machine", "delete", machine, "--skip-drain", "--wait"];
            (machine, cli(stack, task_queue, &args).await)
        });
        for (machine, outcome) in futures::future::join_all(deletes).await {
            match outcome {
                // 5: a delete of that machine is already running (a child of the rollout).
                Ok(result) if matches!(result.code, Some(0 | 5)) => {}
                Ok(result) => eprintln!("cleanup: deleting {machine}: exit {:?}", result.code),
                Err(error) => eprintln!("cleanup: deleting {machine}: {error:#}"),
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The names of the pool's VMs.
pub(crate) async fn pool_machines(stack: &Stack, pool: &str) -> Result<Vec<String>> {
    let arm = stack.arm_client()?;
    Ok(arm
        .list_vms()
        .await?
        .into_iter()
        .filter(|vm| {
            vm.tags.get(TAG_CLUSTER).map(String::as_str) == Some(stack.cluster.as_str())
                && vm.tags.get(TAG_POOL).map(String::as_str) == Some(pool)
        })
        .filter_map(|vm| vm.name)
        .collect())
}

/// Rolls the pool to `file` with the CLI and waits (observing every second); the rollout's
/// result, typed.
pub(crate) async fn roll(
    stack: &Stack,
    task_queue: &str,
    file: &std::path::Path,
    extra: &[&str],
) -> Result<ResultDocument<RolloutResult>> {
    let file = file.to_string_lossy().into_owned();
    let mut args = vec![
        "pool",
        "rollout",
        "--pool",
        &file,
        "--wait",
        "--observe-interval",
        "1s",
        "--output",
        "json",
    ];
    args.extend_from_slice(extra);
    cli(stack, task_queue, &args).await?.expect_code(0)?.parse()
}

/// Checks that the pool has exactly `replicas` machines, all of `template`, each with a Ready
/// Node.
pub(crate) async fn ensure_pool_is(
    stack: &Stack,
    pool: &str,
    replicas: usize,
    template: &str,
) -> Result<()> {
    let kube = stack.kube_client().await?;
    let arm = stack.arm_client()?;
    let sample = sample_pool(stack, &kube, &arm, pool).await?;
    ensure!(
        sample.machines == replicas
            && sample.ready_nodes == replicas
            && sample.by_template.get(template) == Some(&replicas),
        "pool {pool}: want {replicas} Ready machines of template {template}, have {sample:?}"
    );
    Ok(())
}

/// Starts a rollout of `file` without waiting (observing every second), plus `extra` flags.
pub(crate) async fn start_rollout(
    stack: &Stack,
    task_queue: &str,
    file: &std::path::Path,
    extra: &[&str],
) -> Result<()> {
    let file = file.to_string_lossy().into_owned();
    let mut args = vec![
        "pool",
        "rollout",
        "--pool",
        &file,
        "--observe-interval",
        "1s",
    ];
    args.extend_from_slice(extra);
    cli(stack, task_queue, &args).await?.expect_code(0)?;
    Ok(())
}

/// `pool history POOL --output json`, typed.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HistoryDocument {
    pub config_map: String,
    pub revisions: Vec<nodewright_model::rollout::HistoryRow>,
    pub rollback_refusal: Option<String>,
}

/// `pool history POOL --output json`.
pub(crate) async fn read_history(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
) -> Result<HistoryDocument> {
    cli(
        stack,
        task_queue,
        &["pool", "history", pool, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()
}

/// (number, template, outcome, current, rollback target) of each revision.
pub(crate) fn revision_rows(history: &HistoryDocument) -> Vec<(u64, String, String, bool, bool)> {
    history
        .revisions
        .iter()
        .map(|r| {
            (
                r.number,
                r.template_hash.clone(),
                r.outcome.clone(),
                r.current,
                r.rollback_target,
            )
        })
        .collect()
}
