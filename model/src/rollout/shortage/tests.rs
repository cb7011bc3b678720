//! Table tests of booking a create that failed for want of capacity.

use super::*;
use crate::capacity::{EXHAUSTED_TTL, is_exhausted};
use crate::rollout::phase::RolloutPhase;

const SIZE: &str = "Standard_D2s_v5";

fn zones() -> Vec<String> {
    ["1", "2", "3"].iter().map(|z| (*z).to_owned()).collect()
}

fn create(zone: Option<&str>) -> InFlight {
    InFlight {
        machine: "workers-abc12".to_owned(),
        kind: ChildKind::Create,
        workflow_id: "create/test/workers-abc12".to_owned(),
        started_at: 30_000,
        zone: zone.map(str::to_owned),
        run_id: None,
        capacity_type: None,
    }
}

fn failed(text: &str) -> ChildEnd {
    ChildEnd::Failed(text.to_owned())
}

const ALLOCATION: &str = "creating machine workers-abc12 failed at step provision-vm: VM workers-abc12 failed to provision: ZonalAllocationFailed: no capacity; removed the NIC";

#[test]
fn only_a_creates_allocation_failure_in_a_zone_is_a_shortage() {
    let hashed = zone_for("workers-abc12", &zones());
    let table = [
        (
            create(Some("2")),
            failed(ALLOCATION),
            zones(),
            Some("2".to_owned()),
        ),
        (create(None), failed(ALLOCATION), zones(), hashed.clone()),
        (create(Some("9")), failed(ALLOCATION), zones(), hashed),
        (create(Some("2")), failed(ALLOCATION), Vec::new(), None),
        (create(Some("2")), failed("QuotaExceeded"), zones(), None),
        (create(Some("2")), ChildEnd::Succeeded, zones(), None),
        (
            create(Some("2")),
            ChildEnd::Canceled(ALLOCATION.to_owned()),
            zones(),
            None,
        ),
        (
            InFlight {
                kind: ChildKind::Delete,
                ..create(Some("2"))
            },
            failed(ALLOCATION),
            zones(),
            None,
        ),
    ];
    for (entry, end, pool_zones, expected) in table {
        let found = shortage_of(&entry, &end, &pool_zones);
        assert_eq!(
            found.as_ref().map(|s| s.zone.clone()),
            expected,
            "{entry:?} {end:?}"
        );
        if let Some(found) = found {
            assert_eq!(found.code, "ZonalAllocationFailed");
        }
    }
}

#[test]
fn a_shortage_marks_the_zone_and_counts_only_when_every_zone_is_exhausted() {
    let mut status = RolloutStatus::empty();
    status.phase = RolloutPhase::Progressing;
    status.max_failures = 1;
    let book = |status: &mut RolloutStatus, zone: &str, at_millis: i64| {
        let entry = create(Some(zone));
        let shortage = shortage_of(&entry, &failed(ALLOCATION), &zones())
            .unwrap_or_else(|| panic!("a shortage"));
        status.book_shortage(entry, shortage, SIZE, &zones(), at_millis, "workers");
    };
    book(&mut status, "2", 100_000);
    let ttl = i64::try_from(EXHAUSTED_TTL.as_secs()).unwrap_or(0);
    assert_eq!(status.exhausted.len(), 1);
    assert_eq!(
        (status.exhausted[0].zone.as_str(), status.exhausted[0].until),
        ("2", 100 + ttl)
    );
    assert!(is_exhausted(&status.exhausted, SIZE, "2", 100));
    assert_eq!((status.failures_counted, status.failures.len()), (0, 1));
    assert_eq!(status.phase, RolloutPhase::Progressing);
    assert!(
        status.failures[0].reason.starts_with(
            "zone 2 is out of capacity for Standard_D2s_v5 (ZonalAllocationFailed): avoided for 3m"
        ),
        "{}",
        status.failures[0].reason
    );
    assert_eq!(
        status.clone().carried_over().exhausted,
        status.exhausted,
        "continue-as-new carries the exhausted zones"
    );
    book(&mut status, "3", 110_000);
    assert_eq!(status.failures_counted, 0);
    book(&mut status, "1", 120_000);
    assert_eq!(
        (status.failures_counted, status.phase),
        (1, RolloutPhase::Paused),
        "every zone exhausted: counted, and the budget of 1 is spent"
    );
    assert!(
        status.failures[2]
            .reason
            .contains("as is every zone of the pool")
    );
}

#[test]
fn a_spot_first_rollout_falls_back_by_zone_then_to_on_demand_and_counts_only_the_last_refusal() {
    use crate::pool::CapacityType::{OnDemand, Spot};
    let template: MachineTemplate = serde_json::from_value(serde_json::json!({
        "vmSize": SIZE,
        "image": { "publisher": "Canonical", "offer": "o", "sku": "s", "version": "latest" },
        "subnetId": "/subscriptions/s/resourceGroups/r/providers/Microsoft.Network/virtualNetworks/v/subnets/n",
        "zones": ["1", "2"],
        "capacityTypes": ["spot", "on-demand"],
    }))
    .unwrap_or_else(|e| panic!("a template: {e}"));
    let mut status = RolloutStatus::empty();
    status.phase = RolloutPhase::Progressing;
    status.max_failures = 1;
    let refused = "creating machine workers-abc12 failed at step create-vm: PUT VM workers-abc12 answered 409 (SkuNotAvailable): no Spot capacity";
    let book = |status: &mut RolloutStatus, zone: &str, capacity, at_millis| {
        let entry = InFlight {
            capacity_type: Some(capacity),
            ..create(Some(zone))
        };
        let found = offering_refusal_of(&entry, &failed(refused), &template)
            .unwrap_or_else(|| panic!("a refusal"));
        status.book_offering_refusal(
            entry,
            found,
            &template,
            crate::capacity::offering::OFFERING_TTL,
            at_millis,
            "workers",
        );
    };
    book(&mut status, "1", Spot, 100_000);
    assert_eq!(status.failures_counted, 0);
    assert!(
        status.failures[0].reason.starts_with(
            "Azure has no room for spot Standard_D2s_v5 in zone 1 (SkuNotAvailable): spot Standard_D2s_v5 in zone 1: SkuNotAvailable set aside for 1h"
        ),
        "{}",
        status.failures[0].reason
    );
    book(&mut status, "2", Spot, 101_000);
    book(&mut status, "1", OnDemand, 102_000);
    assert_eq!(status.failures_counted, 0, "on-demand in zone 2 is left");
    book(&mut status, "2", OnDemand, 103_000);
    assert_eq!(
        (status.failures_counted, status.phase),
        (1, RolloutPhase::Paused),
        "every offering set aside: counted"
    );
    // A refusal is only read for a pool with capacity types, and only of a create.
    let plain = InFlight {
        capacity_type: Some(Spot),
        ..create(Some("1"))
    };
    let mut on_demand_only = template.clone();
    on_demand_only.capacity_types.clear();
    assert!(offering_refusal_of(&plain, &failed(refused), &on_demand_only).is_none());
    assert!(offering_refusal_of(&plain, &failed("QuotaExceeded"), &template).is_none());
}
