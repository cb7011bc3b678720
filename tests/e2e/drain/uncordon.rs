//! Uncordon that respects others (issue 30, item 7): `machine uncordon` is refused while a drain
//! of the machine runs, and a cordon an administrator set before nodewright's drain survives it.
//!
//! One machine A of a pool whose `spec.drain` says timeout 10 min, PDB retry 2 s, with a
//! Deployment `web` of one pod under a budget with `minAvailable` 1. An administrator cordons A
//! (`spec.unschedulable`, as `kubectl cordon` does). `machine drain A`: while `web`'s pod is held
//! by its budget, `machine uncordon A` exits 5 (a conflicting job runs) naming the running drain and `machine cancel`,
//! and A is still cordoned and tainted. The budget is relaxed and the drain completes; A carries
//! `nodewright.io/cordoned-before-drain: "true"`. `machine uncordon A` then removes
//! nodewright's draining taint and keeps the administrator's cordon, saying so
//! (`keptCordon: true`); `machine uncordon A --force` makes A schedulable and removes the
//! annotation. A foreign taint put on A before the drain is there at every step.

use std::time::Duration;

use super::common::{DrainScene, cli, wait_drain};
use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::drain::TAINT_DRAINING;
use nodewright_model::machine::Outcome;
use nodewright_model::machine::uncordon::ANNOTATION_CORDONED_BEFORE_DRAIN;
use nodewright_tests::machines::node;
use nodewright_tests::workloads::set_unschedulable;
use serde::Deserialize;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);

/// A drain that waits for the budget: long timeout, quick PDB retries.
const SETTINGS: [(&str, &str); 5] = [
    ("timeout", "10m"),
    ("pdbRetryInterval", "2s"),
    ("volumeDetachTimeout", "30s"),
    ("volumeAttachTimeout", "30s"),
    ("forceAfterUnhealthy", "10m"),
];

/// A taint nodewright did not put there: every uncordon must keep it.
const FOREIGN_TAINT: &str = "example.com/dedicated";

/// What `machine uncordon NAME --output json` prints.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UncordonDocument {
    workflow_id: String,
    message: String,
    kept_cordon: bool,
}

/// What the test reads off the Node at each step.
#[derive(Debug, PartialEq)]
struct NodeMarks {
    unschedulable: bool,
    draining_taint: bool,
    foreign_taint: bool,
    cordoned_before_drain: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncordon_is_refused_during_a_drain_and_keeps_an_administrators_cordon() -> Result<()> {
    let scene = DrainScene::<1>::start("drain-uncordon", "du", &SETTINGS).await?;
    let result = scenario(&scene).await;
    scene.finish(result).await
}

async fn scenario(scene: &DrainScene<1>) -> Result<()> {
    let DrainScene {
        stack,
        task_queue,
        pool: _,
        machines: [node_a],
        workloads,
        ..
    } = scene;
    let kube = workloads.client().clone();
    scene.create_machines().await?;

    let web_key = scene.web_under_budget(node_a).await?;

    // The administrator's cordon and a foreign taint, before any drain.
    set_unschedulable(&kube, node_a, true).await?;
    add_foreign_taint(&kube, node_a).await?;
    let before = marks(&kube, node_a).await?;
    ensure!(
        before.unschedulable && before.foreign_taint && !before.draining_taint,
        "{node_a} cordoned by the administrator, not by nodewright: {before:?}"
    );

    scene.drain_until_held(node_a, &web_key).await?;

    // While the drain runs, uncordon is refused and changes nothing.
    let refused = cli(stack, task_queue, &["machine", "uncordon", node_a]).await?;
    refused.expect_code(5)?;
    let drain_id = format!("drain/{}/{node_a}", stack.cluster);
    ensure!(
        refused.stderr.contains(&drain_id) && refused.stderr.contains("machine cancel"),
        "the refusal names the running drain and `machine cancel`: {}",
        refused.stderr
    );
    let during = marks(&kube, node_a).await?;
    ensure!(
        during.unschedulable && during.draining_taint && during.foreign_taint,
        "the refused uncordon left {node_a} cordoned and tainted: {during:?}"
    );
    let still = wait_drain(stack, task_queue, node_a, "the drain", WAIT, |_| true).await?;
    ensure!(
        still.is_running(),
        "the refused uncordon did not end the drain: {still}"
    );

    // The budget lets web's pod go: the drain completes and records the earlier cordon.
    workloads.set_min_available("web", 0).await?;
    let done = wait_drain(
        stack,
        task_queue,
        node_a,
        "the drain to complete",
        WAIT,
        |doc| !doc.is_running(),
    )
    .await?;
    ensure!(
        done.run_status == "completed" && done.status.run.outcome == Outcome::Succeeded,
        "the drain succeeded: {done}"
    );
    let drained = marks(&kube, node_a).await?;
    ensure!(
        drained
            == NodeMarks {
                unschedulable: true,
                draining_taint: true,
                foreign_taint: true,
                cordoned_before_drain: true,
            },
        "after the drain {node_a} is cordoned, tainted and records the earlier cordon: {drained:?}"
    );

    // Uncordon keeps the administrator's cordon and says so; nodewright's taint goes.
    let kept: UncordonDocument = cli(
        stack,
        task_queue,
        &["machine", "uncordon", node_a, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()?;
    ensure!(
        kept.kept_cordon && kept.message.contains("--force"),
        "uncordon kept the administrator's cordon and said how to clear it: {kept:?}"
    );
    ensure!(
        kept.workflow_id == format!("uncordon/{}/{node_a}", stack.cluster),
        "the uncordon's run: {kept:?}"
    );
    let after_kept = marks(&kube, node_a).await?;
    ensure!(
        after_kept
            == NodeMarks {
                unschedulable: true,
                draining_taint: false,
                foreign_taint: true,
                cordoned_before_drain: true,
            },
        "after the plain uncordon: {after_kept:?}"
    );

    // --force clears the cordon too, and the record of it; the foreign taint stays.
    let forced: UncordonDocument = cli(
        stack,
        task_queue,
        &["machine", "uncordon", node_a, "--force", "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()?;
    ensure!(
        !forced.kept_cordon,
        "the forced uncordon cleared the cordon: {forced:?}"
    );
    let after_forced = marks(&kube, node_a).await?;
    ensure!(
        after_forced
            == NodeMarks {
                unschedulable: false,
                draining_taint: false,
                foreign_taint: true,
                cordoned_before_drain: false,
            },
        "after the forced uncordon: {after_forced:?}"
    );
    println!("uncordon: refused during the drain, kept the cordon, then --force: {after_forced:?}");
    Ok(())
}

/// Adds [`FOREIGN_TAINT`] to the Node's taints (a JSON merge patch replaces the list: the
/// current taints are read first).
async fn add_foreign_taint(kube: &kube::Client, node_name: &str) -> Result<()> {
    let found = node(kube, node_name)
        .await?
        .with_context(|| format!("no Node {node_name}"))?;
    let mut taints = found.spec.and_then(|s| s.taints).unwrap_or_default();
    taints.push(serde_json::from_value(json!({
        "key": FOREIGN_TAINT, "value": "infra", "effect": "PreferNoSchedule",
    }))?);
    let nodes: Api<Node> = Api::all(kube.clone());
    nodes
        .patch(
            node_name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "taints": taints } })),
        )
        .await?;
    Ok(())
}

async fn marks(kube: &kube::Client, node_name: &str) -> Result<NodeMarks> {
    let found: Node = node(kube, node_name)
        .await?
        .with_context(|| format!("no Node {node_name}"))?;
    let spec = found.spec.unwrap_or_default();
    let taints = spec.taints.unwrap_or_default();
    Ok(NodeMarks {
        unschedulable: spec.unschedulable.unwrap_or(false),
        draining_taint: taints.iter().any(|t| t.key == TAINT_DRAINING),
        foreign_taint: taints.iter().any(|t| t.key == FOREIGN_TAINT),
        cordoned_before_drain: found
            .metadata
            .annotations
            .unwrap_or_default()
            .get(ANNOTATION_CORDONED_BEFORE_DRAIN)
            .is_some_and(|v| v == "true"),
    })
}
