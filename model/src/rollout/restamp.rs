//! Drain settings changed without the template: which machines a rollout restamps.
//!
//! The template hash leaves the drain settings out (they never need a new VM), so a rollout that
//! changes only `drain` replaces nothing. It still owes the pool's machines their new settings:
//! the Node's `nodewright.io/drain-policy` annotation with its stamp (what a later drain tells
//! the pool's fields from an operator's edit by, [`crate::drain::operator_wishes`]), and the VM's
//! `nodewright.io-drain` tag (a maintenance drain's trusted settings). A machine of the new
//! template that is idle, not failed and has its Node, whose Node's stamp or VM's tag is not the
//! pool's, is restamped: the annotation first (its operator's edits kept), then the tag. Had the
//! tag gone first and the run stopped, a Node without a stamp would be told by a tag that is
//! already new, and its old fields would read as an operator's edits.
//!
//! Machines of an older template are never restamped: they go, drained with the request's
//! settings. A machine whose restamp failed [`MAX_RESTAMP_FAILURES`] times is given up on and
//! named; the rollout stops waiting for it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::observed::{Activity, Health, ObservedMachine, PoolNode, PoolVm};
use crate::drain::{policy_to_annotation, policy_to_tag, stamp_digest};
use crate::pool::DrainPolicy;

/// How many machines one look restamps at most.
pub const RESTAMP_BATCH: usize = 25;

/// After this many failed restamps of a machine the rollout gives up on it.
pub const MAX_RESTAMP_FAILURES: u32 = 3;

/// The pool's drain settings as a machine carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainWanted {
    /// The digest of the Node's stamp ([`stamp_digest`] of the annotation's text).
    pub stamp: String,
    /// The VM's tag value.
    pub tag: String,
}

impl DrainWanted {
    /// What the pool's `policy` looks like on a machine.
    pub fn of(policy: &DrainPolicy) -> Self {
        Self {
            stamp: stamp_digest(&policy_to_annotation(policy)),
            tag: policy_to_tag(policy),
        }
    }
}

/// One machine to restamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restamp {
    /// The machine (= its Node and VM).
    pub machine: String,
    /// Its Node's annotation and stamp are not the pool's.
    pub annotation: bool,
    /// Its VM's tag is not the pool's.
    pub tag: bool,
    /// The VM's tag as it is now: the record of a Node without a stamp.
    pub tag_now: Option<String>,
}

/// The restamps a rollout owes, in the machines' order, none of them `given_up`.
pub fn to_restamp(
    machines: &[ObservedMachine],
    vms: &[PoolVm],
    nodes: &[PoolNode],
    template_hash: &str,
    wanted: &DrainWanted,
    given_up: &[String],
) -> Vec<Restamp> {
    machines
        .iter()
        .filter(|m| m.template_hash == template_hash && m.activity == Activity::Idle)
        .filter(|m| m.health != Health::Failed && !given_up.contains(&m.name))
        .filter_map(|m| {
            let node = nodes.iter().find(|n| n.name == m.name)?;
            let vm = vms.iter().find(|v| v.name == m.name)?;
            let restamp = Restamp {
                machine: m.name.clone(),
                annotation: node.drain_stamp.as_deref() != Some(wanted.stamp.as_str()),
                tag: vm.drain_tag.as_deref() != Some(wanted.tag.as_str()),
                tag_now: vm.drain_tag.clone(),
            };
            (restamp.annotation || restamp.tag).then_some(restamp)
        })
        .collect()
}

/// Where a rollout's restamping stands, in its status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainStamps {
    /// Machines still to restamp (given-up ones excluded).
    pub pending: u32,
    /// Machines this rollout restamped.
    pub restamped: u32,
    /// The operator's edits kept on a Node's annotation: field names by Node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kept_edits: BTreeMap<String, Vec<String>>,
    /// Failed restamps by machine, with the last reason.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failures: BTreeMap<String, RestampFailure>,
}

/// A machine whose restamp failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestampFailure {
    /// How many times.
    pub failures: u32,
    /// The last reason, for people.
    pub reason: String,
}

impl DrainStamps {
    /// The machines given up on.
    pub fn given_up(&self) -> Vec<String> {
        self.failures
            .iter()
            .filter(|(_, f)| f.failures >= MAX_RESTAMP_FAILURES)
            .map(|(machine, _)| machine.clone())
            .collect()
    }

    /// Books a failed restamp of `machine`.
    pub fn failed(&mut self, machine: &str, reason: String) {
        let entry = self
            .failures
            .entry(machine.to_owned())
            .or_insert(RestampFailure {
                failures: 0,
                reason: String::new(),
            });
        entry.failures += 1;
        entry.reason = reason;
    }

    /// For people: `stamped 3 (2 pending); kept edits: web-x (timeout); given up: web-y
    /// (reason)`.
    pub fn summary(&self) -> String {
        let mut said = format!("restamped {} ({} pending)", self.restamped, self.pending);
        if !self.kept_edits.is_empty() {
            let kept: Vec<String> = self
                .kept_edits
                .iter()
                .map(|(node, fields)| format!("{node} ({})", fields.join(", ")))
                .collect();
            said.push_str(&format!("; kept an operator's edits: {}", kept.join(", ")));
        }
        let given_up: Vec<String> = self
            .failures
            .iter()
            .filter(|(_, f)| f.failures >= MAX_RESTAMP_FAILURES)
            .map(|(machine, f)| format!("{machine} ({})", f.reason))
            .collect();
        if !given_up.is_empty() {
            said.push_str(&format!("; given up: {}", given_up.join(", ")));
        }
        said
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn machine(name: &str, template: &str, health: Health, activity: Activity) -> ObservedMachine {
        ObservedMachine {
            name: name.to_owned(),
            template_hash: template.to_owned(),
            health,
            created_at: 0,
            activity,
            tainted_outdated: false,
            zone: None,
            ready_since: 0,
        }
    }

    fn vm(name: &str, tag: Option<&str>) -> PoolVm {
        PoolVm {
            name: name.to_owned(),
            template_hash: "new".to_owned(),
            created_at: 0,
            provisioning_state: "Succeeded".to_owned(),
            zone: None,
            drain_tag: tag.map(str::to_owned),
            power_state: None,
            capacity_type: None,
        }
    }

    fn node(name: &str, stamp: Option<&str>) -> PoolNode {
        PoolNode {
            name: name.to_owned(),
            provider_id: String::new(),
            ready: true,
            ready_since: 0,
            draining: false,
            tainted_outdated: false,
            drain_stamp: stamp.map(str::to_owned),
            conditions: Vec::new(),
            delete_priority: None,
            lease_stale_since: None,
        }
    }

    #[test]
    fn only_idle_healthy_machines_of_the_new_template_whose_settings_differ_are_restamped() {
        let wanted = DrainWanted::of(&DrainPolicy {
            timeout: Duration::from_secs(600),
            ..DrainPolicy::default()
        });
        let old = DrainWanted::of(&DrainPolicy::default());
        let machines = vec![
            machine("a", "new", Health::Ready, Activity::Idle),
            machine("b", "new", Health::Ready, Activity::Idle),
            machine("c", "new", Health::Ready, Activity::Idle),
            machine("d", "old", Health::Ready, Activity::Idle),
            machine("e", "new", Health::Ready, Activity::Creating),
            machine("f", "new", Health::Ready, Activity::Deleting),
            machine("g", "new", Health::Failed, Activity::Idle),
            machine("h", "new", Health::NotReady { since: 0 }, Activity::Idle),
            machine("i", "new", Health::Ready, Activity::Idle),
            machine("j", "new", Health::Ready, Activity::Idle),
        ];
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
        let mut vms: Vec<PoolVm> = names.iter().map(|n| vm(n, Some(&old.tag))).collect();
        let mut nodes: Vec<PoolNode> = names.iter().map(|n| node(n, Some(&old.stamp))).collect();
        // b: already restamped; c: its tag only is behind; j: no Node.
        nodes[1].drain_stamp = Some(wanted.stamp.clone());
        vms[1].drain_tag = Some(wanted.tag.clone());
        nodes[2].drain_stamp = Some(wanted.stamp.clone());
        vms.push(vm("j", None));
        let todo = to_restamp(&machines, &vms, &nodes, "new", &wanted, &["i".to_owned()]);
        let picked: Vec<(&str, bool, bool)> = todo
            .iter()
            .map(|r| (r.machine.as_str(), r.annotation, r.tag))
            .collect();
        assert_eq!(
            picked,
            vec![("a", true, true), ("c", false, true), ("h", true, true)]
        );
        assert_eq!(todo[0].tag_now.as_deref(), Some(old.tag.as_str()));
    }

    #[test]
    fn a_machine_is_given_up_after_three_failures_and_named() {
        let mut stamps = DrainStamps::default();
        for _ in 0..2 {
            stamps.failed("web-a", "409".to_owned());
        }
        assert!(stamps.given_up().is_empty());
        stamps.failed("web-a", "forbidden".to_owned());
        assert_eq!(stamps.given_up(), vec!["web-a".to_owned()]);
        stamps
            .kept_edits
            .insert("web-b".to_owned(), vec!["timeout".to_owned()]);
        stamps.restamped = 4;
        assert_eq!(
            stamps.summary(),
            "restamped 4 (0 pending); kept an operator's edits: web-b (timeout); given up: web-a (forbidden)"
        );
    }
}
