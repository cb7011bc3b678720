//! Falling back when Azure has no room (issue 29 item 2), through the pool controller: a pool
//! of `capacityTypes: [spot, on-demand]` over zones 1 and 2. Spot refused in zone 1
//! (`SkuNotAvailable` at the PUT, as Azure answers for Spot capacity) lands in zone 2; refused
//! in zone 2 too, the next machines are on-demand; the refused offerings are listed in the
//! status and skipped while set aside (a machine made within the pool's
//! `offerings.unavailableFor` is on-demand though the refusals are gone), tried again once it
//! ends (the next machine is Spot), and no refused create leaves anything behind.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::ownership::{TAG_CLUSTER, TAG_CREATED, TAG_POOL};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use super::with_capacity;
use crate::controller::common::{
    apply, await_status, await_world, controller_pool_file, delete_pool, scale,
};

const UP: Duration = Duration::from_secs(300);

/// The pool's `spec.offerings.unavailableFor`: long enough for the steps that need an offering
/// set aside, short enough to see it tried again.
const TTL_SECONDS: u64 = 90;

#[tokio::test]
async fn spot_refused_in_zone_1_lands_in_zone_2_then_on_demand_and_stays_set_aside() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("spot-fallback");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("sf{}", unique_suffix());
    let file = controller_pool_file(&stack, &pool, 1, "24.04.1", "")?;
    with_capacity(&file, "    capacityTypes: [spot, on-demand]\n")?;
    let text = std::fs::read_to_string(&file)?;
    ensure!(
        text.contains("  strategy:\n"),
        "the pool file has no strategy"
    );
    std::fs::write(
        &file,
        text.replacen(
            "  strategy:\n",
            &format!("  offerings:\n    unavailableFor: {TTL_SECONDS}s\n  strategy:\n"),
            1,
        ),
    )?;
    let mut faults = Vec::new();
    let outcome = scenario(&stack, &sandbox, &task_queue, &pool, &file, &mut faults)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    for id in faults {
        let _ = sandbox.remove_fault(id).await;
    }
    delete_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    outcome
}

/// Spot creates of `pool` in `zone` refused at the PUT, as Azure refuses Spot without room.
fn spot_refused(pool: &str, zone: &str) -> serde_json::Value {
    json!({
        "kind": "conflict", "operation": "vm.put", "method": "PUT", "vm": format!("{pool}-*"),
        "priority": "Spot|Low", "zone": zone, "code": "SkuNotAvailable",
        "message": "The requested VM size Standard_D2s_v5 is currently not available for Spot in this zone. Please try another size or deploy to a different location or zone.",
    })
}

/// Each VM of the pool: its zone and whether it is Spot.
async fn vms(stack: &Stack, pool: &str) -> Result<BTreeMap<String, (String, bool)>> {
    let mut found = BTreeMap::new();
    for vm in stack.arm_client()?.list_vms().await? {
        let tag = |key: &str| vm.tags.get(key).map(String::as_str);
        if tag(TAG_CLUSTER) != Some(stack.cluster.as_str()) || tag(TAG_POOL) != Some(pool) {
            continue;
        }
        let value = serde_json::to_value(&vm)?;
        let zone = value["zones"][0].as_str().unwrap_or("(none)").to_owned();
        let spot = value["properties"]["priority"] == json!("Spot");
        found.insert(vm.name.clone().unwrap_or_default(), (zone, spot));
    }
    Ok(found)
}

async fn scenario(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
    faults: &mut Vec<u64>,
) -> Result<()> {
    faults.push(sandbox.add_fault(spot_refused(pool, "1")).await?);
    apply(stack, task_queue, file).await?;
    await_world(stack, pool, "1 Ready machine", UP, |w| w.is_steady(1)).await?;
    let first = vms(stack, pool).await?;
    ensure!(
        first.values().all(|(zone, spot)| zone == "2" && *spot),
        "Spot refused in zone 1 lands as Spot in zone 2: {first:?}"
    );
    let status = await_status(
        stack,
        task_queue,
        pool,
        "zone 1's Spot set aside",
        UP,
        |d| {
            d.status
                .unavailable_offerings
                .iter()
                .any(|o| o.zone == "1" && o.code == "SkuNotAvailable" && o.capacity_type.is_some())
        },
    )
    .await?;
    ensure!(
        status
            .status
            .last_actions
            .iter()
            .any(|a| a.text.contains("refused for capacity")),
        "the controller says what it set aside: {:?}",
        status.status.last_actions
    );

    // Zone 2 refuses Spot too: the next machines are on-demand.
    faults.push(sandbox.add_fault(spot_refused(pool, "2")).await?);
    scale(stack, task_queue, pool, 3).await?;
    await_world(stack, pool, "3 Ready machines", UP, |w| w.is_steady(3)).await?;
    let grown = vms(stack, pool).await?;
    let added: Vec<&(String, bool)> = grown
        .iter()
        .filter(|(name, _)| !first.contains_key(*name))
        .map(|(_, vm)| vm)
        .collect();
    ensure!(
        added.len() == 2 && added.iter().all(|(_, spot)| !spot),
        "with Spot refused everywhere the new machines are on-demand: {grown:?}"
    );
    await_status(
        stack,
        task_queue,
        pool,
        "both zones' Spot set aside",
        UP,
        |d| {
            ["1", "2"].iter().all(|zone| {
                d.status
                    .unavailable_offerings
                    .iter()
                    .any(|o| o.zone == *zone && o.capacity_type.is_some())
            })
        },
    )
    .await?;

    // The refusals end, but the offerings stay set aside for their TTL: a machine made before
    // it ends is on-demand (one made after it, on a slow machine, may be Spot again).
    for id in faults.drain(..) {
        sandbox.remove_fault(id).await?;
    }
    let set_aside = await_status(stack, task_queue, pool, "Spot set aside", UP, |d| {
        !d.status.unavailable_offerings.is_empty()
    })
    .await?;
    let last_until = set_aside
        .status
        .unavailable_offerings
        .iter()
        .map(|o| o.until)
        .max()
        .unwrap_or_default();
    scale(stack, task_queue, pool, 4).await?;
    await_world(stack, pool, "4 Ready machines", UP, |w| w.is_steady(4)).await?;
    let fourth = newest(stack, pool).await?;
    let (_, fourth_spot) = vms(stack, pool)
        .await?
        .get(&fourth.0)
        .cloned()
        .unwrap_or_default();
    // Within a few seconds of the end, the decision and the create's start may fall apart.
    let near_the_end = (fourth.1 - last_until).abs() <= 5;
    ensure!(
        near_the_end || fourth_spot == (fourth.1 >= last_until),
        "the fourth machine {} (made at {}) is Spot only once Spot's set-aside ended at {last_until}",
        fourth.0,
        fourth.1
    );

    // Once the TTL ended, Spot is tried again: the next machine is Spot.
    await_status(stack, task_queue, pool, "nothing set aside", UP, |d| {
        d.status.unavailable_offerings.is_empty()
    })
    .await?;
    scale(stack, task_queue, pool, 5).await?;
    await_world(stack, pool, "5 Ready machines", UP, |w| w.is_steady(5)).await?;
    let fifth = newest(stack, pool).await?;
    let all = vms(stack, pool).await?;
    ensure!(
        all.get(&fifth.0).is_some_and(|(_, spot)| *spot),
        "after the TTL the fifth machine {} is Spot again: {all:?}",
        fifth.0
    );
    // Each refusal was one PUT (zone 1's first machine, then zone 2's), and none left a NIC.
    let refused = refused_puts(sandbox, pool).await?;
    ensure!(
        refused >= 2,
        "the sandbox refused {refused} Spot PUTs, expected at least 2"
    );
    let nics = stack
        .arm_client()?
        .list_nics()
        .await?
        .into_iter()
        .filter(|nic| nic.tags.get(TAG_POOL).map(String::as_str) == Some(pool))
        .count();
    ensure!(
        nics == 5,
        "{nics} NICs for 5 machines: a refused create left one"
    );
    Ok(())
}

/// The pool's newest VM (by its `nodewright.io-created` tag) and when it was made, Unix seconds.
async fn newest(stack: &Stack, pool: &str) -> Result<(String, i64)> {
    let mut newest: Option<(i64, String)> = None;
    for vm in stack.arm_client()?.list_vms().await? {
        let tag = |key: &str| vm.tags.get(key).map(String::as_str);
        if tag(TAG_CLUSTER) != Some(stack.cluster.as_str()) || tag(TAG_POOL) != Some(pool) {
            continue;
        }
        let created = tag(TAG_CREATED)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map_or(0, |t| t.timestamp());
        let name = vm.name.clone().unwrap_or_default();
        if newest.as_ref().is_none_or(|(at, _)| created > *at) {
            newest = Some((created, name));
        }
    }
    newest
        .map(|(at, name)| (name, at))
        .context("the pool has no VM")
}

/// How many VM PUTs of `pool` the sandbox refused with `SkuNotAvailable`.
async fn refused_puts(sandbox: &Sandbox, pool: &str) -> Result<usize> {
    let requests = sandbox
        .requests(&format!("/virtualMachines/{pool}-"))
        .await?;
    Ok(requests
        .iter()
        .filter(|r| r["method"] == json!("PUT") && r["code"] == json!("SkuNotAvailable"))
        .count())
}
