//! Zone 2 out of capacity: with a sandbox fault failing every VM create of the pool in zone 2
//! with `ZonalAllocationFailed`, a rollout of a 6-machine pool over zones 1, 2 and 3 completes
//! without pausing: each create that landed in zone 2 marks it exhausted (the status names it
//! and until when), is not counted against `maxFailures`, and is replaced under a new name in
//! another zone. Afterwards every VM and OS disk of the pool is in zone 1 or 3, each Node's
//! `topology.kubernetes.io/zone` says so, and nothing of the failed creates is left.
//!
//! A machine's zone before any failure is a hash of its random name, so a rollout may happen to
//! send nothing to zone 2; the test then rolls the pool again to a new version (each a fresh set
//! of 6 names) until the fault has fired, at most three times.

use std::collections::BTreeSet;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use nodewright_model::ownership::{LABEL_POOL, TAG_CLUSTER, TAG_POOL};
use nodewright_model::rollout::{ChildKind, RolloutOutcome, RolloutPhase, RolloutResult};
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use super::common::{PoolShape, clean_up_pool, cli, ensure_pool_is, roll, rollout_pool_file};

const REPLICAS: u32 = 6;
/// The image versions of the rollouts the test may need until a create lands in zone 2.
const VERSIONS: [&str; 3] = ["24.04.1", "24.04.2", "24.04.3"];

#[tokio::test]
async fn zone_two_out_of_capacity_is_avoided_and_six_machines_land_in_zones_one_and_three()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("rz");
    let pool = format!("rz{}", unique_suffix());
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let sandbox = Sandbox::new(&stack)?;
    let fault = sandbox
        .add_fault(json!({
            "kind": "fail_operation", "operation": "vm.put", "vm": format!("{pool}-*"),
            "zone": "2", "code": "ZonalAllocationFailed",
            "message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone.",
        }))
        .await?;
    let outcome = avoided(&stack, &task_queue, &pool, &sandbox, fault).await;
    let _ = sandbox.remove_fault(fault).await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn avoided(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    sandbox: &Sandbox,
    fault: u64,
) -> Result<()> {
    let mut hit = None;
    for version in VERSIONS {
        let file = zoned_pool_file(stack, pool, version)?;
        let rolled = roll(stack, task_queue, &file, &[]).await?;
        let result = rolled.result;
        ensure_not_paused(&result)?;
        let fired = sandbox
            .fault(fault)
            .await?
            .and_then(|rule| rule["fired"].as_u64())
            .unwrap_or(0);
        println!("rollout to {version}: zone 2 refused {fired} creates so far");
        if fired > 0 {
            hit = Some(result);
            break;
        }
    }
    let result = hit.context("no create of three rollouts landed in zone 2")?;
    let status = &result.status;

    // The status named zone 2 as exhausted, and each failure says it was capacity.
    ensure!(
        status
            .exhausted
            .iter()
            .any(|e| e.zone == "2" && e.code == "ZonalAllocationFailed" && e.until > 0),
        "the status names zone 2 as exhausted: {:?}",
        status.exhausted
    );
    ensure!(
        status.exhausted.iter().all(|e| e.zone == "2"),
        "only zone 2 ran out: {:?}",
        status.exhausted
    );
    ensure!(
        !status.failures.is_empty()
            && status.failures.iter().all(|f| {
                f.kind == ChildKind::Create && f.reason.contains("zone 2 is out of capacity")
            }),
        "every failure is a create refused in zone 2: {:?}",
        status.failures
    );
    let answer = cli(stack, task_queue, &["pool", "rollout", "status", pool]).await?;
    let text = answer.expect_code(0)?;
    ensure!(
        text.stdout
            .contains("exhausted    zone 2 for Standard_D2s_v5 (ZonalAllocationFailed) until"),
        "`pool rollout status` names the exhausted zone:\n{}",
        text.stdout
    );

    ensure_pool_is(stack, pool, REPLICAS as usize, &status.template_hash).await?;
    ensure_only_zones_one_and_three(stack, pool).await
}

/// Completed, with no failure counted and no pause.
fn ensure_not_paused(result: &RolloutResult) -> Result<()> {
    let status = &result.status;
    ensure!(
        result.outcome == RolloutOutcome::Completed
            && status.phase == RolloutPhase::Completed
            && status.failures_counted == 0
            && status.paused_because.is_none(),
        "completed without counting a failure or pausing: outcome {}, phase {}, {} counted, paused because {:?}",
        shown(&result.outcome),
        status.phase.as_str(),
        status.failures_counted,
        status.paused_because
    );
    Ok(())
}

/// The pool's VMs and OS disks are in zones 1 and 3 only, one NIC per VM and nothing else, and
/// each Node's zone label agrees with its VM.
async fn ensure_only_zones_one_and_three(stack: &Stack, pool: &str) -> Result<()> {
    let arm = stack.arm_client()?;
    let ours = |tags: &std::collections::BTreeMap<String, String>| {
        tags.get(TAG_CLUSTER).map(String::as_str) == Some(stack.cluster.as_str())
            && tags.get(TAG_POOL).map(String::as_str) == Some(pool)
    };
    let zone_of = |zones: &Option<Vec<String>>| zones.as_ref().and_then(|z| z.first().cloned());
    let vms: Vec<(String, Option<String>)> = arm
        .list_vms()
        .await?
        .into_iter()
        .filter(|vm| ours(&vm.tags))
        .map(|vm| (vm.name.clone().unwrap_or_default(), zone_of(&vm.zones)))
        .collect();
    ensure!(
        vms.len() == REPLICAS as usize
            && vms
                .iter()
                .all(|(_, zone)| matches!(zone.as_deref(), Some("1" | "3"))),
        "six VMs, all in zones 1 and 3: {vms:?}"
    );
    let names: BTreeSet<String> = vms.iter().map(|(name, _)| name.clone()).collect();
    let disks: Vec<(String, Option<String>)> = arm
        .list_disks()
        .await?
        .into_iter()
        .filter(|disk| ours(&disk.tags))
        .map(|disk| (disk.name.clone().unwrap_or_default(), zone_of(&disk.zones)))
        .collect();
    let expected_disks: BTreeSet<String> =
        names.iter().map(|name| format!("{name}-osdisk")).collect();
    ensure!(
        disks
            .iter()
            .map(|(name, _)| name.clone())
            .collect::<BTreeSet<_>>()
            == expected_disks
            && disks
                .iter()
                .all(|(_, zone)| matches!(zone.as_deref(), Some("1" | "3"))),
        "an OS disk per VM, in zones 1 and 3, and nothing else: {disks:?}"
    );
    let nics: BTreeSet<String> = arm
        .list_nics()
        .await?
        .into_iter()
        .filter(|nic| ours(&nic.tags))
        .filter_map(|nic| nic.name)
        .collect();
    let expected_nics: BTreeSet<String> = names.iter().map(|name| format!("{name}-nic")).collect();
    ensure!(
        nics == expected_nics,
        "a NIC per VM and nothing else: {nics:?}"
    );
    let location = &stack.arm.location;
    let nodes: Api<Node> = Api::all(stack.kube_client().await?);
    let listed = nodes
        .list(&ListParams::default().labels(&format!("{LABEL_POOL}={pool}")))
        .await?;
    let node_zones: Vec<(String, String)> = listed
        .items
        .iter()
        .map(|node| {
            let name = node.metadata.name.clone().unwrap_or_default();
            let zone = node
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get("topology.kubernetes.io/zone"))
                .cloned()
                .unwrap_or_default();
            (name, zone)
        })
        .collect();
    ensure!(
        node_zones.len() == REPLICAS as usize
            && node_zones.iter().all(|(name, zone)| {
                vms.iter().any(|(vm, vm_zone)| {
                    vm == name
                        && vm_zone.as_deref().map(|z| format!("{location}-{z}"))
                            == Some(zone.clone())
                })
            }),
        "six Nodes, each labelled with its VM's zone ({location}-1 or {location}-3): {node_zones:?}"
    );
    Ok(())
}

/// The pool file of `version` with zones 1, 2 and 3.
fn zoned_pool_file(stack: &Stack, pool: &str, version: &'static str) -> Result<std::path::PathBuf> {
    let shape = PoolShape::new(REPLICAS, "2", "0").version(version);
    let path = rollout_pool_file(stack, pool, &shape)?;
    let text = std::fs::read_to_string(&path)?;
    ensure!(
        text.contains("    zones: [\"1\", \"2\"]\n"),
        "unexpected pool file:\n{text}"
    );
    std::fs::write(
        &path,
        text.replace(
            "    zones: [\"1\", \"2\"]\n",
            "    zones: [\"1\", \"2\", \"3\"]\n",
        ),
    )?;
    Ok(path)
}
