//! `machine force-drain` during a pod's long grace period: force mode starts within seconds, not
//! when the grace period (an hour) or the drain's deadline ends.
//!
//! One machine (A) of a pool whose `spec.drain` says deadline 10 min away and PDB retry 2 s. A
//! Deployment pod on A with `terminationGracePeriodSeconds: 3600` that holds on to its end (a
//! finalizer of the test's: kwok deletes a terminating pod at once, so the finalizer stands in
//! for a process that ignores SIGTERM). `machine drain A`:
//!
//! - the pod is evicted once and stays terminating; the drain waits for it, gracefully, for as
//!   long as we look (a few seconds);
//! - `machine force-drain A`: force mode (reason: requested) within 30 s — before waits were made
//!   of looks, the drain waited min(grace, deadline) + 30 s, ten minutes here, before it looked at
//!   the request; the pod is deleted with grace period 0 and the drain completes, with the pod
//!   `force-deleted` in its status and its result.
//!
//! The finalizer is removed at the end whatever happens; then the pod is gone. (kwok deletes a
//! terminating pod with grace 0 itself, so the pod's `deletionGracePeriodSeconds` tells nothing
//! about force mode: its status entry does.)

use std::path::Path;
use std::time::{Duration, Instant};

use super::common::{cli, create_machines, delete_machines, drain_document, drain_pool_file};
use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::drain::{DrainMode, PodState};
use nodewright_model::machine::Outcome;
use nodewright_tests::Stack;
use nodewright_tests::documents::{DrainLookup, shown};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{Placement, Workload, Workloads};
use serde_json::json;

use super::common::wait_drain;

const WAIT: Duration = Duration::from_secs(60);
/// The test's finalizer: holds the evicted pod terminating.
const HOLD: &str = "nodewright.test/hold";
/// How soon after `force-drain` force mode must have started (looks are 10 s at most; this is
/// generous for a loaded machine, and far below the 10 min the drain waited before).
const FORCE_WITHIN: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_drain_during_an_hour_of_grace_starts_force_mode_within_seconds() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("drain-grace");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("dg{}", unique_suffix());
    let pool_file = drain_pool_file(
        &stack,
        &pool,
        &[
            ("timeout", "10m"),
            ("pdbRetryInterval", "2s"),
            ("forceAfterUnhealthy", "5m"),
        ],
    )?;
    let machines = [format!("{pool}-b2c4d")];
    let workloads = Workloads::create(&stack, "drain-grace").await?;
    let mut held: Option<String> = None;

    let started = Instant::now();
    let result = scenario(
        &stack,
        &task_queue,
        &pool,
        &pool_file,
        &machines,
        &workloads,
        &mut held,
    )
    .await
    .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    println!("scenario took {:.1}s", started.elapsed().as_secs_f64());

    if let Some(pod) = held {
        let pods: Api<Pod> = Api::namespaced(workloads.client().clone(), workloads.namespace());
        if let Err(error) = release(&pods, &pod).await {
            eprintln!("cleanup: removing the finalizer of {pod}: {error:#}");
        }
    }
    workloads.clean_up().await;
    delete_machines(&stack, &task_queue, &machines).await;
    drop(worker);
    result
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    pool_file: &Path,
    machines: &[String; 1],
    workloads: &Workloads,
    held: &mut Option<String>,
) -> Result<()> {
    let [node_a] = machines;
    let kube = workloads.client().clone();
    let namespace = workloads.namespace().to_owned();
    let pods: Api<Pod> = Api::namespaced(kube.clone(), &namespace);
    create_machines(stack, task_queue, pool_file, machines).await?;

    // A pod with an hour of grace that does not end when asked.
    let mut slow = Workload::new("slow", 1, Placement::pool(pool));
    slow.termination_grace_seconds = 3600;
    workloads.deployment(&slow).await?;
    let running = workloads
        .wait_app_running("slow", 1, Some(node_a), WAIT)
        .await?;
    let name = running
        .first()
        .and_then(|pod| pod.metadata.name.clone())
        .context("the slow pod")?;
    let patch = json!({ "metadata": { "finalizers": [HOLD] } });
    pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    *held = Some(name.clone());
    let key = format!("{namespace}/{name}");

    cli(stack, task_queue, &["machine", "drain", node_a])
        .await?
        .expect_code(0)?;

    // 1. Evicted once, terminating; the drain waits, gracefully.
    let evicted = wait_drain(
        stack,
        task_queue,
        node_a,
        "the slow pod evicted",
        WAIT,
        |doc| doc.status.pod(&key).is_some_and(|p| p.evictions == 1),
    )
    .await?;
    ensure!(
        evicted.status.mode == DrainMode::Graceful,
        "graceful: {evicted}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pod = pods.get(&name).await?;
    ensure!(
        pod.metadata.deletion_timestamp.is_some(),
        "{key} is terminating after its eviction: {:?}",
        pod.metadata
    );
    let waiting = drain_document(stack, task_queue, node_a).await?;
    ensure!(
        waiting.is_running() && waiting.status.mode == DrainMode::Graceful,
        "still waiting gracefully for {key}: {waiting}"
    );

    // 2. force-drain: force mode within seconds, the pod deleted with grace 0, the drain done.
    let forcing = Instant::now();
    cli(stack, task_queue, &["machine", "force-drain", node_a])
        .await?
        .expect_code(0)?;
    let requested = DrainMode::Force {
        reason: "force was requested".to_owned(),
    };
    let forced = wait_drain(
        stack,
        task_queue,
        node_a,
        "force mode on request",
        FORCE_WITHIN,
        |doc| doc.status.mode == requested,
    )
    .await?;
    let took = forcing.elapsed();
    println!("force mode {:.1}s after force-drain", took.as_secs_f64());
    ensure!(took <= FORCE_WITHIN, "force mode after {took:?}: {forced}");

    let finished = wait_drain(
        stack,
        task_queue,
        node_a,
        "the drain to complete",
        WAIT,
        |doc| !doc.is_running(),
    )
    .await?;
    let status = &finished.status;
    ensure!(
        finished.run_status == "completed" && status.run.outcome == Outcome::Succeeded,
        "the drain succeeded: {finished}"
    );
    ensure!(
        status.mode == requested,
        "force mode on request: {finished}"
    );
    let entry = status.pod(&key).context("the slow pod's entry")?;
    ensure!(
        entry.state == PodState::ForceDeleted && entry.evictions == 1,
        "{key} evicted once, then force-deleted: {}",
        shown(entry)
    );

    // The world: only our finalizer holds the pod; once it goes, so does the pod.
    release(&pods, &name).await?;
    *held = None;
    let deadline = Instant::now() + WAIT;
    while pods.get_opt(&name).await?.is_some() {
        ensure!(
            Instant::now() < deadline,
            "{key} still there without its finalizer"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

/// Removes the test's finalizer from `pod`.
async fn release(pods: &Api<Pod>, pod: &str) -> Result<()> {
    let patch = json!({ "metadata": { "finalizers": null } });
    match pods
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(answer)) if answer.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}
