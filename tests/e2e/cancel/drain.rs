//! Cancelling a drain, and a delete in the middle of its drain. Two machines of a pool; three
//! pods on the first with a PodDisruptionBudget that allows no disruption, so every drain of it
//! waits in `evict-pods`.
//!
//! 1. `machine delete A` is cancelled (`nodewright machine cancel A --wait`) while its drain
//!    waits: the delete and its drain end Canceled, the VM is still there, and A is back in
//!    service as before: schedulable, no draining taint, no `Terminating` condition, its pods
//!    where they were.
//! 2. A is cordoned by someone else, then `machine drain A` is cancelled with `temporal workflow
//!    cancel` while it waits: the drain ends Canceled, the draining taint is gone and A stays
//!    cordoned, as it was before the drain.
//! 3. The budget relaxed and one pod held terminating by a finalizer, `machine drain A` is
//!    cancelled (`machine cancel A --wait`) while it waits for that pod to go: the drain ends
//!    Canceled, the pods it evicted stay evicted (named in what it kept), A is uncordoned and
//!    untainted.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::drain::PodState;
use nodewright_model::machine::Outcome;
use nodewright_tests::Stack;
use nodewright_tests::documents::{DrainLookup, MachineRunDocument};
use nodewright_tests::eventually;
use nodewright_tests::machines::{Sandbox, cli};
use nodewright_tests::workloads::{Placement, Workload, set_unschedulable};
use serde_json::json;

use super::{NodeState, run_status, state_of, temporal_cancel};
use crate::drain::common::{DrainScene, create_machines, drain_document};

const REPLICAS: usize = 3;
const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_delete_or_drain_gives_the_machine_back_as_it_was() -> Result<()> {
    let scene = DrainScene::<2>::start(
        "cancel-drain",
        "cd",
        &[
            ("timeout", "10m"),
            ("pdbRetryInterval", "2s"),
            ("volumeDetachTimeout", "30s"),
            ("volumeAttachTimeout", "60s"),
            ("forceAfterUnhealthy", "5m"),
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
        pool,
        pool_file,
        machines,
        workloads,
        ..
    } = scene;
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    create_machines(stack, task_queue, pool_file, machines).await?;
    set_unschedulable(&kube, node_b, true).await?;
    let replicas = i32::try_from(REPLICAS)?;
    workloads
        .deployment(&Workload::new("web", replicas, Placement::pool(pool)))
        .await?;
    let pods = workloads
        .wait_app_running("web", REPLICAS, Some(node_a), WAIT)
        .await?;
    let uids: Vec<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    workloads
        .pod_disruption_budget("web", "web", replicas)
        .await?;
    set_unschedulable(&kube, node_b, false).await?;
    let sandbox = Sandbox::new(stack)?;

    // 1. A delete cancelled while its drain waits on the budget.
    cli(stack, task_queue, &["machine", "delete", node_a])
        .await?
        .expect_code(0)?;
    await_drain_step(stack, task_queue, node_a, "evict-pods").await?;
    let canceled = cli(stack, task_queue, &["machine", "cancel", node_a, "--wait"]).await?;
    canceled.expect_code(0)?;
    let delete_id = format!("delete/{}/{node_a}", stack.cluster);
    ensure!(
        canceled
            .stdout
            .contains(&format!("asked {delete_id} to cancel"))
            && canceled.stdout.contains(&format!("{delete_id} canceled")),
        "machine cancel cancelled the delete, not only its drain: {}",
        canceled.stdout
    );
    let delete = run_status(stack, &delete_id).await?;
    ensure!(
        delete == "CANCELED" || delete == "Canceled",
        "delete ended {delete}"
    );
    let drain = run_status(stack, &format!("drain/{}/{node_a}", stack.cluster)).await?;
    ensure!(
        drain == "CANCELED" || drain == "Canceled",
        "drain ended {drain}"
    );
    ensure!(
        state_of(stack, node_a).await?
            == NodeState {
                unschedulable: false,
                draining_taint: false,
                terminating: false,
            },
        "{node_a} is back in service as before the delete"
    );
    let vms = sandbox.machine_resources(node_a).await?.vms;
    ensure!(vms.len() == 1, "the VM was never deleted: {vms:?}");
    let still: Vec<String> = workloads
        .pods_on(node_a)
        .await?
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    ensure!(
        uids.iter().all(|uid| still.contains(uid)),
        "the pods the budget kept are still on {node_a}"
    );

    // 2. A maintenance drain of a Node someone else had cordoned, cancelled from Temporal.
    set_unschedulable(&kube, node_a, true).await?;
    cli(stack, task_queue, &["machine", "drain", node_a])
        .await?
        .expect_code(0)?;
    await_drain_step(stack, task_queue, node_a, "evict-pods").await?;
    ensure!(
        state_of(stack, node_a).await?.draining_taint,
        "the drain tainted {node_a}"
    );
    let drain_id = format!("drain/{}/{node_a}", stack.cluster);
    temporal_cancel(stack, &drain_id).await?;
    let ended = eventually(
        &format!("{drain_id} to end"),
        WAIT,
        Duration::from_millis(500),
        || async {
            let doc = drain_document(stack, task_queue, node_a).await?;
            Ok((!doc.is_running()).then_some(doc))
        },
    )
    .await?;
    ensure!(
        ended.run_status == "canceled" && ended.status.run.outcome == Outcome::Canceled,
        "the drain ended Canceled: {ended}"
    );
    ensure!(
        ended
            .status
            .run
            .canceled
            .as_ref()
            .is_some_and(|c| c.undone.iter().any(|u| u.contains("stays cordoned"))),
        "the status says the cordon was kept: {ended}"
    );
    ensure!(
        state_of(stack, node_a).await?
            == NodeState {
                unschedulable: true,
                draining_taint: false,
                terminating: false,
            },
        "{node_a} stays cordoned as before the drain, without the draining taint"
    );
    set_unschedulable(&kube, node_a, false).await?;

    // 3. A drain cancelled while it waits for an evicted pod (held by a finalizer) to go.
    workloads.set_min_available("web", 0).await?;
    let held = workloads
        .pods_on(node_a)
        .await?
        .into_iter()
        .find_map(|p| p.metadata.name)
        .context("a pod on A")?;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), workloads.namespace());
    let hold = json!({ "metadata": { "finalizers": ["e2e.nodewright.io/hold"] } });
    pods.patch(&held, &PatchParams::default(), &Patch::Merge(&hold))
        .await?;
    cli(stack, task_queue, &["machine", "drain", node_a])
        .await?
        .expect_code(0)?;
    let key = format!("{}/{held}", workloads.namespace());
    eventually(
        "the drain to wait for the held pod to go",
        WAIT,
        Duration::from_millis(500),
        || async {
            let doc = drain_document(stack, task_queue, node_a).await?;
            let evicting = doc
                .status
                .pod(&key)
                .is_some_and(|p| p.state == PodState::Evicting);
            Ok(evicting.then_some(()))
        },
    )
    .await?;
    let canceled = cli(stack, task_queue, &["machine", "cancel", node_a, "--wait"]).await?;
    let release = json!({ "metadata": { "finalizers": null } });
    pods.patch(&held, &PatchParams::default(), &Patch::Merge(&release))
        .await?;
    canceled.expect_code(0)?;
    ensure!(
        canceled.stdout.contains("canceled during evict-pods")
            && canceled
                .stdout
                .contains("pods already evicted stay where they were rescheduled"),
        "the cancelled drain keeps the pods it evicted: {}",
        canceled.stdout
    );
    ensure!(
        state_of(stack, node_a).await?
            == NodeState {
                unschedulable: false,
                draining_taint: false,
                terminating: false,
            },
        "{node_a} is uncordoned and untainted after the cancelled drain"
    );
    Ok(())
}

/// `machine status NAME --output json`, typed by the run it shows.
async fn machine_document(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
) -> Result<MachineRunDocument> {
    cli(
        stack,
        task_queue,
        &["machine", "status", machine, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()
}

/// Waits until the machine's drain (its own, or its delete's) runs `step`.
async fn await_drain_step(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
    step: &str,
) -> Result<()> {
    eventually(
        &format!("the drain of {machine} to run {step}"),
        WAIT,
        Duration::from_millis(500),
        || async {
            let doc = machine_document(stack, task_queue, machine).await?;
            let drain_running = doc
                .drain()
                .and_then(|drain| drain.run.current())
                .is_some_and(|running| running.as_str() == step);
            Ok((doc.running_step() == Some(step) || drain_running).then_some(()))
        },
    )
    .await
}
