//! One machine as the pool controller sees it: its VM joined with its Node and the work the
//! controller has in flight on it ([`join`]).

use serde::{Deserialize, Serialize};

use crate::rollout::{PoolNode, PoolVm};

/// One machine of the pool: a VM, a Node, a piece of work in flight, or any of them together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// The machine's name (= its VM's and Node's).
    pub name: String,
    /// The VM's `nodewright.io-template` tag; empty when there is no VM.
    pub template_hash: String,
    /// The VM's `nodewright.io-created` tag (Unix seconds); 0 when there is no VM.
    pub created_at: i64,
    /// Its VM, when listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<PoolVm>,
    /// Its Node, when registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<PoolNode>,
    /// What the controller is doing to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Work>,
}

/// Whether a look at the pool's VMs should read their power states (the instance views: a
/// second list, of the subscription's VM statuses): only when a VM's Node is missing or not
/// Ready, the machines a power state explains. A pool whose every VM has a Ready Node needs
/// none, so the steady state costs one tagged list per look.
pub fn needs_power_states(vms: &[PoolVm], nodes: &[PoolNode]) -> bool {
    vms.iter()
        .any(|vm| !nodes.iter().any(|node| node.name == vm.name && node.ready))
}

/// The Nodes without a listed VM, by name: the VMs a listing from an index that trails ARM
/// (Azure Resource Graph) must read directly before the controller takes them for gone.
pub fn unlisted_nodes(vms: &[PoolVm], nodes: &[PoolNode]) -> Vec<String> {
    nodes
        .iter()
        .filter(|node| !vms.iter().any(|vm| vm.name == node.name))
        .map(|node| node.name.clone())
        .collect()
}

/// Work the controller has in flight on a machine (a child workflow or an activity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Work {
    /// What.
    pub kind: WorkKind,
    /// Since when, Unix seconds.
    pub since: i64,
}

/// The kinds of work the controller does to a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkKind {
    /// A CreateMachine child is bringing it up.
    Create,
    /// A DeleteMachine child is taking it down.
    Delete,
    /// Its VM is being restarted (a remediation).
    Restart,
    /// Its VM is being redeployed (a remediation).
    Redeploy,
}

/// Whether an instance view's power state means the VM does not run.
pub(crate) fn is_down(power_state: &str) -> bool {
    ["stopped", "stopping", "deallocated", "deallocating"]
        .iter()
        .any(|down| power_state.eq_ignore_ascii_case(down))
}

impl Machine {
    /// Being taken down: a delete in flight, its Node draining (the `nodewright.io/draining`
    /// taint or a deletion timestamp) or its VM's provisioning state `Deleting`.
    pub fn is_deleting(&self) -> bool {
        self.work.is_some_and(|w| w.kind == WorkKind::Delete)
            || self.node.as_ref().is_some_and(|n| n.draining)
            || self
                .vm
                .as_ref()
                .is_some_and(|vm| vm.provisioning_state.eq_ignore_ascii_case("Deleting"))
    }

    /// Whether a create is in flight.
    pub fn is_creating(&self) -> bool {
        self.work.is_some_and(|w| w.kind == WorkKind::Create)
    }

    /// Counts toward `replicas`: a create is in flight (it owns the machine until it ends, even
    /// while its failure path deletes the VM), or it has a VM that is not being deleted.
    pub fn counts(&self) -> bool {
        self.is_creating() || (self.vm.is_some() && !self.is_deleting() && !self.is_evicted())
    }

    /// Whether Azure evicted it: a Spot VM (by its capacity-type tag) stopped or deallocated,
    /// as an eviction under `evictionPolicy: Deallocate` leaves it (no create in flight, not
    /// being deleted). It no longer counts: its replacement is made at once.
    pub fn is_evicted(&self) -> bool {
        !self.is_creating()
            && self.vm.as_ref().is_some_and(|vm| {
                vm.is_spot()
                    && !vm.provisioning_state.eq_ignore_ascii_case("Deleting")
                    && vm.power_state.as_deref().is_some_and(is_down)
            })
    }

    /// Whether its Node is registered and Ready.
    pub fn is_ready(&self) -> bool {
        self.node.as_ref().is_some_and(|n| n.ready)
    }

    /// Since when its Node is Ready (never before the VM's creation), when it is.
    pub fn ready_since(&self) -> Option<i64> {
        self.node
            .as_ref()
            .filter(|n| n.ready)
            .map(|n| n.ready_since.max(self.created_at))
    }
}

/// Joins by name: every VM, every Node (a Node without a VM is a machine whose VM is gone), and
/// every work entry (a create in flight whose VM is not listed yet is a machine too). Sorted by
/// name. A name listed twice (in VMs, Nodes or work) keeps its first entry.
pub fn join(vms: &[PoolVm], nodes: &[PoolNode], work: &[(String, Work)]) -> Vec<Machine> {
    let mut machines: std::collections::BTreeMap<&str, Machine> = std::collections::BTreeMap::new();
    let empty = |name: &str| Machine {
        name: name.to_owned(),
        template_hash: String::new(),
        created_at: 0,
        vm: None,
        node: None,
        work: None,
    };
    for vm in vms {
        let machine = machines
            .entry(vm.name.as_str())
            .or_insert_with(|| empty(&vm.name));
        if machine.vm.is_none() {
            machine.template_hash.clone_from(&vm.template_hash);
            machine.created_at = vm.created_at;
            machine.vm = Some(vm.clone());
        }
    }
    for node in nodes {
        let machine = machines
            .entry(node.name.as_str())
            .or_insert_with(|| empty(&node.name));
        if machine.node.is_none() {
            machine.node = Some(node.clone());
        }
    }
    for (name, entry) in work {
        let machine = machines.entry(name.as_str()).or_insert_with(|| empty(name));
        if machine.work.is_none() {
            machine.work = Some(*entry);
        }
    }
    machines.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{node, vm};

    #[test]
    fn power_states_are_read_only_for_vms_without_a_ready_node() {
        let vms = [vm("a", "t", 1), vm("b", "t", 1)];
        let ready = [node("a", true, 1), node("b", true, 1)];
        assert!(!needs_power_states(&vms, &ready));
        assert!(!needs_power_states(&[], &ready));
        assert!(needs_power_states(&vms, &ready[..1]));
        assert!(needs_power_states(
            &vms,
            &[node("a", true, 1), node("b", false, 1)]
        ));
    }

    #[test]
    fn nodes_without_a_listed_vm_are_named() {
        let vms = [vm("a", "t", 1)];
        let nodes = [node("a", true, 1), node("b", true, 1), node("c", false, 1)];
        assert_eq!(unlisted_nodes(&vms, &nodes), ["b", "c"]);
        assert!(unlisted_nodes(&vms, &nodes[..1]).is_empty());
        assert!(unlisted_nodes(&[], &[]).is_empty());
    }

    #[test]
    fn a_create_in_flight_counts_while_its_failure_deletes_the_vm() {
        let mut deleting = vm("m", "t", 1);
        deleting.provisioning_state = "Deleting".to_owned();
        let creating = Work {
            kind: WorkKind::Create,
            since: 0,
        };
        let machines = join(&[deleting.clone()], &[], &[("m".to_owned(), creating)]);
        assert!(machines.iter().all(Machine::counts), "{machines:?}");
        let machines = join(&[deleting], &[], &[]);
        assert!(!machines.iter().any(Machine::counts), "{machines:?}");
    }

    #[test]
    fn joins_vms_nodes_and_work_by_name_sorted() {
        let vms = [vm("p-b", "t", 100), vm("p-a", "t", 50)];
        let nodes = [node("p-a", true, 60), node("p-c", false, 70)];
        let work = [
            (
                "p-d".to_owned(),
                Work {
                    kind: WorkKind::Create,
                    since: 200,
                },
            ),
            (
                "p-b".to_owned(),
                Work {
                    kind: WorkKind::Delete,
                    since: 210,
                },
            ),
        ];
        let machines = join(&vms, &nodes, &work);
        let summary: Vec<(&str, bool, bool, Option<WorkKind>, i64)> = machines
            .iter()
            .map(|m| {
                (
                    m.name.as_str(),
                    m.vm.is_some(),
                    m.node.is_some(),
                    m.work.map(|w| w.kind),
                    m.created_at,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("p-a", true, true, None, 50),
                ("p-b", true, false, Some(WorkKind::Delete), 100),
                ("p-c", false, true, None, 0),
                ("p-d", false, false, Some(WorkKind::Create), 0),
            ]
        );
        let counting: Vec<&str> = machines
            .iter()
            .filter(|m| m.counts())
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(
            counting,
            ["p-a", "p-d"],
            "deleting and VM-less do not count"
        );
    }

    #[test]
    fn a_draining_node_or_a_deleting_vm_means_being_deleted() {
        let mut draining = node("p-a", true, 1);
        draining.draining = true;
        let mut going = vm("p-b", "t", 1);
        going.provisioning_state = "Deleting".to_owned();
        let machines = join(&[vm("p-a", "t", 1), going], &[draining], &[]);
        assert!(machines.iter().all(Machine::is_deleting), "{machines:?}");
        assert!(machines.iter().all(|m| !m.counts()));
    }
}
