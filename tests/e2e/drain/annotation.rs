//! A drain-policy annotation edited beyond its bounds: the drain keeps the pool's fields that
//! still read, takes the default for the bad one, says so in its status, and finishes.
//!
//! One machine of a pool with `spec.drain` timeout 60s and PDB retry 7s; its Node's
//! `nodewright.io/drain-policy` annotation is then edited to a timeout of 999,999,999 s (about
//! 31 years, beyond the 24h maximum). `machine drain NAME --wait` drains it: the status's
//! `drainSettings` shows the default timeout (7200s) next to the pool's PDB retry (7s), and a
//! warning names the field, its value and the maximum.

use super::common::{cli, create_machines, delete_machines, drain_pool_file, drain_status};
use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::drain::ANNOTATION_DRAIN_POLICY;
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, node};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_policy_annotation_beyond_its_bounds_keeps_the_pools_other_settings() -> Result<()>
{
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("drain-annotation");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("da{}", unique_suffix());
    let machine = format!("{pool}-k3m4n");
    let file = drain_pool_file(
        &stack,
        &pool,
        &[("timeout", "60s"), ("pdbRetryInterval", "7s")],
    )?;
    let result = scenario(&stack, &task_queue, &file, &machine)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_machines(&stack, &task_queue, &[machine]).await;
    drop(worker);
    result
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    file: &std::path::Path,
    machine: &str,
) -> Result<()> {
    create_machines(stack, task_queue, file, &[machine.to_owned()]).await?;
    let kube = stack.kube_client().await?;
    let found: Node = node(&kube, machine)
        .await?
        .with_context(|| format!("no Node {machine}"))?;
    let text = found
        .metadata
        .annotations
        .and_then(|a| a.get(ANNOTATION_DRAIN_POLICY).cloned())
        .with_context(|| format!("{machine} has no {ANNOTATION_DRAIN_POLICY}"))?;
    let mut policy: Value = serde_json::from_str(&text)?;
    ensure!(
        policy["pdbRetryInterval"] == 7,
        "the pool's settings: {policy}"
    );
    policy["timeout"] = json!(999_999_999u64);
    let edit =
        json!({ "metadata": { "annotations": { ANNOTATION_DRAIN_POLICY: policy.to_string() } } });
    Api::<Node>::all(kube.clone())
        .patch(machine, &PatchParams::default(), &Patch::Merge(&edit))
        .await?;

    let drained = cli(stack, task_queue, &["machine", "drain", machine, "--wait"]).await?;
    ensure!(
        drained.code == Some(0),
        "the drain finishes: {}{}",
        drained.stdout,
        drained.stderr
    );
    let status = drain_status(stack, task_queue, machine).await?;
    let settings = status["status"]["run"]["facts"]["drainSettings"]
        .as_str()
        .with_context(|| format!("no drainSettings in {status}"))?;
    ensure!(
        settings.starts_with("timeout 7200s, PDB retry 7s,"),
        "the default timeout and the pool's PDB retry: {settings}"
    );
    let warnings = status["status"]["warnings"].to_string();
    ensure!(
        warnings.contains("timeout 999999999s is longer than the maximum 24h")
            && warnings.contains("the pool's other settings from the annotation"),
        "the status warns naming the field: {warnings}"
    );
    Ok(())
}
