//! What a drain relies on, proven on the real local stack without nodewright draining anything:
//! two machines made with the CLI, a StatefulSet whose pods each own a `ReadWriteOnce` CSI volume
//! (a managed disk in the sandbox), a Deployment and a DaemonSet, all on the first machine. With
//! that machine cordoned, Deployment pods evicted through the eviction API come back on the second
//! one, and each StatefulSet pod removed in turn takes its volume along: the old VolumeAttachment
//! goes and the disk is detached in Azure, then the volume is attached on the second machine and
//! the pod runs there. A PodDisruptionBudget with `minAvailable` = replicas refuses evictions;
//! relaxed to replicas - 1 it lets the first through. Every phase is timed and printed.
//!
//! Only the first StatefulSet pod must be evicted; for the others one eviction is tried, and when
//! the budget refuses it (printed with the budget's status) the pod is deleted instead (as
//! `kubectl delete pod`, which no budget stops). After an eviction the budget's
//! `status.disruptedPods` holds the pod's name for up to 2 minutes unless the disruption
//! controller syncs while no pod of that name exists or the old one is terminating; kwok deletes a
//! pod ~10 ms after its deletionTimestamp and the StatefulSet recreates the name at once, so the
//! controller sometimes counts the new pod as "being disrupted" and refuses the next eviction
//! (429) until the entry expires, 2 minutes after the eviction.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{CliResult, KillableWorker, write_pool_file};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::timeline::{Timeline, What};
use nodewright_tests::workloads::{
    Eviction, Placement, Volume, Workload, Workloads, attachments_of, disk_managed_by,
    ensure_priority_class, is_attached, node_of, set_unschedulable,
};

/// How long any one awaited change may take (the attach-detach controller's force detach of a
/// volume it believes mounted would take 6 minutes: this fails long before).
const WAIT: Duration = Duration::from_secs(60);
/// How often the disks' `managedBy` is sampled through ARM.
const SAMPLE: Duration = Duration::from_millis(50);
const REPLICAS: usize = 3;
/// How far apart two watch streams (Pods, VolumeAttachments) may deliver causally ordered
/// events: the timeline stamps each event when its stream delivers it, so a pod's deletion can
/// reach us a moment after the VolumeAttachment deletion that the pod's deletion caused.
const WATCH_SKEW: Duration = Duration::from_millis(250);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_volume_follows_each_pod_to_another_machine_one_pod_at_a_time() -> Result<()>
{
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("volumes");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("v{}", unique_suffix());
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machines = [format!("{pool}-b2c4d"), format!("{pool}-f5g6h")];
    let mut workloads = Workloads::create(&stack, "vol").await?;

    let result = scenario(
        &stack,
        &task_queue,
        &pool,
        &pool_file,
        &machines,
        &mut workloads,
    )
    .await
    .with_context(|| format!("worker log:\n{}", worker.log_tail()));

    // Pods and volumes first (the attachments must go while the Nodes exist), then the machines.
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
    machines: &[String; 2],
    workloads: &mut Workloads,
) -> Result<()> {
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();

    // Two machines, in parallel, with the CLI; the second is cordoned so everything starts on the
    // first.
    let started = std::time::Instant::now();
    crate::drain::common::create_machines(stack, task_queue, pool_file, machines).await?;
    println!(
        "machines {node_a} and {node_b} Ready after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    set_unschedulable(&kube, node_b, true).await?;

    let mut timeline =
        Timeline::start(&kube, workloads.namespace(), &workloads.volume_prefix()).await?;
    let result = moves(&mut timeline, pool, node_a, node_b, workloads).await;
    println!("{}", timeline.render());
    result
}

async fn moves(
    timeline: &mut Timeline,
    pool: &str,
    node_a: &str,
    node_b: &str,
    workloads: &mut Workloads,
) -> Result<()> {
    let kube = workloads.client().clone();
    let placement = Placement::pool(pool);
    let replicas = i32::try_from(REPLICAS)?;

    // Everything on node A.
    let created = timeline.mark("creating the workloads");
    workloads
        .deployment(&Workload::new("web", replicas, placement.clone()))
        .await?;
    workloads
        .daemon_set(&Workload::new("agent", 0, placement.clone()))
        .await?;
    let priority = ensure_priority_class(&kube, 1000).await?;
    let volumes = workloads
        .stateful_set(&Workload::new("db", replicas, placement.clone()).priority_class(&priority))
        .await?;
    let disks: Vec<String> = volumes.iter().map(|v| v.name.clone()).collect();
    timeline.sample_disks(workloads.arm(), &disks, SAMPLE);
    let set_created = timeline.mark("StatefulSet created (disks, volumes and claims bound)");
    workloads
        .pod_disruption_budget("db", "db", replicas)
        .await?;
    let db = workloads
        .wait_app_running("db", REPLICAS, Some(node_a), WAIT)
        .await?;
    let all_running = timeline.now();
    ensure!(
        db.iter()
            .all(|pod| pod.spec.as_ref().and_then(|s| s.priority) == Some(1000)),
        "the db pods did not get priority 1000 from {priority}"
    );
    workloads
        .wait_app_running("web", REPLICAS, Some(node_a), WAIT)
        .await?;
    let agents = workloads.wait_app_running("agent", 2, None, WAIT).await?;
    let mut all_attached = Duration::ZERO;
    for volume in &volumes {
        let attached = timeline
            .wait_for(&What::attached(&volume.name, node_a), WAIT)
            .await?;
        all_attached = all_attached.max(attached);
        let on_a = attachments_of(&kube, &volume.name).await?;
        ensure!(
            on_a.len() == 1 && on_a[0].spec.node_name == node_a && is_attached(&on_a[0]),
            "{}: one attached VolumeAttachment on {node_a}, got {on_a:?}",
            volume.name
        );
        let managed_by = disk_managed_by(workloads.arm(), &volume.name).await?;
        ensure!(
            managed_by.as_deref() == Some(node_a),
            "disk {} managedBy {managed_by:?}, expected {node_a}",
            volume.name
        );
    }
    println!(
        "start: disks+volumes+claims bound {:.2}s; StatefulSet created -> {REPLICAS} pods Running {:.2}s, -> all attached {:.2}s",
        (set_created - created).as_secs_f64(),
        (all_running - set_created).as_secs_f64(),
        (all_attached - set_created).as_secs_f64(),
    );

    // The budget (minAvailable = replicas) refuses an eviction.
    match workloads.evict("db-2").await? {
        Eviction::Blocked(message) => println!("eviction of db-2 refused (429): {message}"),
        other => bail!("evicting db-2 past its PodDisruptionBudget: {other:?}, expected 429"),
    }

    // Drain by hand: B schedulable, A cordoned.
    set_unschedulable(&kube, node_b, false).await?;
    set_unschedulable(&kube, node_a, true).await?;
    timeline.mark(&format!("cordoned {node_a}, uncordoned {node_b}"));

    // Deployment pods: evicted in parallel, back on B.
    let web = workloads.pods_on(node_a).await?;
    let web: Vec<String> = web
        .iter()
        .filter_map(|pod| pod.metadata.name.clone())
        .filter(|name| name.starts_with("web-"))
        .collect();
    let evicting = timeline.mark("evicting the web pods");
    let outcomes =
        futures::future::try_join_all(web.iter().map(|pod| workloads.evict(pod))).await?;
    ensure!(
        outcomes.iter().all(|o| *o == Eviction::Evicted),
        "web evictions: {outcomes:?}"
    );
    workloads
        .wait_app_running("web", REPLICAS, Some(node_b), WAIT)
        .await?;
    println!(
        "web: {REPLICAS} pods evicted in parallel -> all Running on {node_b} in {:.2}s",
        (timeline.now() - evicting).as_secs_f64()
    );

    // StatefulSet pods: one at a time, each waiting for its volume to follow; the first through
    // a budget that allows one disruption, the others evicted if it allows, else deleted.
    let relaxed = timeline.mark("PodDisruptionBudget db relaxed to minAvailable = replicas - 1");
    workloads.set_min_available("db", replicas - 1).await?;
    println!(
        "PodDisruptionBudget relaxed and observed in {:.0}ms",
        (timeline.now() - relaxed).as_secs_f64() * 1000.0
    );
    for (index, volume) in volumes.iter().rev().enumerate() {
        let how = if index == 0 {
            Removal::Evict
        } else {
            Removal::EvictOrDelete
        };
        let phases = move_pod(timeline, workloads, volume, how, node_a, node_b).await?;
        println!("{}", phases.describe(&volume.pod));
    }

    // The end: every db pod on B with its volume, the DaemonSet pods untouched.
    workloads
        .wait_app_running("db", REPLICAS, Some(node_b), WAIT)
        .await?;
    for volume in &volumes {
        let attachments = attachments_of(&kube, &volume.name).await?;
        ensure!(
            attachments.len() == 1 && attachments[0].spec.node_name == node_b,
            "{}: one VolumeAttachment, on {node_b}: {attachments:?}",
            volume.name
        );
        ensure!(
            timeline.most_attached_at_once(&volume.name) == 1,
            "{} was attached on two nodes at once",
            volume.name
        );
    }
    let agents_now = workloads.wait_app_running("agent", 2, None, WAIT).await?;
    let uids = |pods: &[k8s_openapi::api::core::v1::Pod]| {
        pods.iter()
            .map(|p| (p.metadata.uid.clone(), node_of(p).map(str::to_owned)))
            .collect::<Vec<_>>()
    };
    ensure!(
        uids(&agents) == uids(&agents_now),
        "the DaemonSet pods changed: {:?} -> {:?}",
        uids(&agents),
        uids(&agents_now)
    );
    Ok(())
}

/// How a StatefulSet pod is made to leave its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Removal {
    /// Through the eviction API, retried while its budget refuses.
    Evict,
    /// Evicted if the first attempt is accepted, else deleted (no budget applies).
    EvictOrDelete,
}

/// When each step of one pod's move happened (times since the timeline started).
struct Phases {
    refused: (Duration, u32),
    deleted: Duration,
    pod_gone: Duration,
    detach_started: Duration,
    disk_released: Duration,
    old_attachment_gone: Duration,
    new_attachment: Duration,
    attached: Duration,
    scheduled: Duration,
    running: Duration,
}

impl Phases {
    fn describe(&self, pod: &str) -> String {
        let ms = |from: Duration, to: Duration| (to.as_secs_f64() - from.as_secs_f64()) * 1000.0;
        let steps = [
            ("removed->gone", ms(self.deleted, self.pod_gone)),
            (
                "gone->VA(A) deleting",
                ms(self.pod_gone, self.detach_started),
            ),
            (
                "VA(A) deleting->disk released (sampled)",
                ms(self.detach_started, self.disk_released),
            ),
            (
                "VA(A) deleting->VA(A) gone",
                ms(self.detach_started, self.old_attachment_gone),
            ),
            (
                "VA(A) gone->VA(B) created",
                ms(self.old_attachment_gone, self.new_attachment),
            ),
            (
                "VA(B) created->attached",
                ms(self.new_attachment, self.attached),
            ),
            ("removed->scheduled(B)", ms(self.deleted, self.scheduled)),
            ("removed->Running(B)", ms(self.deleted, self.running)),
            (
                "removed->attached+Running on B",
                ms(self.deleted, self.attached.max(self.running)),
            ),
        ];
        let steps: Vec<String> = steps
            .iter()
            .map(|(label, ms)| format!("{label} {ms:.0}ms"))
            .collect();
        format!(
            "{pod}: eviction refused {}x for {:.0}ms | {}",
            self.refused.1,
            self.refused.0.as_secs_f64() * 1000.0,
            steps.join(" | ")
        )
    }
}

/// Evicts or deletes the pod of `volume` (on cordoned `from`) and follows its volume to `to`: the
/// old
/// attachment goes and the disk is released before the new attachment is created; never
/// attached on both; the pod runs on `to` with its volume attached there.
async fn move_pod(
    timeline: &Timeline,
    workloads: &Workloads,
    volume: &Volume,
    how: Removal,
    from: &str,
    to: &str,
) -> Result<Phases> {
    let (pod, pv) = (volume.pod.as_str(), volume.name.as_str());
    // Every event of the move comes after this mark; refused evictions change nothing.
    let evicting = timeline.mark(&format!("{how:?} pod {pod}"));
    let refused = match how {
        Removal::Evict => {
            workloads
                .evict_when_allowed(pod, WAIT, Duration::from_millis(100))
                .await?
        }
        Removal::EvictOrDelete => match workloads.evict(pod).await? {
            Eviction::Evicted => (Duration::ZERO, 0),
            refused => {
                println!(
                    "{pod}: eviction refused ({refused:?}); budget: {}; deleting it instead",
                    workloads.budgets_summary().await
                );
                workloads.delete_pod(pod).await?;
                (Duration::ZERO, 1)
            }
        },
    };
    let after = |what: What| async move { timeline.wait_for_after(evicting, &what, WAIT).await };
    let phases = Phases {
        refused,
        deleted: after(What::pod_deleting(pod, from)).await?,
        pod_gone: after(What::pod_gone(pod, from)).await?,
        detach_started: after(What::attachment_deleting(pv, from)).await?,
        disk_released: after(What::disk_managed_by(pv, None)).await?,
        old_attachment_gone: after(What::attachment_gone(pv, from)).await?,
        new_attachment: after(What::attachment_created(pv, to)).await?,
        attached: after(What::attached(pv, to)).await?,
        scheduled: after(What::pod_scheduled(pod, to)).await?,
        running: after(What::pod_running(pod, to)).await?,
    };
    after(What::disk_managed_by(pv, Some(to))).await?;
    // Pod gone -> detach started crosses two watch streams; the rest are one stream's order.
    ensure!(
        phases.pod_gone <= phases.detach_started + WATCH_SKEW
            && phases.detach_started <= phases.old_attachment_gone
            && phases.old_attachment_gone <= phases.new_attachment
            && phases.new_attachment <= phases.attached,
        "{pod}: out of order: gone {:?}, detach started {:?}, old VA gone {:?}, new VA {:?}, attached {:?}\n{}",
        phases.pod_gone,
        phases.detach_started,
        phases.old_attachment_gone,
        phases.new_attachment,
        phases.attached,
        timeline.render()
    );
    // The disk went A -> none -> B in Azure, never A -> B directly. The sampler reads every
    // 50 ms and the detached spell lasted 100-400 ms in every run; should it ever be shorter
    // than a sample, the attacher's `attached: false` on A (written only once the emulator has
    // detached the disk) before the new attachment existed proves the same.
    let history: Vec<Option<String>> = timeline
        .disk_history(pv)
        .into_iter()
        .filter(|(at, _)| *at >= evicting)
        .map(|(_, vm)| vm)
        .collect();
    let detached_first = timeline
        .first_after(evicting, &What::detached(pv, from))
        .is_some_and(|at| at <= phases.new_attachment);
    ensure!(
        history == [None, Some(to.to_owned())]
            || (history == [Some(to.to_owned())] && detached_first),
        "{pv}: managedBy after the eviction went {history:?}, expected detached then {to}\n{}",
        timeline.render()
    );
    ensure!(
        timeline.most_attached_at_once(pv) <= 1,
        "{pv} was attached on two nodes at once\n{}",
        timeline.render()
    );
    Ok(phases)
}

/// Deletes the machines with the CLI, in parallel; reports failures without failing.
async fn delete_machines(stack: &Stack, task_queue: &str, machines: &[String]) {
    let deletes = machines.iter().map(|machine| {
        let (stack, task_queue, machine) = (stack.clone(), task_queue.to_owned(), machine.clone());
        tokio::task::spawn_blocking(move || {
            let result = CliResult::run(
                &stack,
                &task_queue,
                &["machine", "delete", &machine, "--wait"],
            );
            (machine, result)
        })
    });
    for joined in futures::future::join_all(deletes).await {
        match joined {
            Ok((machine, Ok(result))) => {
                if let Err(error) = result.expect_code(0) {
                    eprintln!("cleanup: deleting machine {machine}: {error}");
                }
            }
            Ok((machine, Err(error))) => eprintln!("cleanup: deleting machine {machine}: {error}"),
            Err(error) => eprintln!("cleanup: a machine delete panicked: {error}"),
        }
    }
}
