//! A pool's machines as a rollout sees them: template, health, age and whether a create or delete
//! is under way.

use serde::{Deserialize, Serialize};

/// How a machine is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Health {
    /// Its Node is Ready.
    Ready,
    /// Its VM exists but its Node is not Ready (or not registered yet) since this Unix second.
    NotReady {
        /// Unix seconds since when.
        since: i64,
    },
    /// Its VM failed to provision (`provisioningState: Failed`).
    Failed,
}

/// Whether something is already being done to a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Activity {
    /// Nothing: it serves (or fails) as it is.
    Idle,
    /// A CreateMachine run is bringing it up.
    Creating,
    /// A DeleteMachine run (or a drain) is taking it down.
    Deleting,
}

/// One machine of the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedMachine {
    /// The machine's name.
    pub name: String,
    /// The template hash it was built from (its `nodewright.io-template` tag).
    pub template_hash: String,
    /// How it is doing.
    pub health: Health,
    /// When it was created, Unix seconds (its `nodewright.io-created` tag).
    pub created_at: i64,
    /// What is being done to it.
    pub activity: Activity,
    /// Whether its Node carries the `nodewright.io/outdated` taint.
    #[serde(default)]
    pub tainted_outdated: bool,
    /// The availability zone its VM is in (`zones[0]`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Since when its Node is Ready, Unix seconds: the Ready condition's `lastTransitionTime`,
    /// never before the VM's creation (so an unknown time makes an old machine count at once);
    /// 0 when it is not Ready.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready_since: i64,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

impl ObservedMachine {
    /// Serves workloads now: Ready and not being taken down.
    pub fn is_available(&self) -> bool {
        self.health == Health::Ready && self.activity != Activity::Deleting
    }

    /// Counts available at `now` (Unix seconds) under `min_ready_secs`
    /// (`spec.strategy.minReadySeconds`): [`is_available`](Self::is_available), and its Node
    /// Ready for at least that long (a Deployment's `minReadySeconds`). With 0 it is exactly
    /// `is_available`.
    pub fn is_available_at(&self, now: i64, min_ready_secs: i64) -> bool {
        self.is_available()
            && (min_ready_secs <= 0 || now.saturating_sub(self.ready_since) >= min_ready_secs)
    }

    /// When a machine that is Ready but not yet for `min_ready_secs` counts available, Unix
    /// seconds; `None` when it is not warming up (not Ready, being deleted, or available
    /// already at `now`).
    pub fn available_at(&self, now: i64, min_ready_secs: i64) -> Option<i64> {
        (self.is_available() && !self.is_available_at(now, min_ready_secs))
            .then(|| self.ready_since.saturating_add(min_ready_secs))
    }

    /// Broken for good: its VM failed, or its Node has not been Ready for `health_timeout`
    /// seconds (a machine still being created is never unhealthy: its create bounds itself).
    pub fn is_unhealthy(&self, now: i64, health_timeout_secs: i64) -> bool {
        if self.activity == Activity::Creating {
            return false;
        }
        match self.health {
            Health::Ready => false,
            Health::Failed => true,
            Health::NotReady { since } => now.saturating_sub(since) >= health_timeout_secs,
        }
    }
}

/// A VM of the pool as ARM lists it (tagged with the cluster and the pool).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolVm {
    /// The VM's name (= the machine's).
    pub name: String,
    /// Its `nodewright.io-template` tag (empty when missing).
    pub template_hash: String,
    /// Its `nodewright.io-created` tag as Unix seconds (0 when missing or unreadable).
    pub created_at: i64,
    /// `properties.provisioningState` (`Creating`, `Succeeded`, `Failed`, `Deleting`...).
    pub provisioning_state: String,
    /// The availability zone the VM is in (its `zones[0]`); none outside zones, and in
    /// results recorded before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Its `nodewright.io-drain` tag (the drain settings it was created or last restamped
    /// with); none when it has none, and in results recorded before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_tag: Option<String>,
    /// Its power state from the instance view (`running`, `starting`, `stopping`, `stopped`,
    /// `deallocating`, `deallocated`): read only when the listing asked for instance views (a
    /// pool controller's look); none otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_state: Option<String>,
    /// Its `nodewright.io-capacity-type` tag: Spot or on-demand; none when it has none (a VM
    /// made before capacity types, which is on-demand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<crate::pool::CapacityType>,
}

impl PoolVm {
    /// Whether the VM is a Spot VM (by its capacity-type tag).
    pub fn is_spot(&self) -> bool {
        self.capacity_type == Some(crate::pool::CapacityType::Spot)
    }
}

/// A Node labelled with the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolNode {
    /// The Node's name (= the machine's).
    pub name: String,
    /// Its `spec.providerID` (empty when unset).
    pub provider_id: String,
    /// Whether its `Ready` condition is `True`.
    pub ready: bool,
    /// Since when (the condition's `lastTransitionTime`, Unix seconds; 0 when unknown).
    pub ready_since: i64,
    /// Being taken down: it carries the `nodewright.io/draining` taint or a deletion timestamp.
    pub draining: bool,
    /// Whether it carries the `nodewright.io/outdated` taint.
    pub tainted_outdated: bool,
    /// The digest of its `nodewright.io/drain-policy-stamp` annotation
    /// ([`crate::drain::stamp_digest`]); none when it has none, and in results recorded before
    /// it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_stamp: Option<String>,
    /// Its conditions other than heartbeats: type, status and since when (a pool controller
    /// judges health from them); empty in results recorded before they were read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<NodeCondition>,
    /// Its `nodewright.io/delete-priority` annotation as a number (lower goes first when the
    /// pool scales down); none when missing or not a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_priority: Option<i64>,
    /// When its Lease in `kube-node-lease` was last renewed, Unix seconds, reported only once
    /// the renewal is older than the lease timeout the listing was given (so a healthy Node's
    /// entry does not change at every renewal); none otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_stale_since: Option<i64>,
}

/// A Node condition as a pool controller judges it: no heartbeat time, so it changes only when
/// the condition does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCondition {
    /// `Ready`, `KernelDeadlock`, `MemoryPressure`...
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Since when (its `lastTransitionTime`, Unix seconds; 0 when unknown).
    pub since: i64,
}

impl crate::listing::Keyed for PoolVm {
    fn key(&self) -> &str {
        &self.name
    }
}

impl crate::listing::Keyed for PoolNode {
    fn key(&self) -> &str {
        &self.name
    }
}

/// A create or delete the rollout itself has in flight, by machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Running<'a> {
    /// The machine.
    pub machine: &'a str,
    /// Whether it is being created (else deleted).
    pub creating: bool,
    /// When that started, Unix seconds.
    pub since: i64,
}

/// The pool's machines from its VMs, their Nodes and the work in flight.
///
/// A machine is a VM of the pool; its Node is the one of the same name whose providerID names
/// that VM. A machine being created whose VM is not listed yet is counted anyway (with the new
/// template), so the budget sees it; a machine being deleted whose VM is gone no longer counts.
pub fn observe(
    vms: &[PoolVm],
    nodes: &[PoolNode],
    running: &[Running<'_>],
    new_template: &str,
) -> Vec<ObservedMachine> {
    let mut machines: Vec<ObservedMachine> = vms
        .iter()
        .map(|vm| {
            let node = nodes
                .iter()
                .find(|n| n.name == vm.name && provider_id_names(&n.provider_id, &vm.name));
            let mine = running.iter().find(|r| r.machine == vm.name);
            let ready_since = match node {
                Some(node) if node.ready => node.ready_since.max(vm.created_at),
                _ => 0,
            };
            let health = if vm.provisioning_state.eq_ignore_ascii_case("Failed") {
                Health::Failed
            } else {
                match node {
                    Some(node) if node.ready => Health::Ready,
                    Some(node) => Health::NotReady {
                        since: node.ready_since.max(vm.created_at),
                    },
                    None => Health::NotReady {
                        since: vm.created_at,
                    },
                }
            };
            let activity = match mine {
                Some(run) if run.creating => Activity::Creating,
                Some(_) => Activity::Deleting,
                None if vm.provisioning_state.eq_ignore_ascii_case("Deleting")
                    || node.is_some_and(|n| n.draining) =>
                {
                    Activity::Deleting
                }
                None => Activity::Idle,
            };
            ObservedMachine {
                name: vm.name.clone(),
                template_hash: vm.template_hash.clone(),
                health,
                created_at: vm.created_at,
                activity,
                tainted_outdated: node.is_some_and(|n| n.tainted_outdated),
                zone: vm.zone.clone(),
                ready_since: if health == Health::Ready {
                    ready_since
                } else {
                    0
                },
            }
        })
        .collect();
    for run in running.iter().filter(|r| r.creating) {
        if !machines.iter().any(|m| m.name == run.machine) {
            machines.push(ObservedMachine {
                name: run.machine.to_owned(),
                template_hash: new_template.to_owned(),
                health: Health::NotReady { since: run.since },
                created_at: run.since,
                activity: Activity::Creating,
                tainted_outdated: false,
                zone: None,
                ready_since: 0,
            });
        }
    }
    machines.sort_by(|a, b| a.name.cmp(&b.name));
    machines
}

/// Whether `provider_id` (`azure:///subscriptions/.../virtualMachines/<name>`) names the VM
/// `name`.
fn provider_id_names(provider_id: &str, name: &str) -> bool {
    provider_id
        .rsplit_once("/virtualMachines/")
        .is_some_and(|(_, vm)| vm.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(name: &str, template: &str, state: &str) -> PoolVm {
        PoolVm {
            name: name.to_owned(),
            template_hash: template.to_owned(),
            created_at: 100,
            provisioning_state: state.to_owned(),
            zone: Some("2".to_owned()),
            drain_tag: None,
            power_state: None,
            capacity_type: None,
        }
    }

    fn node(name: &str, ready: bool) -> PoolNode {
        PoolNode {
            name: name.to_owned(),
            provider_id: format!(
                "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{name}"
            ),
            ready,
            ready_since: 150,
            draining: false,
            tainted_outdated: false,
            drain_stamp: None,
            conditions: Vec::new(),
            delete_priority: None,
            lease_stale_since: None,
        }
    }

    #[test]
    fn a_look_at_a_steady_pool_of_a_thousand_records_what_changed_not_the_pool() {
        use crate::listing::{apply, changes, whole};
        let names: Vec<String> = (0..1000).map(|n| format!("workers-{n:05}")).collect();
        let vms: Vec<PoolVm> = names.iter().map(|n| vm(n, "abc123", "Succeeded")).collect();
        let nodes: Vec<PoolNode> = names.iter().map(|n| node(n, true)).collect();
        let first = (whole(vms.clone()), whole(nodes.clone()));
        let size = |v: &serde_json::Value| v.to_string().len();
        let whole_bytes = size(&serde_json::json!(first.0)) + size(&serde_json::json!(first.1));

        // The next look: one VM is being deleted and one Node went NotReady.
        let mut vms_now = vms.clone();
        vms_now[7].provisioning_state = "Deleting".to_owned();
        let mut nodes_now = nodes.clone();
        nodes_now[9].ready = false;
        let next = (
            changes(&first.0.items, &first.0.digest, vms_now.clone()),
            changes(&first.1.items, &first.1.digest, nodes_now.clone()),
        );
        let changed_bytes = size(&serde_json::json!(next.0)) + size(&serde_json::json!(next.1));
        assert!(
            whole_bytes > 200_000 && changed_bytes < 1_000,
            "whole {whole_bytes} bytes, changes {changed_bytes} bytes"
        );
        let applied = (
            apply(Some((&first.0.digest, &first.0.items)), next.0).map(|(list, _)| list),
            apply(Some((&first.1.digest, &first.1.items)), next.1).map(|(list, _)| list),
        );
        assert_eq!(applied, (Ok(vms_now), Ok(nodes_now)));
    }

    #[test]
    fn joins_vms_nodes_and_work_in_flight() {
        let vms = [
            vm("p-ready", "old", "Succeeded"),
            vm("p-notready", "old", "Succeeded"),
            vm("p-nonode", "new", "Creating"),
            vm("p-failed", "new", "Failed"),
            vm("p-going", "old", "Succeeded"),
            vm("p-foreignnode", "old", "Succeeded"),
        ];
        let mut draining = node("p-going", true);
        draining.draining = true;
        let mut foreign = node("p-foreignnode", true);
        foreign.provider_id = "azure:///subscriptions/s/virtualMachines/other".to_owned();
        let nodes = [
            node("p-ready", true),
            node("p-notready", false),
            draining,
            foreign,
            node("p-orphan-node", true),
        ];
        let running = [
            Running {
                machine: "p-nonode",
                creating: true,
                since: 90,
            },
            Running {
                machine: "p-invisible",
                creating: true,
                since: 200,
            },
            Running {
                machine: "p-vm-gone",
                creating: false,
                since: 80,
            },
        ];
        let machines = observe(&vms, &nodes, &running, "new");
        let by_name = |name: &str| {
            machines
                .iter()
                .find(|m| m.name == name)
                .unwrap_or_else(|| panic!("{name} missing from {machines:?}"))
        };
        assert_eq!(machines.len(), 7, "{machines:?}");
        assert_eq!(by_name("p-ready").health, Health::Ready);
        assert_eq!(by_name("p-ready").ready_since, 150, "the Ready transition");
        assert_eq!(by_name("p-notready").ready_since, 0);
        assert_eq!(by_name("p-ready").zone.as_deref(), Some("2"));
        assert_eq!(by_name("p-invisible").zone, None);
        assert!(by_name("p-ready").is_available());
        assert_eq!(
            by_name("p-notready").health,
            Health::NotReady { since: 150 }
        );
        assert_eq!(by_name("p-nonode").activity, Activity::Creating);
        assert_eq!(by_name("p-failed").health, Health::Failed);
        assert_eq!(by_name("p-going").activity, Activity::Deleting);
        assert!(!by_name("p-going").is_available());
        assert_eq!(
            by_name("p-foreignnode").health,
            Health::NotReady { since: 100 },
            "a Node of another VM is not this machine's"
        );
        let invisible = by_name("p-invisible");
        assert_eq!(
            (invisible.activity, invisible.template_hash.as_str()),
            (Activity::Creating, "new")
        );
        assert!(machines.iter().all(|m| m.name != "p-vm-gone"));
        assert!(machines.iter().all(|m| m.name != "p-orphan-node"));
    }

    #[test]
    fn unhealthy_means_failed_or_not_ready_past_the_timeout_and_never_while_creating() {
        let base = ObservedMachine {
            name: "m".to_owned(),
            template_hash: "t".to_owned(),
            health: Health::NotReady { since: 100 },
            created_at: 0,
            activity: Activity::Idle,
            tainted_outdated: false,
            zone: None,
            ready_since: 0,
        };
        assert!(!base.is_unhealthy(159, 60));
        assert!(base.is_unhealthy(160, 60));
        let creating = ObservedMachine {
            activity: Activity::Creating,
            ..base.clone()
        };
        assert!(!creating.is_unhealthy(10_000, 60));
        let failed = ObservedMachine {
            health: Health::Failed,
            ..base
        };
        assert!(failed.is_unhealthy(0, 60));
    }

    #[test]
    fn a_machine_counts_available_once_ready_for_min_ready_and_never_before_its_vm() {
        let mut early = node("p-0", true);
        early.ready_since = 40;
        let unknown = PoolNode {
            ready_since: 0,
            ..node("p-1", true)
        };
        let machines = observe(
            &[vm("p-0", "t", "Succeeded"), vm("p-1", "t", "Succeeded")],
            &[early, unknown],
            &[],
            "t",
        );
        // Ready "since" before the VM existed (a recycled Node name, a clock skew) or unknown:
        // the VM's creation, 100.
        assert_eq!(
            machines.iter().map(|m| m.ready_since).collect::<Vec<_>>(),
            [100, 100]
        );
        let machine = &machines[0];
        let table = [
            // (now, min_ready, available, available_at)
            (100, 0, true, None),
            (100, 60, false, Some(160)),
            (159, 60, false, Some(160)),
            (160, 60, true, None),
            (5_000, 60, true, None),
        ];
        for (now, min_ready, available, at) in table {
            assert_eq!(
                (
                    machine.is_available_at(now, min_ready),
                    machine.available_at(now, min_ready)
                ),
                (available, at),
                "at {now} with {min_ready}"
            );
        }
        let going = ObservedMachine {
            activity: Activity::Deleting,
            ..machine.clone()
        };
        assert!(!going.is_available_at(5_000, 0));
        assert_eq!(going.available_at(100, 60), None);
    }
}
