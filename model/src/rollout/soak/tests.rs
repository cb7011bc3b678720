//! Tests of the soak: a batch starts its soak once no create of the new template is in flight,
//! holds the plan until it ends, records what soaked, and a machine of the batch that turns
//! NotReady or goes stops it; and the property that a held plan never creates nor deletes a
//! healthy machine.

use proptest::prelude::*;

use super::*;
use crate::rollout::plan::{Counts, Victim};

const NOW: i64 = 10_000;
const SOAK: i64 = 300;

fn machine(name: &str, template: &str, ready_since: i64, activity: Activity) -> ObservedMachine {
    ObservedMachine {
        name: name.to_owned(),
        template_hash: template.to_owned(),
        health: if ready_since > 0 {
            Health::Ready
        } else {
            Health::NotReady { since: NOW - 5 }
        },
        created_at: 1,
        activity,
        tainted_outdated: false,
        zone: None,
        ready_since,
    }
}

fn input<'a>(
    machines: &'a [ObservedMachine],
    current: Option<&'a Soak>,
    soaked_through: i64,
    now: i64,
) -> SoakInput<'a> {
    SoakInput {
        machines,
        template_hash: "new",
        now,
        min_ready_secs: 0,
        soak_secs: SOAK,
        current,
        soaked_through,
    }
}

#[test]
fn a_complete_batch_starts_its_soak_and_an_incomplete_one_waits() {
    let pool = [
        machine("old-1", "old", 100, Activity::Idle),
        machine("new-1", "new", 9_000, Activity::Idle),
    ];
    let step = soak_step(&input(&pool, None, 0, NOW));
    assert!(step.hold);
    assert_eq!(
        step.soak,
        Some(Soak {
            machines: vec!["new-1".to_owned()],
            until: NOW + SOAK
        })
    );

    let creating = [
        machine("new-1", "new", 9_000, Activity::Idle),
        machine("new-2", "new", 0, Activity::Creating),
    ];
    let step = soak_step(&input(&creating, None, 0, NOW));
    assert!(step.hold, "the batch is not complete: the plan waits");
    assert_eq!(
        step.soak, None,
        "the soak starts once the batch is complete"
    );

    // Ready while its create is still ending: it is available to the plan, so it soaks.
    let ending = [
        machine("old-1", "old", 100, Activity::Idle),
        machine("new-1", "new", 9_000, Activity::Creating),
    ];
    let step = soak_step(&input(&ending, None, 0, NOW));
    assert!(step.hold);
    assert_eq!(
        step.soak.map(|s| s.machines),
        Some(vec!["new-1".to_owned()])
    );
}

#[test]
fn a_soak_holds_until_it_ends_then_records_what_soaked() {
    let pool = [machine("new-1", "new", 9_000, Activity::Idle)];
    let soak = Soak {
        machines: vec!["new-1".to_owned()],
        until: NOW + 10,
    };
    let during = soak_step(&input(&pool, Some(&soak), 0, NOW));
    assert!(during.hold && during.unhealthy.is_none());
    assert_eq!(during.soak.as_ref(), Some(&soak));

    let after = soak_step(&input(&pool, Some(&soak), 0, NOW + 10));
    assert!(!after.hold, "a soaked batch goes on");
    assert_eq!((after.soak, after.soaked_through), (None, 9_000));
    // The next look: nothing new to soak.
    let next = soak_step(&input(&pool, None, 9_000, NOW + 11));
    assert!(!next.hold && next.soak.is_none());
}

#[test]
fn a_machine_of_the_batch_that_turns_not_ready_or_goes_stops_the_rollout() {
    let soak = Soak {
        machines: vec!["new-1".to_owned(), "new-2".to_owned()],
        until: NOW + 100,
    };
    let sick = [
        machine("new-1", "new", 9_000, Activity::Idle),
        machine("new-2", "new", 0, Activity::Idle),
    ];
    let step = soak_step(&input(&sick, Some(&soak), 0, NOW));
    assert_eq!(step.unhealthy.as_deref(), Some("new-2"));
    assert!(step.hold);
    assert_eq!(
        step.soak, None,
        "the soak is dropped: after a resume the batch is soaked again"
    );

    let gone = [machine("new-1", "new", 9_000, Activity::Idle)];
    assert_eq!(
        soak_step(&input(&gone, Some(&soak), 0, NOW))
            .unhealthy
            .as_deref(),
        Some("new-2")
    );
}

#[test]
fn without_a_soak_nothing_holds() {
    let pool = [machine("new-1", "new", 9_000, Activity::Idle)];
    let step = soak_step(&SoakInput {
        soak_secs: 0,
        ..input(&pool, None, 0, NOW)
    });
    assert_eq!(
        step,
        SoakStep {
            soak: None,
            soaked_through: 0,
            hold: false,
            unhealthy: None
        }
    );
}

fn plan(create: u32, reasons: &[DeleteReason], holdup: Option<Holdup>, done: bool) -> Plan {
    Plan {
        create,
        delete: reasons
            .iter()
            .enumerate()
            .map(|(i, reason)| Victim {
                name: format!("m{i}"),
                reason: *reason,
            })
            .collect(),
        counts: Counts::default(),
        done,
        holdup,
        next_available_at: None,
    }
}

#[test]
fn a_held_plan_keeps_only_broken_deletes_and_says_why_it_waits() {
    let held = hold(
        plan(
            2,
            &[DeleteReason::Outdated, DeleteReason::Unhealthy],
            None,
            false,
        ),
        Some(NOW + 5),
    );
    assert_eq!(held.create, 0);
    assert_eq!(
        held.delete.iter().map(|v| v.reason).collect::<Vec<_>>(),
        [DeleteReason::Unhealthy]
    );
    assert_eq!(held.holdup, None, "a broken machine is still replaced");
    assert_eq!(held.next_available_at, Some(NOW + 5));

    let waiting = hold(plan(1, &[DeleteReason::Outdated], None, false), None);
    assert_eq!(waiting.holdup, Some(Holdup::Soak));
    let canary = hold(
        plan(0, &[], Some(Holdup::CanaryReached), false),
        Some(NOW + 5),
    );
    assert_eq!(
        canary.holdup,
        Some(Holdup::Soak),
        "approval waits for the canary's soak"
    );
    let in_flight = hold(plan(0, &[], Some(Holdup::InFlight), false), None);
    assert_eq!(in_flight.holdup, Some(Holdup::InFlight));
    let done = hold(plan(0, &[], None, true), Some(NOW + 5));
    assert_eq!((done.done, done.holdup), (true, None));
}

fn reasons() -> impl Strategy<Value = Vec<DeleteReason>> {
    proptest::collection::vec(
        prop_oneof![
            Just(DeleteReason::Outdated),
            Just(DeleteReason::Unhealthy),
            Just(DeleteReason::Surplus)
        ],
        0..6,
    )
}

proptest! {
    #[test]
    fn a_held_plan_never_creates_nor_deletes_a_healthy_machine(
        create in 0u32..10,
        reasons in reasons(),
        until in proptest::option::of(0i64..20_000),
    ) {
        let held = hold(plan(create, &reasons, None, false), until);
        prop_assert_eq!(held.create, 0);
        prop_assert!(held.delete.iter().all(|v| v.reason == DeleteReason::Unhealthy));
        if let Some(until) = until {
            prop_assert!(held.next_available_at.is_some_and(|at| at <= until));
        }
    }

    #[test]
    fn a_soak_step_holds_whenever_a_new_machine_is_unsoaked(
        readies in proptest::collection::vec(0i64..NOW, 0..6),
        soaked_through in 0i64..NOW,
    ) {
        let pool: Vec<ObservedMachine> = readies
            .iter()
            .enumerate()
            .map(|(i, ready)| machine(&format!("new-{i}"), "new", *ready, Activity::Idle))
            .collect();
        let step = soak_step(&input(&pool, None, soaked_through, NOW));
        let unsoaked = readies.iter().any(|r| *r > 0 && *r > soaked_through);
        prop_assert_eq!(step.hold, unsoaked);
        if let Some(soak) = &step.soak {
            prop_assert_eq!(soak.until, NOW + SOAK);
            prop_assert!(!soak.machines.is_empty());
        }
    }
}
