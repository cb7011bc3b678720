//! A fresh plan after waiting: two orphan VMs and a machine with its Node, `--max-deletions 1`,
//! so the sweep waits for approval. One orphan's Node joins during the wait; after `sweep
//! approve` the sweep lists everything again and keeps that VM (`changed while waiting for
//! approval`), deleting only the other.

use anyhow::{Result, bail, ensure};
use nodewright_model::sweep::{Outcome, SweepPhase};
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use serde_json::json;

use super::common::{
    OLD, SweepCluster, await_phase, entry, joined_node, outcome, own_removals, remove_nodes,
    sweep_in_background,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_joins_during_the_approval_wait_keeps_its_vm() -> Result<()> {
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    let (joins, orphan, healthy) = (
        sweep.machine("joins"),
        sweep.machine("orphn"),
        sweep.machine("hlthy"),
    );
    let result = replan(&sweep, &joins, &orphan, &healthy).await;
    remove_nodes(&sweep, &[joins, healthy]).await?;
    sweep.clean_up().await?;
    result
}

async fn replan(sweep: &SweepCluster, joins: &str, orphan: &str, healthy: &str) -> Result<()> {
    sweep
        .seed(
            [joins, orphan, healthy]
                .iter()
                .map(|vm| json!({ "type": "vm", "name": vm, "tags": sweep.ours(vm, OLD) }))
                .collect(),
        )
        .await?;
    joined_node(sweep, healthy).await?;

    let running = sweep_in_background(
        sweep,
        &["--max-deletions", "1", "--approval-timeout", "60s"],
    );
    let status = await_phase(sweep, SweepPhase::AwaitingApproval).await?;
    ensure!(status.status.brake.is_none(), "braked: {status}");
    ensure!(
        status.status.plan.get("delete vm") == Some(&2),
        "plan {}",
        shown(&status.status.plan)
    );
    joined_node(sweep, joins).await?;
    let approve = sweep.cli(&["sweep", "approve"]).await?;
    ensure!(
        approve.code == Some(0),
        "sweep approve exit {:?}: {}{}",
        approve.code,
        approve.stdout,
        approve.stderr
    );
    ensure!(
        approve.stdout.contains("2 delete vm"),
        "the plan shown: {}",
        approve.stdout
    );
    let (code, audit) = running.await??;
    ensure!(code == Some(0), "approved sweep exit {code:?}: {audit}");
    ensure!(
        outcome(&audit) == "completed",
        "outcome {}",
        shown(&audit.outcome)
    );
    let own = own_removals(&audit, &sweep.pool);
    let result = |name: &str| {
        own.get(&("vm".to_owned(), name.to_owned()))
            .map(|(_, result)| result.clone())
    };
    ensure!(result(orphan).as_deref() == Some("deleted"), "{own:?}");
    ensure!(result(joins).as_deref() == Some("skipped"), "{own:?}");
    let note = match entry(&audit, joins).and_then(|e| e.outcome.as_ref()) {
        Some(Outcome::Skipped { reason } | Outcome::LeftAlone { reason }) => reason.as_str(),
        _ => bail!("no reason for the VM that joined: {audit}"),
    };
    ensure!(
        note.starts_with("changed while waiting for approval: now keep by rule"),
        "{note}"
    );
    ensure!(sweep.exists("vm", joins).await?, "VM {joins} was deleted");
    ensure!(
        !sweep.exists("vm", orphan).await?,
        "VM {orphan} still exists"
    );
    Ok(())
}
