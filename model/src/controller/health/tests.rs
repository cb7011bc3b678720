//! Tests of [`judge`]: one row per rule, through one `check` helper.

use std::time::Duration;

use super::*;
use crate::controller::machines::Work;
use crate::controller::test_support::{creating, node, ready, with_condition, with_work};

const NOW: i64 = 10_000;
const CREATION_TIMEOUT: i64 = 1_200;

fn lease_policy() -> HealthPolicy {
    HealthPolicy {
        lease_timeout: Some(Duration::from_secs(60)),
        ..HealthPolicy::default()
    }
}

fn unhealthy(reason: &str, since: i64) -> Verdict {
    Verdict::Unhealthy {
        reason: reason.to_owned(),
        since,
    }
}

fn pending(reason: &str, at: i64) -> Verdict {
    Verdict::Pending {
        at,
        reason: reason.to_owned(),
    }
}

fn check(case: &str, machine: &Machine, policy: &HealthPolicy, expected: &Verdict) {
    let verdict = judge(machine, policy, CREATION_TIMEOUT, NOW);
    assert_eq!(&verdict, expected, "{case}");
}

fn without_node(mut machine: Machine) -> Machine {
    machine.node = None;
    machine
}

fn without_vm(mut machine: Machine) -> Machine {
    machine.vm = None;
    machine.template_hash = String::new();
    machine.created_at = 0;
    machine
}

fn with_vm_state(mut machine: Machine, provisioning: &str, power: Option<&str>) -> Machine {
    if let Some(vm) = machine.vm.as_mut() {
        vm.provisioning_state = provisioning.to_owned();
        vm.power_state = power.map(str::to_owned);
    }
    machine
}

fn with_stale_lease(mut machine: Machine, renewed: i64) -> Machine {
    if let Some(node) = machine.node.as_mut() {
        node.lease_stale_since = Some(renewed);
    }
    machine
}

#[test]
fn judges_each_rule() {
    let base = ready("p-a", "t", 1_000);
    let default = HealthPolicy::default();
    #[rustfmt::skip]
    let cases: Vec<(&str, Machine, HealthPolicy, Verdict)> = vec![
        ("a Ready machine is healthy", base.clone(), default.clone(), Verdict::Healthy),
        ("a create in flight is starting until its deadline, whatever else holds",
            with_vm_state(with_work(base.clone(), WorkKind::Create, 9_000), "Failed", None), default.clone(),
            Verdict::Starting { until: 10_200 }),
        ("a create in flight without a VM is starting", creating("p-b", 9_500), default.clone(), Verdict::Starting { until: 10_700 }),
        ("a VM that failed to provision is unhealthy since its creation",
            with_vm_state(base.clone(), "Failed", Some("running")), default.clone(), unhealthy("its VM failed to provision", 1_000)),
        ("a deallocated VM is unhealthy, named",
            with_vm_state(base.clone(), "Succeeded", Some("deallocated")), default.clone(), unhealthy("its VM is deallocated", 1_000)),
        ("a stopping VM is unhealthy, named",
            with_vm_state(base.clone(), "Succeeded", Some("Stopping")), default.clone(), unhealthy("its VM is stopping", 1_000)),
        ("a starting VM is not down",
            with_vm_state(base.clone(), "Succeeded", Some("starting")), default.clone(), Verdict::Healthy),
        ("a Node without its VM is unhealthy: its VM is gone",
            without_vm(base.clone()), default.clone(), unhealthy("its VM is gone", 1_000)),
        ("a VM without a Node is starting within the creation timeout",
            without_node(ready("p-a", "t", 9_000)), default.clone(), Verdict::Starting { until: 10_200 }),
        ("a VM without a Node past the creation timeout is unhealthy since the deadline",
            without_node(ready("p-a", "t", 8_000)), default.clone(), unhealthy("its Node never registered within 20m", 9_200)),
        ("a VM without a Node that failed is unhealthy at once",
            with_vm_state(without_node(ready("p-a", "t", 9_000)), "Failed", None), default.clone(), unhealthy("its VM failed to provision", 9_000)),
        ("Ready=False within its timeout is pending",
            with_condition(base.clone(), "Ready", "False", 9_900), default.clone(), pending("Ready=False for 5m", 10_200)),
        ("Ready=False past its timeout is unhealthy since the timeout ended",
            with_condition(base.clone(), "Ready", "False", 9_000), default.clone(), unhealthy("Ready=False for 5m", 9_300)),
        ("Ready=Unknown past its timeout is unhealthy",
            with_condition(base.clone(), "Ready", "Unknown", 9_700), default.clone(), unhealthy("Ready=Unknown for 5m", 10_000)),
        ("KernelDeadlock=True is unhealthy at once",
            with_condition(base.clone(), "KernelDeadlock", "True", 9_999), default.clone(), unhealthy("KernelDeadlock=True", 9_999)),
        ("KernelDeadlock=False is healthy",
            with_condition(base.clone(), "KernelDeadlock", "False", 9_999), default.clone(), Verdict::Healthy),
        ("a condition not in the policy is ignored",
            with_condition(base.clone(), "MemoryPressure", "True", 1), default.clone(), Verdict::Healthy),
        ("a condition's unknown since counts from the VM's creation",
            with_condition(base.clone(), "Ready", "False", 0), default.clone(), unhealthy("Ready=False for 5m", 1_300)),
        ("the earliest unhealthy wins",
            with_condition(with_condition(base.clone(), "Ready", "False", 5_000), "KernelDeadlock", "True", 9_000),
            default.clone(), unhealthy("Ready=False for 5m", 5_300)),
        ("an unhealthy finding wins over an earlier pending one",
            with_condition(with_condition(base.clone(), "Ready", "False", 9_990), "KernelDeadlock", "True", 9_999),
            default.clone(), unhealthy("KernelDeadlock=True", 9_999)),
        ("a stale Lease past the timeout is unhealthy, naming the last renewal",
            with_stale_lease(base.clone(), 9_000), lease_policy(), unhealthy("its Node Lease was not renewed since 1970-01-01T02:30:00Z", 9_060)),
        ("a stale Lease inside the timeout is pending",
            with_stale_lease(base.clone(), 9_990), lease_policy(), pending("its Node Lease was not renewed since 1970-01-01T02:46:30Z", 10_050)),
        ("a stale Lease without a lease timeout is not judged",
            with_stale_lease(base.clone(), 9_000), default.clone(), Verdict::Healthy),
    ];
    for (case, machine, policy, expected) in &cases {
        check(case, machine, policy, expected);
    }
}

#[test]
fn a_node_recorded_without_conditions_is_judged_by_its_ready_flag() {
    let mut recorded = node("p-a", false, 9_000);
    recorded.conditions.clear();
    let machine = Machine {
        node: Some(recorded),
        ..ready("p-a", "t", 1_000)
    };
    check(
        "Ready from the flag",
        &machine,
        &HealthPolicy::default(),
        &unhealthy("Ready=False for 5m", 9_300),
    );
}

#[test]
fn a_delete_or_restart_in_flight_does_not_stop_judging() {
    let machine = Machine {
        work: Some(Work {
            kind: WorkKind::Restart,
            since: 9_000,
        }),
        ..with_condition(ready("p-a", "t", 1_000), "Ready", "Unknown", 9_000)
    };
    check(
        "restarting",
        &machine,
        &HealthPolicy::default(),
        &unhealthy("Ready=Unknown for 5m", 9_300),
    );
}

#[test]
fn the_default_policy_is_the_documented_one() {
    let policy = HealthPolicy::default();
    let json = serde_json::to_value(&policy).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        json,
        serde_json::json!({
            "unhealthyConditions": [
                { "type": "Ready", "status": "False", "timeout": { "secs": 300, "nanos": 0 } },
                { "type": "Ready", "status": "Unknown", "timeout": { "secs": 300, "nanos": 0 } },
                { "type": "KernelDeadlock", "status": "True", "timeout": { "secs": 0, "nanos": 0 } },
            ],
            "maxUnhealthy": { "percent": 40 },
            "maxInFlight": 1,
            "remediation": ["replace"],
            "remediationTimeout": { "secs": 600, "nanos": 0 },
        })
    );
    assert_eq!(
        Rung::ALL.map(|r| r.to_string()),
        ["restart", "redeploy", "replace"]
    );
    assert_eq!(Rung::parse("redeploy"), Some(Rung::Redeploy));
    assert_eq!(Rung::parse("Replace"), None);
}
