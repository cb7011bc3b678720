//! Volumes a drain does not wait on, end to end: an Azure Files share (CSI driver
//! `file.csi.azure.com`, whose CSIDriver says `attachRequired: false`, so no VolumeAttachment
//! ever exists) and an NFS export. Two machines of a fresh pool whose `volumeAttachTimeout` is
//! 5 minutes; the second, B, is cordoned until everything runs on the first, A.
//!
//! - A file-share pod alone on A (a `ReadWriteOnce` claim, so the CSIDriver is what decides):
//!   `machine drain A --wait` returns well before the attach timeout, with no warning; the
//!   status lists the share `not-waited-on` (`needs no attach`), the pod `gone`, not moved with
//!   volumes; the summary says `0 volumes moved` and the move-volumes step `0 pods moved with
//!   their volumes`; the pod runs on B and the share never had a VolumeAttachment.
//! - A disk pod (a 1-replica StatefulSet on an Azure Disk volume), a file-share pod (a
//!   `ReadWriteMany` claim), an NFS pod and two pods without volumes on A: the drain waits on the
//!   disk alone (status: the disk `reattached` on B; the share `not-waited-on`, used from other
//!   nodes; the NFS volume `not-waited-on`, needs no attach); the share and NFS pods get their
//!   deletion timestamps together with the pods without volumes (the parallel lane); the summary
//!   counts 1 volume moved and 1 pod moved with its volumes.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use nodewright_model::drain::{DrainMode, DrainStatus, PodState, VolumeState};
use nodewright_model::machine::Outcome;
use nodewright_tests::Stack;
use nodewright_tests::machines::CliResult;
use nodewright_tests::timeline::{Timeline, What};
use nodewright_tests::workloads::{
    Placement, Workload, Workloads, attachments_of, node_of, set_unschedulable, wait_attached,
};

use super::common::{DrainScene, cli, drain_document};
use super::stateful::{PARALLEL_WINDOW, WAIT};

/// The pool's `volumeAttachTimeout`: a drain that waited on a share would take this long.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(300);

/// The pool's drain settings: a quick PDB retry, a long attach timeout, nothing turns to force
/// mode.
const DRAIN_SETTINGS: [(&str, &str); 5] = [
    ("timeout", "15m"),
    ("pdbRetryInterval", "2s"),
    ("volumeDetachTimeout", "1m"),
    ("volumeAttachTimeout", "5m"),
    ("forceAfterUnhealthy", "15m"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_share_pod_is_drained_without_waiting_for_an_attach() -> Result<()> {
    let mut test = DrainScene::<2>::start("drain-share", "dsh", &DRAIN_SETTINGS).await?;
    let result = match prepare(&test).await {
        Ok(()) => {
            share_alone(
                &test.stack,
                &test.task_queue,
                &test.machines,
                &mut test.workloads,
            )
            .await
        }
        Err(error) => Err(error),
    };
    test.finish(result).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_on_the_disk_alone_beside_a_share_and_nfs() -> Result<()> {
    let mut test = DrainScene::<2>::start("drain-mixed", "dmx", &DRAIN_SETTINGS).await?;
    let result = match prepare(&test).await {
        Ok(()) => {
            disk_share_and_nfs(
                &test.stack,
                &test.task_queue,
                &test.machines,
                &mut test.workloads,
            )
            .await
        }
        Err(error) => Err(error),
    };
    test.finish(result).await
}

/// Creates the machines and cordons B.
async fn prepare(test: &DrainScene<2>) -> Result<()> {
    test.create_machines().await?;
    set_unschedulable(test.workloads.client(), &test.machines[1], true).await
}

/// The pool of the machines: their name up to the last `-`.
fn pool_of(machine: &str) -> &str {
    machine.rsplit_once('-').map_or(machine, |(pool, _)| pool)
}

/// The name of the one pod of `app` on `node`.
async fn pod_of(workloads: &Workloads, app: &str, node: &str) -> Result<String> {
    let pods = workloads.wait_app_running(app, 1, Some(node), WAIT).await?;
    pods.first()
        .and_then(|pod| pod.metadata.name.clone())
        .with_context(|| format!("no pod of {app} on {node}"))
}

/// `machine drain NODE --wait`, timed; prints its output.
async fn drain(stack: &Stack, task_queue: &str, node: &str) -> Result<(CliResult, Duration)> {
    let clock = Instant::now();
    let drained = cli(stack, task_queue, &["machine", "drain", node, "--wait"]).await?;
    let took = clock.elapsed();
    eprintln!(
        "machine drain took {:.1}s\nstdout:\n{}\nstderr:\n{}",
        took.as_secs_f64(),
        drained.stdout,
        drained.stderr
    );
    drained.expect_code(0)?;
    Ok((drained, took))
}

/// The drain's status, read as a typed document, completed and graceful with no warning.
async fn drain_status(stack: &Stack, task_queue: &str, node: &str) -> Result<DrainStatus> {
    let document = drain_document(stack, task_queue, node).await?;
    let status = document.status;
    ensure!(
        document.run_status == "completed" && status.run.outcome == Outcome::Succeeded,
        "the drain completed: {status:?}"
    );
    ensure!(status.mode == DrainMode::Graceful, "graceful: {status:?}");
    ensure!(
        status.warnings.is_empty(),
        "no warning (no \"did not attach\"): {:?}",
        status.warnings
    );
    Ok(status)
}

/// Checks the status entry of volume `pv`: `state`, used by `pod`, with `detail` (when given)
/// and `new_node`.
fn check_volume(
    status: &DrainStatus,
    pv: &str,
    pod: &str,
    state: VolumeState,
    detail: Option<&str>,
    new_node: Option<&str>,
) -> Result<()> {
    let entry = status
        .volumes
        .iter()
        .find(|v| v.persistent_volume == pv)
        .with_context(|| format!("volume {pv} missing from the status: {:?}", status.volumes))?;
    ensure!(
        entry.state == state
            && entry.pod == pod
            && detail.is_none_or(|d| entry.detail.as_deref().is_some_and(|e| e.contains(d)))
            && entry.new_node.as_deref() == new_node,
        "{pv}: {} of {pod} ({detail:?}, new node {new_node:?}): {entry:?}",
        state.as_str()
    );
    Ok(())
}

/// Checks the status entry of pod `pod`: gone after one eviction, moved with its volumes or not.
fn check_pod(status: &DrainStatus, pod: &str, with_volumes: bool) -> Result<()> {
    let entry = status
        .pods
        .iter()
        .find(|p| p.pod == pod)
        .with_context(|| format!("pod {pod} missing from the status: {:?}", status.pods))?;
    ensure!(
        entry.state == PodState::Gone && entry.evictions == 1 && entry.with_volumes == with_volumes,
        "{pod}: gone after one eviction, withVolumes {with_volumes}: {entry:?}"
    );
    Ok(())
}

/// The detail of the move-volumes step.
fn move_volumes_detail(status: &DrainStatus) -> String {
    status
        .run
        .steps
        .iter()
        .find(|s| s.step.as_str() == "move-volumes")
        .and_then(|s| s.detail.clone())
        .unwrap_or_default()
}

async fn share_alone(
    stack: &Stack,
    task_queue: &str,
    machines: &[String; 2],
    workloads: &mut Workloads,
) -> Result<()> {
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    let namespace = workloads.namespace().to_owned();
    let share = workloads.file_share("files", "ReadWriteOnce").await?;
    let placement = Placement::pool(pool_of(node_a));
    workloads
        .deployment(&Workload::new("files", 1, placement).claim(&share.claim))
        .await?;
    let pod = pod_of(workloads, "files", node_a).await?;
    set_unschedulable(&kube, node_b, false).await?;

    let (drained, took) = drain(stack, task_queue, node_a).await?;
    ensure!(
        took < ATTACH_TIMEOUT,
        "the drain took {took:?}: it waited for the share to attach ({ATTACH_TIMEOUT:?})"
    );
    let status = drain_status(stack, task_queue, node_a).await?;
    let key = format!("{namespace}/{pod}");
    check_pod(&status, &key, false)?;
    check_volume(
        &status,
        &share.name,
        &key,
        VolumeState::NotWaitedOn,
        Some("needs no attach"),
        None,
    )?;
    ensure!(
        status.volumes.len() == 1,
        "only the share is listed: {:?}",
        status.volumes
    );
    let detail = move_volumes_detail(&status);
    ensure!(
        detail == "0 pods moved with their volumes",
        "the move-volumes step counts no pod: {detail:?}"
    );
    ensure!(
        drained
            .stdout
            .contains("1 evicted, 0 deleted with grace period 0, 0 volumes moved"),
        "the summary counts the pod evicted and no volume moved: {}",
        drained.stdout
    );
    let moved = workloads
        .wait_app_running("files", 1, Some(node_b), WAIT)
        .await?;
    ensure!(
        moved
            .iter()
            .all(|p| p.metadata.name.as_deref() != Some(pod.as_str())),
        "a new files pod runs on {node_b}"
    );
    let attachments = attachments_of(&kube, &share.name).await?;
    ensure!(
        attachments.is_empty(),
        "the share never gets a VolumeAttachment: {attachments:?}"
    );
    Ok(())
}

async fn disk_share_and_nfs(
    stack: &Stack,
    task_queue: &str,
    machines: &[String; 2],
    workloads: &mut Workloads,
) -> Result<()> {
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    let namespace = workloads.namespace().to_owned();
    let placement = Placement::pool(pool_of(node_a));
    let share = workloads.file_share("files", "ReadWriteMany").await?;
    let nfs = workloads.nfs_volume("exports").await?;
    workloads
        .deployment(&Workload::new("web", 2, placement.clone()))
        .await?;
    workloads
        .deployment(&Workload::new("files", 1, placement.clone()).claim(&share.claim))
        .await?;
    workloads
        .deployment(&Workload::new("nfs", 1, placement.clone()).claim(&nfs.claim))
        .await?;
    let disks = workloads
        .stateful_set(&Workload::new("db", 1, placement))
        .await?;
    let disk = disks
        .first()
        .context("the db StatefulSet has no volume")?
        .clone();
    let timeline = Timeline::start(&kube, &namespace, &workloads.volume_prefix()).await?;
    let web: Vec<String> = workloads
        .wait_app_running("web", 2, Some(node_a), WAIT)
        .await?
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    let on_a = OnA {
        web,
        files: pod_of(workloads, "files", node_a).await?,
        exports: pod_of(workloads, "nfs", node_a).await?,
        disk: disk.name.clone(),
        share: share.name,
        nfs: nfs.name,
    };
    pod_of(workloads, "db", node_a).await?;
    wait_attached(&kube, &disk.name, node_a, WAIT).await?;
    set_unschedulable(&kube, node_b, false).await?;
    let since = timeline.mark(&format!("nodewright machine drain {node_a} --wait"));
    let result = mixed_drained(
        stack, task_queue, machines, workloads, &timeline, since, &on_a,
    )
    .await;
    if result.is_err() {
        eprintln!("{}", timeline.render());
    }
    result
}

/// What runs on A in the mixed scenario: pod names and PersistentVolumes.
struct OnA {
    /// The `web` pods (no volumes).
    web: Vec<String>,
    /// The file-share pod.
    files: String,
    /// The NFS pod.
    exports: String,
    /// The disk's PersistentVolume (`db-0`'s).
    disk: String,
    /// The share's PersistentVolume.
    share: String,
    /// The NFS PersistentVolume.
    nfs: String,
}

async fn mixed_drained(
    stack: &Stack,
    task_queue: &str,
    machines: &[String; 2],
    workloads: &Workloads,
    timeline: &Timeline,
    since: Duration,
    on_a: &OnA,
) -> Result<()> {
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    let namespace = workloads.namespace();
    let (files, exports) = (on_a.files.as_str(), on_a.exports.as_str());
    let (disk, share, nfs) = (&on_a.disk, &on_a.share, &on_a.nfs);
    let web = &on_a.web;

    let (drained, took) = drain(stack, task_queue, node_a).await?;
    ensure!(
        took < ATTACH_TIMEOUT,
        "the drain took {took:?}: it waited for a share or NFS volume to attach"
    );
    let status = drain_status(stack, task_queue, node_a).await?;
    let key = |pod: &str| format!("{namespace}/{pod}");
    check_volume(
        &status,
        disk,
        &key("db-0"),
        VolumeState::Reattached,
        None,
        Some(node_b.as_str()),
    )?;
    check_volume(
        &status,
        share,
        &key(files),
        VolumeState::NotWaitedOn,
        Some("used from other nodes"),
        None,
    )?;
    check_volume(
        &status,
        nfs,
        &key(exports),
        VolumeState::NotWaitedOn,
        Some("needs no attach"),
        None,
    )?;
    ensure!(
        status.volumes.len() == 3,
        "the disk, the share and the NFS volume: {:?}",
        status.volumes
    );
    check_pod(&status, &key("db-0"), true)?;
    for pod in web.iter().map(String::as_str).chain([files, exports]) {
        check_pod(&status, &key(pod), false)?;
    }
    let detail = move_volumes_detail(&status);
    ensure!(
        detail == "1 pods moved with their volumes",
        "the move-volumes step counts the disk pod alone: {detail:?}"
    );
    ensure!(
        drained
            .stdout
            .contains("5 evicted, 0 deleted with grace period 0, 1 volumes moved"),
        "the summary counts 5 pods evicted and the disk moved: {}",
        drained.stdout
    );

    // The share and NFS pods left with the pods without volumes, in the parallel lane.
    let deleting = |pod: &str| {
        timeline
            .first_after(since, &What::pod_deleting(pod, node_a))
            .with_context(|| format!("{pod} never got a deletion timestamp on {node_a}"))
    };
    let mut parallel = Vec::new();
    for pod in web.iter().map(String::as_str).chain([files, exports]) {
        parallel.push((pod, deleting(pod)?));
    }
    let first = parallel.iter().map(|(_, at)| *at).min().unwrap_or_default();
    let last = parallel.iter().map(|(_, at)| *at).max().unwrap_or_default();
    ensure!(
        last - first < PARALLEL_WINDOW,
        "the web, files and nfs pods were evicted over {:?}, not together: {parallel:?}",
        last - first
    );
    // Both lanes start together (drain-lanes-together): which eviction lands first is a matter
    // of milliseconds, so the check is that the parallel lane did not wait for the disk pod,
    // whose volume then takes seconds to move.
    let disk_pod = deleting("db-0")?;
    ensure!(
        first < disk_pod + PARALLEL_WINDOW,
        "the parallel lane ({first:?}) waited for the disk pod ({disk_pod:?})"
    );
    for pv in [share, nfs] {
        let attachments = attachments_of(&kube, pv).await?;
        ensure!(
            attachments.is_empty(),
            "{pv} never gets a VolumeAttachment: {attachments:?}"
        );
    }
    for app in ["web", "files", "nfs", "db"] {
        let count = if app == "web" { 2 } else { 1 };
        let pods = workloads
            .wait_app_running(app, count, Some(node_b), WAIT)
            .await?;
        ensure!(
            pods.iter().all(|p| node_of(p) == Some(node_b.as_str())),
            "{app} runs on {node_b}"
        );
    }
    Ok(())
}
