//! The planner driven through whole rollouts by a simulated pool: table tests of single
//! decisions, property tests of the invariants over every state a rollout reaches, and the
//! 200-machine rollouts that must take exactly the ideal number of steps.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::observed::{Activity, Health, ObservedMachine};
use super::plan::{Budget, DeleteReason, Holdup, Plan, PlanInput, plan};
use crate::pool::Amount;

const NEW: &str = "new";
const OLD: &str = "old";
const HEALTH_TIMEOUT: i64 = 5;

fn machine(name: &str, template: &str, health: Health, created_at: i64) -> ObservedMachine {
    ObservedMachine {
        name: name.to_owned(),
        template_hash: template.to_owned(),
        health,
        created_at,
        activity: Activity::Idle,
        tainted_outdated: false,
        zone: None,
        ready_since: 0,
    }
}

fn ready_old(n: usize) -> Vec<ObservedMachine> {
    (0..n)
        .map(|i| machine(&format!("old-{i:03}"), OLD, Health::Ready, i as i64))
        .collect()
}

fn plan_for(machines: &[ObservedMachine], replicas: u32, budget: Budget, now: i64) -> Plan {
    plan_warming(machines, replicas, budget, now, 0)
}

/// [`plan_for`] with `minReadySeconds` at `min_ready_secs`.
fn plan_warming(
    machines: &[ObservedMachine],
    replicas: u32,
    budget: Budget,
    now: i64,
    min_ready_secs: i64,
) -> Plan {
    plan(&PlanInput {
        replicas,
        template_hash: NEW,
        budget,
        new_target: replicas,
        machines,
        now,
        health_timeout_secs: HEALTH_TIMEOUT,
        held: &BTreeSet::new(),
        held_firmly: &std::collections::BTreeSet::new(),
        min_ready_secs,
    })
}

fn names(plan: &Plan) -> Vec<&str> {
    plan.delete.iter().map(|v| v.name.as_str()).collect()
}

#[test]
fn budgets_resolve_as_kubernetes_does() {
    let table = [
        // (maxSurge, maxUnavailable, replicas, surge, unavailable)
        (Amount::Count(2), Amount::Count(0), 6, 2, 0),
        (Amount::Count(0), Amount::Count(1), 6, 0, 1),
        (Amount::Percent(25), Amount::Percent(25), 10, 3, 2),
        (Amount::Percent(10), Amount::Percent(10), 5, 1, 0),
        (Amount::Count(0), Amount::Count(0), 6, 0, 1),
        (Amount::Percent(0), Amount::Percent(5), 10, 0, 1),
        (Amount::Count(0), Amount::Count(9), 3, 0, 3),
        (Amount::Percent(100), Amount::Count(0), 7, 7, 0),
    ];
    for (surge, unavailable, replicas, want_surge, want_unavailable) in table {
        let budget = Budget::resolve(surge, unavailable, replicas);
        assert_eq!(
            (budget.surge, budget.unavailable),
            (want_surge, want_unavailable),
            "{surge} / {unavailable} of {replicas}"
        );
    }
}

#[test]
fn surge_creates_first_and_deletes_only_what_new_machines_cover() {
    let budget = Budget {
        surge: 2,
        unavailable: 0,
    };
    let mut pool = ready_old(6);
    let first = plan_for(&pool, 6, budget, 100);
    assert_eq!((first.create, first.delete.len()), (2, 0));

    // Two new machines being created: the total is at 8, nothing more.
    pool.push(ObservedMachine {
        activity: Activity::Creating,
        ..machine("new-a", NEW, Health::NotReady { since: 100 }, 100)
    });
    pool.push(ObservedMachine {
        activity: Activity::Creating,
        ..machine("new-b", NEW, Health::NotReady { since: 100 }, 100)
    });
    let waiting = plan_for(&pool, 6, budget, 101);
    assert_eq!((waiting.create, waiting.delete.len()), (0, 0));
    assert_eq!(waiting.holdup, Some(Holdup::InFlight));

    // One is Ready: exactly one old machine may go, the oldest.
    pool[6].activity = Activity::Idle;
    pool[6].health = Health::Ready;
    let one = plan_for(&pool, 6, budget, 102);
    assert_eq!(names(&one), ["old-000"]);
    assert_eq!(one.delete[0].reason, DeleteReason::Outdated);
    assert_eq!(one.create, 0);
}

#[test]
fn unavailable_budget_deletes_first_then_refills() {
    let budget = Budget {
        surge: 0,
        unavailable: 1,
    };
    let mut pool = ready_old(6);
    let first = plan_for(&pool, 6, budget, 100);
    assert_eq!((first.create, names(&first)), (0, vec!["old-000"]));
    pool[0].activity = Activity::Deleting;
    let waiting = plan_for(&pool, 6, budget, 101);
    assert_eq!((waiting.create, waiting.delete.len()), (0, 0));
    pool.remove(0);
    let refill = plan_for(&pool, 6, budget, 102);
    assert_eq!((refill.create, refill.delete.len()), (1, 0));
}

#[test]
fn victims_are_failed_then_not_ready_then_oldest() {
    let budget = Budget {
        surge: 0,
        unavailable: 3,
    };
    let pool = vec![
        machine("old-young", OLD, Health::Ready, 50),
        machine("old-ancient", OLD, Health::Ready, 1),
        machine("old-notready", OLD, Health::NotReady { since: 99 }, 60),
        machine("old-failed", OLD, Health::Failed, 70),
        machine("old-mid", OLD, Health::Ready, 20),
    ];
    let plan = plan_for(&pool, 5, budget, 100);
    // The failed machine is unhealthy (deleted first, costs no availability); the NotReady one
    // is not unhealthy yet but is unavailable, so it goes before any Ready one; then the oldest
    // Ready ones while availability allows: 3 available of 5, 2 required.
    assert_eq!(names(&plan), ["old-failed", "old-notready", "old-ancient"]);
    assert_eq!(plan.delete[0].reason, DeleteReason::Unhealthy);
}

#[test]
fn an_unhealthy_old_machine_is_replaced_first_then_deleted_when_availability_is_short() {
    let budget = Budget {
        surge: 1,
        unavailable: 0,
    };
    let mut pool = vec![
        machine("old-a", OLD, Health::Ready, 1),
        machine("old-b", OLD, Health::NotReady { since: 10 }, 2),
        machine("old-c", OLD, Health::Ready, 3),
    ];
    // old-b has been NotReady for 90 s (> the 5 s health timeout), but 3 live machines of a
    // minimum of 3: a replacement first (as a Deployment does), nothing deleted yet.
    let first = plan_for(&pool, 3, budget, 100);
    assert_eq!((first.create, first.delete.len()), (1, 0), "{first:?}");
    // The replacement is Ready: the broken machine goes first.
    pool.push(machine("new-a", NEW, Health::Ready, 100));
    let second = plan_for(&pool, 3, budget, 101);
    assert_eq!(names(&second), ["old-b"]);
    assert_eq!(second.delete[0].reason, DeleteReason::Unhealthy);
}

/// Every old Node NotReady past the health timeout (a lease or apiserver hiccup): the plan
/// deletes no more than the Deployment's arithmetic allows, counted over every deletion.
#[test]
fn a_hiccup_that_makes_every_old_node_not_ready_deletes_only_within_the_budget() {
    let hiccup = |n: usize| -> Vec<ObservedMachine> {
        (0..n)
            .map(|i| {
                machine(
                    &format!("old-{i}"),
                    OLD,
                    Health::NotReady { since: 0 },
                    i as i64,
                )
            })
            .collect()
    };
    let table = [
        // (replicas, maxSurge, maxUnavailable, creates, deletions)
        // minAvailable 5 of 5 live: nothing goes, one replacement is made first.
        (5, Amount::Count(1), Amount::Count(0), 1, 0),
        // minAvailable 4: one may go; no room to create until it is gone.
        (5, Amount::Count(0), Amount::Count(1), 0, 1),
        // minAvailable 8 of 10: two go, two are made.
        (10, Amount::Count(2), Amount::Count(2), 2, 2),
        // 25% / 25% of 8: surge 2, unavailable 2.
        (8, Amount::Percent(25), Amount::Percent(25), 2, 2),
    ];
    for (replicas, surge, unavailable, creates, deletions) in table {
        let budget = Budget::resolve(surge, unavailable, replicas);
        let pool = hiccup(replicas as usize);
        let plan = plan_for(&pool, replicas, budget, 100);
        assert_eq!(
            (plan.create, plan.delete.len() as u32),
            (creates, deletions),
            "{replicas} replicas, {surge} / {unavailable}: {plan:?}"
        );
        assert!(
            plan.delete
                .iter()
                .all(|v| v.reason == DeleteReason::Unhealthy),
            "{plan:?}"
        );
    }

    // With maxSurge 1: the replacement comes up, then one old machine goes, and so on.
    let budget = Budget::resolve(Amount::Count(1), Amount::Count(0), 5);
    let mut pool = hiccup(5);
    pool.push(machine("new-0", NEW, Health::Ready, 50));
    let one = plan_for(&pool, 5, budget, 100);
    assert_eq!((one.create, names(&one)), (0, vec!["old-0"]));
}

/// Old machines NotReady within the health timeout are unavailable: they go before Ready ones
/// (as outdated victims, not unhealthy) within `maxScaledDown`, never beyond it.
#[test]
fn old_machines_not_ready_within_the_timeout_are_cleaned_up_within_max_scaled_down() {
    let budget = Budget::resolve(Amount::Count(0), Amount::Count(1), 4);
    let pool = vec![
        machine("old-a", OLD, Health::NotReady { since: 98 }, 1),
        machine("old-b", OLD, Health::NotReady { since: 98 }, 2),
        machine("old-c", OLD, Health::Ready, 3),
        machine("old-d", OLD, Health::Ready, 4),
    ];
    // live 4, minAvailable 3, no new machine unavailable: maxScaledDown 1.
    let plan = plan_for(&pool, 4, budget, 100);
    assert_eq!(names(&plan), ["old-a"]);
    assert_eq!(plan.delete[0].reason, DeleteReason::Outdated);
}

/// A new machine being created counts against `maxScaledDown`: nothing old goes while it is
/// not available and the floor would be crossed.
#[test]
fn new_machines_not_yet_available_hold_back_the_clean_up_of_old_ones() {
    let budget = Budget::resolve(Amount::Count(1), Amount::Count(1), 3);
    let mut pool = vec![
        machine("old-a", OLD, Health::Failed, 1),
        machine("old-b", OLD, Health::Ready, 2),
        machine("old-c", OLD, Health::Ready, 3),
    ];
    for name in ["new-a", "new-b"] {
        pool.push(ObservedMachine {
            activity: Activity::Creating,
            ..machine(name, NEW, Health::NotReady { since: 99 }, 99)
        });
    }
    // live 5, minAvailable 2, 2 new unavailable: maxScaledDown 1, the failed one.
    let plan = plan_for(&pool, 3, budget, 100);
    assert_eq!(names(&plan), ["old-a"]);
    assert_eq!(plan.create, 0);
}

/// A broken new-template machine is replaced: first a new one when the surge allows, then the
/// broken one goes once the live machines are above the floor.
#[test]
fn a_broken_new_machine_is_replaced_then_deleted() {
    let budget = Budget::resolve(Amount::Count(1), Amount::Count(0), 3);
    let mut pool = vec![
        machine("new-a", NEW, Health::Ready, 1),
        machine("new-b", NEW, Health::Ready, 2),
        machine("new-c", NEW, Health::Failed, 3),
    ];
    let first = plan_for(&pool, 3, budget, 100);
    assert_eq!((first.create, first.delete.len()), (1, 0));
    assert!(!first.done);
    pool.push(machine("new-d", NEW, Health::Ready, 100));
    let second = plan_for(&pool, 3, budget, 101);
    assert_eq!((second.create, names(&second)), (0, vec!["new-c"]));
    assert_eq!(second.delete[0].reason, DeleteReason::Unhealthy);
}

#[test]
fn replicas_changes_are_honoured_in_the_same_loop() {
    let budget = Budget {
        surge: 1,
        unavailable: 1,
    };
    let mut pool = ready_old(2);
    pool.extend((0..4).map(|i| machine(&format!("new-{i}"), NEW, Health::Ready, 10 + i)));
    // Scaled from 6 to 4: two surplus machines go; the old ones first (victim order: oldest).
    let down = plan_for(&pool, 4, budget, 100);
    assert_eq!(names(&down), ["old-000", "old-001"]);
    // Scaled from 6 to 9 with everything updated: three more, within the surge of 1 at a time.
    let all_new: Vec<ObservedMachine> = (0..6)
        .map(|i| machine(&format!("new-{i}"), NEW, Health::Ready, i))
        .collect();
    let up = plan_for(
        &all_new,
        9,
        Budget::resolve(Amount::Count(1), Amount::Count(1), 9),
        100,
    );
    assert_eq!((up.create, up.delete.len()), (3, 0));
}

#[test]
fn a_canary_replaces_that_many_and_holds() {
    let budget = Budget {
        surge: 2,
        unavailable: 0,
    };
    let mut pool = ready_old(5);
    pool.push(machine("new-0", NEW, Health::Ready, 50));
    let held = plan(&PlanInput {
        replicas: 5,
        template_hash: NEW,
        budget,
        new_target: 1,
        machines: &pool,
        now: 100,
        health_timeout_secs: HEALTH_TIMEOUT,
        held: &BTreeSet::new(),
        held_firmly: &std::collections::BTreeSet::new(),
        min_ready_secs: 0,
    });
    // One new machine is Ready: one old goes, nothing more is created.
    assert_eq!((held.create, names(&held)), (0, vec!["old-000"]));
    pool.remove(0);
    let waiting = plan(&PlanInput {
        replicas: 5,
        template_hash: NEW,
        budget,
        new_target: 1,
        machines: &pool,
        now: 101,
        health_timeout_secs: HEALTH_TIMEOUT,
        held: &BTreeSet::new(),
        held_firmly: &std::collections::BTreeSet::new(),
        min_ready_secs: 0,
    });
    assert_eq!((waiting.create, waiting.delete.len()), (0, 0));
    assert_eq!(waiting.holdup, Some(Holdup::CanaryReached));
}

#[test]
fn machines_held_by_do_not_disrupt_are_passed_over_and_named_as_the_holdup() {
    let budget = Budget::resolve(Amount::Count(1), Amount::Count(0), 3);
    let mut pool = ready_old(3);
    pool.push(machine("new-0", NEW, Health::Ready, 50));
    let plan_firmly =
        |pool: &[ObservedMachine], held: &BTreeSet<String>, firmly: &BTreeSet<String>| {
            plan(&PlanInput {
                replicas: 3,
                template_hash: NEW,
                budget,
                new_target: 3,
                machines: pool,
                now: 100,
                health_timeout_secs: HEALTH_TIMEOUT,
                held,
                held_firmly: firmly,
                min_ready_secs: 0,
            })
        };
    let plan_with = |pool: &[ObservedMachine], held: &BTreeSet<String>| {
        plan_firmly(pool, held, &BTreeSet::new())
    };
    // old-000 would go first; held, old-001 goes instead.
    let held = BTreeSet::from(["old-000".to_owned()]);
    let first = plan_with(&pool, &held);
    assert_eq!(names(&first), vec!["old-001"]);
    assert_eq!(first.holdup, None);

    // Every old machine held: nothing to delete, and the holdup says why; nothing is done.
    let all: BTreeSet<String> = (0..3).map(|i| format!("old-{i:03}")).collect();
    let stuck = plan_with(&pool, &all);
    assert_eq!((stuck.create, stuck.delete.len()), (0, 0));
    assert_eq!(stuck.holdup, Some(Holdup::DoNotDisrupt));
    assert!(!stuck.done);

    // An unhealthy machine goes although held: that is not a voluntary disruption.
    pool[2].health = Health::Failed;
    let broken = plan_with(&pool, &all);
    assert_eq!(broken.delete.len(), 1);
    assert_eq!(broken.delete[0].name, "old-002");
    assert_eq!(broken.delete[0].reason, DeleteReason::Unhealthy);

    // Unless its delete failed before the cordon and its back-off has not passed: then it waits.
    let backing_off = BTreeSet::from(["old-002".to_owned()]);
    let waiting = plan_firmly(&pool, &all, &backing_off);
    assert_eq!((waiting.create, waiting.delete.len()), (0, 0));
    assert_eq!(waiting.holdup, Some(Holdup::DoNotDisrupt));
}

#[test]
fn a_finished_pool_is_done() {
    let pool: Vec<ObservedMachine> = (0..3)
        .map(|i| machine(&format!("new-{i}"), NEW, Health::Ready, i))
        .collect();
    let finished = plan_for(
        &pool,
        3,
        Budget::resolve(Amount::Count(1), Amount::Count(0), 3),
        9,
    );
    assert!(finished.done);
    assert_eq!(finished.holdup, None);
}

/// minReadySeconds 60, 2 replicas, maxSurge 1, maxUnavailable 0: a new machine Ready for 30 s
/// is not available yet, so no old machine goes (the budget holds, and the plan says when it
/// counts); Ready for 61 s, one old machine goes; with minReadySeconds 0 it goes at once.
#[test]
fn an_old_machine_goes_only_once_its_replacement_was_ready_for_min_ready_seconds() {
    let budget = Budget::resolve(Amount::Count(1), Amount::Count(0), 2);
    let mut pool = ready_old(2);
    pool.push(ObservedMachine {
        ready_since: 1_000,
        ..machine("new-a", NEW, Health::Ready, 900)
    });
    let warming = plan_warming(&pool, 2, budget, 1_030, 60);
    assert_eq!(
        (warming.create, warming.delete.len()),
        (0, 0),
        "{warming:?}"
    );
    assert_eq!(warming.holdup, Some(Holdup::Budget));
    assert_eq!(warming.next_available_at, Some(1_060));
    assert_eq!(
        (
            warming.counts.ready,
            warming.counts.available,
            warming.counts.updated_available
        ),
        (3, 2, 0)
    );
    assert!(!warming.done);

    let warm = plan_warming(&pool, 2, budget, 1_061, 60);
    assert_eq!((warm.create, names(&warm)), (0, vec!["old-000"]));
    assert_eq!(warm.delete[0].reason, DeleteReason::Outdated);
    assert_eq!(warm.next_available_at, None);

    let at_once = plan_warming(&pool, 2, budget, 1_030, 0);
    assert_eq!(names(&at_once), ["old-000"]);
    assert_eq!(at_once.next_available_at, None);
    assert_eq!(
        at_once,
        plan_for(&pool, 2, budget, 1_030),
        "0 is the default"
    );

    // The last old machine gone, the rollout is done only once the new ones count available.
    let mut last = vec![
        ObservedMachine {
            ready_since: 1_000,
            ..machine("new-a", NEW, Health::Ready, 900)
        },
        ObservedMachine {
            ready_since: 1_050,
            ..machine("new-b", NEW, Health::Ready, 950)
        },
    ];
    assert!(!plan_warming(&last, 2, budget, 1_100, 60).done);
    assert!(plan_warming(&last, 2, budget, 1_110, 60).done);
    last[1].ready_since = 0;
    assert!(plan_warming(&last, 2, budget, 1_060, 60).done);
}

/// Victims: failed, then NotReady, then Ready but still warming up, then available; with
/// minReadySeconds 0 nothing warms and the order is the one without it.
#[test]
fn machines_warming_up_are_chosen_before_available_ones() {
    use super::plan::{victim_order, victim_order_with};
    let at = |name: &str, health, created_at, ready_since| ObservedMachine {
        ready_since,
        ..machine(name, NEW, health, created_at)
    };
    let pool = [
        at("available-old", Health::Ready, 1, 10),
        at("warming-young", Health::Ready, 90, 95),
        at("available-young", Health::Ready, 50, 60),
        at("notready", Health::NotReady { since: 99 }, 70, 0),
        at("failed", Health::Failed, 80, 0),
    ];
    let order = |min_ready: i64| {
        let mut sorted: Vec<&ObservedMachine> = pool.iter().collect();
        sorted.sort_by(|a, b| victim_order_with(a, b, &|m| m.is_available_at(100, min_ready)));
        sorted
            .into_iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        order(30),
        [
            "failed",
            "notready",
            "warming-young",
            "available-old",
            "available-young"
        ]
    );
    let today = {
        let mut sorted: Vec<&ObservedMachine> = pool.iter().collect();
        sorted.sort_by(|a, b| victim_order(a, b));
        sorted
            .into_iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(order(0), today);
    assert_eq!(
        today,
        [
            "failed",
            "notready",
            "available-old",
            "available-young",
            "warming-young"
        ]
    );

    // Scaled down from 3 to 2 with one machine warming: it goes, no available one does.
    let budget = Budget::resolve(Amount::Count(1), Amount::Count(0), 2);
    let three = vec![
        at("new-a", Health::Ready, 1, 10),
        at("new-b", Health::Ready, 90, 95),
        at("new-c", Health::Ready, 50, 60),
    ];
    let down = plan_warming(&three, 2, budget, 100, 30);
    assert_eq!(names(&down), ["new-b"]);
    assert_eq!(down.delete[0].reason, DeleteReason::Surplus);
}

/// A simulated pool: in-flight creates and deletes finish at given times.
#[derive(Debug, Clone)]
struct Sim {
    machines: Vec<(ObservedMachine, i64)>,
    now: i64,
    next: u32,
}

impl Sim {
    fn new(machines: Vec<ObservedMachine>) -> Self {
        Self {
            machines: machines.into_iter().map(|m| (m, 0)).collect(),
            now: 0,
            next: 0,
        }
    }

    fn observed(&self) -> Vec<ObservedMachine> {
        self.machines.iter().map(|(m, _)| m.clone()).collect()
    }

    /// Starts what `plan` says; creates finish `create_time` later, deletes `delete_time`.
    fn act(&mut self, plan: &Plan, create_time: i64, delete_time: i64) {
        for victim in &plan.delete {
            if let Some((m, at)) = self
                .machines
                .iter_mut()
                .find(|(m, _)| m.name == victim.name)
            {
                m.activity = Activity::Deleting;
                *at = self.now + delete_time;
            }
        }
        for _ in 0..plan.create {
            self.next += 1;
            let mut m = machine(
                &format!("new-{:04}", self.next),
                NEW,
                Health::NotReady { since: self.now },
                self.now,
            );
            m.activity = Activity::Creating;
            self.machines.push((m, self.now + create_time));
        }
    }

    /// Finishes the in-flight work due by now: creates end Ready (or, `failed`, removed by their
    /// own compensation), deletes end with the machine gone.
    fn finish_due(&mut self, failed: impl Fn(&str) -> bool) {
        let now = self.now;
        self.machines.retain(|(m, at)| {
            !(*at <= now
                && (m.activity == Activity::Deleting
                    || (m.activity == Activity::Creating && failed(&m.name))))
        });
        for (m, at) in &mut self.machines {
            if m.activity == Activity::Creating && *at <= now {
                m.activity = Activity::Idle;
                m.health = Health::Ready;
                m.ready_since = now;
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.machines
            .iter()
            .filter(|(m, _)| m.activity != Activity::Idle)
            .count()
    }
}

/// Runs a rollout where every create takes `create_time` and every delete `delete_time`;
/// returns the time at which the planner says done.
fn run_to_done(replicas: u32, budget: Budget, create_time: i64, delete_time: i64) -> i64 {
    let mut sim = Sim::new(ready_old(replicas as usize));
    loop {
        sim.finish_due(|_| false);
        let plan = plan_for(&sim.observed(), replicas, budget, sim.now);
        if plan.done {
            return sim.now;
        }
        sim.act(&plan, create_time, delete_time);
        assert!(sim.now < 100_000, "no end in sight: {plan:?}");
        sim.now += 1;
    }
}

#[test]
fn two_hundred_machines_roll_in_the_ideal_number_of_steps() {
    // (maxSurge, maxUnavailable): the ideal is ceil(replicas / (surge + unavailable)) waves of
    // one create plus one delete.
    let table = [
        (Amount::Percent(10), Amount::Count(0)),
        (Amount::Count(0), Amount::Percent(10)),
        (Amount::Count(20), Amount::Count(5)),
        (Amount::Percent(25), Amount::Percent(25)),
        (Amount::Count(1), Amount::Count(0)),
        (Amount::Count(0), Amount::Count(1)),
        (Amount::Count(7), Amount::Count(0)),
        (Amount::Count(3), Amount::Count(4)),
    ];
    let replicas = 200;
    for (surge, unavailable) in table {
        let budget = Budget::resolve(surge, unavailable, replicas);
        for (create, delete) in [(1, 1), (3, 3)] {
            let ideal = i64::from(replicas.div_ceil(budget.pace())) * (create + delete);
            let took = run_to_done(replicas, budget, create, delete);
            assert_eq!(
                took, ideal,
                "{surge}/{unavailable} ({budget:?}), create {create} delete {delete}"
            );
        }
    }
}

fn health_strategy() -> impl Strategy<Value = Health> {
    prop_oneof![
        4 => Just(Health::Ready),
        1 => (0i64..10).prop_map(|since| Health::NotReady { since }),
        1 => Just(Health::Failed),
    ]
}

fn activity_strategy() -> impl Strategy<Value = Activity> {
    prop_oneof![
        6 => Just(Activity::Idle),
        1 => Just(Activity::Creating),
        1 => Just(Activity::Deleting),
    ]
}

prop_compose! {
    fn pool_strategy()(
        specs in prop::collection::vec(
            (any::<bool>(), health_strategy(), activity_strategy(), 0i64..50),
            0..14,
        )
    ) -> Vec<ObservedMachine> {
        specs
            .into_iter()
            .enumerate()
            .map(|(i, (new, health, activity, created_at))| {
                let health = if activity == Activity::Creating {
                    Health::NotReady { since: created_at }
                } else {
                    health
                };
                ObservedMachine {
                    activity,
                    ..machine(&format!("m-{i:02}"), if new { NEW } else { OLD }, health, created_at)
                }
            })
            .collect()
    }
}

fn amount_strategy() -> impl Strategy<Value = Amount> {
    prop_oneof![
        (0u32..4).prop_map(Amount::Count),
        (0u32..=100).prop_map(Amount::Percent),
    ]
}

/// Checks one plan against the state it was made for: the total within `replicas + surge`,
/// the available and the live machines not taken below `minAvailable` (nor lower than they
/// already are), only idle machines deleted, each once.
fn check_invariants(
    machines: &[ObservedMachine],
    replicas: u32,
    budget: Budget,
    plan: &Plan,
) -> Result<(), TestCaseError> {
    check_invariants_at(machines, replicas, budget, plan, 0, 0)
}

/// [`check_invariants`] at `now` under `min_ready_secs`: available means Ready for that long.
fn check_invariants_at(
    machines: &[ObservedMachine],
    replicas: u32,
    budget: Budget,
    plan: &Plan,
    now: i64,
    min_ready_secs: i64,
) -> Result<(), TestCaseError> {
    let is_available = |m: &ObservedMachine| m.is_available_at(now, min_ready_secs);
    let total = machines.len() as u32;
    let max_total = budget.max_total(replicas);
    let min_available = budget.min_available(replicas);
    if plan.create > 0 {
        prop_assert!(
            total + plan.create <= max_total,
            "creates {} with {total} of max {max_total}",
            plan.create
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut lost = 0;
    for victim in &plan.delete {
        prop_assert!(seen.insert(victim.name.clone()), "{} twice", victim.name);
        let m = machines.iter().find(|m| m.name == victim.name);
        prop_assert!(m.is_some(), "deletes unknown {}", victim.name);
        let m = m.unwrap_or_else(|| unreachable!());
        prop_assert_eq!(m.activity, Activity::Idle, "deletes busy {}", &victim.name);
        if is_available(m) {
            lost += 1;
        }
    }
    let available = machines.iter().filter(|m| is_available(m)).count() as u32;
    prop_assert!(
        available - lost >= min_available.min(available),
        "available {available} - {lost} below min {min_available}"
    );
    let live = machines
        .iter()
        .filter(|m| m.activity != Activity::Deleting)
        .count() as u32;
    let deleted = plan.delete.len() as u32;
    prop_assert!(
        live - deleted >= min_available.min(live),
        "live {live} - {deleted} below min {min_available}"
    );
    Ok(())
}

/// Whether the planner has something it can do now: nothing in flight, and an old machine
/// left, or not `replicas` live machines, or a broken one (a pool whose only gap is a
/// new-template machine NotReady within the health timeout waits for it).
fn work_left(machines: &[ObservedMachine], replicas: u32, now: i64) -> bool {
    let in_flight = machines.iter().any(|m| m.activity != Activity::Idle);
    let live: Vec<&ObservedMachine> = machines
        .iter()
        .filter(|m| m.activity != Activity::Deleting)
        .collect();
    let waiting = live.iter().any(|m| {
        m.template_hash == NEW && !m.is_available() && !m.is_unhealthy(now, HEALTH_TIMEOUT)
    });
    !in_flight
        && !waiting
        && (live.iter().any(|m| m.template_hash != NEW)
            || live.len() as u32 != replicas
            || live.iter().any(|m| m.is_unhealthy(now, HEALTH_TIMEOUT)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// With minReadySeconds from 0 to 120 and machines Ready since any time: whatever order
    /// in-flight work finishes in and however far the clock moves between looks, every plan
    /// keeps the total within replicas + surge and the machines available for minReadySeconds
    /// at replicas − unavailable or above (or, when already below, never lower).
    #[test]
    fn with_min_ready_every_plan_of_every_reachable_state_keeps_the_floors(
        start in pool_strategy(),
        ready_since in prop::collection::vec(0i64..200, 14),
        min_ready_secs in 0i64..120,
        replicas in 0u32..10,
        surge in amount_strategy(),
        unavailable in amount_strategy(),
        order in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>(), 1i64..40), 60),
    ) {
        let budget = Budget::resolve(surge, unavailable, replicas);
        let start: Vec<ObservedMachine> = start
            .into_iter()
            .zip(ready_since)
            .map(|(m, since)| ObservedMachine {
                ready_since: if m.health == Health::Ready { since } else { 0 },
                ..m
            })
            .collect();
        let mut sim = Sim::new(start);
        // Every Node Ready since a time before the first look.
        sim.now = 200;
        for (pick, fails, step) in order {
            sim.now += step;
            let observed = sim.observed();
            let plan = plan_warming(&observed, replicas, budget, sim.now, min_ready_secs);
            check_invariants_at(&observed, replicas, budget, &plan, sim.now, min_ready_secs)?;
            if let Some(at) = plan.next_available_at {
                prop_assert!(at > sim.now && at <= sim.now + min_ready_secs, "{at} at {}", sim.now);
            }
            sim.act(&plan, i64::MAX / 4, i64::MAX / 4);
            let busy: Vec<usize> = (0..sim.machines.len())
                .filter(|&i| sim.machines[i].0.activity != Activity::Idle)
                .collect();
            if !busy.is_empty() {
                let i = busy[pick.index(busy.len())];
                let name = sim.machines[i].0.name.clone();
                sim.machines[i].1 = sim.now;
                sim.finish_due(|n| fails && n == name);
            }
        }
    }

    /// With minReadySeconds from 0 to 120, a rollout from any state still ends when creates
    /// succeed: every machine new, `replicas` of them, each Ready for minReadySeconds.
    #[test]
    fn with_min_ready_a_rollout_always_ends_when_creates_succeed(
        start in pool_strategy(),
        min_ready_secs in 0i64..120,
        replicas in 0u32..10,
        surge in amount_strategy(),
        unavailable in amount_strategy(),
    ) {
        let budget = Budget::resolve(surge, unavailable, replicas);
        let mut sim = Sim::new(start);
        let mut done = false;
        for _ in 0..3_000 {
            sim.finish_due(|_| false);
            let observed = sim.observed();
            let plan = plan_warming(&observed, replicas, budget, sim.now, min_ready_secs);
            check_invariants_at(&observed, replicas, budget, &plan, sim.now, min_ready_secs)?;
            if plan.done {
                done = true;
                break;
            }
            sim.act(&plan, 2, 2);
            sim.now += 1;
        }
        prop_assert!(done, "not done: {:?}", sim.observed());
        let observed = sim.observed();
        prop_assert_eq!(observed.len() as u32, replicas);
        prop_assert!(observed
            .iter()
            .all(|m| m.template_hash == NEW && m.is_available_at(sim.now, min_ready_secs)));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Whatever the pool looks like and in whatever order in-flight work finishes (creates
    /// sometimes failing), every plan keeps the total within replicas + surge and the available
    /// machines at replicas − unavailable or above (or, when already below, never lower).
    #[test]
    fn every_plan_of_every_reachable_state_keeps_the_budget(
        start in pool_strategy(),
        replicas in 0u32..10,
        surge in amount_strategy(),
        unavailable in amount_strategy(),
        order in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 60),
    ) {
        let budget = Budget::resolve(surge, unavailable, replicas);
        let mut sim = Sim::new(start);
        for (pick, fails) in order {
            sim.now += 1;
            let observed = sim.observed();
            let plan = plan_for(&observed, replicas, budget, sim.now);
            check_invariants(&observed, replicas, budget, &plan)?;
            sim.act(&plan, i64::MAX / 4, i64::MAX / 4);
            // One in-flight piece of work finishes, picked at random.
            let busy: Vec<usize> = (0..sim.machines.len())
                .filter(|&i| sim.machines[i].0.activity != Activity::Idle)
                .collect();
            if !busy.is_empty() {
                let i = busy[pick.index(busy.len())];
                let name = sim.machines[i].0.name.clone();
                sim.machines[i].1 = sim.now;
                sim.finish_due(|n| fails && n == name);
            }
        }
    }

    /// When creates succeed, a rollout from any state ends: every machine new, `replicas` of
    /// them, all Ready.
    #[test]
    fn a_rollout_always_ends_when_creates_succeed(
        start in pool_strategy(),
        replicas in 0u32..10,
        surge in amount_strategy(),
        unavailable in amount_strategy(),
        durations in prop::collection::vec((1i64..4, 1i64..4), 1),
    ) {
        let budget = Budget::resolve(surge, unavailable, replicas);
        let (create_time, delete_time) = durations[0];
        let mut sim = Sim::new(start);
        let mut done = false;
        for _ in 0..2_000 {
            sim.finish_due(|_| false);
            let observed = sim.observed();
            let plan = plan_for(&observed, replicas, budget, sim.now);
            check_invariants(&observed, replicas, budget, &plan)?;
            if plan.done {
                done = true;
                break;
            }
            sim.act(&plan, create_time, delete_time);
            sim.now += 1;
        }
        prop_assert!(done, "not done: {:?}", sim.observed());
        let observed = sim.observed();
        prop_assert_eq!(observed.len() as u32, replicas);
        prop_assert!(observed.iter().all(|m| m.template_hash == NEW && m.is_available()));
    }

    /// A canary of N replaces up to N machines and then holds with nothing in flight.
    #[test]
    fn a_canary_holds_at_its_size(
        replicas in 1u32..10,
        canary in 0u32..10,
        surge in amount_strategy(),
        unavailable in amount_strategy(),
    ) {
        let budget = Budget::resolve(surge, unavailable, replicas);
        let mut sim = Sim::new(ready_old(replicas as usize));
        let mut held = None;
        for _ in 0..500 {
            sim.finish_due(|_| false);
            let observed = sim.observed();
            let plan = plan(&PlanInput {
                replicas,
                template_hash: NEW,
                budget,
                new_target: canary,
                machines: &observed,
                now: sim.now,
                health_timeout_secs: HEALTH_TIMEOUT,
                held: &BTreeSet::new(),
                held_firmly: &std::collections::BTreeSet::new(),
                min_ready_secs: 0,
            });
            check_invariants(&observed, replicas, budget, &plan)?;
            if plan.create == 0 && plan.delete.is_empty() && sim.in_flight() == 0 {
                held = Some(plan);
                break;
            }
            sim.act(&plan, 1, 1);
            sim.now += 1;
        }
        let held = held.ok_or_else(|| TestCaseError::fail("never held"))?;
        prop_assert_eq!(held.counts.updated, canary.min(replicas));
        prop_assert_eq!(held.counts.total, replicas);
    }

    /// Any clock, health timeout, transition and creation times, replicas, canary target and
    /// budget (counts far beyond any pool), any machines held by do-not-disrupt: a plan, never a
    /// panic, within replicas + surge, and no held machine chosen but for being unhealthy.
    #[test]
    fn any_times_and_numbers_give_a_plan_within_the_budget(
        machines in prop::collection::vec(
            (any::<bool>(), any::<i64>(), any::<i64>(), 0u8..4, activity_strategy(), any::<i64>()),
            0..10,
        ),
        replicas in prop_oneof![0u32..12, any::<u32>()],
        new_target in any::<u32>(),
        surge in prop_oneof![amount_strategy(), any::<u32>().prop_map(Amount::Count), any::<u32>().prop_map(Amount::Percent)],
        unavailable in prop_oneof![amount_strategy(), any::<u32>().prop_map(Amount::Count), any::<u32>().prop_map(Amount::Percent)],
        now in any::<i64>(),
        health_timeout_secs in any::<i64>(),
        held_mask in any::<u16>(),
        min_ready_secs in prop_oneof![Just(0i64), any::<i64>()],
    ) {
        let held: BTreeSet<String> = (0..machines.len())
            .filter(|i| held_mask & (1 << i) != 0)
            .map(|i| format!("m-{i:02}"))
            .collect();
        let machines: Vec<ObservedMachine> = machines
            .into_iter()
            .enumerate()
            .map(|(i, (new, created_at, since, health, activity, ready_since))| {
                let health = match health {
                    0 => Health::Ready,
                    1 => Health::Failed,
                    _ => Health::NotReady { since },
                };
                ObservedMachine {
                    activity,
                    ready_since,
                    ..machine(&format!("m-{i:02}"), if new { NEW } else { OLD }, health, created_at)
                }
            })
            .collect();
        let budget = Budget::resolve(surge, unavailable, replicas);
        let plan = plan(&PlanInput {
            replicas,
            template_hash: NEW,
            budget,
            new_target,
            machines: &machines,
            now,
            health_timeout_secs,
            held: &held,
            held_firmly: &std::collections::BTreeSet::new(),
            min_ready_secs,
        });
        for victim in &plan.delete {
            prop_assert!(
                victim.reason == DeleteReason::Unhealthy || !held.contains(&victim.name),
                "held machine {} chosen as {}", victim.name, victim.reason
            );
        }
        let total = u64::from(plan.counts.total);
        prop_assert!(
            total + u64::from(plan.create) <= u64::from(budget.max_total(replicas)).max(total)
        );
        prop_assert!(plan.delete.len() <= machines.len());
    }

    /// Pools of 0 to 50 machines in any mix of Ready, NotReady (within and past the health
    /// timeout), Failed, being created and being deleted, old and new template, under every
    /// surge/unavailable pair: every plan keeps the budget, and when there is work and nothing
    /// in flight (and no canary or do-not-disrupt mark holds it) the plan creates or deletes.
    #[test]
    fn every_plan_keeps_the_deployment_arithmetic_and_moves_when_it_can(
        specs in prop::collection::vec(
            (any::<bool>(), 0u8..5, activity_strategy(), 0i64..50),
            0..=50,
        ),
        replicas in 0u32..60,
        surge in amount_strategy(),
        unavailable in amount_strategy(),
    ) {
        let now = 100;
        let machines: Vec<ObservedMachine> = specs
            .into_iter()
            .enumerate()
            .map(|(i, (new, health, activity, created_at))| {
                let health = match health {
                    _ if activity == Activity::Creating => Health::NotReady { since: now - 1 },
                    0 | 1 => Health::Ready,
                    2 => Health::NotReady { since: now - 1 },
                    3 => Health::NotReady { since: now - HEALTH_TIMEOUT - 1 },
                    _ => Health::Failed,
                };
                ObservedMachine {
                    activity,
                    ..machine(&format!("m-{i:02}"), if new { NEW } else { OLD }, health, created_at)
                }
            })
            .collect();
        let budget = Budget::resolve(surge, unavailable, replicas);
        let plan = plan_for(&machines, replicas, budget, now);
        check_invariants(&machines, replicas, budget, &plan)?;
        if work_left(&machines, replicas, now) {
            prop_assert!(
                plan.create > 0 || !plan.delete.is_empty(),
                "stuck with {budget:?} for {replicas}: {plan:?} {machines:?}"
            );
        }
        if plan.done {
            prop_assert!(!work_left(&machines, replicas, now));
        }
    }
}
