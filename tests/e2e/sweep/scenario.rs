//! The seeded scenario: one of each kind of orphan, and one of each thing a sweep must keep, in
//! the same resource group and cluster. A dry run plans exactly the four orphans and the Node
//! and deletes nothing; the sweep then deletes exactly those and keeps the rest, each with the
//! right rule in the audit. A NIC and a VM with the cluster's tags but names nodewright never
//! gives are kept (`name-not-ours`). A machine with its Node is among them: a sweep that sees
//! no Node for any of the cluster's VMs brakes (see `brake.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use nodewright_model::ownership::TAG_TEMPLATE;
use nodewright_model::sweep::SweepAudit;
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use nodewright_tests::machines::write_pool_file;
use nodewright_tests::poll::eventually;
use serde_json::json;

use super::common::{
    OLD, SweepCluster, ago, foreign_tag, joined_node, kept_rule, outcome, own_removals,
};
use crate::rollout::common::terminate;
use nodewright_tests::scrape::scrape;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_deletes_exactly_the_orphans_and_keeps_everything_else_for_its_reason() -> Result<()>
{
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    // The machine whose create runs never joins: its workflow keeps running.
    let fault = sweep
        .sandbox
        .add_fault(json!({ "kind": "never_joins", "vm": sweep.machine("runng") }))
        .await?;
    let result = scenario(&sweep).await;
    sweep.sandbox.remove_fault(fault).await?;
    let kube = stack.kube_client().await?;
    let nodes: Api<Node> = Api::all(kube.clone());
    for name in [sweep.machine("gonen"), sweep.machine("hlthy")] {
        let _ = nodes.delete(&name, &DeleteParams::default()).await;
    }
    let volumes: Api<PersistentVolume> = Api::all(kube);
    let _ = volumes
        .delete(&format!("pv-{}", sweep.pool), &DeleteParams::default())
        .await;
    terminate(
        &sweep.stack,
        &format!("create/{}/{}", sweep.cluster, sweep.machine("runng")),
    )
    .await;
    let pool = sweep.pool.clone();
    sweep.sandbox.remove_seeded(&format!("pvc-{pool}")).await?;
    sweep.clean_up().await?;
    result
}

async fn scenario(sweep: &SweepCluster) -> Result<()> {
    let (orphan, young, lone_nic, lone_disk, gone, running) = (
        sweep.machine("orphn"),
        sweep.machine("young"),
        format!("{}-nic", sweep.machine("lonen")),
        format!("{}-osdisk", sweep.machine("loned")),
        sweep.machine("gonen"),
        sweep.machine("runng"),
    );
    let (other, untagged) = (sweep.machine("other"), sweep.machine("untag"));
    let healthy = sweep.machine("hlthy");
    // Our tags on a NIC nodewright never names so (anyone with tag rights can write them).
    let (foreign_nic, foreign_vm) = (
        format!("{}-billing-nic", sweep.pool),
        format!("{}-Billing_VM", sweep.pool),
    );
    let (pv_bound, pv_released) = (
        format!("pvc-{}-bound", sweep.pool),
        format!("pvc-{}-released", sweep.pool),
    );
    let csi_tags = |pv: &str| {
        json!({
            "k8s-azure-created-by": "kubernetes-azure-dd",
            "kubernetes.io-created-for-pv-name": pv,
            // A StorageClass may tag its disks with anything, even the cluster tag.
            "nodewright.io-cluster": sweep.cluster,
        })
    };
    // The stuck create's VM was made by an earlier create of the same template (no create-run
    // tag): the create adopts it. Another template's VM would be a taken name, and the create
    // would fail at once (`create-name-taken-touches-nothing`).
    let mut running_tags = sweep.ours(&running, OLD);
    running_tags[TAG_TEMPLATE] = json!(stuck_template(sweep)?);
    sweep
        .seed(vec![
            json!({ "type": "vm", "name": orphan, "tags": sweep.ours(&orphan, OLD) }),
            json!({ "type": "vm", "name": young, "tags": sweep.ours(&young, Duration::from_secs(60)) }),
            json!({ "type": "nic", "name": lone_nic, "tags": sweep.ours(&sweep.machine("lonen"), OLD) }),
            json!({ "type": "disk", "name": lone_disk, "tags": sweep.ours(&sweep.machine("loned"), OLD) }),
            json!({ "type": "vm", "name": other, "tags": { "nodewright.io-cluster": "someone-else", "nodewright.io-machine": other, "nodewright.io-created": ago(OLD) } }),
            json!({ "type": "vm", "name": untagged, "tags": {} }),
            json!({ "type": "disk", "name": pv_bound, "tags": csi_tags("pv-bound") }),
            json!({ "type": "disk", "name": pv_released, "tags": csi_tags("pv-released") }),
            json!({ "type": "vm", "name": running, "tags": running_tags }),
            json!({ "type": "vm", "name": healthy, "tags": sweep.ours(&healthy, OLD) }),
            json!({ "type": "nic", "name": foreign_nic, "tags": sweep.ours(&sweep.machine("lonen"), OLD) }),
            json!({ "type": "vm", "name": foreign_vm, "tags": sweep.ours(&foreign_vm, OLD) }),
        ])
        .await?;
    joined_node(sweep, &healthy).await?;
    let kube = sweep.stack.kube_client().await?;
    gone_vm_node(&kube, sweep, &gone).await?;
    bound_volume(&kube, sweep, &pv_bound).await?;
    start_stuck_create(sweep, &running).await?;

    let planned = BTreeMap::from([
        (("vm".to_owned(), orphan.clone()), "orphan-vm"),
        (("nic".to_owned(), lone_nic.clone()), "orphan-nic"),
        (("disk".to_owned(), lone_disk.clone()), "orphan-disk"),
        (("node".to_owned(), gone.clone()), "orphan-node"),
    ]);
    let expect = |audit: &SweepAudit, result: &str| -> Result<()> {
        let own = own_removals(audit, &sweep.pool);
        let wanted: BTreeMap<_, _> = planned
            .iter()
            .map(|(key, rule)| (key.clone(), ((*rule).to_owned(), result.to_owned())))
            .collect();
        ensure!(own == wanted, "removals {own:#?}, expected {wanted:#?}");
        let arm_removals: Vec<_> = super::common::removals(audit)
            .into_keys()
            .filter(|(kind, name)| kind != "node" && !name.starts_with(&sweep.pool))
            .collect();
        ensure!(
            arm_removals.is_empty(),
            "removed what the test did not seed: {arm_removals:?}"
        );
        for (kind, name, rule) in [
            ("vm", &young, "inside-grace"),
            ("vm", &running, "workflow-running"),
            ("nic", &format!("{running}-nic"), "workflow-running"),
            ("vm", &other, "not-ours"),
            ("vm", &untagged, "not-ours"),
            ("disk", &pv_bound, "backs-volume"),
            ("disk", &pv_released, "not-created-by-nodewright"),
            ("nic", &foreign_nic, "name-not-ours"),
            ("vm", &foreign_vm, "name-not-ours"),
        ] {
            let found = kept_rule(audit, kind, name);
            ensure!(
                found.as_deref() == Some(rule),
                "{kind} {name}: kept by {found:?}, expected {rule}"
            );
        }
        ensure!(foreign_tag(audit, "vm", &other) == Some(Some("someone-else".to_owned())));
        ensure!(foreign_tag(audit, "vm", &untagged) == Some(None));
        Ok(())
    };

    let (code, dry) = sweep.sweep(&["--dry-run"]).await?;
    ensure!(code == Some(0), "dry run exit {code:?}: {dry}");
    ensure!(
        outcome(&dry) == "dry-run",
        "dry run outcome: {}",
        shown(&dry.outcome)
    );
    expect(&dry, "planned")?;
    for (kind, name) in [("vm", &orphan), ("nic", &lone_nic), ("disk", &lone_disk)] {
        ensure!(
            sweep.exists(kind, name).await?,
            "the dry run deleted {kind} {name}"
        );
    }
    let nodes: Api<Node> = Api::all(kube.clone());
    ensure!(
        nodes.get_opt(&gone).await?.is_some(),
        "the dry run deleted Node {gone}"
    );

    let (code, audit) = sweep.sweep(&[]).await?;
    ensure!(code == Some(0), "sweep exit {code:?}: {audit}");
    ensure!(
        outcome(&audit) == "completed",
        "outcome: {}",
        shown(&audit.outcome)
    );
    expect(&audit, "deleted")?;
    for (kind, name) in [("vm", &orphan), ("nic", &lone_nic), ("disk", &lone_disk)] {
        ensure!(
            !sweep.exists(kind, name).await?,
            "{kind} {name} still exists"
        );
    }
    ensure!(
        nodes.get_opt(&gone).await?.is_none(),
        "Node {gone} still exists"
    );
    for (kind, name) in [
        ("vm", &young),
        ("vm", &other),
        ("vm", &untagged),
        ("disk", &pv_bound),
        ("disk", &pv_released),
        ("vm", &running),
        ("nic", &foreign_nic),
        ("vm", &foreign_vm),
    ] {
        ensure!(sweep.exists(kind, name).await?, "{kind} {name} was deleted");
    }
    let report = sweep.cli(&["sweep", "report"]).await?;
    report.expect_code(0)?;
    for line in [&orphan, &lone_nic, &lone_disk, &gone] {
        ensure!(
            report
                .stdout
                .lines()
                .any(|l| l.contains(line.as_str()) && l.contains("deleted")),
            "report lacks a deleted row for {line}:\n{}",
            report.stdout
        );
    }
    // The worker's metrics: both runs ended, the last one's findings, what it deleted.
    let metrics = scrape(sweep.metrics_address()?)?;
    for outcome in ["dry-run", "completed"] {
        ensure!(
            metrics.sum("nodewright_sweep_runs_total", &[("outcome", outcome)]) == 1.0,
            "one {outcome} sweep counted:\n{}",
            metrics.text
        );
    }
    for kind in ["vm", "nic", "disk", "node"] {
        ensure!(
            metrics.sum(
                "nodewright_sweep_findings",
                &[("kind", kind), ("action", "delete")]
            ) == 1.0,
            "one {kind} found to delete:\n{}",
            metrics.text
        );
        ensure!(
            metrics.sum("nodewright_sweep_deletions_total", &[("kind", kind)]) == 1.0,
            "one {kind} deleted:\n{}",
            metrics.text
        );
    }
    ensure!(
        metrics.has(
            "nodewright_sweep_freeze_check_timestamp_seconds",
            &[("result", "ok")]
        ) && !metrics.has(
            "nodewright_sweep_freeze_check_timestamp_seconds",
            &[("result", "frozen")]
        ),
        "the freeze checks answered ok"
    );
    Ok(())
}

/// A Node of this pool whose VM does not exist, silent for two hours.
async fn gone_vm_node(kube: &kube::Client, sweep: &SweepCluster, name: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(kube.clone());
    let provider_id = format!(
        "azure:///subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines/{name}",
        sweep.stack.arm.subscription_id, sweep.stack.arm.resource_group
    );
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": { "nodewright.io/machine": name, "nodewright.io/pool": sweep.pool },
        },
        "spec": { "providerID": provider_id },
    }))?;
    nodes.create(&PostParams::default(), &node).await?;
    let silent = ago(OLD);
    let status = json!({ "status": { "conditions": [{
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": silent,
        "lastTransitionTime": silent,
    }]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .context("writing the Node's status")?;
    Ok(())
}

/// A PersistentVolume (Azure disk CSI) that uses `disk`.
async fn bound_volume(kube: &kube::Client, sweep: &SweepCluster, disk: &str) -> Result<()> {
    let volumes: Api<PersistentVolume> = Api::all(kube.clone());
    let handle = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/disks/{disk}",
        sweep.stack.arm.subscription_id, sweep.stack.arm.resource_group
    );
    let volume: PersistentVolume = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": { "name": format!("pv-{}", sweep.pool) },
        "spec": {
            "capacity": { "storage": "32Gi" },
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "csi": { "driver": "disk.csi.azure.com", "volumeHandle": handle },
        },
    }))?;
    volumes.create(&PostParams::default(), &volume).await?;
    Ok(())
}

/// The template hash of the pool file [`start_stuck_create`] creates from.
fn stuck_template(sweep: &SweepCluster) -> Result<String> {
    let file = write_pool_file(&sweep.stack, &sweep.pool, "10m")?;
    let pool = nodewright_model::pool::from_yaml(&std::fs::read_to_string(&file)?)
        .map_err(|e| anyhow::anyhow!("the stuck create's pool file: {e}"))?;
    Ok(pool.template_hash)
}

/// Starts CreateMachine for `machine`, whose VM exists (seeded two hours ago) and never joins:
/// the create adopts the VM and waits for its Node, so its workflow keeps running.
async fn start_stuck_create(sweep: &SweepCluster, machine: &str) -> Result<()> {
    let file = write_pool_file(&sweep.stack, &sweep.pool, "10m")?;
    let file = file.to_string_lossy().into_owned();
    sweep
        .cli(&["machine", "create", "--pool", &file, "--name", machine])
        .await?
        .expect_code(0)?;
    let nic = format!("{machine}-nic");
    eventually(
        &format!("the create of {machine} to make its NIC"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async { Ok(sweep.exists("nic", &nic).await?.then_some(())) },
    )
    .await
}
