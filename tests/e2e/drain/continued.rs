//! A drain that continues as new while a volume's detach is stuck still knows the volume: the
//! continued run keeps looking at it, shows it `detach-timed-out`, and at the deadline force mode
//! force-detaches its disk.
//!
//! Two machines of a pool whose `spec.drain` says deadline 90 s away, detach timeout 3 s, PDB
//! retry 2 s. A StatefulSet of one pod with a `ReadWriteOnce` CSI volume on the first machine
//! (A); a sandbox `hang_detach` rule holds every CSI detach from A's VM. `machine drain A
//! --history-limit 100` (a hidden knob: the run continues as new at 100 history events, where
//! the dev server's `limit.historyCount.suggestContinueAsNew` would hit every concurrent case):
//!
//! - the pod is evicted once and goes; its volume's detach times out: `detach-timed-out`, with a
//!   warning naming it;
//! - the drain continues as new (its first run ends ContinuedAsNew in Temporal; the status's
//!   `continuation` fact counts the runs) and the continued run still shows the volume
//!   `detach-timed-out`, the warning, and the pod evicted once, gracefully — before the fix the
//!   continued run forgot the volume and reported drained without force mode;
//! - at the deadline force mode (reason: the deadline passed) force-detaches the disk: the status
//!   says `force-detached`, the drain completes, the pod runs on B with its volume attached there
//!   and the disk `managedBy` B.
//!
//! The rule is removed at the end whatever happens.

use std::time::Duration;

use super::common::{DrainScene, cli, create_machines, wait_drain};
use anyhow::{Context, Result, ensure};
use nodewright_model::drain::{DrainMode, PodState, VolumeState};
use nodewright_model::machine::{Outcome, Step, StepState};
use nodewright_tests::Stack;
use nodewright_tests::documents::{DrainLookup, print_steps, shown};
use nodewright_tests::machines::Sandbox;
use nodewright_tests::workloads::{
    Placement, Workload, attachments_of, disk_managed_by, is_attached, set_unschedulable,
    wait_attached,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
/// The pool's drain timeout: the deadline, when force mode starts.
const TIMEOUT_SECONDS: u64 = 90;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_continued_as_new_during_a_stuck_detach_still_forces_the_volume_at_the_deadline()
-> Result<()> {
    let timeout = format!("{TIMEOUT_SECONDS}s");
    let mut scene = DrainScene::<2>::start(
        "drain-continued",
        "dc",
        &[
            ("timeout", timeout.as_str()),
            ("pdbRetryInterval", "2s"),
            ("volumeDetachTimeout", "3s"),
            ("volumeAttachTimeout", "60s"),
            ("forceAfterUnhealthy", "5m"),
        ],
    )
    .await?;
    let sandbox = Sandbox::new(&scene.stack)?;
    let mut fault = None;

    let started = std::time::Instant::now();
    let result = scenario(&mut scene, &sandbox, &mut fault).await;
    println!("scenario took {:.1}s", started.elapsed().as_secs_f64());

    // The rule first (it would hold the cleanup's detaches), then pods and volumes, then machines.
    if let Some(id) = fault
        && let Err(error) = sandbox.remove_fault(id).await
    {
        eprintln!("cleanup: removing fault rule {id}: {error:#}");
    }
    scene.finish(result).await
}

async fn scenario(
    scene: &mut DrainScene<2>,
    sandbox: &Sandbox,
    fault: &mut Option<u64>,
) -> Result<()> {
    let DrainScene {
        ref stack,
        ref task_queue,
        ref pool,
        ref pool_file,
        ref machines,
        ref mut workloads,
        ..
    } = *scene;
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    create_machines(stack, task_queue, pool_file, machines).await?;

    // One stateful pod on A with its volume attached there.
    set_unschedulable(&kube, node_b, true).await?;
    let volumes = workloads
        .stateful_set(&Workload::new("db", 1, Placement::pool(pool)))
        .await?;
    let volume = volumes.first().context("one volume")?.clone();
    let pv = volume.name.as_str();
    workloads
        .wait_app_running("db", 1, Some(node_a), WAIT)
        .await?;
    wait_attached(&kube, pv, node_a, WAIT).await?;
    let pod_key = format!("{}/db-0", workloads.namespace());

    // Every CSI detach from A's VM hangs from now on.
    *fault = Some(
        sandbox
            .add_fault(json!({ "kind": "hang_detach", "operation": "csi.detach", "vm": node_a }))
            .await?,
    );
    set_unschedulable(&kube, node_b, false).await?;
    let force_detaches = format!("/virtualMachines/{node_a}/attachDetachDataDisks");

    cli(
        stack,
        task_queue,
        &["machine", "drain", node_a, "--history-limit", "100"],
    )
    .await?
    .expect_code(0)?;

    // 1. The detach times out: reported, the drain waits gracefully.
    wait_drain(
        stack,
        task_queue,
        node_a,
        "the volume detach-timed-out",
        WAIT,
        |doc| {
            doc.status
                .volume(pv)
                .is_some_and(|v| v.state == VolumeState::DetachTimedOut)
        },
    )
    .await?;

    // 2. The drain continues as new; the continued run still knows the stuck volume.
    let continued = wait_drain(
        stack,
        task_queue,
        node_a,
        "a continued run",
        Duration::from_secs(TIMEOUT_SECONDS),
        |doc| doc.status.run.facts.contains_key("continuation"),
    )
    .await?;
    let status = &continued.status;
    ensure!(
        continued.is_running() && status.mode == DrainMode::Graceful,
        "the continued run waits gracefully before the deadline: {continued}"
    );
    let entry = status.volume(pv).context("the stuck volume's entry")?;
    ensure!(
        entry.state == VolumeState::DetachTimedOut && entry.pod == pod_key,
        "the continued run shows the stuck volume: {}",
        shown(entry)
    );
    ensure!(
        status
            .warnings
            .iter()
            .any(|w| w.contains(pv) && w.contains("did not detach")),
        "the continued run keeps the warning: {continued}"
    );
    let pod = status.pod(&pod_key).context("the pod's entry")?;
    ensure!(
        pod.state == PodState::Gone && pod.evictions == 1,
        "{pod_key} evicted once, gone: {}",
        shown(pod)
    );
    let early: Vec<Value> = sandbox.requests(&force_detaches).await?;
    ensure!(
        early.is_empty(),
        "no attachDetachDataDisks on {node_a} before force mode: {early:?}"
    );
    let workflow_id = continued.workflow_id.clone();
    ensure_continued_as_new(stack, &workflow_id).await?;

    // 3. At the deadline: force mode force-detaches the disk; the drain completes.
    let finished = wait_drain(
        stack,
        task_queue,
        node_a,
        "the drain to complete",
        Duration::from_secs(TIMEOUT_SECONDS) + WAIT,
        |doc| !doc.is_running(),
    )
    .await?;
    let status = &finished.status;
    print_steps(&status.run);
    ensure!(
        finished.run_status == "completed" && status.run.outcome == Outcome::Succeeded,
        "the drain succeeded: {finished}"
    );
    ensure!(
        status.mode
            == DrainMode::Force {
                reason: "the drain deadline passed".to_owned()
            },
        "force mode at the deadline: {finished}"
    );
    let entry = status.volume(pv).context("the volume's entry")?;
    ensure!(
        entry.state == VolumeState::ForceDetached,
        "the stuck volume force-detached: {}",
        shown(entry)
    );
    let force_step = status
        .step(Step::ForceDrain)
        .context("a force-drain step")?;
    ensure!(
        force_step.state == StepState::Done
            && force_step
                .detail
                .as_deref()
                .is_some_and(|d| d.contains("1 data disks force-detached")),
        "force-drain step: {}",
        shown(force_step)
    );
    let calls = sandbox.requests(&force_detaches).await?;
    ensure!(
        calls
            .iter()
            .any(|r| r["method"] == "POST" && r["operation"] == "vm.attachDetachDataDisks"),
        "an attachDetachDataDisks on {node_a} in force mode: {calls:?}"
    );

    // The world: the pod runs on B with its volume, attached there only, the disk on B's VM.
    workloads
        .wait_app_running("db", 1, Some(node_b), WAIT)
        .await?;
    wait_attached(&kube, pv, node_b, WAIT).await?;
    let attachments = attachments_of(&kube, pv).await?;
    ensure!(
        attachments.len() == 1
            && attachments[0].spec.node_name == *node_b
            && is_attached(&attachments[0]),
        "{pv}: one attached VolumeAttachment, on {node_b}: {attachments:?}"
    );
    let managed_by = disk_managed_by(workloads.arm(), pv).await?;
    ensure!(
        managed_by.as_deref() == Some(node_b.as_str()),
        "disk {pv} managedBy {managed_by:?}, expected {node_b}"
    );
    Ok(())
}

/// Checks that a run of `workflow_id` ended ContinuedAsNew (visibility may lag a little).
async fn ensure_continued_as_new(stack: &Stack, workflow_id: &str) -> Result<()> {
    let client = stack.temporal_client().await?;
    let query = format!("WorkflowId = '{workflow_id}' AND ExecutionStatus = 'ContinuedAsNew'");
    let mut count = 0;
    for _ in 0..20 {
        count = client
            .count_workflows(
                query.clone(),
                temporalio_client::WorkflowCountOptions::default(),
            )
            .await?
            .count();
        if count > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("{count} runs of {workflow_id} continued as new so far");
    ensure!(count > 0, "no run of {workflow_id} ended ContinuedAsNew");
    Ok(())
}
