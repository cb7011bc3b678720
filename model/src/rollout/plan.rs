//! The rolling-update planner: what to create and what to delete now.
//!
//! A Kubernetes Deployment's arithmetic at machine level (`reconcileOldReplicaSets` and its
//! `cleanupUnhealthyReplicas` and `scaleDownOldReplicaSetsForRollingUpdate`, with machine = pod
//! and new template = new ReplicaSet). With `surge` and `unavailable` resolved from the strategy
//! ([`Budget`]) and `minAvailable = replicas − unavailable`:
//!
//! - a plan never takes the pool above `replicas + surge` machines (every machine that exists
//!   counts, including those being created or deleted);
//! - it never takes the available machines (Ready for `minReadySeconds` and not being deleted)
//!   below `minAvailable` (nor lower than they already are);
//! - it never takes the live machines (every one not being deleted, those being created
//!   included) below `minAvailable` (nor deletes any when they already are at or below it).
//!
//! Within those bounds it uses the whole budget at every call, with no lock-step batches: a
//! machine is replaced as soon as the budget has room, so a pool of `replicas` takes
//! `ceil(replicas / (surge + unavailable))` create-plus-delete times.
//!
//! Order of decisions:
//! 1. **Broken new-template machines** (failed, or NotReady for the health timeout) are deleted
//!    while the live machines stay above `minAvailable`. They are replaced as a ReplicaSet
//!    replaces a failed pod: a broken machine does not count toward the machines wanted (step
//!    4), so its replacement is created first when the surge allows and the broken one goes
//!    once the live machines are above `minAvailable` again. Without this a broken new machine
//!    would hold the rollout for ever (it counts as unavailable in the arithmetic below).
//! 2. **Old-template machines**, in victim order (failed, then not ready, then oldest):
//!    `maxScaledDown = live − minAvailable − newUnavailable` (`newUnavailable`: live
//!    new-template machines that are not available, being created included); nothing old goes
//!    when it is 0 or less. Old machines that are not available go first, at most
//!    `maxScaledDown` of them (`cleanupUnhealthyReplicas`): those broken whatever the canary
//!    target or do-not-disrupt marks (reason `unhealthy`), those merely NotReady only as
//!    outdated victims. Then available old machines, only while the available machines stay
//!    above `minAvailable`. So one look where every old Node is NotReady (a lease or apiserver
//!    hiccup past the health timeout) deletes no more than the budget allows, instead of every
//!    old machine.
//! 3. **Machines beyond `replicas`** once the old excess is gone (surplus), new-template ones in
//!    victim order; available ones only while availability allows.
//! 4. **New machines**: up to the new-template target and up to `replicas` live machines
//!    (broken ones not counted), while the total allows.
//!
//! Available, everywhere above, is one predicate ([`ObservedMachine::is_available_at`]): Ready,
//! not being deleted, and Ready for at least `minReadySeconds` (a Deployment's rule). A machine
//! Ready for less (warming up) counts as unavailable, so no old machine goes on its account
//! until it has served that long, and it is chosen before available machines when victims are
//! picked ([`victim_order_with`]). With `minReadySeconds` 0 every Ready machine not being
//! deleted is available and each decision is the same as without the setting.
//!
//! Deletions already in flight: a machine being deleted is not live and not available (it
//! counts toward neither `live` nor `minAvailable`'s side of the arithmetic, as a terminating
//! pod does not count in its ReplicaSet), but its VM still counts toward the total, so its
//! replacement waits for room. No separate cap on deletions in flight is needed: the floor on
//! live machines bounds them.

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
    /// Machines of `held` held even when unhealthy: a delete that failed before the cordon
    /// waits out its back-off ([`crate::rollout::retry::backoff_holds`]) instead of being
    /// planned again at every look.
    pub held_firmly: &'a BTreeSet<String>,
    /// Seconds a Node must have been Ready before its machine counts available
    /// (`spec.strategy.minReadySeconds`; 0: as soon as it is Ready).
    pub min_ready_secs: i64,
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
    /// Machines available: Ready (for `minReadySeconds`) and not being deleted.
    pub available: u32,
    /// Machines of an outdated template not being deleted.
    pub old: u32,
    /// Machines being created.
    pub creating: u32,
    /// Machines being deleted.
    pub deleting: u32,
    /// Machines broken for good.
    pub unhealthy: u32,
    /// Machines of the new template that are available (Ready for `minReadySeconds`, not being
    /// deleted): what a finished create adds, unlike `updated`, which counts a create from its
    /// start.
    #[serde(default)]
    pub updated_available: u32,
}

/// Why a plan starts nothing although the rollout is not done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Holdup {
    /// Creations and deletions in flight must finish first.
    InFlight,
    /// `replicas + surge` machines exist and none can go without dropping below
    /// `replicas − unavailable` available: new machines must become available first (Ready, and
    /// for `minReadySeconds` when it is set: [`Plan::next_available_at`] says when).
    Budget,
    /// The new template reached the canary's target; the rest waits for approval.
    CanaryReached,
    /// The machines left to replace carry do-not-disrupt marks (the status lists them).
    DoNotDisrupt,
    /// New machines are due but the subnet, a vCPU quota or the size's restrictions leave room
    /// for none (the status's `capacity` names the limit); the rollout looks again.
    Capacity,
    /// The last batch of new machines soaks (`strategy.soak`; the status's `soak` says until
    /// when) before the rollout goes on.
    Soak,
    /// No maintenance window is open (`spec.maintenance`; the status's `window` says when the
    /// next opens): machines in flight finish, nothing new starts.
    MaintenanceWindow,
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
    /// When the next machine that is Ready but not yet for `minReadySeconds` counts available,
    /// Unix seconds ([`next_availability`]): the rollout looks again then at the latest, as a
    /// Deployment requeues. None without such a machine (always with `minReadySeconds` 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_available_at: Option<i64>,
}

/// Decides what to create and delete now; see the module documentation.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let replicas = input.replicas;
    let budget = input.budget;
    let counts = count(input);
    let is_new = |m: &ObservedMachine| m.template_hash == input.template_hash;
    let is_live = |m: &ObservedMachine| m.activity != Activity::Deleting;
    let is_idle = |m: &ObservedMachine| m.activity == Activity::Idle;
    let is_broken = |m: &ObservedMachine| m.is_unhealthy(input.now, input.health_timeout_secs);
    let is_held = |m: &ObservedMachine| input.held.contains(&m.name);
    // Held, and not let through for being broken.
    let is_kept =
        |m: &ObservedMachine| is_held(m) && (!is_broken(m) || input.held_firmly.contains(&m.name));
    let is_available = |m: &ObservedMachine| m.is_available_at(input.now, input.min_ready_secs);
    let victim_order =
        |a: &&ObservedMachine, b: &&ObservedMachine| victim_order_with(a, b, &is_available);
    let min_available = budget.min_available(replicas);
    let new_target = input.new_target.min(replicas);

    let mut live = count_u32(input.machines.iter().filter(|m| is_live(m)).count());
    let mut available = counts.available;
    let mut delete: Vec<Victim> = Vec::new();
    let mut going: BTreeSet<&str> = BTreeSet::new();

    // 1. Broken new-template machines, while the live machines stay above the floor.
    let mut broken_new: Vec<&ObservedMachine> = input
        .machines
        .iter()
        .filter(|m| is_idle(m) && is_new(m) && is_broken(m))
        .collect();
    broken_new.sort_by(victim_order);
    for machine in broken_new {
        if live <= min_available {
            break;
        }
        live -= 1;
        going.insert(&machine.name);
        delete.push(Victim {
            name: machine.name.clone(),
            reason: DeleteReason::Unhealthy,
        });
    }

    // 2. Old machines: the unavailable ones within maxScaledDown, then available ones while
    // availability allows.
    let new_unavailable = count_u32(
        input
            .machines
            .iter()
            .filter(|m| is_live(m) && is_new(m) && !is_available(m))
            .filter(|m| !going.contains(m.name.as_str()))
            .count(),
    );
    let mut cleanup_left = live
        .saturating_sub(min_available)
        .saturating_sub(new_unavailable);
    let allowed_old = replicas - new_target;
    let old_live = count_u32(
        input
            .machines
            .iter()
            .filter(|m| is_live(m) && !is_new(m))
            .count(),
    );
    let mut old_excess = old_live.saturating_sub(allowed_old);
    let held_old = input
        .machines
        .iter()
        .any(|m| is_idle(m) && !is_new(m) && is_kept(m));
    let mut old: Vec<&ObservedMachine> = input
        .machines
        .iter()
        .filter(|m| is_idle(m) && !is_new(m) && !is_kept(m))
        .collect();
    old.sort_by(victim_order);
    for machine in old {
        let broken = is_broken(machine);
        if is_available(machine) {
            if old_excess == 0 || available <= min_available {
                continue;
            }
            available -= 1;
        } else {
            if cleanup_left == 0 || (!broken && old_excess == 0) {
                continue;
            }
            cleanup_left -= 1;
        }
        old_excess = old_excess.saturating_sub(1);
        live -= 1;
        going.insert(&machine.name);
        delete.push(Victim {
            name: machine.name.clone(),
            reason: if broken {
                DeleteReason::Unhealthy
            } else {
                DeleteReason::Outdated
            },
        });
    }

    // 3. Machines beyond `replicas` once the old excess is gone.
    let mut surplus = live.saturating_sub(old_excess).saturating_sub(replicas);
    let mut extra: Vec<&ObservedMachine> = input
        .machines
        .iter()
        .filter(|m| is_idle(m) && is_new(m) && !is_held(m))
        .filter(|m| !going.contains(m.name.as_str()))
        .collect();
    extra.sort_by(victim_order);
    for machine in extra {
        if surplus == 0 {
            break;
        }
        if is_available(machine) {
            if available <= min_available {
                // Victim order puts every unavailable machine first: the rest are available too.
                break;
            }
            available -= 1;
        }
        surplus -= 1;
        going.insert(&machine.name);
        delete.push(Victim {
            name: machine.name.clone(),
            reason: if is_broken(machine) {
                DeleteReason::Unhealthy
            } else {
                DeleteReason::Surplus
            },
        });
    }
    // Deleted in victim order, whatever the step that chose them.
    let order = |name: &str| input.machines.iter().find(|m| m.name == name);
    delete.sort_by(|a, b| match (order(&a.name), order(&b.name)) {
        (Some(a), Some(b)) => victim_order(&a, &b),
        _ => Ordering::Equal,
    });

    // 4. New machines, up to the target and up to `replicas` live (broken ones not counted),
    // while the total allows.
    let (live_ok, new_ok) = input
        .machines
        .iter()
        .filter(|m| is_live(m) && !going.contains(m.name.as_str()) && !is_broken(m))
        .fold((0u32, 0u32), |(live, new), m| {
            (live + 1, new + u32::from(is_new(m)))
        });
    let wanted = new_target
        .saturating_sub(new_ok)
        .max(replicas.saturating_sub(live_ok));
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
    } else if new_target < replicas && new_ok >= new_target {
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
        next_available_at: next_availability(input.machines, input.now, input.min_ready_secs),
    }
}

/// When the next machine Ready but not yet for `min_ready_secs` counts available, Unix seconds
/// (see [`ObservedMachine::available_at`]); none when no machine is warming up, and always none
/// with `min_ready_secs` 0.
pub fn next_availability(
    machines: &[ObservedMachine],
    now: i64,
    min_ready_secs: i64,
) -> Option<i64> {
    machines
        .iter()
        .filter_map(|m| m.available_at(now, min_ready_secs))
        .min()
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
        if machine.is_available_at(input.now, input.min_ready_secs) {
            counts.available += 1;
            if new {
                counts.updated_available += 1;
            }
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
/// name, so the order is total). The order without `minReadySeconds`: every Ready machine
/// counts as available ([`victim_order_with`]).
pub fn victim_order(a: &ObservedMachine, b: &ObservedMachine) -> Ordering {
    victim_order_with(a, b, &|m: &ObservedMachine| m.health == Health::Ready)
}

/// Deletion order with `available` saying which machines count available: failed, then not
/// ready, then Ready but not available yet (warming up for `minReadySeconds`), then available;
/// within each, oldest first (then by name, so the order is total). With a predicate true for
/// every Ready machine it is [`victim_order`].
pub fn victim_order_with(
    a: &ObservedMachine,
    b: &ObservedMachine,
    available: &impl Fn(&ObservedMachine) -> bool,
) -> Ordering {
    let rank = |m: &ObservedMachine| match m.health {
        Health::Failed => 0u8,
        Health::NotReady { .. } => 1,
        Health::Ready if !available(m) => 2,
        Health::Ready => 3,
    };
    rank(a)
        .cmp(&rank(b))
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
