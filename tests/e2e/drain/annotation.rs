//! The drain-policy annotation is bounded by the pool's settings: a Node may make its drain
//! more patient, never faster or endless, and a refused annotation is reported in the drain's
//! status and as an Event on the Node.
//!
//! Two machines, A and B, of a pool whose `spec.drain` says timeout 30 s, PDB retry 2 s (the VM
//! of each carries them in its `nodewright.io-drain` tag). One pod on A behind a
//! PodDisruptionBudget that allows no disruption.
//!
//! 1. A annotated `{"timeout": 1, "forceAfterUnhealthy": 1}` (what a compromised node would ask
//!    for: force mode at once): `machine drain A` runs with the pool's settings (`drainSettings`
//!    timeout 30s, force after 300s; the deadline 30 s after the start), the pod is still
//!    blocked and on A well past the asked 1 s (graceful, not force-deleted); the status warns
//!    naming both fields, what they asked and what was kept; `machine status A` prints it; one
//!    Warning Event `DrainAnnotationRefused` (reporting controller `nodewright.io/worker`) about
//!    Node A names both fields. The budget is then lifted and the drain finishes.
//! 2. A annotated with a timeout of 10^12 s: the drain uses the pool's 30 s and reports it.
//! 3. A annotated with a longer timeout (120 s, within the 24 h maximum): taken, no warning.

use std::time::Duration;

use super::common::{
    POLL, cli, create_machines, delete_machines, drain_document, drain_pool_file, wait_drain,
};
use anyhow::{Context, Result, ensure};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use nodewright_model::drain::{
    ANNOTATION_DRAIN_POLICY, DrainMode, DrainStatus, PodState, TAG_DRAIN,
};
use nodewright_tests::Stack;
use nodewright_tests::documents::{DrainLookup, DrainStatusDocument, shown};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::poll::eventually;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{Placement, Workload, Workloads, set_unschedulable};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_policy_annotation_may_only_make_the_drain_more_patient_and_a_refusal_is_reported()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("drain-annotation");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("da{}", unique_suffix());
    let machines = [format!("{pool}-k3m4n"), format!("{pool}-p5q6r")];
    let file = drain_pool_file(
        &stack,
        &pool,
        &[
            ("timeout", "30s"),
            ("pdbRetryInterval", "2s"),
            ("forceAfterUnhealthy", "5m"),
        ],
    )?;
    let workloads = Workloads::create(&stack, "drain-annotation").await?;
    let result = scenario(&stack, &task_queue, &pool, &file, &machines, &workloads)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    workloads.clean_up().await;
    delete_machines(&stack, &task_queue, &machines).await;
    drop(worker);
    result
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
    machines: &[String; 2],
    workloads: &Workloads,
) -> Result<()> {
    let [node_a, node_b] = machines;
    create_machines(stack, task_queue, file, machines).await?;
    let kube = workloads.client().clone();

    // The trusted copy: the VM's tag, which the Node cannot write.
    let resources = Sandbox::new(stack)?.machine_resources(node_a).await?;
    let vm = resources.vms.first().context("no VM of A")?;
    ensure!(
        vm["tags"][TAG_DRAIN]
            == "timeout=30,pdbRetryInterval=2,volumeDetachTimeout=120,volumeAttachTimeout=90,forceAfterUnhealthy=300",
        "the VM carries the pool's drain settings: {}",
        vm["tags"]
    );

    // One pod on A that a budget never lets go.
    set_unschedulable(&kube, node_b, true).await?;
    workloads
        .deployment(&Workload::new("web", 1, Placement::pool(pool)))
        .await?;
    let pods = workloads
        .wait_app_running("web", 1, Some(node_a), WAIT)
        .await?;
    let pod_uid = pods.first().and_then(|p| p.metadata.uid.clone());
    let pod = format!(
        "{}/{}",
        workloads.namespace(),
        pods.first()
            .and_then(|p| p.metadata.name.clone())
            .unwrap_or_default()
    );
    workloads.pod_disruption_budget("web", "web", 1).await?;
    set_unschedulable(&kube, node_b, false).await?;

    // 1. Force mode at once, asked by the Node: refused.
    annotate(
        &kube,
        node_a,
        &json!({ "timeout": 1, "forceAfterUnhealthy": 1 }),
    )
    .await?;
    cli(stack, task_queue, &["machine", "drain", node_a])
        .await?
        .expect_code(0)?;
    let blocked = wait_drain(stack, task_queue, node_a, "the pod blocked", WAIT, |doc| {
        doc.status
            .pod(&pod)
            .is_some_and(|p| p.state == PodState::Blocked)
    })
    .await?;
    let status = &blocked.status;
    let settings = drain_settings(status)?;
    ensure!(
        settings.starts_with("timeout 30s, PDB retry 2s,")
            && settings.contains("force after 300s unhealthy")
            && settings.contains("(from the pool, VM tag nodewright.io-drain)"),
        "the pool's settings: {settings}"
    );
    let started = time(status.run.started_at.as_deref())?;
    let deadline = time(status.deadline.as_deref())?;
    let lead = (deadline - started).num_seconds();
    ensure!(
        (30..=33).contains(&lead),
        "the deadline is {lead}s after the start, expected the pool's 30s"
    );
    let warnings = status.warnings.join("\n");
    for said in [
        "annotation nodewright.io/drain-policy of Node",
        "timeout 1s refused (shorter than the pool's",
        "kept 30s",
        "forceAfterUnhealthy 1s refused",
        "kept 300s",
    ] {
        ensure!(
            warnings.contains(said),
            "the status says {said:?}: {warnings}"
        );
    }
    // Well past the asked 1 s: still graceful, the pod still on A, never force-deleted.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let later = drain_document(stack, task_queue, node_a).await?;
    ensure!(
        later.status.mode == DrainMode::Graceful,
        "still graceful 6s later: {later}"
    );
    let on_a = workloads.pods_on(node_a).await?;
    ensure!(
        on_a.iter().any(|p| p.metadata.uid == pod_uid),
        "the blocked pod is still on {node_a}"
    );
    // `machine status` prints the refusal for people.
    let printed = cli(stack, task_queue, &["machine", "status", node_a]).await?;
    printed.expect_code(0)?;
    ensure!(
        printed.stdout.contains("warning") && printed.stdout.contains("timeout 1s refused"),
        "machine status prints the refusal:\n{}",
        printed.stdout
    );
    // One Warning Event about Node A.
    let events = refusal_events(&kube, node_a).await?;
    ensure!(events.len() == 1, "one Event: {events:?}");
    let event = &events[0];
    ensure!(
        event.type_.as_deref() == Some("Warning")
            && event.reporting_controller.as_deref() == Some("nodewright.io/worker")
            && event.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Node"),
        "a Warning from nodewright.io/worker about the Node: {event:?}"
    );
    let note = event.note.clone().unwrap_or_default();
    ensure!(
        note.contains("timeout 1s refused") && note.contains("forceAfterUnhealthy 1s refused"),
        "the Event names the fields: {note}"
    );
    // Lift the budget: the drain finishes gracefully.
    workloads.set_min_available("web", 0).await?;
    let finished = wait_drain(
        stack,
        task_queue,
        node_a,
        "the drain to finish",
        WAIT,
        |doc| doc.run_status == "completed",
    )
    .await?;
    // (The JSON reading looked for `result.forceDeleted`, which `machine status` never prints,
    // so it always read as empty: the pods' own states say whether one was force-deleted.)
    ensure!(
        finished.status.mode == DrainMode::Graceful
            && finished
                .status
                .pod(&pod)
                .is_some_and(|p| p.state == PodState::Gone)
            && finished
                .status
                .pods
                .iter()
                .all(|p| p.state != PodState::ForceDeleted),
        "finished gracefully, the pod gone, nothing force-deleted: {finished}"
    );
    ensure!(
        refusal_events(&kube, node_a).await?.len() == 1,
        "still one Event after the drain"
    );
    uncordon(stack, task_queue, node_a).await?;

    // 2. An enormous timeout: refused, the pool's 30 s kept.
    annotate(&kube, node_a, &json!({ "timeout": 1_000_000_000_000u64 })).await?;
    let (doc, printed) = drain_to_end(stack, task_queue, node_a).await?;
    ensure!(
        printed.contains("warning: annotation nodewright.io/drain-policy")
            && printed.contains("timeout 1000000000000s refused"),
        "the drain's result carries the refusal, and --wait prints it:\n{printed}"
    );
    let settings = drain_settings(&doc.status)?;
    ensure!(
        settings.starts_with("timeout 30s,"),
        "the pool's timeout: {settings}"
    );
    let warnings = doc.status.warnings.join("\n");
    ensure!(
        warnings.contains("timeout 1000000000000s refused (longer than the maximum 24h): kept 30s"),
        "the status names the refused timeout: {warnings}"
    );
    ensure!(
        refusal_events(&kube, node_a).await?.iter().any(|e| e
            .note
            .as_deref()
            .is_some_and(|n| n.contains("1000000000000s"))),
        "an Event for the second drain"
    );
    uncordon(stack, task_queue, node_a).await?;

    // 3. More patient: taken.
    annotate(&kube, node_a, &json!({ "timeout": 120 })).await?;
    let (doc, _) = drain_to_end(stack, task_queue, node_a).await?;
    let status = &doc.status;
    let settings = drain_settings(status)?;
    ensure!(
        settings.starts_with("timeout 120s, PDB retry 2s,")
            && settings.contains("made more patient by the Node's annotation: timeout"),
        "the longer timeout is taken: {settings}"
    );
    let lead =
        (time(status.deadline.as_deref())? - time(status.run.started_at.as_deref())?).num_seconds();
    ensure!(
        (120..=123).contains(&lead),
        "deadline {lead}s after the start"
    );
    ensure!(
        status.warnings.is_empty(),
        "no warning: {}",
        status.warnings.join("; ")
    );
    uncordon(stack, task_queue, node_a).await
}

/// Sets the Node's drain-policy annotation to `policy`.
async fn annotate(kube: &kube::Client, node: &str, policy: &Value) -> Result<()> {
    let edit =
        json!({ "metadata": { "annotations": { ANNOTATION_DRAIN_POLICY: policy.to_string() } } });
    Api::<Node>::all(kube.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&edit))
        .await?;
    Ok(())
}

/// `machine drain NODE --wait`, then its status; and what the CLI printed.
async fn drain_to_end(
    stack: &Stack,
    task_queue: &str,
    node: &str,
) -> Result<(DrainStatusDocument, String)> {
    let drained = cli(stack, task_queue, &["machine", "drain", node, "--wait"]).await?;
    ensure!(
        drained.code == Some(0),
        "the drain finishes: {}{}",
        drained.stdout,
        drained.stderr
    );
    Ok((
        drain_document(stack, task_queue, node).await?,
        drained.stdout,
    ))
}

/// `machine uncordon NODE`, then waits until the Node is schedulable again.
async fn uncordon(stack: &Stack, task_queue: &str, node: &str) -> Result<()> {
    cli(stack, task_queue, &["machine", "uncordon", node])
        .await?
        .expect_code(0)?;
    let kube = stack.kube_client().await?;
    eventually(&format!("{node} schedulable again"), WAIT, POLL, || async {
        let found = Api::<Node>::all(kube.clone()).get(node).await?;
        let cordoned = found.spec.and_then(|s| s.unschedulable).unwrap_or(false);
        Ok((!cordoned).then_some(()))
    })
    .await
}

/// The `DrainAnnotationRefused` Events about `node`.
async fn refusal_events(kube: &kube::Client, node: &str) -> Result<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(kube.clone(), "default");
    let listed = events.list(&ListParams::default()).await?;
    Ok(listed
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("DrainAnnotationRefused")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(node)
        })
        .collect())
}

/// The drain settings the run took, as its `drainSettings` fact says them.
fn drain_settings(status: &DrainStatus) -> Result<&str> {
    status
        .run
        .facts
        .get("drainSettings")
        .map(String::as_str)
        .with_context(|| format!("no drainSettings fact in {}", shown(status)))
}

fn time(value: Option<&str>) -> Result<DateTime<Utc>> {
    let text = value.context("no time where one was expected")?;
    Ok(DateTime::parse_from_rfc3339(text)?.with_timezone(&Utc))
}
