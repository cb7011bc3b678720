//! Detection delay: a pool of 2 whose only unhealthy condition is `KernelDeadlock=True` held for
//! 20 s (`maxUnhealthy: 1`, ladder `[replace]`). The test sets the condition on one Node with a
//! `lastTransitionTime` T it chooses; the controller must count the machine unhealthy since
//! exactly T + 20 s (the status's `since`) and replace it.
//!
//! The delay d between the condition's timeout expiring and the controller counting it is
//! printed, never asserted (a timing assertion fails on a loaded machine and proves nothing):
//! d is the remediation's `startedAt` (the workflow time of the decision that found the machine
//! unhealthy and started its replacement) minus T + 20 s. The controller's wait is honest about
//! this: a condition that holds but not yet for its timeout is `Pending` with the instant it
//! turns unhealthy, and the Node watch answers at that `recheck_at` (or at the next VM listing,
//! whichever comes first). The issue asks for "counted within 10 s of its timeout".

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::controller::PoolStatusDocument;
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{apply, await_world, cli, controller_pool_file, delete_pool};

const UP: Duration = Duration::from_secs(300);

/// The condition's timeout in the pool file.
const TIMEOUT_SECS: i64 = 20;

/// How often the status is read while the condition holds.
const POLL: Duration = Duration::from_millis(500);

#[tokio::test]
async fn a_condition_is_counted_at_its_timeout_and_the_delay_is_printed() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-detect");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cd{}", unique_suffix());
    let health = format!(
        "  health:\n    unhealthyConditions:\n      - {{ type: KernelDeadlock, status: \"True\", timeout: {TIMEOUT_SECS}s }}\n    maxUnhealthy: 1\n    remediation: [replace]\n"
    );
    let file = controller_pool_file(&stack, &pool, 2, "24.04.1", &health)?;
    let outcome = scenario(&stack, &task_queue, &pool, &file)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

/// Sets `KernelDeadlock=True` on the Node with `lastTransitionTime` `at`.
async fn report_deadlock(nodes: &Api<Node>, node: &str, at: DateTime<Utc>) -> Result<()> {
    let at = at.to_rfc3339_opts(SecondsFormat::Secs, true);
    let patch = serde_json::json!({
        "status": { "conditions": [{
            "type": "KernelDeadlock", "status": "True", "reason": "DockerHung",
            "message": "task docker:1234 blocked for more than 120 seconds",
            "lastHeartbeatTime": at, "lastTransitionTime": at,
        }]}
    });
    nodes
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    Ok(())
}

/// The controller's status, or `None` when the CLI could not read it this time.
async fn read_status(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
) -> Result<Option<PoolStatusDocument>> {
    let answer = cli(
        stack,
        task_queue,
        &["pool", "status", pool, "--output", "json"],
    )
    .await?;
    if answer.code != Some(0) {
        return Ok(None);
    }
    Ok(Some(answer.parse()?))
}

/// Unix seconds of an RFC 3339 time the controller wrote.
fn unix(rfc3339: &str) -> Result<i64> {
    Ok(DateTime::parse_from_rfc3339(rfc3339)
        .with_context(|| format!("not an RFC 3339 time: {rfc3339}"))?
        .timestamp())
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

    // T: a whole second (the condition's time has second precision), now.
    let t = Utc::now().timestamp();
    let transition = DateTime::from_timestamp(t, 0).context("a time")?;
    report_deadlock(&nodes, &sick, transition).await?;
    let due = t + TIMEOUT_SECS;

    // Poll every 500 ms: the first status that counts it, and the remediation it started.
    let deadline = tokio::time::Instant::now() + UP;
    let mut pending_seen = false;
    let (counted, first_seen_at) = loop {
        if let Some(document) = read_status(stack, task_queue, pool).await? {
            let unhealthy = document.status.unhealthy.iter().find(|u| u.machine == sick);
            let remediation = document
                .status
                .remediations
                .iter()
                .find(|r| r.machine == sick);
            if unhealthy.is_some() || remediation.is_some() {
                break (document.clone(), Utc::now());
            }
            if document
                .status
                .observed_at
                .as_deref()
                .map(unix)
                .transpose()?
                >= Some(t + 1)
            {
                pending_seen = true;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("{sick} was never counted unhealthy within {UP:?}");
        }
        tokio::time::sleep(POLL).await;
    };
    let remediation = counted
        .status
        .remediations
        .iter()
        .find(|r| r.machine == sick)
        .context("the controller counted the machine but started no remediation")?;
    ensure!(
        remediation.reason == format!("KernelDeadlock=True for {TIMEOUT_SECS}s"),
        "the remediation's reason: {remediation:?}"
    );
    if let Some(unhealthy) = counted.status.unhealthy.iter().find(|u| u.machine == sick) {
        ensure!(
            unhealthy.since == due,
            "unhealthy since {} but the condition's timeout expired at {due}: {unhealthy:?}",
            unhealthy.since
        );
    }
    let observed = counted
        .status
        .observed_at
        .as_deref()
        .map(unix)
        .transpose()?;
    let delay = remediation.started_at - due;
    let due_at = transition + chrono::Duration::seconds(TIMEOUT_SECS);
    let polled = (first_seen_at - due_at).num_milliseconds() as f64 / 1000.0;
    println!(
        "detection: KernelDeadlock=True set at {t} with timeout {TIMEOUT_SECS}s (due {due}); the controller counted {sick} unhealthy and started its replacement at {} : d = {delay} s after the timeout (the issue: counted within 10 s of its timeout); first seen by this test's 500 ms polling {polled:.1} s after the timeout; status observedAt then {}; the controller had looked after T before: {pending_seen}",
        remediation.started_at,
        observed.map_or_else(|| "none".to_owned(), |o| o.to_string()),
    );

    let replaced = await_world(stack, pool, "the machine replaced, back to 2", UP, |w| {
        w.is_steady(2) && !w.vms.contains(&sick) && !w.nodes.contains(&sick)
    })
    .await?;
    let kept: Vec<&String> = first.vms.iter().filter(|vm| **vm != sick).collect();
    ensure!(
        kept.iter().all(|vm| replaced.vms.contains(*vm)),
        "the healthy machine {kept:?} was touched: {replaced:?}"
    );
    Ok(())
}
