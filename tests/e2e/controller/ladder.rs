//! The remediation ladder `[restart, replace]` with `remediationTimeout: 1m` (and
//! `maxUnhealthy: 1`): a Node reporting
//! `KernelDeadlock=True` (as node-problem-detector would) is unhealthy at once (timeout 0s);
//! the controller restarts its VM (the status's last actions say so); the condition still
//! holds a minute later (the test sets it again after the restart, as a deadlock that survives
//! a reboot), so the next rung replaces the machine: deleted, a new one Ready, back to 2.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{apply, await_status, await_world, controller_pool_file, delete_pool};

const UP: Duration = Duration::from_secs(300);

#[tokio::test]
async fn a_kernel_deadlock_is_restarted_then_replaced_when_it_persists() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-ladder");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cl{}", unique_suffix());
    // maxUnhealthy 1: the default 40% of 2 machines is 0, which never remediates.
    let health = "  health:\n    maxUnhealthy: 1\n    remediation: [restart, replace]\n    remediationTimeout: 1m\n";
    let file = controller_pool_file(&stack, &pool, 2, "24.04.1", health)?;
    let outcome = scenario(&stack, &task_queue, &pool, &file)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

/// Sets `KernelDeadlock=True` on the Node's status, as node-problem-detector reports it.
async fn report_deadlock(nodes: &Api<Node>, node: &str) -> Result<()> {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let patch = serde_json::json!({
        "status": { "conditions": [{
            "type": "KernelDeadlock", "status": "True", "reason": "DockerHung",
            "message": "task docker:1234 blocked for more than 120 seconds",
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        }]}
    });
    nodes
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    Ok(())
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
) -> Result<()> {
    apply(stack, task_queue, file).await?;
    let first = await_world(stack, pool, "2 Ready machines", UP, |w| w.is_steady(2)).await?;
    let sick = first.vms.iter().next().context("a VM")?.clone();
    let nodes: Api<Node> = Api::all(stack.kube_client().await?);
    report_deadlock(&nodes, &sick).await?;

    let restarted = await_status(stack, task_queue, pool, "the restart rung", UP, |d| {
        d.status
            .last_actions
            .iter()
            .any(|a| a.text.contains("restart") && a.text.contains(&sick))
    })
    .await?;
    ensure!(
        restarted
            .status
            .remediations
            .iter()
            .any(|r| r.machine == sick && r.rung == 0),
        "the restart rung is not in the remediations: {:?}",
        restarted.status.remediations
    );
    // The deadlock survives the reboot.
    report_deadlock(&nodes, &sick).await?;
    let replaced = await_world(
        stack,
        pool,
        "the machine replaced after the restart rung",
        UP,
        |w| w.is_steady(2) && !w.vms.contains(&sick),
    )
    .await?;
    ensure!(replaced.vms.len() == 2, "{replaced:?}");
    Ok(())
}
