//! The plausibility brake: four old VMs of this cluster and no Node for any of them (as a sweep
//! reading an empty or another cluster's Node list sees them). The sweep brakes, shows its
//! counts in `sweep status` and `sweep report`, and without an approval deletes nothing; a late
//! approval of that run, sent to the next one, and an approval of another count are refused and
//! recorded, and that run deletes nothing either.
//!
//! A cluster-wide NotReady: five machines whose Nodes are all NotReady, three past the health
//! timeout. `sweep run --remediate` would replace only those three (within the share), but more
//! Nodes are NotReady than the share allows (a control-plane or network fault, not broken
//! machines): the brake holds, its counts are in the audit and the report, and nothing is
//! deleted or created.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::sweep::{Approval, ApproveSignal, BrakeReason, SweepAudit, SweepPhase};
use nodewright_tests::Stack;
use nodewright_tests::documents::{RunRow, shown};
use nodewright_workflows::OrphanSweepWorkflow;
use serde_json::json;
use temporalio_client::{
    NamespacedClient, WorkflowExecutionInfo, WorkflowHandle, WorkflowSignalOptions,
};

use super::common::{
    OLD, SweepCluster, ago, await_phase, joined_node, outcome, own_removals, remove_nodes,
    sweep_in_background,
};

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
    let status = await_phase(sweep, SweepPhase::Braked).await?;
    let first_run_id = status.run_id.clone();
    let brake = status
        .status
        .brake
        .as_ref()
        .with_context(|| format!("a braked sweep's brake: {status}"))?;
    ensure!(brake.reason == BrakeReason::NoNodeMatched, "{status}");
    let counts = &brake.counts;
    ensure!(
        counts.machines == 4 && counts.matched == 0 && counts.machine_removals == 4,
        "{}",
        shown(counts)
    );
    ensure!(
        status.status.plan.get("delete vm") == Some(&4),
        "plan {}",
        shown(&status.status.plan)
    );
    let text = sweep.cli(&["sweep", "status"]).await?;
    ensure!(
        text.stdout
            .contains("brake: no-node-matched — 4 machines, 0 with a Node"),
        "sweep status:\n{}",
        text.stdout
    );
    let (code, audit) = first.await??;
    ensure!(
        code == Some(3),
        "braked sweep exit {code:?}: {}",
        shown(&audit)
    );
    ensure!(
        outcome(&audit) == "braked",
        "outcome {}",
        shown(&audit.outcome)
    );
    ensure!(
        audit.brake.as_ref().is_some_and(|b| b.counts.machines == 4),
        "{}",
        shown(&audit.brake)
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
    let status = await_phase(sweep, SweepPhase::Braked).await?;
    let planned = status.status.planned;
    let second_run_id = status.run_id.clone();
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
            planned: count,
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
        "second braked sweep exit {code:?}: {}",
        shown(&audit)
    );
    ensure!(
        outcome(&audit) == "braked",
        "outcome {}",
        shown(&audit.outcome)
    );
    ensure!(
        audit.approved_by.is_none(),
        "approved by {}",
        shown(&audit.approved_by)
    );
    let refused: Vec<(String, String)> = audit
        .refused_approvals
        .iter()
        .map(|r| (r.by.clone(), r.reason.clone()))
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
async fn nothing_deleted(sweep: &SweepCluster, audit: &SweepAudit, vms: &[String]) -> Result<()> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remediation_is_braked_while_more_nodes_than_the_share_are_not_ready() -> Result<()> {
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    let machines: Vec<String> = ["nrdy1", "nrdy2", "nrdy3", "nrdy4", "nrdy5"]
        .iter()
        .map(|five| sweep.machine(five))
        .collect();
    let result = cluster_wide_not_ready(&sweep, &machines).await;
    remove_nodes(&sweep, &machines).await?;
    sweep.clean_up().await?;
    result
}

async fn cluster_wide_not_ready(sweep: &SweepCluster, machines: &[String]) -> Result<()> {
    // Five old machines, each with its Node, every Node silent (Ready Unknown): the first three
    // for two hours, past the health timeout (10m), the other two for a minute.
    sweep
        .seed(
            machines
                .iter()
                .map(|vm| json!({ "type": "vm", "name": vm, "tags": sweep.ours(vm, OLD) }))
                .collect(),
        )
        .await?;
    for (index, machine) in machines.iter().enumerate() {
        joined_node(sweep, machine).await?;
        let since = if index < 3 {
            OLD
        } else {
            Duration::from_secs(60)
        };
        silent_since(sweep, machine, since).await?;
    }

    let (code, audit) = sweep
        .sweep(&["--remediate", "--approval-timeout", "5s"])
        .await?;
    ensure!(
        code == Some(3),
        "braked sweep exit {code:?}: {}",
        shown(&audit)
    );
    ensure!(
        outcome(&audit) == "braked",
        "outcome {}",
        shown(&audit.outcome)
    );
    let brake = audit
        .brake
        .as_ref()
        .with_context(|| format!("a braked sweep's brake: {}", shown(&audit)))?;
    ensure!(
        brake.reason == BrakeReason::ClusterWideNotReady,
        "brake {}",
        shown(brake)
    );
    let counts = &brake.counts;
    ensure!(
        counts.machines == 5
            && counts.matched == 5
            && counts.not_ready == 5
            && counts.planned == 3
            && counts.machine_removals == 3
            && counts.replacements == 3,
        "counts {}",
        shown(counts)
    );
    let own = own_removals(&audit, &sweep.pool);
    ensure!(
        own.len() == 3
            && machines[..3].iter().all(|m| {
                own.get(&("vm".to_owned(), m.clone()))
                    == Some(&("unhealthy".to_owned(), "skipped".to_owned()))
            }),
        "removals {own:?}"
    );
    let report = sweep.cli(&["sweep", "report"]).await?;
    ensure!(
        report.stdout.contains(
            "brake: cluster-wide-not-ready — 5 machines, 5 with a Node, 5 NotReady; 3 removals planned (3 machines, 3 replacements)"
        ),
        "sweep report:\n{}",
        report.stdout
    );

    // Nothing was deleted or created: every VM and Node is there, and the cluster's only runs
    // are the sweep's.
    let nodes: Api<Node> = Api::all(sweep.stack.kube_client().await?);
    for machine in machines {
        ensure!(
            sweep.exists("vm", machine).await?,
            "VM {machine} deleted while braked"
        );
        ensure!(
            nodes.get_opt(machine).await?.is_some(),
            "Node {machine} deleted while braked"
        );
    }
    let runs = sweep.cli(&["--output", "json", "runs"]).await?;
    ensure!(
        runs.code == Some(0),
        "runs exit {:?}: {}",
        runs.code,
        runs.stderr
    );
    let runs: Vec<RunRow> = runs.parse()?;
    let ids: Vec<&str> = runs.iter().map(|run| run.workflow_id.as_str()).collect();
    ensure!(
        !ids.is_empty() && ids.iter().all(|id| id.starts_with("sweep/")),
        "runs of the cluster {ids:?}"
    );
    Ok(())
}

/// Makes Node `name` silent since `since` ago, as the node controller leaves a Node whose
/// kubelet stopped posting: `Ready` `Unknown` (the controller keeps an `Unknown` condition's
/// transition time).
async fn silent_since(sweep: &SweepCluster, name: &str, since: Duration) -> Result<()> {
    let nodes: Api<Node> = Api::all(sweep.stack.kube_client().await?);
    let since = ago(since);
    let status = json!({ "status": { "conditions": [{
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": since,
        "lastTransitionTime": since,
    }]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .with_context(|| format!("making Node {name} silent"))?;
    Ok(())
}
