//! Pods with local data: a maintenance drain refuses them by default, before its first
//! eviction; a pool with `spec.drain.localData: evict` (or `machine drain --local-data evict`)
//! evicts them and names each in `localDataLost`.
//!
//! Two machines, A of a pool that leaves `localData` unset and B of a pool that sets it to
//! `evict`. On each: a bare pod (no controller), a Deployment's pod with an `emptyDir` volume and
//! a plain Deployment's pod.
//!
//! - `machine drain A --wait` fails at `select-pods` naming the bare pod ("no controller") and
//!   the `emptyDir` pod ("emptyDir scratch"); its `status` shows both `refused` and the plain pod
//!   never evicted; all three pods are still on A, the same ones; A stays cordoned.
//! - `machine drain B --wait` evicts all three; the result and the `status` name the bare pod and
//!   the `emptyDir` pod in `localDataLost` (not the plain one), and the CLI prints them.
//! - `machine drain A --local-data evict --wait` then evicts A's pods the same way.
//!
//! A deletion's default is the other way round
//! (`a_deletion_evicts_pods_with_local_data_by_default_and_names_them`): one machine C of a pool
//! that leaves `localData` unset, with the same three pods; `machine delete C --wait` drains it
//! (the policy shown as `local data evict (the purpose's default)`), evicts all three and
//! deletes the machine; the result (`drained.localDataLost`), the delete's `status` (its drain
//! step's detail, and the drain part's `localDataLost`) and the drain's pod entries name the bare
//! pod and the `emptyDir` pod, not the plain one.

use std::path::Path;
use std::time::Duration;

use super::common::{
    cli, create_machines, delete_machines, drain_document, drain_pool_file, machine_status,
};
use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use nodewright_model::drain::{ANNOTATION_DRAIN_POLICY, DrainedNode, LocalDataPod, PodState};
use nodewright_model::machine::{DeletedMachine, Step, StepState};
use nodewright_tests::Stack;
use nodewright_tests::documents::{DrainLookup, ResultDocument, StepLookup, print_steps, shown};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::MachineStatusDocument;
use nodewright_tests::machines::{KillableWorker, node};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{Placement, Workload, Workloads};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);
/// The `emptyDir` volume of the cache pods.
const SCRATCH: &str = "scratch";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maintenance_drain_refuses_pods_with_local_data_by_default_and_evict_names_them_in_local_data_lost()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("drain-local-data");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let suffix = unique_suffix();
    let (pool_a, pool_b) = (format!("ld{suffix}"), format!("le{suffix}"));
    let settings = [("timeout", "60s"), ("pdbRetryInterval", "2s")];
    let file_a = drain_pool_file(&stack, &pool_a, &settings)?;
    let file_b = drain_pool_file(
        &stack,
        &pool_b,
        &[settings[0], settings[1], ("localData", "evict")],
    )?;
    let node_a = format!("{pool_a}-b2c4d");
    let node_b = format!("{pool_b}-f5g6h");
    let workloads = Workloads::create(&stack, "drain-local-data").await?;

    let started = std::time::Instant::now();
    let result = scenario(
        &stack,
        &task_queue,
        [(&file_a, &node_a), (&file_b, &node_b)],
        &workloads,
    )
    .await
    .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    println!("scenario took {:.1}s", started.elapsed().as_secs_f64());

    workloads.clean_up().await;
    delete_machines(&stack, &task_queue, &[node_a, node_b]).await;
    drop(worker);
    result
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    [(file_a, node_a), (file_b, node_b)]: [(&Path, &String); 2],
    workloads: &Workloads,
) -> Result<()> {
    let (created_a, created_b) = tokio::join!(
        create_machines(stack, task_queue, file_a, std::slice::from_ref(node_a)),
        create_machines(stack, task_queue, file_b, std::slice::from_ref(node_b)),
    );
    created_a?;
    created_b?;
    let kube = workloads.client().clone();
    let namespace = workloads.namespace();

    // The annotation carries localData only when the pool file sets it.
    let policy_a = drain_annotation(&kube, node_a).await?;
    ensure!(
        policy_a.get("localData").is_none() && policy_a["timeout"] == 60,
        "{node_a}'s drain policy: {policy_a}"
    );
    let policy_b = drain_annotation(&kube, node_b).await?;
    ensure!(
        policy_b["localData"] == "evict",
        "{node_b}'s drain policy: {policy_b}"
    );

    let pods_a = place_pods(workloads, "a", node_a).await?;
    let pods_b = place_pods(workloads, "b", node_b).await?;

    // 1. The default of a maintenance drain: refused before the first eviction.
    let refused = cli(stack, task_queue, &["machine", "drain", node_a, "--wait"]).await?;
    let said = format!("{}{}", refused.stdout, refused.stderr);
    ensure!(refused.code == Some(3), "the refused drain exits 3: {said}");
    let bare_a = format!("{namespace}/{}", pods_a.bare);
    let cache_a = format!("{namespace}/{}", pods_a.cache);
    for expected in [
        "would lose their data if evicted".to_owned(),
        "localData refuse is the default of a maintenance drain".to_owned(),
        format!("{bare_a} (no controller)"),
        format!("{cache_a} (emptyDir {SCRATCH})"),
        "nothing was evicted".to_owned(),
        format!("nodewright machine drain {node_a} --local-data evict"),
    ] {
        ensure!(
            said.contains(&expected),
            "the CLI says {expected:?}: {said}"
        );
    }
    println!("refusal: {}", said.trim());
    let doc = drain_document(stack, task_queue, node_a).await?;
    let status = &doc.status;
    print_steps(&status.run);
    ensure!(doc.run_status == "failed", "the drain failed: {doc}");
    let select = DrainLookup::step(status, Step::SelectPods).context("a select-pods step")?;
    ensure!(
        select.state == StepState::Failed,
        "select-pods failed: {}",
        shown(select)
    );
    ensure!(
        DrainLookup::step(status, Step::EvictPods).is_some_and(|s| s.state == StepState::Pending),
        "evict-pods never started: {doc}"
    );
    for (pod, what) in [
        (&bare_a, "refused: local data (no controller)".to_owned()),
        (
            &cache_a,
            format!("refused: local data (emptyDir {SCRATCH})"),
        ),
    ] {
        let entry = status.pod(pod).with_context(|| format!("{pod} in {doc}"))?;
        ensure!(
            entry.state == PodState::Refused && entry.detail.as_deref() == Some(what.as_str()),
            "{pod}: {}",
            shown(entry)
        );
    }
    let web_a = format!("{namespace}/{}", pods_a.web);
    let web = status
        .pod(&web_a)
        .with_context(|| format!("{web_a} in {doc}"))?;
    ensure!(
        web.state == PodState::Waiting && web.evictions == 0,
        "the plain pod was not evicted either: {}",
        shown(web)
    );
    ensure!(status.local_data_lost.is_empty(), "nothing lost: {doc}");
    let still = workloads.pods_on(node_a).await?;
    for uid in &pods_a.uids {
        ensure!(
            still
                .iter()
                .any(|pod| pod.metadata.uid.as_ref() == Some(uid)
                    && pod.metadata.deletion_timestamp.is_none()),
            "pod {uid} is still on {node_a}, not being deleted: {:?}",
            names(&still)
        );
    }
    ensure!(cordoned(&kube, node_a).await?, "{node_a} stays cordoned");

    // 2. A pool with localData: evict: evicted, and named.
    let drained = cli(
        stack,
        task_queue,
        &["machine", "drain", node_b, "--wait", "--output", "json"],
    )
    .await?;
    drained.expect_code(0)?;
    let result: ResultDocument<DrainedNode> = drained.parse()?;
    println!("drain of {node_b}: {result}");
    let bare_b = format!("{namespace}/{}", pods_b.bare);
    let cache_b = format!("{namespace}/{}", pods_b.cache);
    let expected_b = lost(&bare_b, &cache_b);
    ensure!(
        sorted(&result.result.local_data_lost) == expected_b,
        "the result names the pods with local data lost: {result}"
    );
    ensure!(
        result.result.evicted.len() == 3,
        "all three evicted: {result}"
    );
    let doc = drain_document(stack, task_queue, node_b).await?;
    ensure!(
        sorted(&doc.status.local_data_lost) == expected_b,
        "the status names them too: {doc}"
    );
    let gone = workloads.pods_on(node_b).await?;
    ensure!(
        pods_b.uids.iter().all(
            |uid| gone.iter().all(|pod| pod.metadata.uid.as_ref() != Some(uid)
                || pod.metadata.deletion_timestamp.is_some())
        ),
        "B's pods left: {:?}",
        names(&gone)
    );

    // 3. The same refusal overridden for one drain, with the CLI's text.
    let overridden = cli(
        stack,
        task_queue,
        &[
            "machine",
            "drain",
            node_a,
            "--local-data",
            "evict",
            "--wait",
        ],
    )
    .await?;
    overridden.expect_code(0)?;
    println!("{}", overridden.stdout.trim());
    for expected in [
        "2 pods left with their local data lost:".to_owned(),
        format!("    {bare_a} (no controller)"),
        format!("    {cache_a} (emptyDir {SCRATCH})"),
    ] {
        ensure!(
            overridden.stdout.contains(&expected),
            "the CLI prints {expected:?}: {}",
            overridden.stdout
        );
    }
    let doc = drain_document(stack, task_queue, node_a).await?;
    ensure!(
        doc.run_status == "completed"
            && sorted(&doc.status.local_data_lost) == lost(&bare_a, &cache_a),
        "the override drained A and named its pods: {doc}"
    );
    let bad = cli(
        stack,
        task_queue,
        &["machine", "drain", node_a, "--local-data", "keep"],
    )
    .await?;
    ensure!(
        bad.code == Some(2) && bad.stderr.contains("is neither evict nor refuse"),
        "a bad --local-data is refused before anything starts: {} {}",
        bad.stdout,
        bad.stderr
    );
    Ok(())
}

/// The pods of one machine: their names and UIDs.
struct Placed {
    bare: String,
    cache: String,
    web: String,
    uids: Vec<String>,
}

/// A bare pod `solo-<tag>`, a Deployment `cache-<tag>` with an `emptyDir` and a Deployment
/// `web-<tag>`, one pod each, on `node`; waits until they run.
async fn place_pods(workloads: &Workloads, tag: &str, node: &str) -> Result<Placed> {
    let (solo, cache, web) = (
        format!("solo-{tag}"),
        format!("cache-{tag}"),
        format!("web-{tag}"),
    );
    workloads
        .bare_pod(&Workload::new(&solo, 1, Placement::node(node)))
        .await?;
    workloads
        .deployment(&Workload::new(&cache, 1, Placement::node(node)).empty_dir(SCRATCH))
        .await?;
    workloads
        .deployment(&Workload::new(&web, 1, Placement::node(node)))
        .await?;
    let mut found = Vec::new();
    for app in [&solo, &cache, &web] {
        let pods = workloads.wait_app_running(app, 1, Some(node), WAIT).await?;
        found.push(pods.into_iter().next().context("one pod")?);
    }
    let name = |pod: &Pod| pod.metadata.name.clone().unwrap_or_default();
    Ok(Placed {
        bare: name(&found[0]),
        cache: name(&found[1]),
        web: name(&found[2]),
        uids: found
            .iter()
            .filter_map(|pod| pod.metadata.uid.clone())
            .collect(),
    })
}

/// `localDataLost` as expected: the bare pod (no controller) and the cache pod (its emptyDir).
fn lost(bare: &str, cache: &str) -> Vec<LocalDataPod> {
    sorted(&[
        LocalDataPod {
            pod: bare.to_owned(),
            empty_dirs: Vec::new(),
            no_controller: true,
        },
        LocalDataPod {
            pod: cache.to_owned(),
            empty_dirs: vec![SCRATCH.to_owned()],
            no_controller: false,
        },
    ])
}

/// The entries, sorted by `pod`.
fn sorted(list: &[LocalDataPod]) -> Vec<LocalDataPod> {
    let mut entries = list.to_vec();
    entries.sort_by(|a, b| a.pod.cmp(&b.pod));
    entries
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .map(|pod| pod.metadata.name.clone().unwrap_or_default())
        .collect()
}

/// The drain-policy annotation of `name`, as JSON.
async fn drain_annotation(kube: &kube::Client, name: &str) -> Result<Value> {
    let found: Node = node(kube, name)
        .await?
        .with_context(|| format!("no Node {name}"))?;
    let text = found
        .metadata
        .annotations
        .and_then(|annotations| annotations.get(ANNOTATION_DRAIN_POLICY).cloned())
        .with_context(|| format!("{name} has no {ANNOTATION_DRAIN_POLICY}"))?;
    Ok(serde_json::from_str(&text)?)
}

/// Whether `name` is cordoned.
async fn cordoned(kube: &kube::Client, name: &str) -> Result<bool> {
    let found: Node = node(kube, name)
        .await?
        .with_context(|| format!("no Node {name}"))?;
    Ok(found.spec.and_then(|s| s.unschedulable).unwrap_or(false))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_evicts_pods_with_local_data_by_default_and_names_them() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("delete-local-data");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("lc{}", unique_suffix());
    let file = drain_pool_file(
        &stack,
        &pool,
        &[("timeout", "60s"), ("pdbRetryInterval", "2s")],
    )?;
    let machine = format!("{pool}-c3d5f");
    let workloads = Workloads::create(&stack, "delete-local-data").await?;

    let started = std::time::Instant::now();
    let result = deletion(&stack, &task_queue, &file, &machine, &workloads)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    println!("scenario took {:.1}s", started.elapsed().as_secs_f64());

    workloads.clean_up().await;
    if result.is_err() {
        delete_machines(&stack, &task_queue, std::slice::from_ref(&machine)).await;
    }
    drop(worker);
    result
}

async fn deletion(
    stack: &Stack,
    task_queue: &str,
    file: &Path,
    machine: &str,
    workloads: &Workloads,
) -> Result<()> {
    create_machines(stack, task_queue, file, &[machine.to_owned()]).await?;
    let kube = workloads.client().clone();
    let namespace = workloads.namespace();
    let policy = drain_annotation(&kube, machine).await?;
    ensure!(
        policy.get("localData").is_none(),
        "{machine}'s pool leaves localData unset: {policy}"
    );
    let pods = place_pods(workloads, "c", machine).await?;

    let deleted = cli(
        stack,
        task_queue,
        &["machine", "delete", machine, "--wait", "--output", "json"],
    )
    .await?;
    deleted.expect_code(0)?;
    let deleted: ResultDocument<DeletedMachine> = deleted.parse()?;
    let result = &deleted.result;
    println!("delete of {machine}: {deleted}");
    let bare = format!("{namespace}/{}", pods.bare);
    let cache = format!("{namespace}/{}", pods.cache);
    let web = format!("{namespace}/{}", pods.web);
    let expected = lost(&bare, &cache);

    // The result: the machine is gone, its drain evicted all three, two with their data lost.
    ensure!(
        result.vm_deleted && result.node_deleted,
        "the machine was deleted: {deleted}"
    );
    let drained = result
        .drained
        .as_ref()
        .with_context(|| format!("the deletion drained: {deleted}"))?;
    ensure!(
        sorted_strings(&drained.evicted)
            == sorted_strings(&[bare.clone(), cache.clone(), web.clone()]),
        "the deletion's drain evicted all three pods: {deleted}"
    );
    ensure!(
        sorted(&drained.local_data_lost) == expected,
        "the result names the pods with local data lost (the bare and the emptyDir pod, not the plain one): {deleted}"
    );
    ensure!(
        node(&kube, machine).await?.is_none(),
        "{machine}'s Node is gone"
    );

    // The status: the delete's drain step counts them, the drain part names them.
    let doc: MachineStatusDocument = machine_status(stack, task_queue, machine).await?;
    let shown_doc = shown(&doc);
    ensure!(
        doc.workflow_id == format!("delete/{}/{machine}", stack.cluster)
            && doc.run_status == "completed",
        "the status is the completed delete's: {shown_doc}"
    );
    print_steps(&doc.status);
    let drain_step = doc
        .status
        .step(Step::Drain)
        .with_context(|| format!("a drain step in {shown_doc}"))?;
    ensure!(
        drain_step.state == StepState::Done
            && drain_step.detail.as_deref().is_some_and(
                |d| d.contains("3 evicted") && d.contains("2 with their local data lost")
            ),
        "the delete's drain step says 2 pods lost their local data: {}",
        shown(drain_step)
    );
    let drain = doc
        .drain
        .as_ref()
        .with_context(|| format!("the delete's drain in {shown_doc}"))?;
    print_steps(&drain.run);
    ensure!(
        sorted(&drain.local_data_lost) == expected,
        "the delete's status names the pods with local data lost: {shown_doc}"
    );
    ensure!(
        drain
            .run
            .facts
            .get("drainSettings")
            .is_some_and(|s| s.contains("local data evict (the purpose's default)")),
        "the drain says evict is a deletion's default: {}",
        shown(&drain.run.facts)
    );
    for pod in [&bare, &cache, &web] {
        let entry = drain
            .pod(pod)
            .with_context(|| format!("{pod} in {shown_doc}"))?;
        ensure!(
            entry.state == PodState::Gone && entry.evictions == 1,
            "{pod} was evicted once and is gone: {}",
            shown(entry)
        );
    }
    let left = workloads.pods_on(machine).await?;
    ensure!(
        pods.uids.iter().all(|uid| left
            .iter()
            .all(|pod| pod.metadata.uid.as_ref() != Some(uid))),
        "no pod of {machine} is left: {:?}",
        names(&left)
    );
    Ok(())
}

/// The strings, sorted.
fn sorted_strings(list: &[String]) -> Vec<String> {
    let mut strings = list.to_vec();
    strings.sort();
    strings
}
