//! A fresh look before "drained" (issue 30, item 3): a pod that reaches the Node after the drain
//! listed its pods is evicted before the drain reports "drained".
//!
//! Two machines of a pool whose `spec.drain` says timeout 10 min, PDB retry 2 s. On A a
//! Deployment `web` of one pod under a budget with `minAvailable` 1, so its eviction is refused.
//! `machine drain A --local-data evict` (the late pod is a bare pod); while `web`'s pod is held,
//! a bare pod `late` is created with `spec.nodeName: A` (no scheduler, no cordon stops it). Then
//! the budget is relaxed: `web`'s pod is evicted, and the drain, instead of reporting "drained",
//! lists A's pods again, evicts `late` and completes in graceful mode. Afterwards no pod of the
//! test is on A, `late` is gone (evicted once, not force-deleted), and the status's `freshLook`
//! fact names it.

use std::time::Duration;

use super::common::{DrainScene, create_machines, drain_document, wait_drain};
use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use nodewright_model::drain::{DrainMode, PodState};
use nodewright_model::machine::Outcome;
use nodewright_tests::documents::{DrainLookup, shown};
use nodewright_tests::workloads::{TEST_LABEL, set_unschedulable};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_bound_to_the_node_after_the_pods_were_listed_is_evicted_before_drained() -> Result<()>
{
    let scene = DrainScene::<2>::start(
        "drain-late",
        "dz",
        &[
            ("timeout", "10m"),
            ("pdbRetryInterval", "2s"),
            ("volumeDetachTimeout", "30s"),
            ("volumeAttachTimeout", "30s"),
            ("forceAfterUnhealthy", "10m"),
        ],
    )
    .await?;
    let result = scenario(&scene).await;
    scene.finish(result).await
}

async fn scenario(scene: &DrainScene<2>) -> Result<()> {
    let DrainScene {
        stack,
        task_queue,
        pool: _,
        pool_file,
        machines,
        workloads,
        ..
    } = scene;
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    let namespace = workloads.namespace().to_owned();
    create_machines(stack, task_queue, pool_file, machines).await?;

    set_unschedulable(&kube, node_b, true).await?;
    let web_key = scene.web_under_budget(node_a).await?;
    set_unschedulable(&kube, node_b, false).await?;

    scene.drain_until_held(node_a, &web_key).await?;

    // A pod bound to A directly, after the drain listed A's pods.
    let late: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "late", "labels": { TEST_LABEL.0: TEST_LABEL.1, "app": "late" } },
        "spec": {
            "nodeName": node_a,
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{ "operator": "Exists" }],
            "containers": [{ "name": "late", "image": "registry.invalid/late:1" }],
        },
    }))?;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), &namespace);
    pods.create(&PostParams::default(), &late).await?;
    let late_key = format!("{namespace}/late");
    let before = drain_document(stack, task_queue, node_a).await?;
    ensure!(
        before.is_running() && before.status.pod(&late_key).is_none(),
        "the drain had not seen 'late' when it was created: {before}"
    );

    // The budget lets web's pod go; the drain must find 'late' before it reports drained.
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
        "the drain succeeded: {done}"
    );
    ensure!(
        status.mode == DrainMode::Graceful,
        "no force mode was needed: {done}"
    );
    let entry = status.pod(&late_key).context("'late' in the status")?;
    ensure!(
        entry.state == PodState::Gone && entry.evictions == 1,
        "'late' evicted once, gone: {}",
        shown(entry)
    );
    let fresh = status
        .run
        .facts
        .get("freshLook")
        .context("a freshLook fact")?;
    ensure!(fresh.contains(&late_key), "freshLook names 'late': {fresh}");

    // The world: nothing of the test left on A.
    let left: Vec<String> = workloads
        .pods_on(node_a)
        .await?
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    ensure!(left.is_empty(), "pods left on {node_a}: {left:?}");
    ensure!(
        pods.get_opt("late").await?.is_none(),
        "'late' still exists after the drain"
    );
    println!("'late' evicted by the fresh look: {fresh}");
    Ok(())
}
