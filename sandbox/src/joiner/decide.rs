//! Which Nodes to register, stop or restore, given the VMs and the Nodes: one pure function.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::Node;

use super::spec::{HEARTBEAT_STOPPED_ANNOTATION, KWOK_ANNOTATION, node_name, provider_id};
use crate::compute::{GuestState, MachineView};

/// The parts of an existing Node the decision needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedNode {
    /// `metadata.name`.
    pub name: String,
    /// `spec.providerID`, when set.
    pub provider_id: Option<String>,
    /// Whether kwok heartbeats the Node: it has the kwok annotation and the joiner has not
    /// stopped its heartbeat.
    pub heartbeating: bool,
}

/// One step the joiner takes to make the Nodes match the VMs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeAction {
    /// A booted VM has no Node yet: create it, write its status, then let kwok heartbeat it.
    Register(MachineView),
    /// A booted VM's Node exists but is not heartbeating (the VM was started again, or a previous
    /// registration stopped half-way): write its status and hand its lease back to kwok.
    Restore(MachineView),
    /// The Node's VM is gone or not running: take the Node's lease away from kwok so it is no
    /// longer renewed.
    StopHeartbeat {
        /// The Node's name.
        node: String,
    },
    /// A booted VM's Node name is held by a Node with another (or no) providerID: left alone.
    NameTaken {
        /// The Node's name.
        node: String,
        /// The providerID the Node has.
        provider_id: Option<String>,
    },
}

impl ObservedNode {
    /// Reads the decision's inputs from a Node.
    pub fn from_node(node: &Node) -> Self {
        Self {
            name: node.metadata.name.clone().unwrap_or_default(),
            provider_id: node.spec.as_ref().and_then(|spec| spec.provider_id.clone()),
            heartbeating: node
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|annotations| {
                    annotations.contains_key(KWOK_ANNOTATION)
                        && !annotations.contains_key(HEARTBEAT_STOPPED_ANNOTATION)
                }),
        }
    }
}

/// Decides what to do so that every booted VM (`Running` and joining the cluster) has a
/// heartbeating Node and no other Node under `managed_prefix` heartbeats.
///
/// Nodes whose providerID does not start with `managed_prefix` (compared case-insensitively, as
/// ARM ids are) are never stopped: tests create plain kwok Nodes, and other sandboxes own theirs.
/// No action ever deletes a Node; in Azure a Node outlives its VM.
pub fn decide_nodes(
    machines: &[MachineView],
    nodes: &[ObservedNode],
    managed_prefix: &str,
) -> Vec<NodeAction> {
    let booted: Vec<&MachineView> = machines
        .iter()
        .filter(|machine| machine.guest == GuestState::Running && machine.joins_cluster)
        .collect();
    // Indexes keep a pass linear in VMs + Nodes (the first Node of a name counts, as names are
    // unique).
    let mut by_name: HashMap<&str, &ObservedNode> = HashMap::with_capacity(nodes.len());
    for node in nodes {
        by_name.entry(node.name.as_str()).or_insert(node);
    }
    let booted_provider_ids: HashSet<String> = booted
        .iter()
        .map(|machine| provider_id(machine).to_ascii_lowercase())
        .collect();
    let mut actions = Vec::new();
    for machine in &booted {
        let name = node_name(machine);
        let wanted_provider_id = provider_id(machine);
        match by_name.get(name.as_str()) {
            None => actions.push(NodeAction::Register((*machine).clone())),
            Some(node) if !same_id(node.provider_id.as_deref(), &wanted_provider_id) => {
                actions.push(NodeAction::NameTaken {
                    node: name,
                    provider_id: node.provider_id.clone(),
                });
            }
            Some(node) if !node.heartbeating => {
                actions.push(NodeAction::Restore((*machine).clone()));
            }
            Some(_) => {}
        }
    }
    for node in nodes.iter().filter(|node| node.heartbeating) {
        let Some(node_provider_id) = node.provider_id.as_deref() else {
            continue;
        };
        if !starts_with_ignore_case(node_provider_id, managed_prefix) {
            continue;
        }
        let has_booted_vm = booted_provider_ids.contains(&node_provider_id.to_ascii_lowercase());
        if !has_booted_vm {
            actions.push(NodeAction::StopHeartbeat {
                node: node.name.clone(),
            });
        }
    }
    actions
}

fn same_id(left: Option<&str>, right: &str) -> bool {
    left.is_some_and(|left| left.eq_ignore_ascii_case(right))
}

fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.len() >= prefix.len()
        && text.is_char_boundary(prefix.len())
        && text[..prefix.len()].eq_ignore_ascii_case(prefix)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const PREFIX: &str = "azure:///subscriptions/";
    const ID: &str =
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/";

    fn machine(name: &str, guest: GuestState) -> MachineView {
        MachineView {
            id: format!("{ID}{name}"),
            name: name.to_owned(),
            computer_name: name.to_owned(),
            location: "westeurope".to_owned(),
            zone: None,
            vm_size: "Standard_D2s_v5".to_owned(),
            tags: BTreeMap::new(),
            custom_data: None,
            guest,
            joins_cluster: true,
        }
    }

    fn node(name: &str, provider_id: Option<&str>, heartbeating: bool) -> ObservedNode {
        ObservedNode {
            name: name.to_owned(),
            provider_id: provider_id.map(str::to_owned),
            heartbeating,
        }
    }

    fn azure(name: &str) -> String {
        format!("azure://{ID}{name}")
    }

    fn check(machines: &[MachineView], nodes: &[ObservedNode], expected: &[NodeAction]) {
        assert_eq!(decide_nodes(machines, nodes, PREFIX), expected);
    }

    #[test]
    fn registers_a_node_for_a_booted_vm_without_one() {
        let vm = machine("a", GuestState::Running);
        check(
            std::slice::from_ref(&vm),
            &[],
            &[NodeAction::Register(vm.clone())],
        );
    }

    #[test]
    fn does_nothing_for_a_booting_vm_or_one_that_never_joins() {
        let mut never = machine("b", GuestState::Running);
        never.joins_cluster = false;
        check(&[machine("a", GuestState::Booting), never], &[], &[]);
    }

    #[test]
    fn does_nothing_when_the_node_heartbeats_and_its_vm_runs() {
        let upper = azure("a").to_uppercase().replace("AZURE://", "azure://");
        check(
            &[machine("a", GuestState::Running)],
            &[node("a", Some(&upper), true)],
            &[],
        );
    }

    #[test]
    fn stops_heartbeat_when_vm_deleted_or_down_but_never_deletes_the_node() {
        check(
            &[machine("b", GuestState::Down)],
            &[
                node("a", Some(&azure("a")), true),
                node("b", Some(&azure("b")), true),
            ],
            &[
                NodeAction::StopHeartbeat {
                    node: "a".to_owned(),
                },
                NodeAction::StopHeartbeat {
                    node: "b".to_owned(),
                },
            ],
        );
    }

    #[test]
    fn leaves_a_stopped_node_alone_while_its_vm_is_down() {
        check(
            &[machine("a", GuestState::Down)],
            &[node("a", Some(&azure("a")), false)],
            &[],
        );
    }

    #[test]
    fn restores_the_heartbeat_when_the_vm_runs_again() {
        let vm = machine("a", GuestState::Running);
        check(
            std::slice::from_ref(&vm),
            &[node("a", Some(&azure("a")), false)],
            &[NodeAction::Restore(vm.clone())],
        );
    }

    #[test]
    fn never_touches_nodes_without_a_managed_provider_id() {
        check(
            &[],
            &[
                node("plain", None, true),
                node("aws", Some("aws:///eu-west-1a/i-1"), true),
            ],
            &[],
        );
    }

    #[test]
    fn leaves_a_node_of_the_same_name_with_another_provider_id_alone() {
        check(
            &[machine("a", GuestState::Running)],
            &[node("a", None, true)],
            &[NodeAction::NameTaken {
                node: "a".to_owned(),
                provider_id: None,
            }],
        );
    }

    #[test]
    fn node_name_is_the_lower_cased_computer_name() {
        let mut vm = machine("a", GuestState::Running);
        vm.computer_name = "Web-A".to_owned();
        check(
            std::slice::from_ref(&vm),
            &[node("web-a", Some(&azure("a")), false)],
            &[NodeAction::Restore(vm.clone())],
        );
    }
}
