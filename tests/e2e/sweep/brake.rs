//! The plausibility brake: four old VMs of this cluster and no Node for any of them (as a sweep
//! reading an empty or another cluster's Node list sees them). The sweep brakes, shows its
//! counts in `sweep status` and `sweep report`, and without an approval deletes nothing; a late
//! approval of that run, sent to the next one, and an approval of another count are refused and
//! recorded, and that run deletes nothing either.

use anyhow::{Context, Result, ensure};
use nodewright_model::sweep::{Approval, ApproveSignal};
use nodewright_tests::Stack;
use nodewright_workflows::OrphanSweepWorkflow;
use serde_json::{Value, json};
use temporalio_client::{
    NamespacedClient, WorkflowExecutionInfo, WorkflowHandle, WorkflowSignalOptions,
};

use super::common::{OLD, SweepCluster, await_phase, outcome, own_removals, sweep_in_background};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_that_sees_no_node_for_its_vms_brakes_and_refuses_approvals_of_other_runs()
-> Result<()> {
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    let result = braked(&sweep).await;
    sweep.clean_up().await?;
    result
}

async fn braked(sweep: &SweepCluster) -> Result<()> {
    let vms: Vec<String> = ["brka1", "brkb2", "brkc3", "brkd4"]
        .iter()
        .map(|five| sweep.machine(five))
        .collect();
    sweep
        .seed(
            vms.iter()
                .map(|vm| json!({ "type": "vm", "name": vm, "tags": sweep.ours(vm, OLD) }))
                .collect(),
        )
        .await?;

    // The first run brakes; its status shows why and the counts.
    let first = sweep_in_background(sweep, &["--approval-timeout", "6s"]);
    let status = await_phase(sweep, "braked").await?;
    let first_run_id = status["runId"].as_str().unwrap_or_default().to_owned();
    ensure!(status["brake"]["reason"] == "no-node-matched", "{status}");
    let counts = &status["brake"]["counts"];
    ensure!(
        counts["machines"] == 4 && counts["matched"] == 0 && counts["machineRemovals"] == 4,
        "{counts}"
    );
    ensure!(status["plan"]["delete vm"] == 4, "plan {}", status["plan"]);
    let text = sweep.cli(&["sweep", "status"]).await?;
    ensure!(
        text.stdout
            .contains("brake: no-node-matched — 4 machines, 0 with a Node"),
        "sweep status:\n{}",
        text.stdout
    );
    let (code, audit) = first.await??;
    ensure!(code == Some(3), "braked sweep exit {code:?}: {audit}");
    ensure!(outcome(&audit) == "braked", "outcome {}", audit["outcome"]);
    ensure!(
        audit["brake"]["counts"]["machines"] == 4,
        "{}",
        audit["brake"]
    );
    nothing_deleted(sweep, &audit, &vms).await?;
    let report = sweep.cli(&["sweep", "report"]).await?;
    ensure!(
        report
            .stdout
            .contains("brake: no-node-matched — 4 machines, 0 with a Node"),
        "sweep report:\n{}",
        report.stdout
    );

    // No sweep waits now: `sweep approve` refuses (exit 3) and nothing is kept for later.
    let approve = sweep.cli(&["sweep", "approve"]).await?;
    ensure!(
        approve.code == Some(3),
        "approve without a waiting sweep: exit {:?} {}",
        approve.code,
        approve.stderr
    );

    // The second run brakes too; an approval of the first run and one of another count are
    // refused.
    let second = sweep_in_background(sweep, &["--approval-timeout", "8s"]);
    let status = await_phase(sweep, "braked").await?;
    let planned = status["planned"].as_u64().context("no planned count")?;
    let second_run_id = status["runId"].as_str().unwrap_or_default().to_owned();
    ensure!(second_run_id != first_run_id, "the same run twice");
    let client = sweep.stack.temporal_client().await?;
    let info = WorkflowExecutionInfo::builder()
        .namespace(client.namespace())
        .workflow_id(format!("sweep/{}", sweep.cluster))
        .run_id(second_run_id.clone())
        .build();
    let handle: WorkflowHandle<_, OrphanSweepWorkflow> = WorkflowHandle::new(client, info);
    for (run_id, count, by) in [
        (first_run_id.as_str(), planned, "late@e2e"),
        (second_run_id.as_str(), planned + 1, "miscount@e2e"),
    ] {
        let approval = Approval {
            run_id: run_id.to_owned(),
            planned: u32::try_from(count)?,
            by: by.to_owned(),
        };
        handle
            .signal(
                OrphanSweepWorkflow::approve,
                ApproveSignal::Bound(approval),
                WorkflowSignalOptions::default(),
            )
            .await?;
    }
    let (code, audit) = second.await??;
    ensure!(
        code == Some(3),
        "second braked sweep exit {code:?}: {audit}"
    );
    ensure!(outcome(&audit) == "braked", "outcome {}", audit["outcome"]);
    ensure!(
        audit["approvedBy"].is_null(),
        "approved by {}",
        audit["approvedBy"]
    );
    let refused: Vec<(String, String)> = audit["refusedApprovals"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (text(&r["by"]), text(&r["reason"]))
        })
        .collect();
    ensure!(
        refused.len() == 2
            && refused[0].0 == "late@e2e"
            && refused[0]
                .1
                .starts_with(&format!("it approves run \"{first_run_id}\""))
            && refused[1].0 == "miscount@e2e"
            && refused[1].1.starts_with(&format!(
                "it approves {} planned removals, but this run's plan holds {planned}",
                planned + 1
            )),
        "refused {refused:?}"
    );
    nothing_deleted(sweep, &audit, &vms).await
}

/// Every VM still exists and every removal of the audit was skipped.
async fn nothing_deleted(sweep: &SweepCluster, audit: &Value, vms: &[String]) -> Result<()> {
    let own = own_removals(audit, &sweep.pool);
    ensure!(
        own.len() == vms.len() && own.values().all(|(_, result)| result == "skipped"),
        "{own:?}"
    );
    for vm in vms {
        ensure!(
            sweep.exists("vm", vm).await?,
            "VM {vm} deleted while braked"
        );
    }
    Ok(())
}
