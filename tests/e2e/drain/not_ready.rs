//! A dead node is drained in force mode from the start, without a single eviction, when its
//! machine is deleted.
//!
//! Two machines of a pool whose `spec.drain` says force after 5 s unhealthy (deadline 10 min
//! away). On the first machine (A): a Deployment of two pods and a StatefulSet pod with a
//! `ReadWriteOnce` CSI volume. A's VM is powered off through ARM; the joiner stops its heartbeat
//! and the node-lifecycle controller marks the Node NotReady (~40–50 s). Once it has been so for
//! more than 5 s, `machine delete A --wait`:
//!
//! - the drain is in force mode from the start, for the NotReady reason: no pod is evicted (every
//!   pod's `evictions` is 0, the `evict-pods` step never runs), the three pods are
//!   `force-deleted`, the volume `force-detached`;
//! - the pods run again on B, the volume is attached there (never on both nodes), its disk
//!   `managedBy` B;
//! - A's VM, NIC, OS disk and Node are gone; the data disk survives.

use std::time::Duration;

use super::common::{DrainScene, cli, create_machines, machine_status};
use anyhow::{Context, Result, bail, ensure};
use chrono::{DateTime, Utc};
use nodewright_model::drain::{DrainMode, DrainStatus, PodState, VolumeState};
use nodewright_model::machine::{DeletedMachine, Outcome, Step, StepState};
use nodewright_tests::Stack;
use nodewright_tests::documents::{DrainLookup, ResultDocument, print_steps, shown};
use nodewright_tests::machines::MachineStatusDocument;
use nodewright_tests::machines::{Sandbox, node};
use nodewright_tests::timeline::{Timeline, What};
use nodewright_tests::workloads::{
    Placement, Workload, Workloads, attachments_of, disk_managed_by, is_attached,
    set_unschedulable, wait_attached,
};

const WAIT: Duration = Duration::from_secs(60);
/// The node-lifecycle controller's grace period is ~40–50 s; allow twice that.
const NOT_READY_WAIT: Duration = Duration::from_secs(120);
/// The pool's `forceAfterUnhealthy`.
const FORCE_AFTER_SECONDS: i64 = 5;
const SAMPLE: Duration = Duration::from_millis(50);
const WEB_REPLICAS: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_machine_whose_node_is_not_ready_drains_it_in_force_mode_without_evictions()
-> Result<()> {
    let mut scene = DrainScene::<2>::start(
        "drain-notready",
        "dn",
        &[
            ("timeout", "10m"),
            ("pdbRetryInterval", "2s"),
            ("volumeDetachTimeout", "30s"),
            ("volumeAttachTimeout", "60s"),
            ("forceAfterUnhealthy", "5s"),
        ],
    )
    .await?;
    let started = std::time::Instant::now();
    let result = scenario(&mut scene).await;
    println!("scenario took {:.1}s", started.elapsed().as_secs_f64());
    scene.finish(result).await
}

async fn scenario(scene: &mut DrainScene<2>) -> Result<()> {
    let DrainScene {
        ref stack,
        ref task_queue,
        ref pool,
        ref pool_file,
        ref machines,
        ref mut workloads,
        ..
    } = *scene;
    let sandbox = &Sandbox::new(stack)?;
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    let namespace = workloads.namespace().to_owned();
    create_machines(stack, task_queue, pool_file, machines).await?;

    // Everything on A.
    set_unschedulable(&kube, node_b, true).await?;
    let mut timeline = Timeline::start(&kube, &namespace, &workloads.volume_prefix()).await?;
    let placement = Placement::pool(pool);
    workloads
        .deployment(&Workload::new(
            "web",
            i32::try_from(WEB_REPLICAS)?,
            placement.clone(),
        ))
        .await?;
    let volumes = workloads
        .stateful_set(&Workload::new("db", 1, placement))
        .await?;
    let volume = volumes.first().context("one volume")?.clone();
    let pv = volume.name.as_str();
    timeline.sample_disks(workloads.arm(), std::slice::from_ref(&volume.name), SAMPLE);
    let web = workloads
        .wait_app_running("web", WEB_REPLICAS, Some(node_a), WAIT)
        .await?;
    workloads
        .wait_app_running("db", 1, Some(node_a), WAIT)
        .await?;
    wait_attached(&kube, pv, node_a, WAIT).await?;
    let mut keys: Vec<String> = web
        .iter()
        .map(|pod| {
            format!(
                "{namespace}/{}",
                pod.metadata.name.clone().unwrap_or_default()
            )
        })
        .collect();
    keys.push(format!("{namespace}/db-0"));
    keys.sort();
    set_unschedulable(&kube, node_b, false).await?;

    let result = kill_and_delete(
        stack, sandbox, task_queue, node_a, node_b, workloads, &timeline, pv, &keys,
    )
    .await;
    println!("{}", timeline.render());
    result
}

#[allow(clippy::too_many_arguments)]
async fn kill_and_delete(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    node_a: &str,
    node_b: &str,
    workloads: &Workloads,
    timeline: &Timeline,
    pv: &str,
    keys: &[String],
) -> Result<()> {
    let kube = workloads.client().clone();

    // A dies: its VM powered off, its Node NotReady after the controller's grace period.
    let off = timeline.mark(&format!("powerOff {node_a}"));
    nodewright_tests::machines::vm_action(stack, node_a, "powerOff").await?;
    let since = wait_not_ready(&kube, node_a).await?;
    let not_ready = timeline.mark(&format!("{node_a} NotReady (since {since})"));
    println!(
        "{node_a} NotReady {:.1}s after the power-off",
        (not_ready - off).as_secs_f64()
    );
    let on_a = workloads.pods_on(node_a).await?;
    ensure!(
        on_a.len() == keys.len() && on_a.iter().all(|p| p.metadata.deletion_timestamp.is_none()),
        "the pods are still on the NotReady {node_a}: {:?}",
        on_a.iter().map(|p| &p.metadata.name).collect::<Vec<_>>()
    );
    // Unhealthy for longer than forceAfterUnhealthy (the drain counts whole seconds).
    let due = since + chrono::Duration::seconds(FORCE_AFTER_SECONDS + 2);
    if let Ok(wait) = (due - Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    }

    // Delete the machine: the drain goes straight to force mode.
    let deleting = timeline.mark(&format!("machine delete {node_a} --wait"));
    let deleted = cli(
        stack,
        task_queue,
        &["machine", "delete", node_a, "--wait", "--output", "json"],
    )
    .await?;
    let deleted: ResultDocument<DeletedMachine> = deleted.expect_code(0)?.parse()?;
    let took = timeline.now() - deleting;
    let result = &deleted.result;
    ensure!(
        result.vm_deleted && result.node_deleted,
        "VM and Node deleted: {deleted}"
    );
    let drained = result
        .drained
        .as_ref()
        .with_context(|| format!("the delete drained: {deleted}"))?;
    ensure!(
        drained
            .forced
            .as_deref()
            .is_some_and(|r| r.contains("has not been Ready")),
        "drained in force mode because the node is NotReady: {deleted}"
    );
    ensure!(drained.evicted.is_empty(), "nothing evicted: {deleted}");
    let mut force_deleted = drained.force_deleted.clone();
    force_deleted.sort();
    ensure!(
        force_deleted == keys,
        "force-deleted {force_deleted:?}, expected {keys:?}"
    );

    // The drain's own status says the same, pod by pod.
    let (run_status, status) = deletes_drain(stack, task_queue, node_a).await?;
    let status_doc = shown(&status);
    let status = &status;
    ensure!(
        run_status == "completed" && status.run.outcome == Outcome::Succeeded,
        "{status_doc}"
    );
    ensure!(
        status.run.facts.get("purpose").map(String::as_str) == Some("deletion"),
        "a drain for deletion: {status_doc}"
    );
    let DrainMode::Force { reason } = &status.mode else {
        bail!("force mode: {status_doc}");
    };
    ensure!(
        reason.starts_with("the node has not been Ready for"),
        "force mode for the NotReady reason: {status_doc}"
    );
    let seconds: i64 = reason
        .rsplit(' ')
        .next()
        .and_then(|s| s.trim_end_matches('s').parse().ok())
        .context("the reason's seconds")?;
    ensure!(
        seconds > FORCE_AFTER_SECONDS,
        "NotReady for {seconds}s, more than forceAfterUnhealthy {FORCE_AFTER_SECONDS}s"
    );
    for key in keys {
        let pod = status
            .pod(key)
            .with_context(|| format!("{key} in {status_doc}"))?;
        ensure!(
            pod.state == PodState::ForceDeleted && pod.evictions == 0,
            "{key} force-deleted without an eviction: {}",
            shown(pod)
        );
    }
    ensure!(
        status.pods.len() == keys.len(),
        "only the test's pods were on {node_a}: {status_doc}"
    );
    let evict_step = status.step(Step::EvictPods).context("evict-pods step")?;
    ensure!(
        evict_step.state == StepState::Done
            && evict_step.detail.as_deref() == Some("skipped: force mode")
            && evict_step.started_at.is_none(),
        "no eviction step ran: {}",
        shown(evict_step)
    );
    let volume = status.volume(pv).context("volume entry")?;
    ensure!(
        volume.state == VolumeState::ForceDetached,
        "{}",
        shown(volume)
    );
    print_steps(&status.run);
    let detaches = sandbox
        .requests(&format!("/virtualMachines/{node_a}/attachDetachDataDisks"))
        .await?;
    println!("  attachDetachDataDisks requests on {node_a}: {detaches:?}");

    // The pods run on B, the volume is attached there.
    let db_key = format!("{}/db-0", workloads.namespace());
    workloads
        .wait_app_running("web", WEB_REPLICAS, Some(node_b), WAIT)
        .await?;
    workloads
        .wait_app_running("db", 1, Some(node_b), WAIT)
        .await
        .with_context(|| format!("{db_key} on {node_b}"))?;
    wait_attached(&kube, pv, node_b, WAIT).await?;
    let attachments = attachments_of(&kube, pv).await?;
    ensure!(
        attachments.len() == 1
            && attachments[0].spec.node_name == node_b
            && is_attached(&attachments[0]),
        "{pv}: one attached VolumeAttachment, on {node_b}: {attachments:?}"
    );
    ensure!(
        timeline.most_attached_at_once(pv) <= 1,
        "{pv} was attached on two nodes at once\n{}",
        timeline.render()
    );
    let attached_b = timeline
        .first_after(deleting, &What::attached(pv, node_b))
        .context("attached on B after the delete began")?;

    // A is gone: VM, NIC, OS disk, Node; the data disk is kept, on B.
    let left = sandbox.machine_resources(node_a).await?;
    ensure!(left.is_empty(), "{node_a} left in Azure: {left:#?}");
    ensure!(
        node(&kube, node_a).await?.is_none(),
        "the Node {node_a} is gone"
    );
    let managed_by = disk_managed_by(workloads.arm(), pv).await?;
    ensure!(
        managed_by.as_deref() == Some(node_b),
        "data disk {pv} survives, managedBy {managed_by:?}, expected {node_b}"
    );
    println!(
        "delete --wait took {:.1}s; volume attached on {node_b} {:.1}s after the delete began",
        took.as_secs_f64(),
        (attached_b - deleting).as_secs_f64()
    );
    Ok(())
}

/// Waits until the Node's `Ready` condition is not `True`; returns when it changed.
async fn wait_not_ready(kube: &kube::Client, name: &str) -> Result<DateTime<Utc>> {
    let deadline = tokio::time::Instant::now() + NOT_READY_WAIT;
    loop {
        let found = node(kube, name)
            .await?
            .with_context(|| format!("no Node {name}"))?;
        let ready = found
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready");
        if let Some(ready) = ready
            && ready.status != "True"
        {
            let since = ready
                .last_transition_time
                .map(|t| t.0.as_second())
                .and_then(|s| DateTime::from_timestamp(s, 0))
                .context("Ready has no lastTransitionTime")?;
            return Ok(since);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("{name} still Ready {NOT_READY_WAIT:?} after its VM was powered off");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

// ---- helpers shared in spirit with the other drain tests ---------------------------------------

/// `machine status NAME --output json` of a machine deleted by `machine delete`: the delete's
/// run (which must have succeeded), with its drain's status under `drain`; returns the run's
/// status word and the drain's status.
async fn deletes_drain(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
) -> Result<(String, DrainStatus)> {
    let doc: MachineStatusDocument = machine_status(stack, task_queue, machine).await?;
    let expected = format!("delete/{}/{machine}", stack.cluster);
    ensure!(
        doc.workflow_id == expected,
        "status of {expected}: {}",
        shown(&doc)
    );
    ensure!(
        doc.status.outcome == Outcome::Succeeded,
        "the delete did not succeed: {}",
        shown(&doc)
    );
    let drain = doc
        .drain
        .with_context(|| format!("no drain in the status of {expected}"))?;
    Ok((doc.run_status, drain))
}
