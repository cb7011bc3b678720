//! The rolling-update planner: what to create and what to delete now.
//!
//! Kubernetes Deployment semantics at machine level. With `surge` and `unavailable` resolved
//! from the strategy ([`Budget`]), a plan never takes the pool above `replicas + surge`
//! machines (every machine that exists counts, including those being created or deleted) and
//! never takes the available machines (Ready and not being deleted) below
//! `replicas − unavailable` (nor lower than they already are). Within those bounds it uses the
//! whole budget at every call — no lock-step batches: a machine is replaced as soon as the
//! budget has room, so a pool of `replicas` takes `ceil(replicas / (surge + unavailable))`
//! create-plus-delete times.
//!
//! Order of decisions:
//! 1. machines broken for good ([`ObservedMachine::is_unhealthy`]) are deleted first, whatever
//!    their template (deleting them costs no availability), at most `max(1, surge + unavailable)`
//!    deletions in flight at once, so a cluster-wide outage cannot empty the pool;
//! 2. outdated machines beyond what the new template does not yet replace, and machines beyond
//!    `replicas`, are deleted in victim order — failed, then not ready, then oldest — while
//!    availability allows;
//! 3. new-template machines are created up to the target, and up to `replicas` live machines,
//!    while the total allows.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::observed::{Activity, Health, ObservedMachine};
use crate::pool::Amount;

/// The disruption budget in machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// Machines allowed above `replicas`.
    pub surge: u32,
    /// Machines allowed below `replicas` that are available.
    pub unavailable: u32,
}

impl Budget {
    /// Resolves a strategy for `replicas` machines as Kubernetes does: `max_surge` percentages
    /// round up, `max_unavailable` percentages round down and are capped at `replicas`, and when
    /// both come out 0 one machine may be unavailable (otherwise nothing could ever move).
    pub fn resolve(max_surge: Amount, max_unavailable: Amount, replicas: u32) -> Self {
        let surge = max_surge.resolve(replicas, true);
        let mut unavailable = max_unavailable.resolve(replicas, false).min(replicas);
        if surge == 0 && unavailable == 0 {
            unavailable = 1;
        }
        Self { surge, unavailable }
    }

    /// How many machines may exist at once: `replicas + surge`.
    pub fn max_total(&self, replicas: u32) -> u32 {
        replicas.saturating_add(self.surge)
    }

    /// How many machines must stay available: `replicas − unavailable`.
    pub fn min_available(&self, replicas: u32) -> u32 {
        replicas.saturating_sub(self.unavailable)
    }

    /// Machines replaced per create-plus-delete time when the budget is used fully.
    pub fn pace(&self) -> u32 {
        self.surge.saturating_add(self.unavailable).max(1)
    }
}

/// What the planner looks at.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// How many machines the pool should have.
    pub replicas: u32,
    /// The template every machine should run.
    pub template_hash: &'a str,
    /// The budget, resolved for `replicas`.
    pub budget: Budget,
    /// How many machines of the new template to aim for now: `replicas`, or fewer while a
    /// canary waits for approval (then outdated machines are replaced only that far).
    pub new_target: u32,
    /// Every machine of the pool, including those being created or deleted.
    pub machines: &'a [ObservedMachine],
    /// Now, Unix seconds.
    pub now: i64,
    /// A machine NotReady this long is broken for good.
    pub health_timeout_secs: i64,
    /// Machines held by do-not-disrupt marks ([`crate::rollout::hold`]): never chosen as
    /// outdated or surplus victims (unhealthy ones still go).
    pub held: &'a BTreeSet<String>,
}

/// Why a machine is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeleteReason {
    /// Its VM failed or its Node has not been Ready for the health timeout.
    Unhealthy,
    /// It runs an outdated template and a new machine has taken (or will take) its place.
    Outdated,
    /// The pool has more machines than `replicas`.
    Surplus,
}

impl DeleteReason {
    /// The word messages and the serialized form use: `unhealthy`, `outdated`, `surplus`.
    pub const fn as_str(self) -> &'static str {
        match self {
            DeleteReason::Unhealthy => "unhealthy",
            DeleteReason::Outdated => "outdated",
            DeleteReason::Surplus => "surplus",
        }
    }
}

impl std::fmt::Display for DeleteReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A machine to delete and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Victim {
    /// The machine.
    pub name: String,
    /// Why.
    pub reason: DeleteReason,
}

/// The pool in numbers, as the plan saw it (before acting).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Every machine that exists, including those being created or deleted.
    pub total: u32,
    /// Machines of the new template not being deleted (including those being created).
    pub updated: u32,
    /// Machines whose Node is Ready (including those being deleted).
    pub ready: u32,
    /// Machines Ready and not being deleted.
    pub available: u32,
    /// Machines of an outdated template not being deleted.
    pub old: u32,
    /// Machines being created.
    pub creating: u32,
    /// Machines being deleted.
    pub deleting: u32,
    /// Machines broken for good.
    pub unhealthy: u32,
}

/// Why a plan starts nothing although the rollout is not done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Holdup {
    /// Creations and deletions in flight must finish first.
    InFlight,
    /// `replicas + surge` machines exist and none can go without dropping below
    /// `replicas − unavailable` available: new machines must become Ready first.
    Budget,
    /// The new template reached the canary's target; the rest waits for approval.
    CanaryReached,
    /// The machines left to replace carry do-not-disrupt marks (the status lists them).
    DoNotDisrupt,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// How many machines of the new template to create.
    pub create: u32,
    /// Which machines to delete, in order.
    pub delete: Vec<Victim>,
    /// The pool as seen.
    pub counts: Counts,
    /// Every machine runs the new template, there are `replicas` of them, all available, and
    /// nothing is in flight.
    pub done: bool,
    /// Why nothing starts, when nothing does and the rollout is not done.
    pub holdup: Option<Holdup>,
}

/// Decides what to create and delete now; see the module documentation.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let replicas = input.replicas;
    let budget = input.budget;
    let counts = count(input);
    let is_new = |m: &ObservedMachine| m.template_hash == input.template_hash;
    let is_live = |m: &ObservedMachine| m.activity != Activity::Deleting;

    let mut available = counts.available;
    let min_available = budget.min_available(replicas);
    let mut delete: Vec<Victim> = Vec::new();

    // 1. Broken machines go first, a pace's worth in flight at most.
    let mut deletions_left = budget.pace().saturating_sub(counts.deleting);
    let mut unhealthy: Vec<&ObservedMachine> = input
        .machines
        .iter()
        .filter(|m| m.activity == Activity::Idle)
        .filter(|m| m.is_unhealthy(input.now, input.health_timeout_secs))
        .collect();
    unhealthy.sort_by(|a, b| victim_order(a, b));
    for machine in unhealthy {
        if deletions_left == 0 {
            break;
        }
        deletions_left -= 1;
        delete.push(Victim {
            name: machine.name.clone(),
            reason: DeleteReason::Unhealthy,
        });
    }
    let doomed = |m: &ObservedMachine| delete.iter().any(|v| v.name == m.name);

    // 2. Outdated machines beyond what is still allowed, then machines beyond `replicas`.
    let new_target = input.new_target.min(replicas);
    let allowed_old = replicas - new_target;
    let mut outdated: Vec<&ObservedMachine> = input
        .machines
        .iter()
        .filter(|m| is_live(m) && !is_new(m) && !doomed(m))
        .collect();
    let mut updated: Vec<&ObservedMachine> = input
        .machines
        .iter()
        .filter(|m| is_live(m) && is_new(m) && !doomed(m))
        .collect();
    let mut chosen = Vec::new();
    let old_excess = count_u32(outdated.len()).saturating_sub(allowed_old);
    let is_held = |m: &ObservedMachine| input.held.contains(&m.name);
    let held_old = outdated
        .iter()
        .any(|m| m.activity == Activity::Idle && is_held(m));
    outdated.retain(|m| m.activity == Activity::Idle && !is_held(m));
    outdated.sort_by(|a, b| victim_order(a, b));
    chosen.extend(
        outdated
            .into_iter()
            .take(old_excess as usize)
            .map(|m| (m, DeleteReason::Outdated)),
    );
    let live_after_old = count_u32(
        input
            .machines
            .iter()
            .filter(|m| is_live(m) && !doomed(m))
            .count(),
    )
    .saturating_sub(old_excess);
    let surplus = live_after_old.saturating_sub(replicas);
    updated.retain(|m| m.activity == Activity::Idle && !is_held(m));
    updated.sort_by(|a, b| victim_order(a, b));
    chosen.extend(
        updated
            .into_iter()
            .take(surplus as usize)
            .map(|m| (m, DeleteReason::Surplus)),
    );
    chosen.sort_by(|(a, _), (b, _)| victim_order(a, b));
    for (machine, reason) in chosen {
        if machine.is_available() {
            if available <= min_available {
                // Victim order puts every unavailable machine first: the rest are available too.
                break;
            }
            available -= 1;
        }
        delete.push(Victim {
            name: machine.name.clone(),
            reason,
        });
    }

    // 3. New machines, up to the target and up to `replicas` live, while the total allows.
    let going: BTreeSet<&str> = delete.iter().map(|v| v.name.as_str()).collect();
    let (live_after, new_live) = input
        .machines
        .iter()
        .filter(|m| is_live(m) && !going.contains(m.name.as_str()))
        .fold((0u32, 0u32), |(live, new), m| {
            (live + 1, new + u32::from(is_new(m)))
        });
    let wanted = new_target
        .saturating_sub(new_live)
        .max(replicas.saturating_sub(live_after));
    let room = budget.max_total(replicas).saturating_sub(counts.total);
    let create = wanted.min(room);

    let done = create == 0
        && delete.is_empty()
        && counts.creating == 0
        && counts.deleting == 0
        && counts.old == 0
        && counts.updated == replicas
        && counts.available == replicas;
    let holdup = if done || create > 0 || !delete.is_empty() {
        None
    } else if counts.creating > 0 || counts.deleting > 0 {
        Some(Holdup::InFlight)
    } else if new_target < replicas && new_live >= new_target {
        Some(Holdup::CanaryReached)
    } else if held_old {
        Some(Holdup::DoNotDisrupt)
    } else {
        Some(Holdup::Budget)
    };
    Plan {
        create,
        delete,
        counts,
        done,
        holdup,
    }
}

fn count(input: &PlanInput<'_>) -> Counts {
    let mut counts = Counts::default();
    for machine in input.machines {
        counts.total += 1;
        let live = machine.activity != Activity::Deleting;
        let new = machine.template_hash == input.template_hash;
        if live && new {
            counts.updated += 1;
        }
        if live && !new {
            counts.old += 1;
        }
        if machine.health == Health::Ready {
            counts.ready += 1;
        }
        if machine.is_available() {
            counts.available += 1;
        }
        match machine.activity {
            Activity::Creating => counts.creating += 1,
            Activity::Deleting => counts.deleting += 1,
            Activity::Idle => {}
        }
        if machine.is_unhealthy(input.now, input.health_timeout_secs) {
            counts.unhealthy += 1;
        }
    }
    counts
}

/// Deletion order: failed, then not ready, then ready; within each, oldest first (then by
/// name, so the order is total).
pub fn victim_order(a: &ObservedMachine, b: &ObservedMachine) -> Ordering {
    fn rank(health: Health) -> u8 {
        match health {
            Health::Failed => 0,
            Health::NotReady { .. } => 1,
            Health::Ready => 2,
        }
    }
    rank(a.health)
        .cmp(&rank(b.health))
        .then(a.created_at.cmp(&b.created_at))
        .then_with(|| a.name.cmp(&b.name))
}

fn count_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_reason_reads_as_its_serialized_word() {
        for reason in [
            DeleteReason::Unhealthy,
            DeleteReason::Outdated,
            DeleteReason::Surplus,
        ] {
            assert_eq!(
                serde_json::to_value(reason).ok(),
                Some(serde_json::Value::from(reason.as_str()))
            );
            assert_eq!(reason.to_string(), reason.as_str());
        }
    }
}
