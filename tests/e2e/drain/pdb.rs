//! A PodDisruptionBudget that can never allow a disruption holds a maintenance drain until its
//! deadline, and force mode ends it.
//!
//! Two machines of a pool whose `spec.drain` says timeout 20 s, PDB retry 2 s. A Deployment of
//! three pods on the first machine (the second is cordoned while they start, then uncordoned) and
//! a budget with `minAvailable` = 3: every eviction is refused with 429. `machine drain A`:
//!
//! - while it waits, `machine status --output json` shows every pod `blocked`, and `pdbsBlocking`
//!   names the budget as misconfigured (all its pods healthy, no disruption allowed), the pods
//!   stay on A;
//! - `machine extend-drain A --by 15s` moves the `deadline` exactly 15 s later, and the drain is
//!   still graceful past the original deadline;
//! - at the extended deadline it switches to force mode (reason: the deadline), deletes the three
//!   pods with grace period 0 (`force-deleted`) and completes; the Deployment's pods run on B,
//!   none is left on A, and evictions were retried no more often than the retry interval;
//! - A stays cordoned and tainted until `machine uncordon A`.

use std::time::Duration;

use super::common::{DrainScene, POLL, cli, create_machines, drain_document, wait_drain};
use anyhow::{Context, Result, bail, ensure};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use nodewright_model::drain::{ANNOTATION_DRAIN_POLICY, DrainMode, PodState, TAINT_DRAINING};
use nodewright_model::machine::{Outcome, Step, StepState};
use nodewright_tests::documents::{DrainLookup, print_steps, shown};
use nodewright_tests::machines::node;
use nodewright_tests::workloads::{Placement, Workload, Workloads, set_unschedulable};
use serde_json::{Value, json};

const REPLICAS: usize = 3;
/// The pool's drain timeout, and how much `extend-drain` adds.
const TIMEOUT_SECONDS: i64 = 20;
const EXTEND_SECONDS: i64 = 15;
const PDB_RETRY_SECONDS: i64 = 2;
const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_allowing_no_disruption_holds_the_drain_until_its_extended_deadline_then_force_mode_moves_the_pods()
-> Result<()> {
    let scene = DrainScene::<2>::start(
        "drain-pdb",
        "dp",
        &[
            ("timeout", "20s"),
            ("pdbRetryInterval", "2s"),
            ("volumeDetachTimeout", "30s"),
            ("volumeAttachTimeout", "60s"),
            ("forceAfterUnhealthy", "5m"),
        ],
    )
    .await?;
    let started = std::time::Instant::now();
    let result = scenario(&scene).await;
    println!("scenario took {:.1}s", started.elapsed().as_secs_f64());
    scene.finish(result).await
}

async fn scenario(scene: &DrainScene<2>) -> Result<()> {
    let DrainScene {
        stack,
        task_queue,
        pool,
        pool_file,
        machines,
        workloads,
        ..
    } = scene;
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    let namespace = workloads.namespace();
    create_machines(stack, task_queue, pool_file, machines).await?;

    // The pool's drain settings were recorded on the Node at create.
    let recorded = node_annotation(&kube, node_a, ANNOTATION_DRAIN_POLICY).await?;
    let recorded: Value = serde_json::from_str(recorded.as_deref().unwrap_or("null"))?;
    ensure!(
        recorded
            == json!({
                "timeout": 20, "pdbRetryInterval": 2, "volumeDetachTimeout": 30,
                "volumeAttachTimeout": 60, "forceAfterUnhealthy": 300,
            }),
        "drain policy annotation on {node_a}: {recorded}"
    );

    // Three pods on A, a budget that never lets one go; B open for them.
    set_unschedulable(&kube, node_b, true).await?;
    let replicas = i32::try_from(REPLICAS)?;
    workloads
        .deployment(&Workload::new("web", replicas, Placement::pool(pool)))
        .await?;
    let before = workloads
        .wait_app_running("web", REPLICAS, Some(node_a), WAIT)
        .await?;
    let keys: Vec<String> = before
        .iter()
        .map(|pod| {
            format!(
                "{namespace}/{}",
                pod.metadata.name.clone().unwrap_or_default()
            )
        })
        .collect();
    let uids: Vec<String> = before
        .iter()
        .filter_map(|pod| pod.metadata.uid.clone())
        .collect();
    workloads
        .pod_disruption_budget("web", "web", replicas)
        .await?;
    set_unschedulable(&kube, node_b, false).await?;
    let pdb = format!("{namespace}/web");

    let drain_started = Utc::now();
    cli(stack, task_queue, &["machine", "drain", node_a])
        .await?
        .expect_code(0)?;

    // 1. Blocked: every pod refused by the budget, which is called misconfigured.
    let blocked = wait_drain(
        stack,
        task_queue,
        node_a,
        "every pod blocked by a misconfigured PDB",
        WAIT,
        |doc| {
            let status = &doc.status;
            let all_blocked = keys.iter().all(|key| {
                status
                    .pod(key)
                    .is_some_and(|p| p.state == PodState::Blocked)
            });
            let budget = status.pdbs_blocking.iter().find(|b| b.pdb == pdb);
            all_blocked && budget.is_some_and(|b| b.misconfigured && b.pods.len() == REPLICAS)
        },
    )
    .await?;
    let status = &blocked.status;
    ensure!(blocked.run_status == "running", "{blocked}");
    ensure!(status.mode == DrainMode::Graceful, "{blocked}");
    ensure!(
        status.pdbs_blocking.len() == 1 && status.pdbs_blocking[0].disruptions_allowed == 0,
        "one blocking budget allowing no disruption: {blocked}"
    );
    let budget = &status.pdbs_blocking[0];
    let mut blocked_pods: Vec<String> = budget.pods.clone();
    blocked_pods.sort();
    let mut sorted_keys = keys.clone();
    sorted_keys.sort();
    ensure!(
        blocked_pods == sorted_keys,
        "the budget blocks {blocked_pods:?}, expected {sorted_keys:?}"
    );
    for key in &keys {
        let pod = status.pod(key).context("pod entry")?;
        ensure!(pod.evictions >= 1, "{key} was evicted: {}", shown(pod));
        let detail = pod.detail.as_deref().context("a blocked pod's detail")?;
        ensure!(
            detail.contains(&pdb) && detail.contains("misconfigured"),
            "{key}'s detail names the misconfigured budget: {}",
            shown(pod)
        );
    }
    let started_at = time(status.run.started_at.as_deref())?;
    let original = time(status.deadline.as_deref())?;
    let lead = (original - started_at).num_seconds();
    ensure!(
        (TIMEOUT_SECONDS..=TIMEOUT_SECONDS + 3).contains(&lead),
        "deadline {original} is {lead}s after the start {started_at}, expected the pool's {TIMEOUT_SECONDS}s"
    );
    ensure_cordoned(&kube, node_a, true).await?;
    ensure_pods_unmoved(workloads, node_a, &uids).await?;
    println!(
        "every pod blocked {:.1}s after the drain started, {:.1}s before the deadline {original}",
        (Utc::now() - drain_started).as_seconds_f64(),
        (original - Utc::now()).as_seconds_f64()
    );

    // 2. Extend by 15 s, well before the original deadline.
    let left = original - Utc::now();
    ensure!(
        left > chrono::Duration::seconds(3),
        "only {left} left before the deadline {original}: the test was too slow to extend it"
    );
    let extended = cli(
        stack,
        task_queue,
        &[
            "machine",
            "extend-drain",
            node_a,
            "--by",
            &format!("{EXTEND_SECONDS}s"),
        ],
    )
    .await?;
    extended.expect_code(0)?;
    ensure!(
        extended.stdout.contains("drain deadline moved"),
        "extend-drain says what it did: {}",
        extended.stdout
    );
    let moved = wait_drain(
        stack,
        task_queue,
        node_a,
        "the deadline to move",
        WAIT,
        |doc| time(doc.status.deadline.as_deref()).is_ok_and(|d| d != original),
    )
    .await?;
    let deadline = time(moved.status.deadline.as_deref())?;
    ensure!(
        deadline - original == chrono::Duration::seconds(EXTEND_SECONDS),
        "deadline moved from {original} to {deadline}, expected +{EXTEND_SECONDS}s"
    );
    println!("deadline {original} extended to {deadline}");

    // 3. Graceful past the original deadline; force mode at the extended one.
    let mut graceful_at: Option<DateTime<Utc>> = None;
    let (reason, forced) = loop {
        let asked = Utc::now();
        let doc = drain_document(stack, task_queue, node_a).await?;
        match &doc.status.mode {
            DrainMode::Graceful => {
                graceful_at = Some(asked);
                if asked > original {
                    ensure_pods_unmoved(workloads, node_a, &uids)
                        .await
                        .with_context(|| format!("graceful after the original deadline: {doc}"))?;
                }
            }
            DrainMode::Force { reason } => break (reason.clone(), doc),
        }
        if Utc::now() > deadline + chrono::Duration::seconds(30) {
            bail!("no force mode 30 s after the extended deadline {deadline}: {doc}");
        }
        tokio::time::sleep(POLL).await;
    };
    let graceful_at = graceful_at.context("never saw the drain graceful after extending it")?;
    ensure!(
        graceful_at >= original + chrono::Duration::seconds(1),
        "the last graceful look was at {graceful_at}, not after the original deadline {original}"
    );
    ensure!(
        reason.contains("deadline"),
        "force reason names the deadline: {forced}"
    );
    println!(
        "graceful at {graceful_at} (original deadline {original}), force mode by {} ({reason})",
        Utc::now()
    );

    // 4. The drain completes; the pods were deleted with grace period 0 and run on B.
    let finished = wait_drain(
        stack,
        task_queue,
        node_a,
        "the drain to complete",
        WAIT,
        |doc| !doc.is_running(),
    )
    .await?;
    let status = &finished.status;
    ensure!(
        finished.run_status == "completed" && status.run.outcome == Outcome::Succeeded,
        "the drain succeeded: {finished}"
    );
    let force_step = status
        .step(Step::ForceDrain)
        .context("a force-drain step")?;
    let force_started = time(force_step.started_at.as_deref())?;
    // Never before the extended deadline; the upper bound only tells "at that deadline" from
    // "much later" (a loaded machine delays the look that notices it by a few seconds).
    ensure!(
        force_started >= deadline && force_started <= deadline + chrono::Duration::seconds(30),
        "force mode began at {force_started}, expected at the extended deadline {deadline}"
    );
    ensure!(
        force_step.state == StepState::Done
            && force_step.detail.as_deref().is_some_and(
                |d| d.contains(&format!("{REPLICAS} pods deleted with grace period 0"))
            ),
        "force-drain step: {}",
        shown(force_step)
    );
    let evict_step = status.step(Step::EvictPods).context("an evict-pods step")?;
    ensure!(
        evict_step
            .detail
            .as_deref()
            .is_some_and(|d| d.contains("deadline")),
        "evict-pods was interrupted by the deadline: {}",
        shown(evict_step)
    );
    let tries = (force_started - drain_started).num_seconds() / PDB_RETRY_SECONDS + 2;
    for key in &keys {
        let pod = status.pod(key).context("pod entry")?;
        ensure!(
            pod.state == PodState::ForceDeleted,
            "{key} force-deleted: {}",
            shown(pod)
        );
        ensure!(
            pod.detail.as_deref() == Some("deleted with grace period 0"),
            "{key} deleted with grace period 0: {}",
            shown(pod)
        );
        let evictions = i64::from(pod.evictions);
        ensure!(
            (2..=tries).contains(&evictions),
            "{key}: {evictions} evictions; expected one per {PDB_RETRY_SECONDS}s retry interval, at most {tries}"
        );
    }
    ensure!(
        status.pdbs_blocking.is_empty(),
        "no budget blocks anything once forced: {finished}"
    );
    print_steps(&status.run);
    for pod in &status.pods {
        println!("  pod {}", shown(pod));
    }
    let after = workloads
        .wait_app_running("web", REPLICAS, Some(node_b), WAIT)
        .await?;
    ensure!(
        after.iter().all(|pod| pod
            .metadata
            .uid
            .as_ref()
            .is_none_or(|uid| !uids.contains(uid))),
        "the pods on {node_b} are new ones"
    );
    ensure!(
        workloads.pods_on(node_a).await?.is_empty(),
        "no pod of the test left on {node_a}"
    );

    // A maintenance drain leaves the node cordoned; uncordon undoes it.
    ensure_cordoned(&kube, node_a, true).await?;
    cli(stack, task_queue, &["machine", "uncordon", node_a])
        .await?
        .expect_code(0)?;
    ensure_cordoned(&kube, node_a, false).await?;
    Ok(())
}

/// Fails unless the pods with `uids` are all still on `node` and not being deleted.
async fn ensure_pods_unmoved(workloads: &Workloads, node: &str, uids: &[String]) -> Result<()> {
    let pods = workloads.pods_on(node).await?;
    let there: Vec<&String> = pods
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter_map(|pod| pod.metadata.uid.as_ref())
        .collect();
    ensure!(
        uids.iter().all(|uid| there.contains(&uid)),
        "the pods {uids:?} are no longer all on {node}: {there:?}"
    );
    Ok(())
}

/// Fails unless `node` is cordoned and tainted `nodewright.io/draining` (or neither).
async fn ensure_cordoned(kube: &kube::Client, node_name: &str, cordoned: bool) -> Result<()> {
    let found: Node = node(kube, node_name)
        .await?
        .with_context(|| format!("no Node {node_name}"))?;
    let spec = found.spec.unwrap_or_default();
    let unschedulable = spec.unschedulable.unwrap_or(false);
    let tainted = spec
        .taints
        .unwrap_or_default()
        .iter()
        .any(|t| t.key == TAINT_DRAINING && t.effect == "NoSchedule");
    ensure!(
        unschedulable == cordoned && tainted == cordoned,
        "{node_name}: unschedulable {unschedulable}, draining taint {tainted}; expected {cordoned}"
    );
    Ok(())
}

// ---- helpers shared in spirit with the other drain tests ---------------------------------------

fn time(value: Option<&str>) -> Result<DateTime<Utc>> {
    let text = value.context("no time where one was expected")?;
    Ok(DateTime::parse_from_rfc3339(text)
        .with_context(|| format!("{text} is not RFC 3339"))?
        .with_timezone(&Utc))
}

async fn node_annotation(kube: &kube::Client, name: &str, key: &str) -> Result<Option<String>> {
    let found = node(kube, name)
        .await?
        .with_context(|| format!("no Node {name}"))?;
    Ok(found
        .metadata
        .annotations
        .and_then(|annotations| annotations.get(key).cloned()))
}
