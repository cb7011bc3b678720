//! The drain's main scenario, end to end. Two machines of a fresh pool are made with the CLI (the
//! pool's `spec.drain` is recorded on their Nodes); on the first, A, run a 3-replica Deployment
//! `web` without volumes, a DaemonSet `agent`, a 3-replica StatefulSet `db` and a 1-replica
//! StatefulSet `vip` of a higher PriorityClass, each StatefulSet pod owning one `ReadWriteOnce`
//! Azure Disk CSI volume (a managed disk in the sandbox). The second machine, B, is cordoned
//! until everything runs on A. Then `nodewright machine drain A --wait`, and the timeline must
//! show, as the runbook says:
//!
//! - the `web` pods evicted together (deletion timestamps within 2 s), and with them the first
//!   StatefulSet pod (both lanes at once);
//! - the StatefulSet pods evicted one at a time, highest priority first, then by name: `vip-0`,
//!   `db-0`, `db-1`, `db-2`; each pod's old VolumeAttachment on A gone and its disk no longer
//!   `managedBy` A's VM, then its volume attached on B and the pod Running there, before the next
//!   one gets its deletion timestamp (never attached on two nodes at once);
//! - the DaemonSet pod on A untouched (same UID, never deleted); every other pod Running on B.
//!
//! The drain's status (`machine status A --output json`) shows every volume `reattached` on B,
//! every pod `gone` after one eviction, the pool's drain settings; the CLI printed each pod and
//! volume as it moved. A stays cordoned and tainted until `machine uncordon`. Then `machine delete
//! A --wait` removes A's VM, NIC, OS disk and Node while the data disks stay, attached to B.
//!
//! It prints the drain's wall time against the ideal — the sum of the serial volume moves (each
//! eviction → attached and Running on B) plus the parallel evictions (first eviction → last
//! replacement Running) — for the team's note.
//!
//! The items marked `pub(super)` are shared with [`super::crash`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use nodewright_model::drain::{DrainMode, PodState, TAINT_DRAINING, VolumeState};
use nodewright_model::machine::Outcome;
use nodewright_tests::Stack;
use nodewright_tests::documents::{DrainLookup, MachineRunDocument, shown};
use nodewright_tests::machines::{Sandbox, node};

use super::common::{DrainScene, cli, create_machines, drain_pool_file};
use nodewright_tests::timeline::{Timeline, What};
use nodewright_tests::workloads::{
    Placement, Volume, Workload, Workloads, attachments_of, disk_managed_by, ensure_priority_class,
    is_attached, node_of, set_unschedulable, wait_attached,
};

/// How long any one awaited change may take.
pub(super) const WAIT: Duration = Duration::from_secs(90);
/// How often the disks' `managedBy` is sampled through ARM.
const SAMPLE: Duration = Duration::from_millis(100);
/// The longest spread of the parallel evictions' deletion timestamps.
pub(super) const PARALLEL_WINDOW: Duration = Duration::from_secs(2);
/// Replicas of `web` and `db`.
pub(super) const REPLICAS: usize = 3;
/// The value of `vip`'s PriorityClass (`db` has none: priority 0).
const HIGH_PRIORITY: i32 = 1000;

/// The pool's drain settings: a quick PDB retry, timeouts long enough that nothing turns to
/// force mode.
const DRAIN_SETTINGS: [(&str, &str); 5] = [
    ("timeout", "10m"),
    ("pdbRetryInterval", "2s"),
    ("volumeDetachTimeout", "1m"),
    ("volumeAttachTimeout", "1m"),
    ("forceAfterUnhealthy", "10m"),
];

/// A pool file with [`DRAIN_SETTINGS`] as `spec.drain`.
pub(super) fn write_drain_pool_file(stack: &Stack, pool: &str) -> Result<PathBuf> {
    drain_pool_file(stack, pool, &DRAIN_SETTINGS)
}

/// `machine status NAME --output json`, typed by the run it shows (a drain, a delete with its
/// drain): a field the run's status requires that is missing or renamed fails here.
pub(super) async fn machine_document(
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

/// What runs on node A before the drain.
pub(super) struct OnA {
    /// The StatefulSets' volumes, in the order the drain must move their pods.
    pub volumes: Vec<Volume>,
    /// The pods the drain must move (all but the DaemonSet's): name → UID.
    pub moving: BTreeMap<String, String>,
    /// The `web` pods' names.
    pub web: Vec<String>,
    /// The DaemonSet pod on A: name and UID.
    pub agent: (String, String),
}

impl OnA {
    /// The volume of the pod `pod`, if it has one.
    pub fn volume_of(&self, pod: &str) -> Option<&Volume> {
        self.volumes.iter().find(|v| v.pod == pod)
    }
}

/// Creates `web`, `agent`, `db` and (with `vip`) `vip` on the pool (only A is schedulable), and
/// waits until every pod runs on A with its volume attached there. Starts sampling the disks.
pub(super) async fn place_on_a(
    workloads: &mut Workloads,
    timeline: &mut Timeline,
    pool: &str,
    node_a: &str,
    vip: bool,
) -> Result<OnA> {
    let kube = workloads.client().clone();
    let placement = Placement::pool(pool);
    let replicas = i32::try_from(REPLICAS)?;
    timeline.mark("creating the workloads");
    workloads
        .deployment(&Workload::new("web", replicas, placement.clone()))
        .await?;
    workloads
        .daemon_set(&Workload::new("agent", 0, placement.clone()))
        .await?;
    let mut volumes = Vec::new();
    if vip {
        let class = ensure_priority_class(&kube, HIGH_PRIORITY).await?;
        volumes.extend(
            workloads
                .stateful_set(&Workload::new("vip", 1, placement.clone()).priority_class(&class))
                .await?,
        );
    }
    volumes.extend(
        workloads
            .stateful_set(&Workload::new("db", replicas, placement.clone()))
            .await?,
    );
    let disks: Vec<String> = volumes.iter().map(|v| v.name.clone()).collect();
    timeline.sample_disks(workloads.arm(), &disks, SAMPLE);

    let web = workloads
        .wait_app_running("web", REPLICAS, Some(node_a), WAIT)
        .await?;
    let db = workloads
        .wait_app_running("db", REPLICAS, Some(node_a), WAIT)
        .await?;
    let priority = |pod: &k8s_openapi::api::core::v1::Pod| {
        pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
    };
    ensure!(
        db.iter().all(|pod| priority(pod) < HIGH_PRIORITY),
        "the db pods must have a lower priority than vip"
    );
    if vip {
        let vips = workloads
            .wait_app_running("vip", 1, Some(node_a), WAIT)
            .await?;
        ensure!(
            vips.iter().all(|pod| priority(pod) == HIGH_PRIORITY),
            "vip-0 did not get priority {HIGH_PRIORITY}"
        );
    }
    let agents = workloads.wait_app_running("agent", 2, None, WAIT).await?;
    for volume in &volumes {
        wait_attached(&kube, &volume.name, node_a, WAIT).await?;
    }
    timeline.mark(&format!("everything Running on {node_a}, volumes attached"));

    let agent = agents
        .iter()
        .find(|pod| node_of(pod) == Some(node_a))
        .and_then(|pod| Some((pod.metadata.name.clone()?, pod.metadata.uid.clone()?)))
        .with_context(|| format!("no agent pod on {node_a}"))?;
    let moving: BTreeMap<String, String> = workloads
        .pods_on(node_a)
        .await?
        .into_iter()
        .filter_map(|pod| Some((pod.metadata.name?, pod.metadata.uid?)))
        .filter(|(name, _)| *name != agent.0)
        .collect();
    let expected = 2 * REPLICAS + usize::from(vip);
    ensure!(
        moving.len() == expected,
        "{expected} pods to move on {node_a}, found {moving:?}"
    );
    Ok(OnA {
        volumes,
        moving,
        web: web
            .into_iter()
            .filter_map(|pod| pod.metadata.name)
            .collect(),
        agent,
    })
}

/// One volume pod's move, as the timeline saw it.
pub(super) struct Move {
    /// The pod.
    pub pod: String,
    /// Its deletion timestamp on A.
    pub evicted: Duration,
    /// Its old VolumeAttachment gone.
    pub old_gone: Duration,
    /// The first disk sample not `managedBy` A.
    pub released: Duration,
    /// Its volume attached on B.
    pub attached: Duration,
    /// The new pod Running on B.
    pub running: Duration,
}

impl Move {
    /// Eviction → attached and Running on B.
    pub fn took(&self) -> Duration {
        self.attached.max(self.running) - self.evicted
    }

    /// The phases in milliseconds, for the log.
    pub fn describe(&self) -> String {
        let ms = |to: Duration| (to.as_secs_f64() - self.evicted.as_secs_f64()) * 1000.0;
        format!(
            "{}: evicted -> old VA gone {:.0}ms, disk released (sampled) {:.0}ms, attached on B {:.0}ms, Running on B {:.0}ms; move {:.0}ms",
            self.pod,
            ms(self.old_gone),
            ms(self.released),
            ms(self.attached),
            ms(self.running),
            self.took().as_secs_f64() * 1000.0
        )
    }
}

/// When `what` first happened at or after `after`, or an error showing the timeline.
pub(super) fn seen_after(timeline: &Timeline, after: Duration, what: &What) -> Result<Duration> {
    timeline
        .first_after(after, what)
        .with_context(|| format!("never saw: {what}\n{}", timeline.render()))
}

/// Checks the serial lane: each volume pod of `on_a` (in order) left A after the previous one's
/// volume was detached from A (VolumeAttachment gone, disk released in Azure) and attached on
/// `node_b` with the pod Running there; the last one before `end`. Returns each move.
pub(super) fn check_serial_moves(
    timeline: &Timeline,
    on_a: &OnA,
    node_a: &str,
    node_b: &str,
    since: Duration,
    end: Duration,
) -> Result<Vec<Move>> {
    let mut moves = Vec::new();
    for (index, volume) in on_a.volumes.iter().enumerate() {
        let (pod, pv) = (volume.pod.as_str(), volume.name.as_str());
        let evicted = seen_after(timeline, since, &What::pod_deleting(pod, node_a))?;
        let next = match on_a.volumes.get(index + 1) {
            Some(next) => seen_after(timeline, since, &What::pod_deleting(&next.pod, node_a))?,
            None => end,
        };
        let old_gone = seen_after(timeline, evicted, &What::attachment_gone(pv, node_a))?;
        let created = seen_after(timeline, evicted, &What::attachment_created(pv, node_b))?;
        let attached = seen_after(timeline, evicted, &What::attached(pv, node_b))?;
        let running = seen_after(timeline, evicted, &What::pod_running(pod, node_b))?;
        let released = timeline
            .disk_history(pv)
            .into_iter()
            .find(|(at, vm)| *at >= evicted && vm.as_deref() != Some(node_a))
            .map(|(at, _)| at)
            .with_context(|| {
                format!(
                    "disk {pv} never seen released from {node_a}\n{}",
                    timeline.render()
                )
            })?;
        ensure!(
            old_gone <= created && created <= attached,
            "{pv}: the VolumeAttachment on {node_b} was created ({created:?}) or attached ({attached:?}) before the one on {node_a} was gone ({old_gone:?})\n{}",
            timeline.render()
        );
        ensure!(
            old_gone < next && released < next && attached < next && running < next,
            "{pod} was not fully moved (old VA gone {old_gone:?}, disk released {released:?}, attached on {node_b} {attached:?}, Running there {running:?}) before the next volume pod was evicted ({next:?})\n{}",
            timeline.render()
        );
        ensure!(
            timeline.most_attached_at_once(pv) <= 1,
            "{pv} was attached on two nodes at once\n{}",
            timeline.render()
        );
        moves.push(Move {
            pod: pod.to_owned(),
            evicted,
            old_gone,
            released,
            attached,
            running,
        });
    }
    Ok(moves)
}

/// Checks the parallel lane: the `web` pods' deletion timestamps on A and the first volume
/// pod's lie within [`PARALLEL_WINDOW`] (both lanes at once) and every web pod went. Returns the
/// first eviction and the last replacement Running on `node_b`.
pub(super) fn check_parallel_evictions(
    timeline: &Timeline,
    on_a: &OnA,
    node_a: &str,
    node_b: &str,
    since: Duration,
) -> Result<(Duration, Duration)> {
    let mut deleted = Vec::new();
    let mut gone = Vec::new();
    for pod in &on_a.web {
        deleted.push(seen_after(
            timeline,
            since,
            &What::pod_deleting(pod, node_a),
        )?);
        gone.push(seen_after(timeline, since, &What::pod_gone(pod, node_a))?);
    }
    let first = deleted.iter().min().copied().unwrap_or_default();
    let last = deleted.iter().max().copied().unwrap_or_default();
    ensure!(
        last - first < PARALLEL_WINDOW,
        "the web pods were evicted over {:?}, not in parallel\n{}",
        last - first,
        timeline.render()
    );
    // Both lanes at once: the first volume pod leaves with the web pods, not after them.
    if let Some(first_volume) = on_a.volumes.first() {
        let evicted = seen_after(
            timeline,
            since,
            &What::pod_deleting(&first_volume.pod, node_a),
        )?;
        ensure!(
            evicted.max(last) - evicted.min(first) < PARALLEL_WINDOW,
            "{} was evicted at {evicted:?}, not with the web pods ({first:?}..{last:?}): the lanes did not run at once\n{}",
            first_volume.pod,
            timeline.render()
        );
    }
    let replacements: Vec<Duration> = timeline
        .events()
        .into_iter()
        .filter(|event| {
            event.at >= first
                && matches!(&event.what, What::PodRunning { pod, node }
                    if node == node_b && pod.starts_with("web-") && !on_a.web.contains(pod))
        })
        .map(|event| event.at)
        .collect();
    ensure!(
        replacements.len() == on_a.web.len(),
        "{} web replacements Running on {node_b}, expected {}\n{}",
        replacements.len(),
        on_a.web.len(),
        timeline.render()
    );
    Ok((first, replacements.into_iter().max().unwrap_or(first)))
}

/// Checks that every Deployment and StatefulSet pod runs on `node_b` now, the StatefulSets'
/// under their old names with new UIDs.
pub(super) async fn check_all_moved(workloads: &Workloads, on_a: &OnA, node_b: &str) -> Result<()> {
    let mut expected = vec![("web", REPLICAS), ("db", REPLICAS)];
    if on_a.volume_of("vip-0").is_some() {
        expected.push(("vip", 1));
    }
    for (app, count) in expected {
        let pods = workloads
            .wait_app_running(app, count, Some(node_b), WAIT)
            .await?;
        for pod in pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            ensure!(
                on_a.moving.get(&name) != Some(&uid),
                "pod {name} ({uid}) on {node_b} is the very pod that was on A"
            );
        }
    }
    Ok(())
}

/// Checks `machine status --output json` after a `purpose` drain (`maintenance`: the drain is
/// the latest run; `deletion`: the delete is, with its drain): completed, graceful, every moved
/// pod `gone` after exactly one eviction, every volume `reattached` on `node_b`, the DaemonSet
/// pod `skipped`, no PDB blocking, no warning, the pool's drain settings.
pub(super) fn check_drain_document(
    document: &MachineRunDocument,
    purpose: &str,
    cluster: &str,
    namespace: &str,
    on_a: &OnA,
    node_a: &str,
    node_b: &str,
) -> Result<()> {
    let latest = if purpose == "deletion" {
        "delete"
    } else {
        "drain"
    };
    ensure!(
        document.workflow_id() == format!("{latest}/{cluster}/{node_a}"),
        "the latest run of {node_a} is its {latest}: {document}"
    );
    ensure!(document.run_status() == "completed", "{document}");
    match document {
        MachineRunDocument::Machine(delete) => ensure!(
            latest == "delete" && delete.status.outcome == Outcome::Succeeded,
            "{document}"
        ),
        MachineRunDocument::Drain(_) => ensure!(latest == "drain", "{document}"),
    }
    let status = document
        .drain()
        .with_context(|| format!("no drain status in {document}"))?;
    ensure!(status.run.outcome == Outcome::Succeeded, "{document}");
    ensure!(
        status.run.facts.get("purpose").map(String::as_str) == Some(purpose),
        "a {purpose} drain: {document}"
    );
    ensure!(status.mode == DrainMode::Graceful, "{document}");
    ensure!(status.warnings.is_empty(), "warnings: {document}");
    ensure!(status.pdbs_blocking.is_empty(), "PDBs blocking: {document}");
    let settings = status
        .run
        .facts
        .get("drainSettings")
        .with_context(|| format!("no drainSettings fact in {document}"))?;
    ensure!(
        settings.contains("PDB retry 2s")
            && settings.contains("from the pool, VM tag nodewright.io-drain"),
        "the pool's drain settings, from the VM's tag: {settings}"
    );
    for name in on_a.moving.keys() {
        let key = format!("{namespace}/{name}");
        let pod = status
            .pod(&key)
            .with_context(|| format!("{key} missing from {document}"))?;
        ensure!(
            pod.state == PodState::Gone && pod.evictions == 1,
            "{key}: gone after one eviction: {}",
            shown(pod)
        );
        ensure!(
            pod.with_volumes == on_a.volume_of(name).is_some(),
            "{key}: withVolumes: {}",
            shown(pod)
        );
    }
    let agent = format!("{namespace}/{}", on_a.agent.0);
    let agent = status
        .pod(&agent)
        .with_context(|| format!("{agent} missing from {document}"))?;
    ensure!(
        agent.state == PodState::Skipped,
        "the DaemonSet pod: {}",
        shown(agent)
    );
    ensure!(
        status.volumes.len() == on_a.volumes.len(),
        "{} volumes in the status: {document}",
        on_a.volumes.len()
    );
    for volume in &on_a.volumes {
        let seen = status
            .volume(&volume.name)
            .with_context(|| format!("{} missing from {document}", volume.name))?;
        ensure!(
            seen.state == VolumeState::Reattached
                && seen.new_node.as_deref() == Some(node_b)
                && seen.pod == format!("{namespace}/{}", volume.pod)
                && seen
                    .disk_id
                    .as_deref()
                    .is_some_and(|id| id.eq_ignore_ascii_case(&volume.disk_id)),
            "{}: reattached on {node_b}: {}",
            volume.name,
            shown(seen)
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_evicts_plain_pods_together_then_moves_volume_pods_one_at_a_time_by_priority()
-> Result<()> {
    let mut scene = DrainScene::<2>::start("drain-stateful", "ds", &DRAIN_SETTINGS).await?;
    let result = scenario(&mut scene).await;
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
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    let started = Instant::now();
    create_machines(stack, task_queue, pool_file, machines).await?;
    eprintln!(
        "machines {node_a} and {node_b} Ready after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    set_unschedulable(&kube, node_b, true).await?;
    let mut timeline =
        Timeline::start(&kube, workloads.namespace(), &workloads.volume_prefix()).await?;
    let result =
        drain_and_delete(stack, task_queue, &mut timeline, pool, machines, workloads).await;
    eprintln!("{}", timeline.render());
    result
}

async fn drain_and_delete(
    stack: &Stack,
    task_queue: &str,
    timeline: &mut Timeline,
    pool: &str,
    machines: &[String; 2],
    workloads: &mut Workloads,
) -> Result<()> {
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    let namespace = workloads.namespace().to_owned();
    let on_a = place_on_a(workloads, timeline, pool, node_a, true).await?;
    set_unschedulable(&kube, node_b, false).await?;
    timeline.mark(&format!("uncordoned {node_b}"));

    // The drain. NODEWRIGHT_E2E_DRAIN_LATENCY=realistic measures it with Azure's latencies (the
    // sandbox is shared: run this test alone then); the machines were made on the short profile.
    let latency = std::env::var("NODEWRIGHT_E2E_DRAIN_LATENCY").ok();
    let sandbox = Sandbox::new(stack)?;
    if let Some(profile) = &latency {
        sandbox.set_latency(profile).await?;
    }
    let since = timeline.mark(&format!("nodewright machine drain {node_a} --wait"));
    let clock = Instant::now();
    let drained = cli(stack, task_queue, &["machine", "drain", node_a, "--wait"]).await;
    let wall = clock.elapsed();
    if latency.is_some() {
        sandbox.set_latency("short").await?;
    }
    let drained = drained?;
    let end = timeline.mark("the drain CLI returned");
    eprintln!(
        "machine drain stdout:\n{}\nmachine drain stderr:\n{}",
        drained.stdout, drained.stderr
    );
    drained.expect_code(0)?;

    // The order of things.
    let (parallel_from, parallel_to) =
        check_parallel_evictions(timeline, &on_a, node_a, node_b, since)?;
    let moves = check_serial_moves(timeline, &on_a, node_a, node_b, since, end)?;
    let order: Vec<&str> = on_a.volumes.iter().map(|v| v.pod.as_str()).collect();
    ensure!(
        order == ["vip-0", "db-0", "db-1", "db-2"],
        "the expected order is by priority, then name: {order:?}"
    );

    // The DaemonSet pod stayed; everything else runs on B.
    let (agent, agent_uid) = &on_a.agent;
    let left: Vec<(Option<String>, Option<String>, bool)> = workloads
        .pods_on(node_a)
        .await?
        .into_iter()
        .map(|pod| {
            (
                pod.metadata.name,
                pod.metadata.uid,
                pod.metadata.deletion_timestamp.is_some(),
            )
        })
        .collect();
    ensure!(
        left == [(Some(agent.clone()), Some(agent_uid.clone()), false)],
        "only the DaemonSet pod {agent} ({agent_uid}) is left on {node_a}, untouched: {left:?}"
    );
    ensure!(
        timeline
            .find_after(
                Duration::ZERO,
                |what| matches!(what, What::PodDeleting { pod, .. } if pod == agent)
            )
            .is_none(),
        "the DaemonSet pod was deleted\n{}",
        timeline.render()
    );
    check_all_moved(workloads, &on_a, node_b).await?;

    // What the drain says about itself.
    let status = machine_document(stack, task_queue, node_a).await?;
    check_drain_document(
        &status,
        "maintenance",
        &stack.cluster,
        &namespace,
        &on_a,
        node_a,
        node_b,
    )?;
    let moved = on_a.volumes.len();
    let summary = format!(
        "{} evicted, 0 deleted with grace period 0, {moved} volumes moved",
        on_a.moving.len()
    );
    ensure!(
        drained.stdout.contains(&format!("{node_a} drained")) && drained.stdout.contains(&summary),
        "the drain's summary ({summary:?}) in stdout: {}",
        drained.stdout
    );
    for volume in &on_a.volumes {
        let result_line = format!("{} → {node_b}", volume.name);
        let progress_line = format!("↳ {} attached on {node_b}", volume.name);
        ensure!(
            drained.stdout.contains(&result_line) && drained.stderr.contains(&progress_line),
            "{result_line:?} in stdout and {progress_line:?} in stderr:\n{}\n{}",
            drained.stdout,
            drained.stderr
        );
    }
    for pod in on_a.moving.keys() {
        let line = format!("↳ {namespace}/{pod} left the node");
        ensure!(
            drained.stderr.contains(&line),
            "{line:?} in stderr: {}",
            drained.stderr
        );
    }
    ensure!(
        drained.stderr.contains("✓ move-volumes"),
        "the move-volumes step line in stderr: {}",
        drained.stderr
    );

    // A maintenance drain leaves A cordoned and tainted; uncordon undoes it.
    let cordoned = |node: &k8s_openapi::api::core::v1::Node| {
        let spec = node.spec.clone().unwrap_or_default();
        let tainted = spec
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == TAINT_DRAINING && t.effect == "NoSchedule");
        (spec.unschedulable == Some(true), tainted)
    };
    let a = node(&kube, node_a)
        .await?
        .with_context(|| format!("Node {node_a} is gone after a maintenance drain"))?;
    ensure!(
        cordoned(&a) == (true, true),
        "{node_a} stays cordoned and tainted {TAINT_DRAINING}: {:?}",
        a.spec
    );
    cli(stack, task_queue, &["machine", "uncordon", node_a])
        .await?
        .expect_code(0)?;
    let a = node(&kube, node_a)
        .await?
        .with_context(|| format!("Node {node_a} is gone"))?;
    ensure!(
        cordoned(&a) == (false, false),
        "uncordon makes {node_a} schedulable and removes the taint: {:?}",
        a.spec
    );

    report_figures(wall, &moves, parallel_from, parallel_to);

    // Deleting A (its drain finds only the DaemonSet pod) removes its VM, NIC, OS disk and
    // Node; the data disks stay, attached to B.
    let deleted = cli(stack, task_queue, &["machine", "delete", node_a, "--wait"]).await?;
    deleted.expect_code(0)?;
    ensure!(
        deleted
            .stdout
            .contains(&format!("machine {node_a} is gone")),
        "delete's stdout: {}",
        deleted.stdout
    );
    let left = Sandbox::new(stack)?.machine_resources(node_a).await?;
    ensure!(left.is_empty(), "{node_a} leaked in Azure: {left:#?}");
    ensure!(
        node(&kube, node_a).await?.is_none(),
        "{node_a} leaked its Node"
    );
    for volume in &on_a.volumes {
        let managed_by = disk_managed_by(workloads.arm(), &volume.name)
            .await
            .with_context(|| format!("data disk {} did not survive", volume.name))?;
        ensure!(
            managed_by.as_deref() == Some(node_b.as_str()),
            "data disk {} managedBy {managed_by:?}, expected {node_b}",
            volume.name
        );
        let attachments = attachments_of(&kube, &volume.name).await?;
        ensure!(
            attachments.len() == 1
                && attachments[0].spec.node_name == *node_b
                && is_attached(&attachments[0]),
            "{}: one attached VolumeAttachment, on {node_b}: {attachments:?}",
            volume.name
        );
    }
    Ok(())
}

/// Prints the drain's wall time against the ideal: the serial moves back to back plus the
/// parallel evictions.
fn report_figures(wall: Duration, moves: &[Move], parallel_from: Duration, parallel_to: Duration) {
    for step in moves {
        eprintln!("  {}", step.describe());
    }
    let serial: Duration = moves.iter().map(Move::took).sum();
    let parallel = parallel_to - parallel_from;
    let ideal = serial + parallel;
    let span = moves
        .iter()
        .map(|m| m.attached.max(m.running))
        .max()
        .unwrap_or(parallel_to)
        .max(parallel_to)
        - parallel_from;
    let ratio = |d: Duration| d.as_secs_f64() / ideal.as_secs_f64().max(f64::EPSILON);
    eprintln!(
        "DRAIN FIGURES: wall {:.2}s (CLI start to return); first eviction -> last move done {:.2}s; ideal {:.2}s = serial volume moves {:.2}s ({} moves) + parallel evictions {:.2}s; wall/ideal {:.2}, span/ideal {:.2}",
        wall.as_secs_f64(),
        span.as_secs_f64(),
        ideal.as_secs_f64(),
        serial.as_secs_f64(),
        moves.len(),
        parallel.as_secs_f64(),
        ratio(wall),
        ratio(span),
    );
}
