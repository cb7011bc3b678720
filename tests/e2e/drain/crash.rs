//! The worker dies (SIGKILL) in the middle of a drain and is started again: the drain resumes
//! where it was and evicts no pod twice.
//!
//! Two machines of a fresh pool; on the first, A, a 3-replica Deployment `web`, a DaemonSet and a
//! 3-replica StatefulSet `db` whose pods each own a `ReadWriteOnce` CSI volume. `nodewright
//! machine delete A --wait` drains A first (DrainNode as DeleteMachine's child). A sandbox fault
//! (`hang_detach` on A's second `csi.detach`) holds the drain once `db-0` has moved and `db-1`'s
//! volume is detaching; the worker is killed there, the fault removed, and while no worker runs
//! the volume follows `db-1` to B by itself. The worker is started again and the delete finishes.
//!
//! Then: the drain's history schedules `kube.evict_pod` exactly once per original pod UID (no
//! eviction storm; the attempts of each are printed) and shows the wait for `db-1`'s volume, in
//! flight at the kill, run again on the restarted worker (attempt 2); the timeline shows each
//! original pod deleted exactly once and the StatefulSet pods still one at a time; `machine
//! status` shows the delete completed with its drain counting one eviction per pod and every
//! volume `reattached` on B; no VolumeAttachment of A is left, A's VM had no data disk when it
//! was deleted, A's VM, NIC, OS disk and Node are gone, the data disks are attached to B and
//! every pod runs there.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use base64::Engine;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Api;
use kube::api::ListParams;
use nodewright_activities::azure::ArmClient;
use nodewright_model::arm::Disposition;
use nodewright_model::drain::{PodState, VolumeState};
use nodewright_tests::documents::{DrainLookup, MachineRunDocument};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{CliResult, KillableWorker, Sandbox, node};
use nodewright_tests::stack::history_json;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::timeline::{Timeline, What};
use nodewright_tests::workloads::{Workloads, disk_managed_by, set_unschedulable};
use nodewright_tests::{Stack, eventually};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::common::{create_machines, delete_machines, terminate_drains};
use super::stateful::{
    check_all_moved, check_drain_document, check_parallel_evictions, check_serial_moves,
    machine_document, place_on_a, write_drain_pool_file,
};

/// How often A's VM is read to see its data disks.
const VM_SAMPLE: Duration = Duration::from_millis(200);
/// How long the delete may take after the worker is back (a lost wait is retried after the
/// activities' 15 s heartbeat timeout).
const FINISH: Duration = Duration::from_secs(150);

/// What the scenario may leave behind when it fails half-way, for the cleanup.
struct Harness {
    /// The worker process.
    worker: KillableWorker,
    /// Whether it runs now.
    running: bool,
    /// The sandbox fault rule in force.
    fault: Option<u64>,
    /// The `machine delete A --wait` running in the background.
    delete: Option<JoinHandle<Result<CliResult>>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_drain_resumes_it_without_evicting_any_pod_twice() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("drain-crash");
    let mut harness = Harness {
        worker: KillableWorker::start(&stack, &task_queue)?,
        running: true,
        fault: None,
        delete: None,
    };
    let pool = format!("dc{}", unique_suffix());
    let pool_file = write_drain_pool_file(&stack, &pool)?;
    let machines = [format!("{pool}-b2c4d"), format!("{pool}-f5g6h")];
    let mut workloads = Workloads::create(&stack, "drain-cr").await?;

    let result = scenario(
        &stack,
        &sandbox,
        &task_queue,
        &mut harness,
        &pool,
        &pool_file,
        &machines,
        &mut workloads,
    )
    .await;
    let result = result.with_context(|| format!("worker log:\n{}", harness.worker.log_tail()));

    // A failure may have left the fault in place, the worker dead or the delete running.
    if let Some(rule) = harness.fault.take()
        && let Err(error) = sandbox.remove_fault(rule).await
    {
        eprintln!("cleanup: removing fault {rule}: {error:#}");
    }
    if !harness.running
        && let Err(error) = harness.worker.restart()
    {
        eprintln!("cleanup: restarting the worker: {error:#}");
    }
    workloads.clean_up().await;
    if result.is_err() {
        // A drain still running ends now (and the delete waiting for it fails).
        terminate_drains(&stack, &machines).await;
    }
    if let Some(delete) = harness.delete.take()
        && tokio::time::timeout(Duration::from_secs(60), delete)
            .await
            .is_err()
    {
        eprintln!("cleanup: the delete of {} did not finish", machines[0]);
    }
    delete_machines(&stack, &task_queue, &machines).await;
    drop(harness);
    result
}

#[allow(clippy::too_many_arguments)]
async fn scenario(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    harness: &mut Harness,
    pool: &str,
    pool_file: &Path,
    machines: &[String; 2],
    workloads: &mut Workloads,
) -> Result<()> {
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
    let result = crash_mid_drain(
        stack,
        sandbox,
        task_queue,
        harness,
        &mut timeline,
        pool,
        machines,
        workloads,
    )
    .await;
    eprintln!("{}", timeline.render());
    result
}

#[allow(clippy::too_many_arguments)]
async fn crash_mid_drain(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    harness: &mut Harness,
    timeline: &mut Timeline,
    pool: &str,
    machines: &[String; 2],
    workloads: &mut Workloads,
) -> Result<()> {
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    let namespace = workloads.namespace().to_owned();
    let on_a = place_on_a(workloads, timeline, pool, node_a, false).await?;
    set_unschedulable(&kube, node_b, false).await?;
    timeline.mark(&format!("uncordoned {node_b}"));
    let vm = VmDataDisks::watch(workloads.arm().clone(), node_a);

    // The second detach from A (db-1's) hangs while the rule exists.
    let rule = sandbox
        .add_fault(json!({
            "kind": "hang_detach", "operation": "csi.detach", "vm": node_a,
            "every": 2, "count": 1,
        }))
        .await?;
    harness.fault = Some(rule);

    let since = timeline.mark(&format!("nodewright machine delete {node_a} --wait"));
    let delete = harness.delete.insert({
        let (stack, task_queue, machine) = (stack.clone(), task_queue.to_owned(), node_a.clone());
        tokio::task::spawn_blocking(move || {
            CliResult::run(
                &stack,
                &task_queue,
                &["machine", "delete", &machine, "--wait"],
            )
        })
    });

    // Kill the worker once db-0 has moved and db-1's volume is held detaching.
    let (first, second) = (&on_a.volumes[0], &on_a.volumes[1]);
    let db_1 = format!("{namespace}/{}", second.pod);
    // The drain gives up on a detach after the pod's grace period + volumeDetachTimeout (61 s)
    // and goes on: the kill must come well before.
    let last_seen = Mutex::new(String::from("none read"));
    eventually(
        "the drain to have moved db-0 and be waiting for db-1's volume to detach",
        Duration::from_secs(45),
        Duration::from_millis(250),
        || async {
            // A status the CLI cannot read yet is asked again; one it prints must parse.
            let read = cli_result(stack, task_queue, node_a).await?;
            if read.code != Some(0) {
                *last_seen.lock().unwrap_or_else(PoisonError::into_inner) = read.stderr;
                return Ok(None);
            }
            let document: MachineRunDocument = read.parse()?;
            let held = document.drain().is_some_and(|status| {
                let state = |pv: &str| status.volume(pv).map(|v| v.state);
                state(&first.name) == Some(VolumeState::Reattached)
                    && state(&second.name) == Some(VolumeState::Detaching)
                    && status
                        .pod(&db_1)
                        .is_some_and(|p| p.state == PodState::Evicting)
            }) && timeline
                .first_after(since, &What::attachment_deleting(&second.name, node_a))
                .is_some();
            *last_seen.lock().unwrap_or_else(PoisonError::into_inner) = document.to_string();
            Ok(held.then_some(()))
        },
    )
    .await
    .with_context(|| {
        format!(
            "last machine status: {}",
            last_seen.lock().unwrap_or_else(PoisonError::into_inner)
        )
    })?;
    harness.worker.kill();
    harness.running = false;
    let killed = timeline.mark("worker killed (SIGKILL)");
    let fired = fault_fired(stack, rule).await?;
    ensure!(
        fired == 1,
        "the hang_detach rule fired {fired} times, expected once (db-1's detach)"
    );

    // Without a worker, the world moves on: db-1's volume detaches and follows it to B; db-2
    // stays where it is.
    sandbox.remove_fault(rule).await?;
    harness.fault = None;
    timeline.mark("fault removed: db-1's detach completes");
    let wait = Duration::from_secs(30);
    timeline
        .wait_for_after(killed, &What::attachment_gone(&second.name, node_a), wait)
        .await?;
    timeline
        .wait_for_after(killed, &What::attached(&second.name, node_b), wait)
        .await?;
    ensure!(
        timeline
            .first(&What::pod_deleting(&on_a.volumes[2].pod, node_a))
            .is_none(),
        "{} was evicted while no worker ran\n{}",
        on_a.volumes[2].pod,
        timeline.render()
    );
    harness.worker.restart()?;
    harness.running = true;
    let restarted = timeline.mark("worker restarted");

    let deleted = tokio::time::timeout(FINISH, delete)
        .await
        .with_context(|| {
            format!("the delete did not finish within {FINISH:?} of the restart")
        })???;
    harness.delete = None;
    let end = timeline.mark("the delete CLI returned");
    eprintln!(
        "machine delete stdout:\n{}\nmachine delete stderr:\n{}",
        deleted.stdout, deleted.stderr
    );
    deleted.expect_code(0)?;
    eprintln!(
        "killed at +{:.2}s, restarted at +{:.2}s, delete done at +{:.2}s",
        killed.as_secs_f64(),
        restarted.as_secs_f64(),
        end.as_secs_f64()
    );
    ensure!(
        deleted.stdout.contains(&format!("{node_a} drained"))
            && deleted
                .stdout
                .contains(&format!("machine {node_a} is gone")),
        "delete's stdout: {}",
        deleted.stdout
    );

    // No eviction storm: one kube.evict_pod per original pod, per the history...
    let drain_id = format!("drain/{}/{node_a}", stack.cluster);
    let activities = activities_in_history(stack, &drain_id).await?;
    let mut per_uid: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    eprintln!("in {drain_id}'s history:");
    for activity in &activities {
        if let Some((pod, uid)) = activity.evicted_pod() {
            eprintln!(
                "  kube.evict_pod {pod} (uid {uid}): attempt {}",
                activity.attempt
            );
            per_uid.entry(uid).or_default().push(activity.attempt);
        } else if activity.attempt != 1 {
            eprintln!("  {} ended at attempt {}", activity.name, activity.attempt);
        }
    }
    for (name, uid) in &on_a.moving {
        let attempts = per_uid.remove(uid).unwrap_or_default();
        ensure!(
            attempts.len() == 1 && attempts[0] <= 2,
            "{name} ({uid}): {} kube.evict_pod scheduled (attempts {attempts:?}), expected one",
            attempts.len()
        );
    }
    ensure!(
        per_uid.is_empty(),
        "kube.evict_pod for pods that were never on {node_a} before the drain: {per_uid:?}"
    );
    // The kill hit the wait for db-1's volume to detach: the restarted worker ran it again.
    let held_wait = activities
        .iter()
        .find(|a| {
            a.name == "kube.await_volumes_detached"
                && a.input["persistentVolumes"]
                    .as_array()
                    .is_some_and(|pvs| pvs.iter().any(|pv| *pv == second.name.as_str()))
        })
        .with_context(|| format!("no kube.await_volumes_detached of {}", second.name))?;
    ensure!(
        held_wait.attempt >= 2,
        "the wait for {} to detach, in flight when the worker was killed, ended at attempt {}",
        second.name,
        held_wait.attempt
    );
    // ... and per the timeline: each original pod deleted exactly once, still in order.
    for name in on_a.moving.keys() {
        let deletions = timeline
            .events()
            .iter()
            .filter(|event| event.what == What::pod_deleting(name, node_a))
            .count();
        ensure!(
            deletions == 1,
            "{name} got a deletion timestamp on {node_a} {deletions} times\n{}",
            timeline.render()
        );
    }
    check_parallel_evictions(timeline, &on_a, node_a, node_b, since)?;
    let moves = check_serial_moves(timeline, &on_a, node_a, node_b, since, end)?;
    for step in &moves {
        eprintln!("  {}", step.describe());
    }
    let status = machine_document(stack, task_queue, node_a).await?;
    check_drain_document(
        &status,
        "deletion",
        &stack.cluster,
        &namespace,
        &on_a,
        node_a,
        node_b,
    )?;

    // Nothing of A is left attached, nor anything of A at all; the data disks are on B.
    check_nothing_attached_to(&kube, node_a).await?;
    let last = vm.last_seen();
    ensure!(
        last.gone && last.data_disks.as_ref().is_some_and(Vec::is_empty),
        "{node_a}'s VM had no data disk left when it was deleted: {last:?}"
    );
    let left = sandbox.machine_resources(node_a).await?;
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
    }
    check_all_moved(workloads, &on_a, node_b).await?;
    Ok(())
}

/// How often the sandbox says a fault rule fired.
async fn fault_fired(stack: &Stack, rule: u64) -> Result<u64> {
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
    let rules = body["rules"].as_array().cloned().unwrap_or_default();
    let found = rules
        .iter()
        .find(|r| r["id"] == rule)
        .with_context(|| format!("fault {rule} not listed: {body}"))?;
    Ok(found["fired"].as_u64().unwrap_or_default())
}

/// Fails if any VolumeAttachment names `node`.
async fn check_nothing_attached_to(kube: &kube::Client, node: &str) -> Result<()> {
    let attachments: Api<VolumeAttachment> = Api::all(kube.clone());
    let left: Vec<String> = attachments
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|va| va.spec.node_name == node)
        .map(|va| format!("{:?}", va.spec.source.persistent_volume_name))
        .collect();
    ensure!(
        left.is_empty(),
        "VolumeAttachments left on {node}: {left:?}"
    );
    Ok(())
}

/// What the VM sampler saw last.
#[derive(Debug, Clone, Default)]
struct VmSeen {
    /// The data disks' names at the last successful read.
    data_disks: Option<Vec<String>>,
    /// Whether the VM was then found gone.
    gone: bool,
}

/// Reads a VM every [`VM_SAMPLE`] until it is gone, remembering its data disks.
struct VmDataDisks {
    seen: Arc<Mutex<VmSeen>>,
    task: JoinHandle<()>,
}

impl Drop for VmDataDisks {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl VmDataDisks {
    fn watch(arm: ArmClient, vm: &str) -> Self {
        let seen = Arc::new(Mutex::new(VmSeen::default()));
        let (shared, vm) = (seen.clone(), vm.to_owned());
        let task = tokio::spawn(async move {
            loop {
                match arm.get_vm(&vm).await {
                    Ok(found) => {
                        let body = serde_json::to_value(found).unwrap_or_default();
                        let disks = body["properties"]["storageProfile"]["dataDisks"]
                            .as_array()
                            .map(|disks| {
                                disks
                                    .iter()
                                    .map(|d| d["name"].as_str().unwrap_or("?").to_owned())
                                    .collect()
                            })
                            .unwrap_or_default();
                        shared
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .data_disks = Some(disks);
                    }
                    Err(error) if error.disposition() == Disposition::Gone => {
                        shared.lock().unwrap_or_else(PoisonError::into_inner).gone = true;
                        return;
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(VM_SAMPLE).await;
            }
        });
        Self { seen, task }
    }

    fn last_seen(&self) -> VmSeen {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One activity scheduled in a workflow's history.
#[derive(Debug)]
struct ScheduledActivity {
    /// Its type, e.g. `kube.evict_pod`.
    name: String,
    /// Its input (the first payload, JSON).
    input: Value,
    /// The attempt that completed it (0 when it never started).
    attempt: u32,
}

impl ScheduledActivity {
    /// For a `kube.evict_pod`: the pod's `namespace/name` and UID.
    fn evicted_pod(&self) -> Option<(String, String)> {
        (self.name == "kube.evict_pod").then(|| {
            let pod = &self.input["pod"];
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                format!("{}/{}", text(&pod["namespace"]), text(&pod["name"])),
                text(&pod["uid"]),
            )
        })
    }
}

/// Every activity the workflow `workflow_id` scheduled (its latest run), read with `temporal
/// workflow show --output json`: the type, the input payload, the attempt from the matching
/// ActivityTaskStarted event.
async fn activities_in_history(stack: &Stack, workflow_id: &str) -> Result<Vec<ScheduledActivity>> {
    let history = history_json(stack, workflow_id).await?;
    let number = |value: &Value| {
        value
            .as_u64()
            .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
            .unwrap_or_default()
    };
    let events = history["events"].as_array().cloned().unwrap_or_default();
    let mut attempts: BTreeMap<u64, u32> = BTreeMap::new();
    for event in &events {
        let started = &event["activityTaskStartedEventAttributes"];
        if started.is_object() {
            let attempt = u32::try_from(number(&started["attempt"])).unwrap_or(u32::MAX);
            attempts.insert(number(&started["scheduledEventId"]), attempt);
        }
    }
    let mut activities = Vec::new();
    for event in &events {
        let scheduled = &event["activityTaskScheduledEventAttributes"];
        let Some(name) = scheduled["activityType"]["name"].as_str() else {
            continue;
        };
        let input = match scheduled["input"]["payloads"][0]["data"].as_str() {
            Some(data) => {
                serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(data)?)?
            }
            None => Value::Null,
        };
        activities.push(ScheduledActivity {
            name: name.to_owned(),
            input,
            attempt: attempts
                .get(&number(&event["eventId"]))
                .copied()
                .unwrap_or_default(),
        });
    }
    ensure!(
        !activities.is_empty(),
        "no activity in {workflow_id}'s history: {history}"
    );
    Ok(activities)
}

/// `machine status NODE --output json` as the CLI answered, whatever its exit code.
async fn cli_result(stack: &Stack, task_queue: &str, node: &str) -> Result<CliResult> {
    super::common::cli(
        stack,
        task_queue,
        &["machine", "status", node, "--output", "json"],
    )
    .await
}
