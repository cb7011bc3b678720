//! Table tests of [`decide`]: one row per rule of the module documentation, through one `check`.

use super::*;
use crate::controller::health::HealthPolicy;
use crate::controller::machines::WorkKind;
use crate::controller::test_support::{creating, ready, with_condition, with_work};
use crate::pool::Amount;

const NOW: i64 = 10_000;

/// What a decision does, in short: creates, victims, steps, a rollout start, held.
#[derive(Debug, PartialEq, Eq)]
struct Acts {
    create: u32,
    delete: Vec<(String, VictimReason)>,
    remediate: Vec<(String, Rung)>,
    start_rollout: bool,
    held: bool,
}

fn acts(create: u32, delete: &[(&str, VictimReason)], remediate: &[(&str, Rung)]) -> Acts {
    Acts {
        create,
        delete: delete.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect(),
        remediate: remediate
            .iter()
            .map(|(n, r)| ((*n).to_owned(), *r))
            .collect(),
        start_rollout: false,
        held: false,
    }
}

fn summary(decision: &Decision) -> Acts {
    Acts {
        create: decision.create,
        delete: decision
            .delete
            .iter()
            .map(|v| (v.name.clone(), v.reason))
            .collect(),
        remediate: decision
            .remediate
            .iter()
            .map(|s| (s.machine.clone(), s.rung))
            .collect(),
        start_rollout: decision.start_rollout,
        held: decision.held.is_some(),
    }
}

/// A pool of `replicas` machines of template `t` in `mode`.
struct Pool {
    replicas: u32,
    policy: HealthPolicy,
    min_ready_secs: i64,
    max_unavailable: u32,
    machines: Vec<Machine>,
    remediations: Vec<Remediation>,
    mode: Mode,
    now: i64,
    window_closed: Option<&'static str>,
}

impl Pool {
    fn new(replicas: u32, machines: Vec<Machine>) -> Self {
        Self {
            replicas,
            policy: HealthPolicy::default(),
            min_ready_secs: 0,
            max_unavailable: 0,
            machines,
            remediations: Vec::new(),
            mode: Mode::Active,
            now: NOW,
            window_closed: None,
        }
    }

    fn decide(&self) -> Decision {
        decide(&Input {
            replicas: self.replicas,
            template_hash: "t",
            policy: &self.policy,
            creation_timeout_secs: 1_200,
            min_ready_secs: self.min_ready_secs,
            max_unavailable: self.max_unavailable,
            machines: &self.machines,
            remediations: &self.remediations,
            mode: self.mode,
            now: self.now,
            remediation_window_closed: self.window_closed,
        })
    }
}

fn check(case: &str, pool: &Pool, expected: &Acts) {
    let decision = pool.decide();
    assert_eq!(&summary(&decision), expected, "{case}: {decision:?}");
}

/// A machine of template `t` with a KernelDeadlock since 9,000: unhealthy.
fn deadlocked(name: &str) -> Machine {
    with_condition(ready(name, "t", 1_000), "KernelDeadlock", "True", 9_000)
}

fn healthy(name: &str) -> Machine {
    ready(name, "t", 1_000)
}

fn node_only(name: &str) -> Machine {
    let mut machine = healthy(name);
    machine.vm = None;
    machine.template_hash = String::new();
    machine.created_at = 0;
    machine
}

/// A Spot machine whose VM is in `power` (Azure's eviction under Deallocate stops and
/// deallocates it).
fn spot(name: &str, power: &str) -> Machine {
    let mut machine = healthy(name);
    if let Some(vm) = machine.vm.as_mut() {
        vm.capacity_type = Some(crate::pool::CapacityType::Spot);
        vm.power_state = Some(power.to_owned());
    }
    machine
}

fn draining(name: &str) -> Machine {
    let mut machine = healthy(name);
    if let Some(node) = machine.node.as_mut() {
        node.draining = true;
    }
    machine
}

fn with_priority(mut machine: Machine, priority: i64) -> Machine {
    if let Some(node) = machine.node.as_mut() {
        node.delete_priority = Some(priority);
    }
    machine
}

/// `pool` with `applyTo: all` and no maintenance window open.
fn closed(mut pool: Pool) -> Pool {
    pool.window_closed = Some("closed; opens 2026-11-30 01:00 UTC");
    pool
}

fn rolled(mut pool: Pool, mode: Mode) -> Pool {
    pool.mode = mode;
    pool
}

#[test]
fn decides_each_rule_of_the_module_documentation() {
    use Rung::{Replace, Restart};
    use VictimReason::{Evicted, PoolDeleted, ScaleDown, Unhealthy, VmGone};
    let with_rollout = |mut a: Acts| {
        a.start_rollout = true;
        a
    };
    let held = Acts {
        held: true,
        ..acts(0, &[], &[])
    };
    let restart_first = |mut pool: Pool| {
        pool.policy.remediation = vec![Restart, Replace];
        pool
    };
    #[rustfmt::skip]
    let cases: Vec<(&str, Pool, Acts)> = vec![
        ("a steady pool does nothing", Pool::new(2, vec![healthy("p-a"), healthy("p-b")]), acts(0, &[], &[])),
        ("a short pool creates the missing machines", Pool::new(3, vec![healthy("p-a")]), acts(2, &[], &[])),
        ("a create in flight counts", Pool::new(2, vec![healthy("p-a"), creating("p-b", 9_900)]), acts(0, &[], &[])),
        ("a machine being deleted does not count", Pool::new(2, vec![healthy("p-a"), draining("p-b")]), acts(1, &[], &[])),
        ("a machine deleting by work does not count", Pool::new(2, vec![healthy("p-a"), with_work(healthy("p-b"), WorkKind::Delete, 9_000)]), acts(1, &[], &[])),
        ("paused: nothing is acted on", rolled(Pool::new(3, vec![deadlocked("p-a"), with_priority(healthy("p-b"), 0)]), Mode::Paused), acts(0, &[], &[])),
        ("paused: nor a surplus", rolled(Pool::new(1, vec![healthy("p-a"), healthy("p-b")]), Mode::Paused), acts(0, &[], &[])),
        ("rolling out: no create, delete, remediation or rollout start", rolled(Pool::new(4, vec![deadlocked("p-a"), healthy("p-b"), ready("p-c", "old", 1), healthy("p-d"), node_only("p-e")]), Mode::RollingOut), acts(0, &[], &[])),
        ("deleting: every machine not being deleted goes, a create in flight is left to the caller",
            rolled(Pool::new(3, vec![healthy("p-a"), draining("p-b"), creating("p-c", 9_000), node_only("p-d"), deadlocked("p-e")]), Mode::Deleting),
            acts(0, &[("p-a", PoolDeleted), ("p-d", PoolDeleted), ("p-e", PoolDeleted)], &[])),
        ("no VM listed but Nodes: held", Pool::new(3, vec![node_only("p-a"), node_only("p-b")]), held),
        ("more Nodes without a VM than machines with one: held", Pool::new(3, vec![healthy("p-a"), node_only("p-b"), node_only("p-c")]), Acts { held: true, ..acts(0, &[], &[]) }),
        ("a Node whose VM is gone is deleted and replaced at once", Pool::new(3, vec![healthy("p-a"), healthy("p-b"), node_only("p-c")]), acts(1, &[("p-c", VmGone)], &[])),
        ("an evicted Spot machine is deleted and replaced at once, outside the ladder",
            Pool::new(3, vec![healthy("p-a"), spot("p-b", "running"), spot("p-c", "deallocated")]), acts(1, &[("p-c", Evicted)], &[])),
        ("evictions are not held by maxUnhealthy: two of three evicted are both replaced",
            Pool::new(3, vec![healthy("p-a"), spot("p-b", "deallocating"), spot("p-c", "stopped")]), acts(2, &[("p-b", Evicted), ("p-c", Evicted)], &[])),
        ("an on-demand VM deallocated is unhealthy, not evicted: the ladder replaces it (it still counts)",
            Pool::new(3, vec![healthy("p-a"), healthy("p-b"), { let mut m = spot("p-c", "deallocated"); if let Some(vm) = m.vm.as_mut() { vm.capacity_type = None; } m }]), acts(0, &[("p-c", Unhealthy)], &[])),
        ("paused: an eviction is only reported", rolled(Pool::new(2, vec![healthy("p-a"), spot("p-b", "deallocated")]), Mode::Paused), acts(0, &[], &[])),
        ("a VM gone and one as many VMs left is not held", Pool::new(2, vec![healthy("p-a"), node_only("p-b")]), acts(1, &[("p-b", VmGone)], &[])),
        ("an unhealthy machine is replaced: it still counts, so nothing is created now",
            Pool::new(3, vec![deadlocked("p-a"), healthy("p-b"), healthy("p-c")]), acts(0, &[("p-a", Unhealthy)], &[])),
        ("once its delete is in flight its replacement is created",
            Pool { remediations: vec![remediation("p-a", 0, 9_990)], ..Pool::new(3, vec![with_work(deadlocked("p-a"), WorkKind::Delete, 9_995), healthy("p-b"), healthy("p-c")]) },
            acts(1, &[], &[])),
        ("with restart first an unhealthy machine is restarted",
            restart_first(Pool::new(3, vec![deadlocked("p-a"), healthy("p-b"), healthy("p-c")])), acts(0, &[], &[("p-a", Restart)])),
        ("a restart inside its time is left to work",
            restart_first(Pool { remediations: vec![remediation("p-a", 0, 9_500)], ..Pool::new(3, vec![deadlocked("p-a"), healthy("p-b"), healthy("p-c")]) }), acts(0, &[], &[])),
        ("a restart past its time moves to replace",
            restart_first(Pool { remediations: vec![remediation("p-a", 0, 9_400)], ..Pool::new(3, vec![deadlocked("p-a"), healthy("p-b"), healthy("p-c")]) }), acts(0, &[("p-a", Unhealthy)], &[])),
        ("a restart still running past its time is waited for",
            restart_first(Pool { remediations: vec![remediation("p-a", 0, 9_400)], ..Pool::new(3, vec![with_work(deadlocked("p-a"), WorkKind::Restart, 9_400), healthy("p-b"), healthy("p-c")]) }), acts(0, &[], &[])),
        ("above maxUnhealthy nothing is remediated",
            Pool::new(3, vec![deadlocked("p-a"), deadlocked("p-b"), healthy("p-c")]), acts(0, &[], &[])),
        ("above maxUnhealthy a rung does not move on",
            restart_first(Pool { remediations: vec![remediation("p-a", 0, 1_000)], ..Pool::new(3, vec![deadlocked("p-a"), deadlocked("p-b"), healthy("p-c")]) }), acts(0, &[], &[])),
        ("at most maxInFlight remediations: the longest unhealthy first",
            Pool { policy: HealthPolicy { max_unhealthy: Amount::Percent(100), ..HealthPolicy::default() },
                ..Pool::new(3, vec![deadlocked("p-b"), with_condition(healthy("p-a"), "KernelDeadlock", "True", 9_500), healthy("p-c")]) },
            acts(0, &[("p-b", Unhealthy)], &[])),
        ("a remediation in flight takes the only slot",
            Pool { policy: HealthPolicy { max_unhealthy: Amount::Percent(100), ..HealthPolicy::default() }, remediations: vec![remediation("p-a", 0, 9_990)],
                ..Pool::new(3, vec![with_work(deadlocked("p-a"), WorkKind::Delete, 9_995), deadlocked("p-b"), healthy("p-c")]) },
            acts(1, &[], &[])),
        ("a surplus goes, unhealthy first, and is not also remediated",
            Pool::new(2, vec![healthy("p-a"), deadlocked("p-b"), healthy("p-c")]), acts(0, &[("p-b", ScaleDown)], &[])),
        ("a machine with work in flight is never a scale-down victim",
            Pool::new(1, vec![with_work(healthy("p-a"), WorkKind::Restart, 9_000), healthy("p-b")]), acts(0, &[("p-b", ScaleDown)], &[])),
        ("a replacement takes the place of a scale-down",
            restart_first(Pool { remediations: vec![remediation("p-a", 0, 9_400)], ..Pool::new(2, vec![deadlocked("p-a"), healthy("p-b"), healthy("p-c")]) }),
            acts(0, &[("p-a", Unhealthy)], &[])),
        ("another template starts a rollout, and scale happens in the same decision",
            Pool::new(3, vec![ready("p-a", "old", 1_000), healthy("p-b")]), with_rollout(acts(1, &[], &[]))),
        ("a create in flight does not start a rollout", Pool::new(2, vec![healthy("p-a"), creating("p-b", 9_900)]), acts(0, &[], &[])),
        ("no maintenance window open: an unhealthy machine is not remediated",
            closed(Pool::new(3, vec![deadlocked("p-a"), healthy("p-b"), healthy("p-c")])), acts(0, &[], &[])),
        ("no maintenance window open: a rung does not move on",
            closed(restart_first(Pool { remediations: vec![remediation("p-a", 0, 9_400)], ..Pool::new(3, vec![deadlocked("p-a"), healthy("p-b"), healthy("p-c")]) })), acts(0, &[], &[])),
        ("no maintenance window open: a machine whose VM is gone is still replaced",
            closed(Pool::new(3, vec![healthy("p-a"), healthy("p-b"), node_only("p-c")])), acts(1, &[("p-c", VmGone)], &[])),
    ];
    for (case, pool, expected) in &cases {
        check(case, pool, expected);
    }
}

fn remediation(machine: &str, rung: usize, started_at: i64) -> Remediation {
    Remediation {
        machine: machine.to_owned(),
        rung,
        started_at,
        reason: "KernelDeadlock=True".to_owned(),
    }
}

/// The documented example: 5 machines down to 2, one unhealthy, one with delete priority -1,
/// one of another template; the newest of the rest goes next, then by name.
#[test]
fn scales_down_unhealthy_then_priority_then_outdated_then_newest() {
    let machines = vec![
        ready("p-a", "t", 5_000),
        with_priority(ready("p-b", "t", 1_000), -1),
        ready("p-c", "old", 1_000),
        ready("p-d", "t", 2_000),
        deadlocked("p-e"),
    ];
    let two = Pool::new(2, machines.clone()).decide();
    let victims: Vec<(&str, VictimReason)> = two
        .delete
        .iter()
        .map(|v| (v.name.as_str(), v.reason))
        .collect();
    assert_eq!(
        victims,
        [
            ("p-e", VictimReason::ScaleDown),
            ("p-b", VictimReason::ScaleDown),
            ("p-c", VictimReason::ScaleDown),
        ]
    );
    assert!(two.start_rollout, "p-c is of another template");
    let one = Pool::new(1, machines).decide();
    assert_eq!(
        one.delete.last().map(|v| v.name.as_str()),
        Some("p-a"),
        "the newest of the current template goes before the older p-d"
    );
}

#[test]
fn a_scale_down_never_takes_availability_below_replicas_minus_max_unavailable() {
    // p-a and p-b are available, p-c is Ready but warming up (minReadySeconds 60 from 9,990).
    let machines = vec![
        with_priority(healthy("p-a"), -5),
        healthy("p-b"),
        with_condition(healthy("p-c"), "Ready", "True", 9_990),
    ];
    let pool = Pool {
        min_ready_secs: 60,
        ..Pool::new(2, machines)
    };
    let decision = pool.decide();
    assert_eq!(decision.counts.available, 2);
    assert_eq!(
        summary(&decision),
        acts(0, &[("p-c", VictimReason::ScaleDown)], &[]),
        "p-a goes first by priority, but only the warming p-c keeps 2 available"
    );
    let relaxed = Pool {
        max_unavailable: 1,
        ..pool
    };
    assert_eq!(
        summary(&relaxed.decide()),
        acts(0, &[("p-a", VictimReason::ScaleDown)], &[])
    );
}

#[test]
fn remediations_end_when_healthy_or_gone_and_stay_when_exhausted() {
    let policy = HealthPolicy {
        remediation: vec![Rung::Restart],
        ..HealthPolicy::default()
    };
    let pool = Pool {
        policy,
        remediations: vec![
            remediation("p-a", 0, 1_000),
            remediation("p-b", 0, 1_000),
            remediation("p-gone", 0, 1_000),
        ],
        ..Pool::new(3, vec![deadlocked("p-a"), healthy("p-b"), healthy("p-c")])
    };
    let decision = pool.decide();
    assert_eq!(
        decision.remediations,
        [remediation("p-a", 0, 1_000)],
        "p-b is healthy again and p-gone is gone"
    );
    assert!(decision.remediate.is_empty() && decision.delete.is_empty());
    assert_eq!(
        decision.unhealthy,
        [Unhealthy {
            machine: "p-a".to_owned(),
            reason: "KernelDeadlock=True; remediation ladder exhausted".to_owned(),
            since: 9_000,
        }]
    );
    assert!(decision.remediation_allowed.allowed);
}

#[test]
fn a_new_restart_is_carried_with_its_deadline_to_recheck() {
    let pool = Pool {
        policy: HealthPolicy {
            remediation: vec![Rung::Restart, Rung::Replace],
            ..HealthPolicy::default()
        },
        ..Pool::new(3, vec![deadlocked("p-a"), healthy("p-b"), healthy("p-c")])
    };
    let decision = pool.decide();
    assert_eq!(
        decision.remediations,
        [Remediation {
            machine: "p-a".to_owned(),
            rung: 0,
            started_at: NOW,
            reason: "KernelDeadlock=True".to_owned(),
        }]
    );
    assert_eq!(decision.recheck_at, Some(NOW + 600));
}

#[test]
fn the_allowance_gives_the_counts() {
    let table = [
        (
            vec![deadlocked("p-a"), deadlocked("p-b"), healthy("p-c")],
            false,
            "2 of 3 machines unhealthy, more than maxUnhealthy 40% (1); remediating none",
        ),
        (
            vec![deadlocked("p-a"), healthy("p-b"), healthy("p-c")],
            true,
            "1 of 3 machines unhealthy, within maxUnhealthy 40% (1)",
        ),
        (
            // 1 of 3 replicas present: the total is max(replicas, counted) = 3, 40% of 3 = 1.
            vec![deadlocked("p-a")],
            true,
            "1 of 3 machines unhealthy, within maxUnhealthy 40% (1)",
        ),
    ];
    for (machines, allowed, message) in table {
        let decision = Pool::new(3, machines).decide();
        assert_eq!(
            decision.remediation_allowed,
            Allowance {
                allowed,
                window_closed: false,
                message: message.to_owned()
            }
        );
    }
    let held = closed(Pool::new(
        3,
        vec![deadlocked("p-a"), healthy("p-b"), healthy("p-c")],
    ))
    .decide();
    assert_eq!(
        held.remediation_allowed,
        Allowance {
            allowed: false,
            window_closed: true,
            message: "1 of 3 machines unhealthy; no maintenance window is open (closed; opens 2026-11-30 01:00 UTC): remediating none until one opens".to_owned()
        }
    );
}

#[test]
fn counts_ready_available_updated_and_unhealthy() {
    let machines = vec![
        healthy("p-a"),
        with_condition(healthy("p-b"), "Ready", "True", 9_980),
        ready("p-c", "old", 1_000),
        with_condition(healthy("p-d"), "Ready", "False", 9_990),
        deadlocked("p-e"),
        creating("p-f", 9_900),
        draining("p-g"),
    ];
    let pool = Pool {
        min_ready_secs: 30,
        mode: Mode::Paused,
        ..Pool::new(6, machines)
    };
    let decision = pool.decide();
    assert_eq!(
        decision.counts,
        Counts {
            replicas: 6,
            ready: 4,
            available: 3,
            updated: 5,
            unhealthy: 1,
        }
    );
    // Pending Ready=False at 10,290, warming p-b at 10,010, creating p-f until 11,100.
    assert_eq!(decision.recheck_at, Some(10_010));
}

#[test]
fn the_mode_names_its_phase() {
    assert_eq!(
        [Mode::Active, Mode::Paused, Mode::Deleting, Mode::RollingOut].map(Mode::phase),
        ["Active", "Paused", "Deleting", "RollingOut"]
    );
    assert_eq!(
        serde_json::to_string(&Mode::RollingOut).unwrap_or_default(),
        "\"rolling-out\""
    );
    assert_eq!(VictimReason::VmGone.to_string(), "its VM is gone");
}
