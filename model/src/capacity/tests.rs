//! Table tests and properties of the capacity decisions: allocation failure codes, exhausted
//! (VM size, zone) pairs and the zone choice around them.

use proptest::prelude::*;

use super::*;

fn zones(names: &[&str]) -> Vec<String> {
    names.iter().map(|z| (*z).to_owned()).collect()
}

fn entry(vm_size: &str, zone: &str, until: i64) -> Exhausted {
    Exhausted {
        vm_size: vm_size.to_owned(),
        zone: zone.to_owned(),
        code: "ZonalAllocationFailed".to_owned(),
        until,
        capacity_type: None,
    }
}

#[test]
fn allocation_failure_codes_are_told_from_the_others() {
    let table = [
        ("ZonalAllocationFailed", true),
        ("zonalallocationfailed", true),
        ("AllocationFailed", true),
        ("OverconstrainedAllocationRequest", true),
        ("OverconstrainedZonalAllocationRequest", true),
        ("SkuNotAvailable", true),
        (" SkuNotAvailable ", true),
        ("OperationNotAllowed", false),
        ("QuotaExceeded", false),
        ("InternalExecutionError", false),
        ("AllocationFailedX", false),
        ("", false),
    ];
    for (code, expected) in table {
        assert_eq!(is_allocation_failure(code), expected, "{code}");
    }
}

#[test]
fn a_failures_text_names_its_allocation_failure_as_a_whole_word() {
    let table = [
        (
            "creating machine web-x failed at step provision-vm: VM web-x failed to provision: ZonalAllocationFailed: no capacity; removed the NIC",
            Some("ZonalAllocationFailed"),
        ),
        (
            "creating machine web-x failed at step create-vm: PUT VM web-x answered 409 (SkuNotAvailable): the size is not available",
            Some("SkuNotAvailable"),
        ),
        ("quota: QuotaExceeded for family", None),
        ("NotAllocationFailed happened", None),
        (
            "the word allocationfailed in lower case",
            Some("AllocationFailed"),
        ),
        ("", None),
    ];
    for (text, expected) in table {
        assert_eq!(allocation_failure_in(text), expected, "{text}");
    }
}

#[test]
fn marking_renews_the_pair_drops_the_expired_and_keeps_the_bound() {
    let mut list = vec![entry("D2", "1", 50), entry("D2", "2", 500)];
    let marked = mark_exhausted(&mut list, "D2", "2", "AllocationFailed", 100);
    assert_eq!(marked.until, 100 + 180);
    assert_eq!(
        list,
        vec![marked.clone()],
        "zone 1 expired at 50, zone 2 renewed"
    );
    for zone in 0..(MAX_EXHAUSTED + 5) {
        mark_exhausted(&mut list, "D4", &zone.to_string(), "AllocationFailed", 200);
    }
    assert_eq!(list.len(), MAX_EXHAUSTED);
    assert!(
        list.iter().all(|e| e.vm_size == "D4"),
        "the entry that expires first went"
    );
}

#[test]
fn an_entry_holds_for_its_size_and_zone_until_its_time() {
    let list = vec![entry("Standard_D2s_v5", "2", 100)];
    let table = [
        ("Standard_D2s_v5", "2", 99, true),
        ("standard_d2s_v5", "2", 99, true),
        ("Standard_D2s_v5", "2", 100, false),
        ("Standard_D2s_v5", "1", 99, false),
        ("Standard_D4s_v5", "2", 99, false),
    ];
    for (size, zone, now, expected) in table {
        assert_eq!(
            is_exhausted(&list, size, zone, now),
            expected,
            "{size} {zone} {now}"
        );
    }
    assert_eq!(active(&list, 99).len(), 1);
    assert!(active(&list, 100).is_empty());
}

#[test]
fn the_zone_is_the_hashed_one_unless_exhausted_then_the_next_free_one() {
    let pool = zones(&["1", "2", "3"]);
    let machine = (0..100)
        .map(|i| format!("web-{i:05}"))
        .find(|m| zone_for(m, &pool).as_deref() == Some("2"))
        .unwrap_or_else(|| panic!("no name hashes to zone 2"));
    let size = "Standard_D2s_v5";
    let table: [(&[(&str, i64)], &str); 6] = [
        (&[], "2"),
        (&[("2", 200)], "3"),
        (&[("2", 200), ("3", 200)], "1"),
        (&[("1", 200), ("3", 200)], "2"),
        (&[("1", 200), ("2", 200), ("3", 200)], "2"),
        (&[("2", 100)], "2"),
    ];
    for (marked, expected) in table {
        let list: Vec<Exhausted> = marked
            .iter()
            .map(|(z, until)| entry(size, z, *until))
            .collect();
        assert_eq!(
            choose_zone(&machine, size, &pool, &list, 100).as_deref(),
            Some(expected),
            "{marked:?}"
        );
    }
    let other_size = vec![entry("Standard_D4s_v5", "2", 200)];
    assert_eq!(
        choose_zone(&machine, size, &pool, &other_size, 100).as_deref(),
        Some("2"),
        "another size's shortage does not move this one"
    );
    assert_eq!(choose_zone(&machine, size, &[], &[], 100), None);
    assert!(all_exhausted(
        &[
            entry(size, "1", 200),
            entry(size, "2", 200),
            entry(size, "3", 200)
        ],
        size,
        &pool,
        100
    ));
    assert!(!all_exhausted(&[entry(size, "1", 200)], size, &pool, 100));
    assert!(!all_exhausted(&[], size, &[], 100));
}

proptest! {
    /// A chosen zone is one of the pool's; never an exhausted one while another is free; the
    /// hashed zone when it is free or when all are exhausted; the same for the same inputs.
    #[test]
    fn a_zone_is_never_exhausted_while_another_is_free(
        machine in "[a-z]{1,8}-[a-z0-9]{5}",
        zone_count in 1usize..6,
        marks in proptest::collection::vec((0usize..6, 0i64..400, any::<bool>()), 0..10),
        now in 0i64..400,
    ) {
        let pool: Vec<String> = (1..=zone_count).map(|z| z.to_string()).collect();
        let size = "Standard_D2s_v5";
        let list: Vec<Exhausted> = marks
            .iter()
            .map(|(z, until, same_size)| {
                entry(if *same_size { size } else { "Standard_E8s_v5" }, &(z + 1).to_string(), *until)
            })
            .collect();
        let chosen = choose_zone(&machine, size, &pool, &list, now);
        prop_assert_eq!(&chosen, &choose_zone(&machine, size, &pool, &list, now));
        let chosen = chosen.unwrap_or_default();
        prop_assert!(pool.contains(&chosen));
        let hashed = zone_for(&machine, &pool).unwrap_or_default();
        let free: Vec<&String> = pool.iter().filter(|z| !is_exhausted(&list, size, z, now)).collect();
        if free.is_empty() {
            prop_assert_eq!(chosen, hashed);
        } else {
            prop_assert!(free.contains(&&chosen));
            if free.contains(&&hashed) {
                prop_assert_eq!(chosen, hashed);
            }
        }
    }
}

fn per_zone(counts: &[(&str, u32)]) -> BTreeMap<String, u32> {
    counts.iter().map(|(z, n)| ((*z).to_owned(), *n)).collect()
}

#[test]
fn new_machines_go_to_the_allowed_zones_with_the_fewest_machines() {
    let pool = zones(&["1", "2", "3"]);
    let size = "Standard_D2s_v5";
    // (machines per zone, exhausted zones until, creates, zones chosen)
    type Case<'a> = (
        &'a [(&'a str, u32)],
        &'a [(&'a str, i64)],
        u32,
        &'a [&'a str],
    );
    let table: [Case<'_>; 9] = [
        // An empty pool: the zones in their order.
        (&[], &[], 2, &["1", "2"]),
        (&[], &[], 4, &["1", "2", "3", "1"]),
        // The fewest first, ties in the zones' order.
        (&[("1", 2), ("2", 1), ("3", 2)], &[], 1, &["2"]),
        (&[("1", 2), ("2", 1), ("3", 1)], &[], 3, &["2", "3", "1"]),
        // Each machine placed counts.
        (
            &[("1", 0), ("2", 3), ("3", 3)],
            &[],
            4,
            &["1", "1", "1", "1"],
        ),
        // Machines in a zone the pool no longer allows do not count.
        (&[("4", 9), ("1", 1)], &[], 2, &["2", "3"]),
        // An exhausted zone is skipped while another one is free.
        (
            &[("1", 0), ("2", 2), ("3", 2)],
            &[("1", 200)],
            2,
            &["2", "3"],
        ),
        // Expired: not skipped.
        (&[("1", 0), ("2", 2), ("3", 2)], &[("1", 100)], 1, &["1"]),
        // Every zone exhausted: the fewest among all.
        (
            &[("1", 2), ("2", 1), ("3", 2)],
            &[("1", 200), ("2", 200), ("3", 200)],
            1,
            &["2"],
        ),
    ];
    for (counts, marked, count, expected) in table {
        let list: Vec<Exhausted> = marked
            .iter()
            .map(|(z, until)| entry(size, z, *until))
            .collect();
        let chosen = choose_zones(count, size, &pool, &per_zone(counts), &list, 100);
        let expected: Vec<Option<String>> =
            expected.iter().map(|z| Some((*z).to_owned())).collect();
        assert_eq!(chosen, expected, "{counts:?} {marked:?} {count}");
    }
    assert_eq!(
        choose_zones(2, size, &[], &per_zone(&[("1", 1)]), &[], 100),
        vec![None, None],
        "a pool without zones"
    );
    assert!(choose_zones(0, size, &pool, &BTreeMap::new(), &[], 100).is_empty());
}

proptest! {
    /// However many machines a pool has per zone and however many are placed, the zones end at
    /// most one machine apart when they started that way, and a placement never widens the gap
    /// between the fullest and the emptiest allowed zone beyond what it was (or one).
    #[test]
    fn placing_machines_never_unbalances_the_zones(
        start in prop::collection::vec(0u32..20, 1..5),
        count in 0u32..40,
    ) {
        let pool: Vec<String> = (1..=start.len()).map(|z| z.to_string()).collect();
        let counts: BTreeMap<String, u32> = pool.iter().cloned().zip(start.iter().copied()).collect();
        let chosen = choose_zones(count, "Standard_D2s_v5", &pool, &counts, &[], 0);
        prop_assert_eq!(chosen.len(), count as usize);
        let mut after = counts.clone();
        for zone in chosen.into_iter().flatten() {
            *after.entry(zone).or_default() += 1;
        }
        let spread = |c: &BTreeMap<String, u32>| {
            let max = c.values().max().copied().unwrap_or(0);
            let min = c.values().min().copied().unwrap_or(0);
            max - min
        };
        prop_assert!(spread(&after) <= spread(&counts).max(1));
    }
}
