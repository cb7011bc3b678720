//! `kubectl get events` tells a Node's story in order: the machine joined, its Node was
//! cordoned for a drain, a PodDisruptionBudget refused the eviction of its pod round after round
//! (one Event counting the rounds in its series), the pod was evicted once the budget allowed it,
//! and the Node was deleted with its machine. Every Event is reported by nodewright's worker.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::machine::Outcome;
use nodewright_tests::documents::DrainStatusDocument;
use serde_json::Value;

use super::common::{DrainScene, cli, node_events, wait_drain};

const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_events_tells_the_nodes_story_of_a_drain_held_by_a_budget() -> Result<()> {
    let scene = DrainScene::<2>::start(
        "drain-story",
        "ds",
        &[("timeout", "5m"), ("pdbRetryInterval", "1s")],
    )
    .await?;
    let result = scenario(&scene).await;
    scene.finish(result).await
}

fn reasons(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|event| event["reason"].as_str().unwrap_or_default())
        .collect()
}

async fn scenario(scene: &DrainScene<2>) -> Result<()> {
    let [node_a, node_b] = &scene.machines;
    scene.create_machines().await?;
    let key = scene.hold_web_on(node_a, node_b).await?;
    scene.drain_until_held(node_a, &key).await?;
    // A few more refused rounds (one a second), then the budget lets the pod go.
    tokio::time::sleep(Duration::from_secs(4)).await;
    scene.workloads.set_min_available("web", 0).await?;
    let done = |doc: &DrainStatusDocument| {
        doc.run_status == "completed" && doc.status.run.outcome == Outcome::Succeeded
    };
    wait_drain(
        &scene.stack,
        &scene.task_queue,
        node_a,
        "the drain's end",
        WAIT,
        done,
    )
    .await?;

    let events = node_events(&scene.stack, node_a)?;
    let told = reasons(&events);
    println!("events about {node_a}: {told:?}");
    let position = |reason: &str| {
        told.iter()
            .position(|told| *told == reason)
            .with_context(|| format!("no {reason} Event about {node_a}: {told:?}"))
    };
    let (joined, cordoned, blocked, evicted) = (
        position("Joined")?,
        position("Cordoned")?,
        position("EvictionBlocked")?,
        position("Evicted")?,
    );
    ensure!(
        joined < cordoned && cordoned < blocked && blocked < evicted,
        "the story is in order (Joined, Cordoned, EvictionBlocked, Evicted): {told:?}"
    );
    ensure!(
        told.iter()
            .filter(|reason| **reason == "EvictionBlocked")
            .count()
            == 1,
        "the refused rounds are one Event: {told:?}"
    );
    let blocked = &events[blocked];
    let rounds = blocked["series"]["count"].as_i64().unwrap_or(1);
    ensure!(
        rounds >= 2,
        "the refused rounds are counted in its series: {blocked}"
    );
    let note = blocked["note"].as_str().unwrap_or_default();
    ensure!(
        note.contains(&key) && note.contains("PodDisruptionBudget") && note.contains("/web"),
        "the note names the pod and its budget: {note}"
    );
    ensure!(blocked["type"] == "Warning", "{blocked}");
    let ours = ["Joined", "Cordoned", "EvictionBlocked", "Evicted"];
    for event in events
        .iter()
        .filter(|event| ours.contains(&event["reason"].as_str().unwrap_or_default()))
    {
        ensure!(
            event["reportingController"] == "nodewright.io/worker",
            "reported by nodewright: {event}"
        );
    }

    // The machine's delete ends the story.
    cli(
        &scene.stack,
        &scene.task_queue,
        &["machine", "delete", node_a, "--skip-drain", "--wait"],
    )
    .await?
    .expect_code(0)?;
    let told_after = reasons(&node_events(&scene.stack, node_a)?)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    ensure!(
        told_after.last().map(String::as_str) == Some("Deleted"),
        "the Node's deletion is its last Event: {told_after:?}"
    );
    Ok(())
}
