//! Drain rules (`spec.drain.rules`, Cluster API's MachineDrainRule) end to end: one machine of a
//! pool whose rules skip one app, wait for another until it completes, and drain three tiers.
//!
//! On the machine: `agent` (a Deployment's pod; rule 0: `Skip`), `batch` (a pod that runs to
//! completion; rule 1: `WaitCompleted`), `first` (two pods; rule 2: `Drain`, order -5),
//! `held` (a pod rule 2 would drain, labelled `nodewright.io/drain: skip`), `mid` (two pods, no
//! rule: order 0) and `last` (two pods; rule 3, a namespace selector and `In`: order 10).
//! `machine drain`:
//!
//! - evicts the tiers in order: a watch on the Node's pods sees every pod of a tier deleted
//!   before the first pod of the next gets its deletion timestamp;
//! - then waits for `batch`: the drain is still running, `batch` is the same pod, never evicted,
//!   shown `awaiting-completion` with its rule; once its phase is Succeeded (kwok completes a
//!   Job's pods the moment they run, so this stack cannot show a Job's pod running: the test
//!   plays the kubelet and patches the status) the drain completes, before its deadline and
//!   without force mode;
//! - leaves `agent` and `held` on the Node, the same pods (same UIDs, no deletion timestamp),
//!   each shown `skipped` with what skipped it (`spec.drain.rules[0]`, the label).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::common::{cli, create_machines, delete_machines, drain_pool_file, wait_drain};
use anyhow::{Context, Result, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use nodewright_model::drain::{DrainMode, DrainStatus, LABEL_DRAIN, PodProgress, PodState};
use nodewright_tests::Stack;
use nodewright_tests::documents::print_steps;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{Placement, Workload, Workloads};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
/// How long a drain's status may take to show what is awaited.
const DRAIN_WAIT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_rules_skip_wait_for_completion_and_drain_tiers_in_order() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("drain-rules");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let suffix = unique_suffix();
    let pool = format!("dr{suffix}");
    let machine = format!("{pool}-r7t2k");
    let workloads = Workloads::create(&stack, "drain-rules").await?;
    let apps = Apps::new(&suffix);
    let rules = format!(
        "[{{selector: {{podSelector: {{matchLabels: {{app: {agent}}}}}}}, behavior: Skip}}, \
          {{selector: {{podSelector: {{matchLabels: {{app: {batch}}}}}}}, behavior: WaitCompleted}}, \
          {{selector: {{podSelector: {{matchExpressions: [{{key: app, operator: In, values: [{first}, {held}]}}]}}}}, behavior: Drain, order: -5}}, \
          {{selector: {{podSelector: {{matchExpressions: [{{key: app, operator: In, values: [{last}]}}]}}, \
            namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {namespace}}}}}}}, behavior: Drain, order: 10}}]",
        agent = apps.agent,
        batch = apps.batch,
        first = apps.first,
        held = apps.held,
        last = apps.last,
        namespace = workloads.namespace(),
    );
    let file = drain_pool_file(
        &stack,
        &pool,
        &[
            ("timeout", "5m"),
            ("pdbRetryInterval", "1s"),
            ("rules", &rules),
        ],
    )?;

    let started = std::time::Instant::now();
    let result = scenario(&stack, &task_queue, &file, &machine, &workloads, &apps)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    println!("scenario took {:.1}s", started.elapsed().as_secs_f64());

    workloads.clean_up().await;
    delete_machines(&stack, &task_queue, std::slice::from_ref(&machine)).await;
    drop(worker);
    result
}

/// The apps of the scenario, named for this run.
struct Apps {
    agent: String,
    batch: String,
    first: String,
    held: String,
    mid: String,
    last: String,
}

impl Apps {
    fn new(suffix: &str) -> Self {
        let name = |app: &str| format!("{app}-{suffix}");
        Self {
            agent: name("agent"),
            batch: name("batch"),
            first: name("first"),
            held: name("held"),
            mid: name("mid"),
            last: name("last"),
        }
    }
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    file: &Path,
    machine: &str,
    workloads: &Workloads,
    apps: &Apps,
) -> Result<()> {
    create_machines(stack, task_queue, file, &[machine.to_owned()]).await?;
    let here = || Placement::node(machine);
    for (app, replicas) in [
        (&apps.agent, 1),
        (&apps.first, 2),
        (&apps.held, 1),
        (&apps.mid, 2),
        (&apps.last, 2),
    ] {
        workloads
            .deployment(&Workload::new(app, replicas, here()))
            .await?;
    }
    workloads
        .bare_pod(&Workload::new(&apps.batch, 1, here()))
        .await?;
    let mut uids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (app, count) in [
        (&apps.agent, 1),
        (&apps.batch, 1),
        (&apps.first, 2),
        (&apps.held, 1),
        (&apps.mid, 2),
        (&apps.last, 2),
    ] {
        let pods = workloads
            .wait_app_running(app, count, Some(machine), WAIT)
            .await?;
        uids.insert(app.clone(), pods.iter().filter_map(uid).collect());
    }
    let pods: Api<Pod> = Api::namespaced(workloads.client().clone(), workloads.namespace());
    let held_pod = workloads
        .wait_app_running(&apps.held, 1, Some(machine), WAIT)
        .await?;
    let held_name = held_pod
        .first()
        .and_then(|p| p.metadata.name.clone())
        .context("the held pod")?;
    let label = json!({ "metadata": { "labels": { LABEL_DRAIN: "skip" } } });
    pods.patch(&held_name, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .context("labelling the held pod nodewright.io/drain: skip")?;

    // Watch the Node's pods from now on: the order of deletions.
    let on_node = ListParams::default().fields(&format!("spec.nodeName={machine}"));
    let version = pods
        .list(&on_node)
        .await?
        .metadata
        .resource_version
        .context("a list's resourceVersion")?;
    let watch = WatchParams::default().fields(&format!("spec.nodeName={machine}"));
    let stream = pods.watch(&watch, &version).await?.boxed();
    let seen: Seen = Arc::default();
    let watcher = tokio::spawn(record_deletions(stream, Arc::clone(&seen)));

    cli(stack, task_queue, &["machine", "drain", machine])
        .await?
        .expect_code(0)?;

    // The tiers are drained; the drain waits for batch.
    let waiting = wait_drain(
        stack,
        task_queue,
        machine,
        "the drain to wait for batch",
        DRAIN_WAIT,
        |doc| {
            let tiers_gone = [&apps.first, &apps.mid, &apps.last].iter().all(|app| {
                entries(&doc.status, app)
                    .iter()
                    .all(|p| p.state == PodState::Gone)
            });
            tiers_gone
                && doc
                    .status
                    .run
                    .facts
                    .get("awaitingCompletion")
                    .map(String::as_str)
                    == Some("1")
        },
    )
    .await?;
    print_steps(&waiting.status.run);
    ensure!(
        waiting.run_status == "running",
        "still running while batch runs: {}",
        waiting.run_status
    );
    let batch = single(&waiting.status, &apps.batch)?;
    ensure!(
        batch.state == PodState::AwaitingCompletion
            && batch.evictions == 0
            && batch.rule.as_deref() == Some("WaitCompleted by spec.drain.rules[1]"),
        "batch is waited for, not evicted: {batch:?}"
    );
    for (app, tier) in [(&apps.first, -5), (&apps.mid, 0), (&apps.last, 10)] {
        for entry in entries(&waiting.status, app) {
            ensure!(
                entry.tier == Some(tier) && entry.evictions >= 1,
                "{app}'s pods are of tier {tier}, evicted: {entry:?}"
            );
        }
    }
    let still = workloads.pods_on(machine).await?;
    let batch_uid = uids.get(&apps.batch).cloned().unwrap_or_default();
    ensure!(
        still.iter().any(
            |p| uid(p).as_ref() == batch_uid.first() && p.metadata.deletion_timestamp.is_none()
        ),
        "batch is the same pod, not being deleted"
    );

    // batch completes: the drain ends.
    let succeeded = json!({ "status": { "phase": "Succeeded" } });
    pods.patch_status(
        &apps.batch,
        &PatchParams::default(),
        &Patch::Merge(&succeeded),
    )
    .await
    .context("completing batch")?;
    let done = wait_drain(
        stack,
        task_queue,
        machine,
        "the drain to complete",
        DRAIN_WAIT,
        |doc| doc.run_status != "running",
    )
    .await?;
    print_steps(&done.status.run);
    ensure!(
        done.run_status == "completed",
        "the drain completed: {}",
        done.run_status
    );
    ensure!(
        done.status.mode == DrainMode::Graceful,
        "without force mode: {:?}",
        done.status.mode
    );
    let batch = single(&done.status, &apps.batch)?;
    ensure!(
        batch.state == PodState::Completed && batch.evictions == 0,
        "batch completed, never evicted: {batch:?}"
    );
    for (app, rule) in [
        (&apps.agent, "Skip by spec.drain.rules[0]"),
        (&apps.held, "Skip by label nodewright.io/drain"),
    ] {
        let entry = single(&done.status, app)?;
        ensure!(
            entry.state == PodState::Skipped
                && entry.evictions == 0
                && entry.rule.as_deref() == Some(rule),
            "{app} skipped by {rule}: {entry:?}"
        );
    }

    // The world: the skipped pods are the same, still here; the tiers left in order.
    let left = workloads.pods_on(machine).await?;
    for app in [&apps.agent, &apps.held, &apps.batch] {
        for expected in uids.get(app).into_iter().flatten() {
            ensure!(
                left.iter().any(|p| uid(p).as_ref() == Some(expected)
                    && p.metadata.deletion_timestamp.is_none()),
                "{app}'s pod {expected} is still on {machine}"
            );
        }
    }
    for app in [&apps.first, &apps.mid, &apps.last] {
        for gone in uids.get(app).into_iter().flatten() {
            ensure!(
                left.iter().all(|p| uid(p).as_ref() != Some(gone)),
                "{app}'s pod {gone} left {machine}"
            );
        }
    }
    watcher.abort();
    if let Ok(Err(error)) = watcher.await {
        bail!("watching {machine}'s pods: {error:#}");
    }
    let events = seen.lock().map(|e| e.clone()).unwrap_or_default();
    check_tiers(&events, &uids, apps)
}

/// The pod entries of `app` in a drain status.
fn entries<'a>(status: &'a DrainStatus, app: &str) -> Vec<&'a PodProgress> {
    status
        .pods
        .iter()
        .filter(|p| p.pod.split('/').nth(1).is_some_and(|n| n.starts_with(app)))
        .collect()
}

/// The one pod entry of `app`.
fn single<'a>(status: &'a DrainStatus, app: &str) -> Result<&'a PodProgress> {
    match entries(status, app).as_slice() {
        [one] => Ok(one),
        other => bail!("one pod entry of {app}, found {}: {status:?}", other.len()),
    }
}

fn uid(pod: &Pod) -> Option<String> {
    pod.metadata.uid.clone()
}

/// What the watch saw: per pod UID, in order, `"deleting"` (deletion timestamp first seen) or
/// `"deleted"`.
type Events = Vec<(String, &'static str)>;

/// The events the watch recorded so far.
type Seen = Arc<Mutex<Events>>;

/// Records, in the order the apiserver sends them, when each pod gets its deletion timestamp
/// and when it is deleted.
async fn record_deletions(
    mut stream: futures::stream::BoxStream<'static, kube::Result<WatchEvent<Pod>>>,
    seen: Seen,
) -> Result<()> {
    while let Some(event) = stream.try_next().await? {
        let (pod, what) = match event {
            WatchEvent::Modified(pod) if pod.metadata.deletion_timestamp.is_some() => {
                (pod, "deleting")
            }
            WatchEvent::Deleted(pod) => (pod, "deleted"),
            _ => continue,
        };
        if let (Some(uid), Ok(mut seen)) = (uid(&pod), seen.lock())
            && !seen.iter().any(|(u, w)| *u == uid && *w == what)
        {
            seen.push((uid, what));
        }
    }
    Ok(())
}

/// Every pod of a tier deleted before the first pod of the next gets its deletion timestamp.
fn check_tiers(events: &Events, uids: &BTreeMap<String, Vec<String>>, apps: &Apps) -> Result<()> {
    let at = |uid: &str, what: &str| events.iter().position(|(u, w)| u == uid && *w == what);
    let tiers = [&apps.first, &apps.mid, &apps.last];
    for pair in tiers.windows(2) {
        let (earlier, later) = (pair[0], pair[1]);
        let mut last_gone = 0;
        for uid in uids.get(earlier).into_iter().flatten() {
            let gone = at(uid, "deleted").with_context(|| {
                format!("{earlier}'s pod {uid} deleted, in the watch: {events:?}")
            })?;
            last_gone = last_gone.max(gone);
        }
        for uid in uids.get(later).into_iter().flatten() {
            let first = at(uid, "deleting")
                .or_else(|| at(uid, "deleted"))
                .with_context(|| format!("{later}'s pod {uid} in the watch: {events:?}"))?;
            ensure!(
                first > last_gone,
                "{later}'s pod {uid} was deleted before every pod of {earlier} was gone: {events:?}"
            );
        }
        println!("tier {earlier} gone before tier {later} began");
    }
    let skipped = [&apps.agent, &apps.held, &apps.batch];
    for app in skipped {
        for uid in uids.get(app).into_iter().flatten() {
            ensure!(
                at(uid, "deleting").is_none() && at(uid, "deleted").is_none(),
                "{app}'s pod {uid} was never deleted: {events:?}"
            );
        }
    }
    Ok(())
}
