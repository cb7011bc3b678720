//! Remediation: a pool machine whose Node has been NotReady longer than the health timeout is
//! reported by a plain sweep, left alone by `sweep run --remediate` while its Node is annotated
//! `nodewright.io/do-not-disrupt: "true"`, and then replaced by `sweep run --remediate` — a
//! CreateMachine from the pool's last completed rollout, and a DeleteMachine of the broken one,
//! the create started only once the delete had started (the sweep's history says so).

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::disruption::ANNOTATION_DO_NOT_DISRUPT;
use nodewright_model::sweep::{Action, Outcome, Rule, SweepAudit};
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use nodewright_tests::kube_objects::is_node_ready;
use nodewright_tests::poll::eventually;
use nodewright_tests::stack::history_json;
use serde_json::Value;

use super::common::{SweepCluster, entry, kept_rule, outcome};
use crate::rollout::common::{PoolShape, clean_up_pool, pool_machines, roll, rollout_pool_file};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remediate_replaces_a_machine_not_ready_past_the_health_timeout() -> Result<()> {
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    let result = remediate(&sweep).await;
    clean_up_pool(&sweep.stack, &sweep.task_queue, &sweep.pool).await;
    sweep.clean_up().await?;
    result
}

async fn remediate(sweep: &SweepCluster) -> Result<()> {
    let file = rollout_pool_file(&sweep.stack, &sweep.pool, &PoolShape::new(1, "1", "0"))?;
    roll(&sweep.stack, &sweep.task_queue, &file, &[]).await?;
    let machines = pool_machines(&sweep.stack, &sweep.pool).await?;
    let broken = machines
        .first()
        .context("the rollout made no machine")?
        .clone();

    // The VM powers off: its kubelet stops, the node controller marks the Node NotReady.
    nodewright_tests::machines::vm_action(&sweep.stack, &broken, "powerOff").await?;
    let nodes: Api<Node> = Api::all(sweep.stack.kube_client().await?);
    eventually(
        &format!("Node {broken} to become NotReady"),
        Duration::from_secs(180),
        Duration::from_secs(1),
        || async {
            let node = nodes.get(&broken).await?;
            Ok((!is_node_ready(&node)).then_some(()))
        },
    )
    .await?;

    let entry = |audit: &SweepAudit| entry(audit, &broken).cloned();
    // The Node's NotReady may be seconds old when the test first sees it (the health timeout
    // counts from the condition's lastTransitionTime): sweep until the machine is reported.
    let mut last_rule = None;
    let mut reported = None;
    for _ in 0..10 {
        let (code, audit) = sweep.sweep(&["--health-timeout", "10s"]).await?;
        ensure!(code == Some(0), "report-only sweep exit {code:?}: {audit}");
        reported = entry(&audit);
        if reported.is_some() {
            break;
        }
        last_rule = kept_rule(&audit, "vm", &broken);
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let reported = reported.with_context(|| {
        format!("the unhealthy machine is not in the audit; it was kept by {last_rule:?}")
    })?;
    ensure!(
        reported.decision.rule == Rule::Unhealthy && reported.decision.action == Action::Report,
        "{}",
        shown(&reported)
    );

    // Marked do-not-disrupt, the machine is left alone by a remediating sweep (a remediation is
    // voluntary), and the audit names the mark; the mark removed, the next sweep replaces it.
    let mark = |value: Option<&str>| serde_json::json!({ "metadata": { "annotations": { ANNOTATION_DO_NOT_DISRUPT: value } } });
    nodes
        .patch(
            &broken,
            &PatchParams::default(),
            &Patch::Merge(&mark(Some("true"))),
        )
        .await?;
    let (code, audit) = sweep
        .sweep(&["--remediate", "--health-timeout", "10s"])
        .await?;
    ensure!(code == Some(0), "remediating sweep exit {code:?}: {audit}");
    let held = entry(&audit).context("the marked machine is not in the audit")?;
    let left_alone = matches!(
        (&held.decision.action, &held.outcome),
        (Action::Replace, Some(Outcome::LeftAlone { reason })) if reason.contains(ANNOTATION_DO_NOT_DISRUPT)
    );
    ensure!(
        left_alone,
        "a do-not-disrupt machine was not left alone: {}",
        shown(&held)
    );
    ensure!(
        pool_machines(&sweep.stack, &sweep.pool)
            .await?
            .contains(&broken),
        "the marked machine's VM is gone"
    );
    nodes
        .patch(&broken, &PatchParams::default(), &Patch::Merge(&mark(None)))
        .await?;

    let (code, audit) = sweep
        .sweep(&["--remediate", "--health-timeout", "10s"])
        .await?;
    ensure!(code == Some(0), "remediating sweep exit {code:?}: {audit}");
    ensure!(outcome(&audit) == "completed");
    let replaced = entry(&audit).context("the unhealthy machine is not in the audit")?;
    let workflows: Vec<String> = match (&replaced.decision.action, &replaced.outcome) {
        (Action::Replace, Some(Outcome::Replacing { workflows })) => workflows.clone(),
        _ => bail!("replaced, with its workflows: {}", shown(&replaced)),
    };
    ensure!(
        workflows
            .iter()
            .any(|w| w.starts_with(&format!("create/{}/{}-", sweep.cluster, sweep.pool)))
            && workflows.contains(&format!("delete/{}/{broken}", sweep.cluster)),
        "workflows {workflows:?}"
    );
    // The replacement's create was started only once its machine's delete had started: in the
    // sweep's history, the CreateMachine's start is initiated after the DeleteMachine started.
    let delete_id = format!("delete/{}/{broken}", sweep.cluster);
    let create_id = workflows
        .iter()
        .find(|w| w.starts_with("create/"))
        .context("no create among the workflows")?;
    let events = history_events(sweep, &format!("sweep/{}", sweep.cluster)).await?;
    let position = |attributes: &str, id: &str| {
        events.iter().position(|event| {
            let attributes = &event[attributes];
            attributes["workflowId"].as_str() == Some(id)
                || attributes["workflowExecution"]["workflowId"].as_str() == Some(id)
        })
    };
    let delete_started = position("childWorkflowExecutionStartedEventAttributes", &delete_id)
        .with_context(|| format!("the sweep's history has no start of {delete_id}"))?;
    let create_initiated = position(
        "startChildWorkflowExecutionInitiatedEventAttributes",
        create_id,
    )
    .with_context(|| format!("the sweep's history does not start {create_id}"))?;
    ensure!(
        delete_started < create_initiated,
        "{create_id} was initiated (event {}) before {delete_id} had started (event {})",
        events[create_initiated]["eventId"],
        events[delete_started]["eventId"]
    );
    let replacement = eventually(
        "the replacement to be Ready and the broken machine gone",
        Duration::from_secs(300),
        Duration::from_secs(2),
        || async {
            let machines = pool_machines(&sweep.stack, &sweep.pool).await?;
            let [only] = machines.as_slice() else {
                return Ok(None);
            };
            if *only == broken {
                return Ok(None);
            }
            let ready = nodes
                .get_opt(only)
                .await?
                .is_some_and(|n| is_node_ready(&n));
            Ok(ready.then(|| only.clone()))
        },
    )
    .await?;
    // The DeleteMachine deletes the Node a few steps after the VM: wait for it to go.
    eventually(
        &format!("Node {broken} to be deleted"),
        Duration::from_secs(120),
        Duration::from_secs(1),
        || async { Ok(nodes.get_opt(&broken).await?.is_none().then_some(())) },
    )
    .await?;
    println!("replaced {broken} with {replacement}");
    Ok(())
}

/// The events of the latest run of `workflow_id` (`temporal workflow show --output json`), in
/// history order.
async fn history_events(sweep: &SweepCluster, workflow_id: &str) -> Result<Vec<Value>> {
    let history = history_json(&sweep.stack, workflow_id).await?;
    Ok(history["events"].as_array().cloned().unwrap_or_default())
}
