//! Table tests and properties of the offerings: what a refusal sets aside, and where new
//! machines go around what is set aside (the fallback order: zone, then capacity type).

use proptest::prelude::*;

use super::*;
use crate::pool::CapacityType::{OnDemand, Spot};

const SIZE: &str = "Standard_D4s_v5";
const HOUR: Duration = Duration::from_secs(3600);

fn zones(names: &[&str]) -> Vec<String> {
    names.iter().map(|z| (*z).to_owned()).collect()
}

fn refused(list: &mut Vec<Exhausted>, zone: Option<&str>, capacity: CapacityType, code: &str) {
    let refusal = refusal_in(code, capacity).unwrap_or_else(|| panic!("a refusal for capacity"));
    set_aside(list, SIZE, zone, capacity, refusal, 1000, HOUR);
}

fn place(
    count: u32,
    zone_names: &[&str],
    types: &[CapacityType],
    list: &[Exhausted],
    now: i64,
) -> Vec<(Option<String>, CapacityType)> {
    choose_placements(
        count,
        SIZE,
        &zones(zone_names),
        types,
        &BTreeMap::new(),
        &BTreeMap::new(),
        list,
        now,
    )
    .into_iter()
    .map(|p| (p.zone, p.capacity))
    .collect()
}

fn at(zone: &str, capacity: CapacityType) -> (Option<String>, CapacityType) {
    (Some(zone.to_owned()), capacity)
}

#[test]
fn refusals_are_told_by_their_code_and_set_aside_what_it_says() {
    type Row<'a> = (&'a str, CapacityType, Option<(&'a str, Scope)>);
    let table: [Row; 11] = [
        (
            "VM x failed to provision: SkuNotAvailable: no Spot capacity",
            Spot,
            Some(("SkuNotAvailable", Scope::Offering)),
        ),
        (
            "ZonalAllocationFailed: zone 1",
            Spot,
            Some(("ZonalAllocationFailed", Scope::Zone)),
        ),
        (
            "allocationfailed",
            OnDemand,
            Some(("AllocationFailed", Scope::Offering)),
        ),
        (
            "OverconstrainedZonalAllocationRequest",
            Spot,
            Some(("OverconstrainedZonalAllocationRequest", Scope::Offering)),
        ),
        (
            "OverconstrainedAllocationRequest",
            Spot,
            Some(("OverconstrainedAllocationRequest", Scope::CapacityType)),
        ),
        (
            "PUT VM x answered 409 (OperationNotAllowed): Operation could not be completed as it results in exceeding approved LowPriorityCores quota",
            Spot,
            Some(("OperationNotAllowed", Scope::CapacityType)),
        ),
        // The regular vCPU quota is no capacity refusal: more of it is an operator's request.
        (
            "OperationNotAllowed: exceeding approved standardDSv5Family Cores quota",
            Spot,
            None,
        ),
        (
            "OperationNotAllowed: exceeding approved LowPriorityCores quota",
            OnDemand,
            None,
        ),
        (
            "SpotPriceGreaterThanProvidedMaxPrice: the current price is above 0.01",
            Spot,
            Some(("SpotPriceGreaterThanProvidedMaxPrice", Scope::CapacityType)),
        ),
        // Configuration errors fail without a fallback.
        ("AzureSpotIsNotSupportedForThisVMSize", Spot, None),
        ("MaxPriceValueInvalid", Spot, None),
    ];
    for (text, capacity, expected) in table {
        assert_eq!(
            refusal_in(text, capacity).map(|r| (r.code, r.scope)),
            expected,
            "{text}"
        );
    }
}

#[test]
fn spot_refused_in_zone_1_lands_in_zone_2_and_refused_everywhere_lands_on_demand() {
    let types = [Spot, OnDemand];
    let mut list = Vec::new();
    assert_eq!(place(1, &["1", "2"], &types, &list, 1000), [at("1", Spot)]);
    refused(&mut list, Some("1"), Spot, "SkuNotAvailable");
    assert_eq!(place(1, &["1", "2"], &types, &list, 1001), [at("2", Spot)]);
    refused(&mut list, Some("2"), Spot, "SkuNotAvailable");
    // Spot everywhere set aside: on-demand, balanced over both zones.
    assert_eq!(
        place(2, &["1", "2"], &types, &list, 1002),
        [at("1", OnDemand), at("2", OnDemand)]
    );
    // An hour later Spot is tried again.
    assert_eq!(
        place(1, &["1", "2"], &types, &list, 1000 + 3600),
        [at("1", Spot)]
    );
}

#[test]
fn a_zone_without_room_is_left_for_both_types_and_a_spot_quota_for_every_zone() {
    let types = [Spot, OnDemand];
    let mut list = Vec::new();
    refused(&mut list, Some("1"), Spot, "ZonalAllocationFailed");
    assert_eq!(
        place(2, &["1", "2"], &types, &list, 1001),
        [at("2", Spot), at("2", Spot)]
    );
    // Spot only: no fallback to on-demand is allowed, so when all is set aside the create
    // goes to the preferred type in the emptiest zone (and its failure is counted).
    let mut quota = Vec::new();
    refused(
        &mut quota,
        Some("2"),
        Spot,
        "OperationNotAllowed: exceeding approved LowPriorityCores quota",
    );
    assert!(all_set_aside(
        &quota,
        SIZE,
        &zones(&["1", "2"]),
        &[Spot],
        1001
    ));
    assert_eq!(
        place(1, &["1", "2"], &[Spot], &quota, 1001),
        [at("1", Spot)]
    );
    assert_eq!(
        place(1, &["1", "2"], &types, &quota, 1001),
        [at("1", OnDemand)]
    );
    assert!(!all_set_aside(
        &quota,
        SIZE,
        &zones(&["1", "2"]),
        &types,
        1001
    ));
}

#[test]
fn a_pool_without_zones_falls_back_by_type_alone() {
    let types = [Spot, OnDemand];
    let mut list = Vec::new();
    assert_eq!(place(1, &[], &types, &list, 1000), [(None, Spot)]);
    refused(&mut list, None, Spot, "AllocationFailed");
    assert_eq!(place(1, &[], &types, &list, 1001), [(None, OnDemand)]);
    refused(&mut list, None, OnDemand, "AllocationFailed");
    assert!(all_set_aside(&list, SIZE, &[], &types, 1001));
}

#[test]
fn entries_made_before_capacity_types_hold_for_every_type_of_their_zone() {
    let list = vec![Exhausted {
        vm_size: SIZE.to_owned(),
        zone: "1".to_owned(),
        code: "ZonalAllocationFailed".to_owned(),
        until: 2000,
        capacity_type: None,
    }];
    assert!(is_set_aside(&list, SIZE, Some("1"), Spot, 1000));
    assert!(is_set_aside(&list, SIZE, Some("1"), OnDemand, 1000));
    assert!(!is_set_aside(&list, SIZE, Some("2"), Spot, 1000));
    assert!(!is_set_aside(
        &list,
        "Standard_D2s_v5",
        Some("1"),
        Spot,
        1000
    ));
}

#[test]
fn a_refusal_again_renews_its_entry_and_the_list_stays_bounded() {
    let mut list = Vec::new();
    refused(&mut list, Some("1"), Spot, "SkuNotAvailable");
    let refusal = refusal_in("SkuNotAvailable", Spot).unwrap_or_else(|| panic!("a refusal"));
    set_aside(&mut list, SIZE, Some("1"), Spot, refusal, 1500, HOUR);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].until, 1500 + 3600);
    assert_eq!(
        describe(&list[0]),
        "spot Standard_D4s_v5 in zone 1: SkuNotAvailable"
    );
    for zone in 0..100 {
        set_aside(
            &mut list,
            &format!("Standard_D{zone}s_v5"),
            Some("1"),
            Spot,
            refusal,
            1500,
            HOUR,
        );
    }
    assert!(list.len() <= MAX_EXHAUSTED);
}

fn capacity() -> impl Strategy<Value = CapacityType> {
    prop_oneof![Just(Spot), Just(OnDemand)]
}

proptest! {
    /// Every placement is one of the pool's offerings, and one that is not set aside whenever
    /// any is left; the preferred open type is always taken first.
    #[test]
    fn placements_stay_in_the_pool_and_avoid_what_is_set_aside(
        zone_count in 0usize..4,
        prefer_spot in any::<bool>(),
        both in any::<bool>(),
        refusals in proptest::collection::vec((0usize..4, capacity(), 0usize..4), 0..8),
        count in 0u32..6,
    ) {
        let names: Vec<String> = (1..=zone_count).map(|z| z.to_string()).collect();
        let mut types = vec![if prefer_spot { Spot } else { OnDemand }];
        if both {
            types.push(if prefer_spot { OnDemand } else { Spot });
        }
        let mut list = Vec::new();
        let codes = ["SkuNotAvailable", "ZonalAllocationFailed", "OverconstrainedAllocationRequest", "AllocationFailed"];
        for (zone, kind, code) in refusals {
            let zone = names.get(zone % names.len().max(1)).map(String::as_str);
            if let Some(refusal) = refusal_in(codes[code], kind) {
                set_aside(&mut list, SIZE, zone, kind, refusal, 1000, HOUR);
            }
        }
        let placed = choose_placements(count, SIZE, &names, &types, &BTreeMap::new(), &BTreeMap::new(), &list, 1001);
        prop_assert_eq!(placed.len(), count as usize);
        let everything_set_aside = all_set_aside(&list, SIZE, &names, &types, 1001);
        for p in &placed {
            prop_assert!(types.contains(&p.capacity));
            prop_assert_eq!(p.zone.is_none(), names.is_empty());
            if let Some(zone) = &p.zone {
                prop_assert!(names.contains(zone));
            }
            if everything_set_aside {
                prop_assert_eq!(p.capacity, types[0]);
            } else {
                prop_assert!(!is_set_aside(&list, SIZE, p.zone.as_deref(), p.capacity, 1001));
                let earlier_open = types.iter().take_while(|k| **k != p.capacity).any(|k| {
                    !all_set_aside(&list, SIZE, &names, &[*k], 1001)
                });
                prop_assert!(!earlier_open, "a more preferred type had room");
            }
        }
    }

    /// Reading a failure's text never panics, whatever it holds.
    #[test]
    fn any_text_is_read_without_panic(text in ".{0,200}", spot in any::<bool>()) {
        let _ = refusal_in(&text, if spot { Spot } else { OnDemand });
    }
}
