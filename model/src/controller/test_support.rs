//! Builders of VMs, Nodes and machines for the controller's tests.

use crate::rollout::{NodeCondition, PoolNode, PoolVm};

use super::machines::{Machine, Work, WorkKind};

/// A running VM `name` of `template`, created at `created_at`.
pub(super) fn vm(name: &str, template: &str, created_at: i64) -> PoolVm {
    PoolVm {
        name: name.to_owned(),
        template_hash: template.to_owned(),
        created_at,
        provisioning_state: "Succeeded".to_owned(),
        zone: None,
        drain_tag: None,
        power_state: Some("running".to_owned()),
        capacity_type: None,
    }
}

/// A Node `name`, Ready (or not) since `since`, its Ready condition listed.
pub(super) fn node(name: &str, ready: bool, since: i64) -> PoolNode {
    PoolNode {
        name: name.to_owned(),
        provider_id: format!("azure:///subscriptions/s/virtualMachines/{name}"),
        ready,
        ready_since: since,
        draining: false,
        tainted_outdated: false,
        drain_stamp: None,
        conditions: vec![NodeCondition {
            type_: "Ready".to_owned(),
            status: if ready { "True" } else { "False" }.to_owned(),
            since,
        }],
        delete_priority: None,
        lease_stale_since: None,
    }
}

/// A machine with a VM of `template` created at `created_at` and a Node Ready since then.
pub(super) fn ready(name: &str, template: &str, created_at: i64) -> Machine {
    Machine {
        name: name.to_owned(),
        template_hash: template.to_owned(),
        created_at,
        vm: Some(vm(name, template, created_at)),
        node: Some(node(name, true, created_at)),
        work: None,
    }
}

/// `machine` with a Node condition `type_=status` since `since` (replacing one of that type).
pub(super) fn with_condition(
    mut machine: Machine,
    type_: &str,
    status: &str,
    since: i64,
) -> Machine {
    if let Some(node) = machine.node.as_mut() {
        node.conditions.retain(|c| c.type_ != type_);
        node.conditions.push(NodeCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            since,
        });
        if type_ == "Ready" {
            node.ready = status == "True";
            node.ready_since = since;
        }
    }
    machine
}

/// `machine` with work `kind` in flight since `since`.
pub(super) fn with_work(mut machine: Machine, kind: WorkKind, since: i64) -> Machine {
    machine.work = Some(Work { kind, since });
    machine
}

/// A create in flight since `since`, no VM listed yet.
pub(super) fn creating(name: &str, since: i64) -> Machine {
    Machine {
        name: name.to_owned(),
        template_hash: String::new(),
        created_at: 0,
        vm: None,
        node: None,
        work: Some(Work {
            kind: WorkKind::Create,
            since,
        }),
    }
}
