//! The outdated taint after a rollout that does not complete: a pool of 2 machines rolled to a
//! new template with a canary of 1, so it waits for approval with its old machine tainted
//! `nodewright.io/outdated`. Aborted, it removes the taint before it ends; cancelled (`pool
//! rollout cancel`), too. Terminated (no workflow code runs), it leaves the taint, and the orphan
//! sweep removes it as `stale-outdated-taint`: a dry run only lists it, a sweep removes that taint
//! and keeps the others (the template's `dedicated` and one put by someone else).
//!
//! The test runs under a cluster name of its own, so the sweep takes only this test's machines
//! for its cluster's, and nothing else of the shared stack is touched.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use nodewright_model::ownership::LABEL_POOL;
use nodewright_model::rollout::{RolloutPhase, TAINT_OUTDATED};
use nodewright_model::sweep::{Action, Outcome, Rule, SubjectKind};
use nodewright_tests::Stack;
use nodewright_tests::documents::SweepAuditDocument;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use super::common::{
    PoolShape, await_rollout, clean_up_pool, cli, roll, rollout_pool_file, start_rollout, terminate,
};

/// How long a phase of a rollout, or a taint, may take to show.
const WAIT: Duration = Duration::from_secs(180);
/// The taint someone else put on the pool's Node: the sweep must leave it.
const FOREIGN_TAINT: &str = "e2e.example/foreign";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outdated_taint_goes_after_an_abort_a_cancel_and_a_termination() -> Result<()> {
    let mut stack = Stack::load()?;
    stack.cluster = format!("oae-{}", unique_suffix());
    let task_queue = unique_task_queue("oae");
    let pool = format!("oa{}", unique_suffix());
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = scenario(&stack, &task_queue, &pool)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    clean_up_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

async fn scenario(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let shape = PoolShape::new(2, "1", "0");
    let v1 = rollout_pool_file(stack, pool, &shape)?;
    roll(stack, task_queue, &v1, &[]).await?;
    let v2 = rollout_pool_file(stack, pool, &shape.version("24.04.2"))?;
    let nodes: Api<Node> = Api::all(stack.kube_client().await?);

    // 1. Abort: the taint goes before the rollout ends.
    canary_waiting(stack, task_queue, pool, &v2, &nodes).await?;
    cli(stack, task_queue, &["pool", "rollout", "abort", pool])
        .await?
        .expect_code(0)?;
    await_rollout(stack, task_queue, pool, "the abort", WAIT, |s| {
        s.phase == RolloutPhase::Aborted
    })
    .await?;
    let tainted = tainted_nodes(&nodes, pool).await?;
    ensure!(
        tainted.is_empty(),
        "after the abort no Node of the pool carries {TAINT_OUTDATED}: {tainted:?}"
    );

    // 2. Cancel: the same.
    canary_waiting(stack, task_queue, pool, &v2, &nodes).await?;
    cli(stack, task_queue, &["pool", "rollout", "cancel", pool])
        .await?
        .expect_code(0)?;
    await_rollout(stack, task_queue, pool, "the cancellation", WAIT, |s| {
        s.phase == RolloutPhase::Canceled
    })
    .await?;
    let tainted = tainted_nodes(&nodes, pool).await?;
    ensure!(
        tainted.is_empty(),
        "after the cancellation no Node of the pool carries {TAINT_OUTDATED}: {tainted:?}"
    );

    // 3. Terminated: the taint stays, with nobody to remove it but the sweep.
    let old = canary_waiting(stack, task_queue, pool, &v2, &nodes).await?;
    terminate(stack, &format!("rollout/{}/{pool}", stack.cluster)).await;
    add_foreign_taint(&nodes, &old).await?;

    // The dry run lists it (once visibility no longer lists the rollout as running) and
    // changes nothing.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let planned = loop {
        let (code, audit) = sweep(stack, task_queue, &["--dry-run"]).await?;
        ensure!(code == Some(0), "the dry run succeeds: exit {code:?}");
        let entry = audit
            .entries
            .iter()
            .find(|e| e.decision.kind == SubjectKind::Node && e.decision.name == old)
            .cloned();
        match entry {
            Some(entry) => break entry,
            None if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            None => anyhow::bail!(
                "the dry run does not list Node {old} as a stale taint: {}",
                serde_json::to_string(&audit.0)?
            ),
        }
    };
    ensure!(
        planned.decision.rule == Rule::StaleOutdatedTaint
            && planned.decision.action == Action::Untaint
            && planned.outcome == Some(Outcome::Planned),
        "the dry run plans to remove the stale taint: {planned:?}"
    );
    ensure!(
        tainted_nodes(&nodes, pool).await? == [old.clone()],
        "the dry run changed nothing: Node {old} still carries {TAINT_OUTDATED}"
    );

    // A sweep removes it, and only it.
    let (code, audit) = sweep(stack, task_queue, &[]).await?;
    ensure!(code == Some(0), "the sweep succeeds: exit {code:?}");
    let done = audit
        .entries
        .iter()
        .find(|e| e.decision.name == old)
        .with_context(|| format!("the sweep lists Node {old}"))?;
    ensure!(
        done.decision.rule == Rule::StaleOutdatedTaint && done.outcome == Some(Outcome::Untainted),
        "the sweep removed the stale taint: {done:?}"
    );
    ensure!(
        audit.planned() == 0 && audit.removals().next().is_none(),
        "nothing removed: the pool is whole"
    );
    let tainted = tainted_nodes(&nodes, pool).await?;
    ensure!(
        tainted.is_empty(),
        "after the sweep no Node of the pool carries {TAINT_OUTDATED}: {tainted:?}"
    );
    let keys = taint_keys(&nodes.get(&old).await?);
    ensure!(
        keys.iter().any(|k| k == FOREIGN_TAINT) && keys.iter().any(|k| k == "dedicated"),
        "the other taints stay: {keys:?}"
    );
    Ok(())
}

/// Starts the rollout to `file` with a canary of 1 and waits until it waits for approval with
/// the pool's old machine tainted; returns that machine's Node.
async fn canary_waiting(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
    nodes: &Api<Node>,
) -> Result<String> {
    start_rollout(stack, task_queue, file, &["--canary", "1"]).await?;
    await_rollout(
        stack,
        task_queue,
        pool,
        "the canary to wait for approval",
        WAIT,
        |s| s.phase == RolloutPhase::AwaitingApproval,
    )
    .await?;
    nodewright_tests::eventually(
        "the old machine's Node to carry the outdated taint",
        WAIT,
        Duration::from_millis(500),
        || async {
            let tainted = tainted_nodes(nodes, pool).await?;
            Ok(match tainted.as_slice() {
                [one] => Some(one.clone()),
                _ => None,
            })
        },
    )
    .await
}

/// The Nodes of `pool` carrying the outdated taint, by name.
async fn tainted_nodes(nodes: &Api<Node>, pool: &str) -> Result<Vec<String>> {
    let listed = nodes
        .list(&ListParams::default().labels(&format!("{LABEL_POOL}={pool}")))
        .await?;
    let mut names: Vec<String> = listed
        .items
        .iter()
        .filter(|node| taint_keys(node).iter().any(|k| k == TAINT_OUTDATED))
        .filter_map(|node| node.metadata.name.clone())
        .collect();
    names.sort();
    Ok(names)
}

fn taint_keys(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_ref())
        .map(|taints| taints.iter().map(|t| t.key.clone()).collect())
        .unwrap_or_default()
}

/// Adds a taint of someone else's to Node `name` (its taints kept).
async fn add_foreign_taint(nodes: &Api<Node>, name: &str) -> Result<()> {
    let node = nodes.get(name).await?;
    let mut taints = node
        .spec
        .as_ref()
        .and_then(|spec| spec.taints.clone())
        .unwrap_or_default();
    taints.push(k8s_openapi::api::core::v1::Taint {
        key: FOREIGN_TAINT.to_owned(),
        value: Some("yes".to_owned()),
        effect: "PreferNoSchedule".to_owned(),
        time_added: None,
    });
    let patch = json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "spec": { "taints": taints },
    });
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// `sweep run --wait --output json` plus `extra`: the exit code and the audit.
async fn sweep(
    stack: &Stack,
    task_queue: &str,
    extra: &[&str],
) -> Result<(Option<i32>, SweepAuditDocument)> {
    let mut args = vec!["--output", "json", "sweep", "run", "--wait"];
    args.extend_from_slice(extra);
    let result = cli(stack, task_queue, &args).await?;
    let audit = result
        .parse()
        .with_context(|| format!("sweep run (exit {:?})", result.code))?;
    Ok((result.code, audit))
}
