//! Both lanes at once, and a pod selected by two PodDisruptionBudgets (issue 30, items 1 and 2).
//!
//! Two machines of a pool whose `spec.drain` says timeout 45 s, PDB retry 2 s. On A: a
//! Deployment `web` of one pod selected by two budgets (a team-wide `team` over every pod of the
//! namespace with `app`, and a per-service `web`), which the eviction API refuses with 500, and
//! a StatefulSet `db` of one pod on an Azure Disk CSI volume. `machine drain A --wait`:
//!
//! - the status shows `web`'s pod blocked, its detail naming both budgets, while `db-0` is moved
//!   gracefully: evicted once (not force-deleted), its volume detached from A and attached on B,
//!   the pod Running on B — all before the deadline;
//! - at the deadline force mode deletes `web`'s pod with grace period 0 and the drain completes;
//!   nothing but the DaemonSet-free A is left: no pod of the test on A, one VolumeAttachment of
//!   the volume, on B.

use std::time::Duration;

use super::common::{DrainScene, cli, create_machines, drain_document};
use anyhow::{Context, Result, bail, ensure};
use chrono::{DateTime, Utc};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::PostParams;
use nodewright_model::drain::{DrainMode, PodState, VolumeState};
use nodewright_model::machine::Outcome;
use nodewright_tests::documents::{DrainLookup, shown};
use nodewright_tests::workloads::{
    Placement, TEST_LABEL, Workload, attachments_of, is_attached, set_unschedulable, wait_attached,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
const TIMEOUT_SECONDS: i64 = 45;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_two_budgets_select_waits_for_force_mode_while_the_stateful_pod_moves_gracefully()
-> Result<()> {
    let mut scene = DrainScene::<2>::start(
        "drain-lanes",
        "dl",
        &[
            ("timeout", "45s"),
            ("pdbRetryInterval", "2s"),
            ("volumeDetachTimeout", "30s"),
            ("volumeAttachTimeout", "30s"),
            ("forceAfterUnhealthy", "10m"),
        ],
    )
    .await?;
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
    let namespace = workloads.namespace().to_owned();
    create_machines(stack, task_queue, pool_file, machines).await?;

    set_unschedulable(&kube, node_b, true).await?;
    let placement = Placement::pool(pool);
    workloads
        .deployment(&Workload::new("web", 1, placement.clone()))
        .await?;
    let volumes = workloads
        .stateful_set(&Workload::new("db", 1, placement))
        .await?;
    let volume = volumes.first().context("db's volume")?.clone();
    let web = workloads
        .wait_app_running("web", 1, Some(node_a), WAIT)
        .await?;
    workloads
        .wait_app_running("db", 1, Some(node_a), WAIT)
        .await?;
    wait_attached(&kube, &volume.name, node_a, WAIT).await?;
    let web_pod = web
        .first()
        .and_then(|p| p.metadata.name.clone())
        .context("web's pod")?;
    let web_key = format!("{namespace}/{web_pod}");
    let db_key = format!("{namespace}/db-0");

    // Two budgets select web's pod: the per-service one and a team-wide one.
    workloads.pod_disruption_budget("web", "web", 0).await?;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(kube.clone(), &namespace);
    let team: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": { "name": "team", "labels": { TEST_LABEL.0: TEST_LABEL.1 } },
        "spec": { "maxUnavailable": 1, "selector": { "matchExpressions": [
            { "key": "app", "operator": "In", "values": ["web"] },
        ] } },
    }))?;
    budgets.create(&PostParams::default(), &team).await?;
    set_unschedulable(&kube, node_b, false).await?;

    let started = Utc::now();
    cli(stack, task_queue, &["machine", "drain", node_a])
        .await?
        .expect_code(0)?;

    // While web's pod is refused, db-0 moves: its volume attached on B before the deadline.
    let mut names_both = None;
    let mut moved_at: Option<DateTime<Utc>> = None;
    let done = loop {
        let doc = drain_document(stack, task_queue, node_a).await?;
        let status = &doc.status;
        if let Some(pod) = status.pod(&web_key)
            && pod.state == PodState::Blocked
            && names_both.is_none()
        {
            names_both = pod.detail.clone();
        }
        if moved_at.is_none()
            && status
                .volume(&volume.name)
                .is_some_and(|v| v.state == VolumeState::Reattached)
        {
            moved_at = Some(Utc::now());
            ensure!(
                status.mode == DrainMode::Graceful,
                "db-0 moved in graceful mode: {doc}"
            );
        }
        if !doc.is_running() {
            break doc;
        }
        if Utc::now() > started + chrono::Duration::seconds(TIMEOUT_SECONDS + 120) {
            bail!("the drain did not end 2 minutes after its deadline: {doc}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let detail = names_both.context("web's pod was never shown blocked")?;
    ensure!(
        detail.contains("more than one PodDisruptionBudget")
            && detail.contains(&format!("{namespace}/team"))
            && detail.contains(&format!("{namespace}/web")),
        "the blocked pod's detail names both budgets: {detail}"
    );
    let moved_at = moved_at.context("db-0's volume never shown reattached")?;
    let status = &done.status;
    let deadline: DateTime<Utc> = status.deadline.as_deref().context("a deadline")?.parse()?;
    ensure!(
        moved_at < deadline,
        "db-0's volume reattached at {moved_at}, after the deadline {deadline}"
    );
    ensure!(
        done.run_status == "completed" && status.run.outcome == Outcome::Succeeded,
        "the drain succeeded: {done}"
    );
    ensure!(
        matches!(&status.mode, DrainMode::Force { reason } if reason.contains("deadline")),
        "force mode at the deadline: {done}"
    );
    let db = status.pod(&db_key).context("db-0 in the status")?;
    ensure!(
        db.state == PodState::Gone && db.evictions == 1,
        "db-0 evicted once and gone, not force-deleted: {}",
        shown(db)
    );
    let web_entry = status.pod(&web_key).context("web's pod in the status")?;
    ensure!(
        web_entry.state == PodState::ForceDeleted && web_entry.evictions >= 2,
        "web's pod refused, asked again, then force-deleted: {}",
        shown(web_entry)
    );

    // The world: nothing of the test left on A; db-0 on B, its volume attached there only.
    let left: Vec<String> = workloads
        .pods_on(node_a)
        .await?
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    ensure!(left.is_empty(), "pods left on {node_a}: {left:?}");
    workloads
        .wait_app_running("db", 1, Some(node_b), WAIT)
        .await?;
    let attachments = attachments_of(&kube, &volume.name).await?;
    ensure!(
        attachments.len() == 1
            && attachments[0].spec.node_name == *node_b
            && is_attached(&attachments[0]),
        "{}: one attached VolumeAttachment, on {node_b}: {attachments:?}",
        volume.name
    );
    println!(
        "db-0 moved {:.1}s after the drain started, {:.1}s before the deadline; web's pod: {}",
        (moved_at - started).as_seconds_f64(),
        (deadline - moved_at).as_seconds_f64(),
        shown(web_entry)
    );
    Ok(())
}
