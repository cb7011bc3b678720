//! A volume whose detach hangs: the drain reports it and waits; `machine force-drain` releases
//! it with an Azure ForceDetach, and the pod comes up on the other machine with its volume.
//!
//! Two machines of a pool whose `spec.drain` says detach timeout 3 s, PDB retry 2 s and a
//! deadline far away (10 min). A StatefulSet of one pod with a `ReadWriteOnce` CSI volume on the
//! first machine (A); a sandbox `hang_detach` rule holds every CSI detach from A's VM. `machine
//! drain A`:
//!
//! - the pod is evicted once and goes; the attach-detach controller deletes the
//!   VolumeAttachment on A, whose detach hangs: after grace 1 s + 3 s the status shows the volume
//!   `detach-timed-out` and a warning naming it, the mode stays graceful, the disk stays
//!   `managedBy` A and the volume is attached nowhere else, for as long as we look (two retry
//!   intervals);
//! - `machine force-drain A`: force mode (reason: requested); the drain asks ARM once to
//!   `attachDetachDataDisks` on A's VM (none before) — the only way to release the disk while the
//!   `hang_detach` rule (still in place) holds every normal detach is a ForceDetach — the disk's
//!   `managedBy` goes A → none → B, the VolumeAttachment on A goes, the one on B attaches, the pod
//!   runs on B; the volume was never attached on both; the status says `force-detached`, and the
//!   drain completes.
//!
//! The rule is removed at the end whatever happens.

use std::time::Duration;

use super::common::{DrainScene, cli, create_machines, drain_document, wait_drain};
use anyhow::{Context, Result, ensure};
use nodewright_model::drain::{DrainMode, PodState, VolumeState};
use nodewright_model::machine::{Outcome, Step, StepState};
use nodewright_tests::Stack;
use nodewright_tests::documents::{DrainLookup, print_steps, shown};
use nodewright_tests::machines::Sandbox;
use nodewright_tests::timeline::{Timeline, What};
use nodewright_tests::workloads::{
    Placement, Workload, Workloads, attachments_of, disk_managed_by, is_attached,
    set_unschedulable, wait_attached,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
/// How often the disk's `managedBy` is sampled through ARM.
const SAMPLE: Duration = Duration::from_millis(50);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_detach_is_reported_and_force_drain_releases_the_disk_with_a_force_detach()
-> Result<()> {
    let mut scene = DrainScene::<2>::start(
        "drain-stuck",
        "ds",
        &[
            ("timeout", "10m"),
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
    let mut timeline =
        Timeline::start(&kube, workloads.namespace(), &workloads.volume_prefix()).await?;
    let volumes = workloads
        .stateful_set(&Workload::new("db", 1, Placement::pool(pool)))
        .await?;
    let volume = volumes.first().context("one volume")?.clone();
    let pv = volume.name.as_str();
    timeline.sample_disks(workloads.arm(), std::slice::from_ref(&volume.name), SAMPLE);
    workloads
        .wait_app_running("db", 1, Some(node_a), WAIT)
        .await?;
    wait_attached(&kube, pv, node_a, WAIT).await?;
    timeline
        .wait_for(&What::disk_managed_by(pv, Some(node_a)), WAIT)
        .await?;

    let result = drain(
        stack,
        sandbox,
        task_queue,
        node_a,
        node_b,
        workloads,
        &timeline,
        pv,
        &volume.disk_id,
        fault,
    )
    .await;
    println!("{}", timeline.render());
    result
}

#[allow(clippy::too_many_arguments)]
async fn drain(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    node_a: &str,
    node_b: &str,
    workloads: &Workloads,
    timeline: &Timeline,
    pv: &str,
    disk_id: &str,
    fault: &mut Option<u64>,
) -> Result<()> {
    let kube = workloads.client().clone();
    let pod_key = format!("{}/db-0", workloads.namespace());

    // Every CSI detach from A's VM hangs from now on.
    *fault = Some(
        sandbox
            .add_fault(json!({ "kind": "hang_detach", "operation": "csi.detach", "vm": node_a }))
            .await?,
    );
    set_unschedulable(&kube, node_b, false).await?;
    let force_detaches = format!("/virtualMachines/{node_a}/attachDetachDataDisks");

    let draining = timeline.mark(&format!("machine drain {node_a}"));
    cli(stack, task_queue, &["machine", "drain", node_a])
        .await?
        .expect_code(0)?;

    // 1. The detach times out: reported, and the drain keeps waiting, gracefully.
    let stuck = wait_drain(
        stack,
        task_queue,
        node_a,
        "the volume detach-timed-out with a warning",
        WAIT,
        |doc| {
            let status = &doc.status;
            status
                .volume(pv)
                .is_some_and(|v| v.state == VolumeState::DetachTimedOut)
                && status.warnings.iter().any(|w| w.contains(pv))
        },
    )
    .await?;
    let reported = timeline.now();
    let status = &stuck.status;
    ensure!(stuck.run_status == "running", "{stuck}");
    ensure!(status.mode == DrainMode::Graceful, "{stuck}");
    let entry = status.volume(pv).context("volume entry")?;
    ensure!(
        entry.pod == pod_key
            && entry
                .disk_id
                .as_deref()
                .is_some_and(|d| d.eq_ignore_ascii_case(disk_id)),
        "the volume entry names the pod and the disk: {}",
        shown(entry)
    );
    let pod = status.pod(&pod_key).context("pod entry")?;
    ensure!(
        pod.state == PodState::Gone && pod.evictions == 1 && pod.with_volumes,
        "{pod_key} evicted once and gone: {}",
        shown(pod)
    );
    let warning = status
        .warnings
        .iter()
        .find(|w| w.contains(pv))
        .with_context(|| format!("a warning naming {pv}: {stuck}"))?;
    ensure!(
        warning.contains("did not detach")
            && warning.contains(node_a)
            && warning.contains(&pod_key)
            && warning.contains("4s"),
        "the warning says what did not detach from where within grace 1s + detach 3s: {warning}"
    );
    timeline
        .find_after(draining, |w| *w == What::attachment_deleting(pv, node_a))
        .with_context(|| {
            format!(
                "the attach-detach controller did not start the detach from {node_a}\n{}",
                timeline.render()
            )
        })?;

    // It stays that way: two retry intervals later, still stuck on A, attached nowhere else.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let still = drain_document(stack, task_queue, node_a).await?;
    ensure!(
        still.run_status == "running"
            && still.status.mode == DrainMode::Graceful
            && still
                .status
                .volume(pv)
                .is_some_and(|v| v.state == VolumeState::DetachTimedOut),
        "still waiting gracefully on the stuck volume: {still}"
    );
    let attachments = attachments_of(&kube, pv).await?;
    ensure!(
        attachments.len() == 1
            && attachments[0].spec.node_name == node_a
            && attachments[0].metadata.deletion_timestamp.is_some(),
        "{pv}: only its VolumeAttachment on {node_a}, being deleted: {attachments:?}"
    );
    let managed_by = disk_managed_by(workloads.arm(), pv).await?;
    ensure!(
        managed_by.as_deref() == Some(node_a),
        "disk {pv} managedBy {managed_by:?} while its detach hangs, expected {node_a}"
    );
    ensure!(
        timeline
            .find_after(draining, |w| *w == What::disk_managed_by(pv, None))
            .is_none(),
        "the disk was released before force mode\n{}",
        timeline.render()
    );
    let early: Vec<Value> = sandbox.requests(&force_detaches).await?;
    ensure!(
        early.is_empty(),
        "no attachDetachDataDisks on {node_a} before force mode: {early:?}"
    );
    println!(
        "detach-timed-out reported {:.1}s after the drain started",
        (reported - draining).as_secs_f64()
    );

    // 2. force-drain: a ForceDetach in ARM releases the disk; the volume follows the pod to B.
    let forcing = timeline.mark(&format!("machine force-drain {node_a}"));
    cli(stack, task_queue, &["machine", "force-drain", node_a])
        .await?
        .expect_code(0)?;
    let finished = wait_drain(
        stack,
        task_queue,
        node_a,
        "the drain to complete",
        WAIT,
        |doc| !doc.is_running(),
    )
    .await?;
    let done = timeline.now();
    let status = &finished.status;
    ensure!(
        finished.run_status == "completed" && status.run.outcome == Outcome::Succeeded,
        "the drain succeeded: {finished}"
    );
    ensure!(
        status.mode
            == DrainMode::Force {
                reason: "force was requested".to_owned()
            },
        "force mode on request: {finished}"
    );
    ensure!(
        status.run.facts.get("forceRequestedBy").map(String::as_str)
            == Some("nodewright machine force-drain"),
        "who asked: {finished}"
    );
    let entry = status.volume(pv).context("volume entry")?;
    ensure!(
        entry.state == VolumeState::ForceDetached,
        "{}",
        shown(entry)
    );
    print_steps(&status.run);
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
    let posts: Vec<&Value> = calls
        .iter()
        .filter(|r| r["method"] == "POST" && r["operation"] == "vm.attachDetachDataDisks")
        .collect();
    ensure!(
        posts.len() == 1
            && posts[0]["status"]
                .as_u64()
                .is_some_and(|s| (200..300).contains(&s)),
        "one accepted attachDetachDataDisks on {node_a} after force-drain: {calls:?}"
    );
    // A normal detach from A is held while the rule exists: only a ForceDetach (never checked
    // against the rules) could release the disk.
    let rule = fault_rule(stack, fault.unwrap_or_default())
        .await?
        .context("the hang_detach rule was gone when the disk was released")?;
    ensure!(
        rule["fired"].as_u64() >= Some(1),
        "the hang_detach rule held the CSI detach: {rule}"
    );
    println!("hang_detach rule at the end: {rule}");

    let new_attached = timeline
        .wait_for_after(forcing, &What::attached(pv, node_b), WAIT)
        .await?;
    timeline
        .wait_for_after(forcing, &What::disk_managed_by(pv, Some(node_b)), WAIT)
        .await?;
    let old_gone = timeline
        .first_after(forcing, &What::attachment_gone(pv, node_a))
        .with_context(|| {
            format!(
                "the VolumeAttachment on {node_a} did not go\n{}",
                timeline.render()
            )
        })?;
    // The sampler may miss a spell without managedBy shorter than a sample (see below).
    let released = timeline.first_after(forcing, &What::disk_managed_by(pv, None));
    ensure!(
        old_gone <= new_attached && released.is_none_or(|r| r <= new_attached),
        "released {released:?}, old attachment gone {old_gone:?}, attached on {node_b} {new_attached:?}\n{}",
        timeline.render()
    );
    let history: Vec<Option<String>> = timeline
        .disk_history(pv)
        .into_iter()
        .filter(|(at, _)| *at >= forcing)
        .map(|(_, vm)| vm)
        .collect();
    // Should the spell without managedBy ever be shorter than a sample, the VolumeAttachment on
    // A going (the attacher lets it go only once the disk left A's VM) before the one on B was
    // created proves the same.
    let gone_first = timeline
        .first_after(forcing, &What::attachment_created(pv, node_b))
        .is_some_and(|created| old_gone <= created);
    ensure!(
        history == [None, Some(node_b.to_owned())]
            || (history == [Some(node_b.to_owned())] && gone_first),
        "{pv}: managedBy after force-drain went {history:?}, expected none then {node_b}\n{}",
        timeline.render()
    );
    ensure!(
        timeline.most_attached_at_once(pv) <= 1,
        "{pv} was attached on two nodes at once\n{}",
        timeline.render()
    );
    workloads
        .wait_app_running("db", 1, Some(node_b), WAIT)
        .await?;
    let attachments = attachments_of(&kube, pv).await?;
    ensure!(
        attachments.len() == 1
            && attachments[0].spec.node_name == node_b
            && is_attached(&attachments[0]),
        "{pv}: one attached VolumeAttachment, on {node_b}: {attachments:?}"
    );
    println!(
        "force-drain -> drain completed {:.1}s, -> disk released {:.1}s, -> attached on {node_b} {:.1}s",
        (done - forcing).as_secs_f64(),
        (released.unwrap_or(old_gone) - forcing).as_secs_f64(),
        (new_attached - forcing).as_secs_f64(),
    );
    Ok(())
}

/// The sandbox's fault rule `id` as `GET /sandbox/faults` lists it, if it still exists.
async fn fault_rule(stack: &Stack, id: u64) -> Result<Option<Value>> {
    let url = format!(
        "{}/sandbox/faults",
        stack.arm.endpoint.trim_end_matches('/')
    );
    let body: Value = reqwest::Client::new()
        .get(url)
        .bearer_auth(&stack.arm.token)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(body["rules"]
        .as_array()
        .and_then(|rules| rules.iter().find(|r| r["id"] == id).cloned()))
}

// ---- helpers shared in spirit with the other drain tests ---------------------------------------
