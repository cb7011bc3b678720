//! The plausibility brake: whether a sweep's plan is believable enough to act on without a
//! person looking at it first (like MCM's safety controller and Karpenter's 20% guard).
//!
//! A sweep that reads a wrong Node list (an empty API, another cluster's) sees every VM without
//! a Node and plans to delete them all; a cluster-wide NotReady (a control-plane or network
//! fault, not machine faults) makes every machine look unhealthy. [`decide_brake`] stops both
//! before anything is removed:
//! - **no Node matched**: this cluster has VMs but none of them has a Node, and the plan removes
//!   something;
//! - **too many removals**: the plan deletes or replaces more of this cluster's machines (VMs)
//!   than `brake_percent` of them, and more than [`BRAKE_MIN_COUNT`] (below which the share
//!   does not apply: a cluster of 4 may lose one machine);
//! - **cluster-wide NotReady**: the plan replaces machines while more of this cluster's Nodes
//!   are NotReady than the same share (and than [`BRAKE_MIN_COUNT`]).
//!
//! NICs and disks attached to nothing and Node objects whose VM is gone are not machines: they
//! count in `planned` but not against the share. A braked sweep goes on only with an approval
//! that names its run and its planned count (see [`super::approval`]).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::classify::{Action, Decision, SubjectKind, SweepPolicy};
use super::inventory::{Inventory, NodeReadiness, ResourceKind, name_from_id};
use crate::ownership::is_owned_by;

/// Default `brake_percent`: a sweep removes at most 20% of the cluster's machines unapproved.
pub const DEFAULT_BRAKE_PERCENT: u32 = 20;

/// Machine removals (and NotReady Nodes) up to this count never brake by share: the share of
/// a small cluster would otherwise forbid removing its one orphan.
pub const BRAKE_MIN_COUNT: u32 = 3;

/// What the brake counted (also what `sweep status` and the audit show).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrakeCounts {
    /// This cluster's VMs (carrying its exact cluster tag).
    pub machines: u32,
    /// Of those, VMs with a Node (its providerID names the VM).
    pub matched: u32,
    /// Of the matched Nodes, those NotReady now.
    pub not_ready: u32,
    /// Every removal the plan holds (VMs, NICs, disks, Nodes).
    pub planned: u32,
    /// Of those, machines deleted or replaced (VMs).
    pub machine_removals: u32,
    /// Of those, replacements of unhealthy machines.
    pub replacements: u32,
    /// The most machine removals (and NotReady Nodes) allowed without approval.
    pub allowed: u32,
}

/// Why the brake holds a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BrakeReason {
    /// The cluster has VMs, and none has a Node: the Node list cannot be the cluster's.
    NoNodeMatched,
    /// The plan removes more machines than the share allows.
    TooManyRemovals,
    /// The plan replaces machines while more Nodes than the share allows are NotReady.
    ClusterWideNotReady,
}

impl BrakeReason {
    /// The reason as the audit and the CLI print it.
    pub const fn as_str(self) -> &'static str {
        match self {
            BrakeReason::NoNodeMatched => "no-node-matched",
            BrakeReason::TooManyRemovals => "too-many-removals",
            BrakeReason::ClusterWideNotReady => "cluster-wide-not-ready",
        }
    }
}

/// A brake that held: why, a sentence for people, and the counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Brake {
    /// Why.
    pub reason: BrakeReason,
    /// The reason with its numbers, for people.
    pub message: String,
    /// What was counted.
    pub counts: BrakeCounts,
}

/// The brake's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrakeDecision {
    /// The plan is plausible: act on it (within `max_deletions`).
    Proceed(BrakeCounts),
    /// Stop before removing anything until an approval names the run.
    Hold(Brake),
}

/// The most of `total` a sweep may remove (or find NotReady) without approval: `percent` of it
/// (rounded down), and never less than [`BRAKE_MIN_COUNT`].
pub fn allowed(total: u32, percent: u32) -> u32 {
    let share = u64::from(total) * u64::from(percent) / 100;
    u32::try_from(share)
        .unwrap_or(u32::MAX)
        .max(BRAKE_MIN_COUNT)
}

/// Decides whether the plan `decisions` (made by `classify` from `inventory` under `policy`) may
/// go on without approval; `percent` is the request's brake share, already within its bounds.
pub fn decide_brake(
    inventory: &Inventory,
    policy: &SweepPolicy,
    decisions: &[Decision],
    percent: u32,
) -> BrakeDecision {
    let counts = count(inventory, policy, decisions, percent);
    if counts.planned == 0 {
        return BrakeDecision::Proceed(counts);
    }
    let hold = |reason: BrakeReason, message: String| {
        BrakeDecision::Hold(Brake {
            reason,
            message,
            counts,
        })
    };
    if counts.machines > 0 && counts.matched == 0 {
        return hold(
            BrakeReason::NoNodeMatched,
            format!(
                "none of this cluster's {} VMs has a Node: the Node list looks wrong (an empty or another cluster's API), so none of the {} planned removals is made without an approval",
                counts.machines, counts.planned
            ),
        );
    }
    if counts.machine_removals > counts.allowed {
        return hold(
            BrakeReason::TooManyRemovals,
            format!(
                "{} of this cluster's {} machines would be removed, more than {percent}% (at most {} without an approval)",
                counts.machine_removals, counts.machines, counts.allowed
            ),
        );
    }
    let not_ready_allowed = allowed(counts.matched, percent);
    if counts.replacements > 0 && counts.not_ready > not_ready_allowed {
        return hold(
            BrakeReason::ClusterWideNotReady,
            format!(
                "{} of this cluster's {} Nodes are NotReady, more than {percent}% (at most {not_ready_allowed}): that looks like a control-plane or network fault, not {} broken machines",
                counts.not_ready, counts.matched, counts.replacements
            ),
        );
    }
    BrakeDecision::Proceed(counts)
}

/// Counts machines, matched Nodes, NotReady Nodes and planned removals.
fn count(
    inventory: &Inventory,
    policy: &SweepPolicy,
    decisions: &[Decision],
    percent: u32,
) -> BrakeCounts {
    let ours: BTreeSet<&str> = inventory
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::Vm && is_owned_by(&r.tags, &policy.cluster))
        .map(|r| r.name.as_str())
        .collect();
    let mut matched = BTreeSet::new();
    let mut not_ready = BTreeSet::new();
    for node in &inventory.nodes {
        let Some(vm) = node
            .provider_id
            .as_deref()
            .and_then(|id| vm_in_group(id, &policy.vm_id_prefix))
            .filter(|vm| ours.contains(vm))
        else {
            continue;
        };
        matched.insert(vm);
        if matches!(node.readiness, NodeReadiness::NotReady { .. }) {
            not_ready.insert(vm);
        }
    }
    let removals = decisions.iter().filter(|d| d.action.removes());
    let machine_removals = removals
        .clone()
        .filter(|d| d.kind == SubjectKind::Vm)
        .count();
    let replacements = removals
        .clone()
        .filter(|d| d.action == Action::Replace)
        .count();
    let machines = to_u32(ours.len());
    BrakeCounts {
        machines,
        matched: to_u32(matched.len()),
        not_ready: to_u32(not_ready.len()),
        planned: to_u32(removals.count()),
        machine_removals: to_u32(machine_removals),
        replacements: to_u32(replacements),
        allowed: allowed(machines, percent),
    }
}

/// The VM a providerID names when it is in this resource group (as the classifier reads it).
fn vm_in_group<'a>(provider_id: &'a str, prefix: &str) -> Option<&'a str> {
    let id = provider_id.strip_prefix("azure://")?;
    let in_group = id.len() > prefix.len()
        && id.is_char_boundary(prefix.len())
        && id[..prefix.len()].eq_ignore_ascii_case(prefix);
    in_group.then(|| name_from_id(id))
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
