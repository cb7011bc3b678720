//! Zones balanced: a rollout sends each new machine to the pool's allowed zone with the fewest
//! machines (ties in the zones' order), so a 4-machine pool over zones 1 and 2 ends with two
//! VMs in each zone, when built from nothing and again when every machine is replaced. The
//! rollout's status counts the machines per zone and `pool rollout status` prints them.
//!
//! Before, a machine's zone was a hash of its random name: a pool of 4 ended 2 and 2 only
//! 6 times in 16, so this test fails on the old choice more often than not (and on two
//! rollouts, nearly always).

use std::collections::BTreeMap;

use anyhow::{Result, ensure};
use nodewright_model::ownership::{TAG_CLUSTER, TAG_POOL};
use nodewright_model::rollout::{RolloutOutcome, RolloutResult};
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{PoolShape, clean_up_pool, cli, ensure_pool_is, roll, rollout_pool_file};

const REPLICAS: u32 = 4;

#[tokio::test]
async fn a_two_zone_pool_of_four_ends_with_two_machines_in_each_zone() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("zb");
    let pool = format!("zb{}", unique_suffix());
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = balanced(&stack, &task_queue, &pool).await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn balanced(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    for version in ["24.04.1", "24.04.2"] {
        let shape = PoolShape::new(REPLICAS, "2", "0").version(version);
        let file = rollout_pool_file(stack, pool, &shape)?;
        let text = std::fs::read_to_string(&file)?;
        ensure!(
            text.contains("    zones: [\"1\", \"2\"]\n"),
            "the pool file allows zones 1 and 2:\n{text}"
        );
        let result = roll(stack, task_queue, &file, &[]).await?.result;
        ensure_completed(&result)?;
        ensure_pool_is(stack, pool, REPLICAS as usize, &result.status.template_hash).await?;

        let vms = vms_per_zone(stack, pool).await?;
        println!("after the rollout to {version}: VMs per zone {vms:?}");
        let even = BTreeMap::from([("1".to_owned(), 2), ("2".to_owned(), 2)]);
        ensure!(
            vms == even,
            "rollout to {version}: two VMs in each zone, found {vms:?}"
        );
        ensure!(
            result.status.zones == even,
            "rollout to {version}: the status counts two machines per zone: {:?}",
            result.status.zones
        );
    }
    let answer = cli(stack, task_queue, &["pool", "rollout", "status", pool]).await?;
    let text = answer.expect_code(0)?;
    ensure!(
        text.stdout
            .contains("  zones        zone 1: 2, zone 2: 2\n"),
        "`pool rollout status` prints the machines per zone:\n{}",
        text.stdout
    );
    Ok(())
}

/// Completed, nothing counted as failed.
fn ensure_completed(result: &RolloutResult) -> Result<()> {
    ensure!(
        result.outcome == RolloutOutcome::Completed && result.status.failures_counted == 0,
        "completed without failures: outcome {}, {} failures counted",
        shown(&result.outcome),
        result.status.failures_counted
    );
    Ok(())
}

/// The pool's VMs in the sandbox, counted by their zone (`(none)` for a VM without one).
/// The pool's VMs per availability zone, as the sandbox lists them.
pub(crate) async fn vms_per_zone(stack: &Stack, pool: &str) -> Result<BTreeMap<String, u32>> {
    let arm = stack.arm_client()?;
    let mut per_zone = BTreeMap::new();
    for vm in arm.list_vms().await? {
        let ours = vm.tags.get(TAG_CLUSTER).map(String::as_str) == Some(stack.cluster.as_str())
            && vm.tags.get(TAG_POOL).map(String::as_str) == Some(pool);
        if !ours {
            continue;
        }
        let zone = vm
            .zones
            .as_ref()
            .and_then(|zones| zones.first().cloned())
            .unwrap_or_else(|| "(none)".to_owned());
        *per_zone.entry(zone).or_insert(0) += 1;
    }
    Ok(per_zone)
}
