//! The apiserver away in the middle of a drain (issue 30, item 2): an outage is waited out, not
//! a reason to fail the drain or to force it.
//!
//! The worker reaches the Kubernetes API through a proxy the test stops (the other tests keep
//! theirs). One machine A of a pool whose `spec.drain` says timeout 10 min, PDB retry 2 s, with
//! a Deployment `web` of one pod under a budget with `minAvailable` 1. `machine drain A`: while
//! `web`'s pod is held by its budget, the proxy stops for 20 s. The drain keeps running, in
//! graceful mode (its reads and evictions are retried). The API comes back, the budget is
//! relaxed: the drain evicts the pod and completes in graceful mode, and no pod of the test is
//! left on A.

use std::time::Duration;

use super::common::{DrainScene, wait_drain};
use anyhow::{Context, Result, ensure};
use nodewright_model::drain::{DrainMode, PodState};
use nodewright_model::machine::Outcome;
use nodewright_tests::api_proxy::ApiProxy;
use nodewright_tests::documents::{DrainLookup, shown};

const WAIT: Duration = Duration::from_secs(90);

/// How long the API stays away.
const OUTAGE: Duration = Duration::from_secs(20);

/// A drain that waits for the budget: long timeout, quick PDB retries.
const SETTINGS: [(&str, &str); 5] = [
    ("timeout", "10m"),
    ("pdbRetryInterval", "2s"),
    ("volumeDetachTimeout", "30s"),
    ("volumeAttachTimeout", "30s"),
    ("forceAfterUnhealthy", "10m"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_out_an_apiserver_outage_and_completes_gracefully() -> Result<()> {
    let stack = nodewright_tests::Stack::load()?;
    let (proxy, kubeconfig) = ApiProxy::for_stack(&stack).await?;
    let scene =
        DrainScene::<1>::start_with("drain-outage", "do", &SETTINGS, Some(kubeconfig)).await?;
    let result = scenario(&scene, &proxy).await;
    // The clean-up needs the worker's API back.
    if let Err(error) = proxy.resume().await {
        eprintln!("cleanup: resuming the proxy (it may be listening already): {error:#}");
    }
    scene.finish(result).await
}

async fn scenario(scene: &DrainScene<1>, proxy: &ApiProxy) -> Result<()> {
    let DrainScene {
        stack,
        task_queue,
        pool: _,
        machines: [node_a],
        workloads,
        ..
    } = scene;
    scene.create_machines().await?;
    let web_key = scene.web_under_budget(node_a).await?;

    scene.drain_until_held(node_a, &web_key).await?;

    // The worker's API goes away; the drain's status (read through Temporal) goes on. Its
    // reads fail and are retried until the drain's deadline.
    proxy.stop();
    tokio::time::sleep(OUTAGE).await;
    let during = wait_drain(stack, task_queue, node_a, "the drain", WAIT, |_| true).await?;
    ensure!(
        during.is_running() && during.status.mode == DrainMode::Graceful,
        "after {OUTAGE:?} without its API the drain still runs, graceful: {during}"
    );
    let held = during
        .status
        .pod(&web_key)
        .context("web's pod in the status")?;
    ensure!(
        held.state == PodState::Blocked,
        "web's pod is still held, not evicted or forced: {}",
        shown(held)
    );

    // The API is back and the budget lets the pod go: the drain completes gracefully.
    proxy.resume().await?;
    workloads.set_min_available("web", 0).await?;
    let done = wait_drain(
        stack,
        task_queue,
        node_a,
        "the drain to complete",
        WAIT,
        |doc| !doc.is_running(),
    )
    .await?;
    let status = &done.status;
    ensure!(
        done.run_status == "completed" && status.run.outcome == Outcome::Succeeded,
        "the drain succeeded after the outage: {done}"
    );
    ensure!(
        status.mode == DrainMode::Graceful,
        "no force mode after the outage: {done}"
    );
    let entry = status.pod(&web_key).context("web's pod in the status")?;
    ensure!(
        entry.state == PodState::Gone,
        "web's pod evicted and gone: {}",
        shown(entry)
    );
    ensure!(
        workloads
            .pods_on(node_a)
            .await?
            .iter()
            .all(|p| p.metadata.deletion_timestamp.is_some()),
        "no running pod of the test left on {node_a}"
    );
    println!("through the outage: {}", shown(entry));
    Ok(())
}
