//! Property tests of [`decide`] over random pools (VMs, Nodes, conditions, work, remediations,
//! policies and modes): the guarantees of the module documentation marked as such in the issue.

use std::collections::BTreeSet;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::controller::machines::{Work, WorkKind};
use crate::controller::test_support::{node, vm, with_condition};
use crate::pool::Amount;

const NOW: i64 = 10_000;

/// The random parts of one machine.
#[derive(Debug, Clone)]
struct Drawn {
    has_vm: bool,
    has_node: bool,
    template_old: bool,
    created_at: i64,
    provisioning: usize,
    power: usize,
    ready: bool,
    ready_since: i64,
    draining: bool,
    deadlock: bool,
    priority: Option<i64>,
    lease: Option<i64>,
    work: Option<(usize, i64)>,
}

fn drawn() -> impl Strategy<Value = Drawn> {
    (
        (any::<bool>(), any::<bool>(), any::<bool>(), 0i64..10_000),
        (0usize..3, 0usize..3, any::<bool>(), 0i64..10_000),
        (
            prop::bool::weighted(0.15),
            prop::bool::weighted(0.3),
            prop::option::of(-2i64..3),
        ),
        (
            prop::option::of(8_000i64..10_000),
            prop::option::weighted(0.3, (0usize..4, 8_000i64..10_000)),
        ),
    )
        .prop_map(
            |(
                (has_vm, has_node, template_old, created_at),
                (provisioning, power, ready, ready_since),
                (draining, deadlock, priority),
                (lease, work),
            )| Drawn {
                has_vm,
                has_node,
                template_old,
                created_at,
                provisioning,
                power,
                ready,
                ready_since,
                draining,
                deadlock,
                priority,
                lease,
                work,
            },
        )
}

fn machine(index: usize, drawn: &Drawn) -> Machine {
    let name = format!("p-{index:02}");
    let template = if drawn.template_old { "old" } else { "t" };
    let work = drawn.work.map(|(kind, since)| Work {
        kind: [
            WorkKind::Create,
            WorkKind::Delete,
            WorkKind::Restart,
            WorkKind::Redeploy,
        ][kind],
        since,
    });
    let has_vm = drawn.has_vm || (!drawn.has_node && work.is_none());
    let vm = has_vm.then(|| {
        let mut vm = vm(&name, template, drawn.created_at);
        vm.provisioning_state = ["Succeeded", "Failed", "Deleting"][drawn.provisioning].to_owned();
        vm.power_state =
            [Some("running"), Some("deallocated"), None][drawn.power].map(str::to_owned);
        vm
    });
    let node = drawn.has_node.then(|| {
        let mut node = node(&name, drawn.ready, drawn.ready_since);
        node.draining = drawn.draining;
        node.delete_priority = drawn.priority;
        node.lease_stale_since = drawn.lease;
        node
    });
    let machine = Machine {
        name,
        template_hash: vm
            .as_ref()
            .map_or_else(String::new, |v| v.template_hash.clone()),
        created_at: vm.as_ref().map_or(0, |v| v.created_at),
        vm,
        node,
        work,
    };
    if drawn.deadlock {
        with_condition(machine, "KernelDeadlock", "True", 9_000)
    } else {
        machine
    }
}

/// A random pool: machines, remediations on some of them, a policy, replicas and a mode.
#[derive(Debug, Clone)]
struct Case {
    replicas: u32,
    policy: HealthPolicy,
    min_ready_secs: i64,
    max_unavailable: u32,
    machines: Vec<Machine>,
    remediations: Vec<Remediation>,
    mode: Mode,
}

fn case() -> impl Strategy<Value = Case> {
    let policy = (
        prop_oneof![
            (0u32..=100).prop_map(Amount::Percent),
            (0u32..5).prop_map(Amount::Count)
        ],
        1u32..4,
        prop::option::of(10u64..300),
        prop::sample::select(vec![
            vec![Rung::Replace],
            vec![Rung::Restart],
            vec![Rung::Restart, Rung::Replace],
            vec![Rung::Restart, Rung::Redeploy, Rung::Replace],
            vec![Rung::Redeploy],
        ]),
        60u64..1_200,
    )
        .prop_map(
            |(max_unhealthy, max_in_flight, lease, remediation, timeout)| HealthPolicy {
                max_unhealthy,
                max_in_flight,
                lease_timeout: lease.map(Duration::from_secs),
                remediation,
                remediation_timeout: Duration::from_secs(timeout),
                ..HealthPolicy::default()
            },
        );
    (
        0u32..8,
        policy,
        0i64..120,
        0u32..3,
        prop::collection::vec(drawn(), 0..9),
        prop::collection::vec(prop::option::of((0usize..3, 8_000i64..10_000)), 9),
        prop::sample::select(vec![
            Mode::Active,
            Mode::Active,
            Mode::Paused,
            Mode::Deleting,
            Mode::RollingOut,
        ]),
    )
        .prop_map(
            |(replicas, policy, min_ready_secs, max_unavailable, drawn, remediated, mode)| {
                let machines: Vec<Machine> = drawn
                    .iter()
                    .enumerate()
                    .map(|(index, d)| machine(index, d))
                    .collect();
                let remediations = machines
                    .iter()
                    .zip(remediated)
                    .filter_map(|(m, r)| {
                        r.map(|(rung, started_at)| Remediation {
                            machine: m.name.clone(),
                            rung,
                            started_at,
                            reason: "drawn".to_owned(),
                        })
                    })
                    .collect();
                Case {
                    replicas,
                    policy,
                    min_ready_secs,
                    max_unavailable,
                    machines,
                    remediations,
                    mode,
                }
            },
        )
}

fn decide_case(case: &Case) -> Decision {
    decide(&Input {
        replicas: case.replicas,
        template_hash: "t",
        policy: &case.policy,
        creation_timeout_secs: 1_200,
        min_ready_secs: case.min_ready_secs,
        max_unavailable: case.max_unavailable,
        machines: &case.machines,
        remediations: &case.remediations,
        mode: case.mode,
        now: NOW,
        remediation_window_closed: None,
    })
}

fn by_name<'a>(case: &'a Case, name: &str) -> Option<&'a Machine> {
    case.machines.iter().find(|m| m.name == name)
}

fn acts_on_nothing(decision: &Decision) -> bool {
    decision.create == 0
        && decision.delete.is_empty()
        && decision.remediate.is_empty()
        && !decision.start_rollout
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn paused_or_rolling_out_acts_on_nothing_and_keeps_its_remediations(case in case()) {
        let decision = decide_case(&case);
        if matches!(case.mode, Mode::Paused | Mode::RollingOut) {
            prop_assert!(acts_on_nothing(&decision), "{decision:?}");
            prop_assert_eq!(&decision.remediations, &case.remediations);
        }
    }

    #[test]
    fn held_acts_on_nothing(case in case()) {
        let decision = decide_case(&case);
        let no_vm_but_nodes = case.machines.iter().all(|m| m.vm.is_none())
            && case.machines.iter().any(|m| m.node.is_some());
        if case.mode == Mode::Active && no_vm_but_nodes {
            prop_assert!(decision.held.is_some());
        }
        if decision.held.is_some() {
            prop_assert!(acts_on_nothing(&decision), "{decision:?}");
            prop_assert_eq!(&decision.remediations, &case.remediations);
        }
    }

    #[test]
    fn never_remediates_above_max_unhealthy(case in case()) {
        let decision = decide_case(&case);
        let unhealthy = decision.unhealthy.len();
        let total = case.replicas.max(decision.counts.replicas);
        let threshold = case.policy.max_unhealthy.resolve(total, false);
        prop_assert_eq!(decision.remediation_allowed.allowed, unhealthy as u32 <= threshold);
        if !decision.remediation_allowed.allowed {
            prop_assert!(decision.remediate.is_empty(), "{decision:?}");
            prop_assert!(
                decision.delete.iter().all(|v| v.reason != VictimReason::Unhealthy),
                "{decision:?}"
            );
        }
    }

    #[test]
    fn never_more_than_max_in_flight_when_one_starts(case in case()) {
        let decision = decide_case(&case);
        let in_flight = |list: &[Remediation]| {
            list.iter().filter(|r| !r.is_exhausted(&case.policy, NOW)).count()
        };
        let started = decision
            .remediations
            .iter()
            .filter(|r| !case.remediations.iter().any(|old| old.machine == r.machine))
            .count();
        if started > 0 {
            prop_assert!(
                in_flight(&decision.remediations) <= case.policy.max_in_flight as usize,
                "{decision:?}"
            );
        }
        prop_assert!(
            in_flight(&decision.remediations)
                <= in_flight(&case.remediations).max(case.policy.max_in_flight as usize)
        );
        let names: BTreeSet<&str> =
            decision.remediations.iter().map(|r| r.machine.as_str()).collect();
        prop_assert_eq!(names.len(), decision.remediations.len(), "one remediation a machine");
    }

    #[test]
    fn victims_are_distinct_listed_and_not_already_going(case in case()) {
        let decision = decide_case(&case);
        let names: BTreeSet<&str> = decision.delete.iter().map(|v| v.name.as_str()).collect();
        prop_assert_eq!(names.len(), decision.delete.len(), "{:?}", decision.delete);
        for victim in &decision.delete {
            let machine = by_name(&case, &victim.name);
            prop_assert!(machine.is_some_and(|m| !m.is_deleting()), "{victim:?}");
        }
        for step in &decision.remediate {
            let machine = by_name(&case, &step.machine);
            prop_assert!(machine.is_some_and(|m| m.vm.is_some() && !m.is_deleting()));
            prop_assert!(step.rung != Rung::Replace);
        }
    }

    #[test]
    fn never_overshoots_and_scales_down_only_the_surplus(case in case()) {
        let decision = decide_case(&case);
        let counted = decision.counts.replicas;
        prop_assert!(decision.create + counted <= case.replicas.max(counted));
        if decision.create > 0 {
            prop_assert_eq!(decision.create + counted, case.replicas);
            prop_assert_eq!(case.mode, Mode::Active);
        }
        let scale_down: Vec<&Victim> = decision
            .delete
            .iter()
            .filter(|v| v.reason == VictimReason::ScaleDown)
            .collect();
        prop_assert!(scale_down.len() as u32 <= counted.saturating_sub(case.replicas));
        for victim in &scale_down {
            prop_assert!(by_name(&case, &victim.name).is_some_and(|m| m.counts() && m.work.is_none()));
        }
    }

    #[test]
    fn a_scale_down_keeps_replicas_minus_max_unavailable_available(case in case()) {
        let decision = decide_case(&case);
        let floor = case.replicas.saturating_sub(case.max_unavailable);
        let available_taken = decision
            .delete
            .iter()
            .filter(|v| v.reason == VictimReason::ScaleDown)
            .filter(|v| {
                by_name(&case, &v.name)
                    .is_some_and(|m| is_available(m, NOW, case.min_ready_secs))
            })
            .count() as u32;
        if available_taken > 0 {
            prop_assert!(
                decision.counts.available - available_taken >= floor,
                "{decision:?}"
            );
        }
    }

    #[test]
    fn deleting_creates_nothing_and_ends_remediations(case in case()) {
        let decision = decide_case(&case);
        if case.mode == Mode::Deleting {
            prop_assert_eq!(decision.create, 0);
            prop_assert!(decision.remediate.is_empty() && decision.remediations.is_empty());
            prop_assert!(decision.delete.iter().all(|v| v.reason == VictimReason::PoolDeleted));
        }
    }

    #[test]
    fn recheck_is_always_later_than_now(case in case()) {
        let decision = decide_case(&case);
        prop_assert!(decision.recheck_at.is_none_or(|at| at > NOW));
        prop_assert_eq!(decision.counts.unhealthy as usize, decision.unhealthy.len());
    }
}
