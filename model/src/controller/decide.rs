//! The pool controller's decision ([`decide`]): from the pool's machines, the remediations in
//! progress and the mode, what to create, delete and remediate now, and what to report.
//!
//! # Counting
//!
//! A machine *counts* toward `replicas` when it has a VM (or a create in flight) and is not being
//! deleted (a delete in flight, its Node draining, or its VM's provisioning state `Deleting`).
//! Reported counts: `replicas` = counted; `ready` = counted with the Node Ready; `available` =
//! ready for at least `min_ready_secs` (since the Ready transition, never before the VM's
//! creation); `updated` = counted of the current template (a create in flight whose VM is not
//! listed yet is of the current template: the controller creates nothing else); `unhealthy` =
//! counted machines judged [`Verdict::Unhealthy`] (see [`super::judge`]).
//!
//! # Modes
//!
//! - [`Mode::Paused`]: observe and report only: nothing is created, deleted, remediated or
//!   rolled out; remediations in progress are carried unchanged.
//! - [`Mode::Deleting`]: every machine with a VM or a Node that is not being deleted is a victim
//!   [`VictimReason::PoolDeleted`] (a create in flight whose VM is not listed yet is left to the
//!   caller, which cancels it; its VM, if one appears, is a victim at the next decision); nothing
//!   is created; remediations end.
//! - [`Mode::RollingOut`]: a RollingUpdate child owns the pool: the controller creates, deletes,
//!   remediates and starts nothing; counts and unhealthy machines are still reported.
//! - [`Mode::Active`], in this order:
//!   1. **Surprise guard**: when no VM is listed but the pool has Nodes, or when more Nodes lack
//!      their VM than machines have one (more than half of the pool's machines would go as
//!      [`VictimReason::VmGone`] at once), act on nothing and say why in `held`: an empty or
//!      partial listing would look the same.
//!   2. **VM gone**: a machine with a Node but no VM (no create in flight, not being deleted) is a
//!      victim `VmGone` (DeleteMachine removes its Node); it does not count, so its replacement
//!      is created in this same decision. **Evicted**: a Spot machine whose VM Azure stopped or
//!      deallocated ([`Machine::is_evicted`]) is a victim [`VictimReason::Evicted`] likewise, at
//!      once, outside the remediation ladder and `maxUnhealthy` (Azure took it; nothing to heal).
//!   3. **Remediations in progress** move on (see `remediation::carry_on`): one whose machine is
//!      healthy again or gone ends; a rung that had `remediationTimeout` moves to the next
//!      (a [`Step`] or a victim [`VictimReason::Unhealthy`]); past the last rung it stays and the
//!      machine's unhealthy reason says "remediation ladder exhausted".
//!   4. **Scale down**: surplus = counted − replicas − this decision's replacements. Victims
//!      [`VictimReason::ScaleDown`] are taken among counted machines without work in flight, in
//!      this order: never joined (no Node) or unhealthy first, then the Node's
//!      `nodewright.io/delete-priority` ascending (none counts as 0), then machines of another
//!      template, then the newest (`created_at` descending), then by name. An available machine
//!      is passed over when taking it would leave fewer than `replicas − max_unavailable`
//!      available (the surplus then waits for a later decision). A machine with work in flight
//!      (a create, a restart) is never a victim: its surplus waits until the work ends.
//!   5. **New remediations**, only when allowed: unhealthy counted machines without a
//!      remediation or work in flight, the longest unhealthy first, while fewer than
//!      `max_in_flight` remediations are in progress (those not exhausted, a replacement counting
//!      until its machine is gone). Each starts on rung 0: `restart` or `redeploy` is a [`Step`],
//!      `replace` a victim `Unhealthy`. A victim still counts in this decision, so nothing is
//!      created for it now; once its delete is in flight it no longer counts and the next
//!      decision creates its replacement (a pool never goes above `replicas` for a remediation).
//!   6. **Create** `replicas − counted` machines (when positive), from the current template.
//!   7. **Rollout**: when a counted machine's VM is of another template, `start_rollout`: the
//!      caller starts a RollingUpdate child and decides with [`Mode::RollingOut`] until it ends.
//!      Scale and remediation in this same decision still happen as above.
//!
//! # Remediation allowed
//!
//! Allowed iff unhealthy ≤ `max_unhealthy` resolved against max(replicas, counted), rounded down
//! (Cluster API's `maxUnhealthy`): with the default 40%, a pool of one or two machines never
//! remediates (40% of 2 is 0), one of three remediates one machine at a time. Not allowed: no
//! remediation starts or moves to its next rung, and the message gives the counts.
//!
//! # Recheck
//!
//! `recheck_at` is the earliest instant after `now` at which this decision could change without a
//! new observation: a pending condition's timeout, a starting machine's creation deadline, a
//! rung's deadline, a warming machine becoming available.

use serde::{Deserialize, Serialize};

use super::health::{HealthPolicy, Rung, Verdict, judge};
use super::machines::Machine;
use super::remediation::{Remediation, carry_on};

/// What the controller may do with the pool now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Keep the pool at its declared state.
    Active,
    /// Observe and report only.
    Paused,
    /// Delete every machine.
    Deleting,
    /// A RollingUpdate child owns the pool.
    RollingOut,
}

impl Mode {
    /// The phase `pool status` shows: `Active`, `Paused`, `Deleting` or `RollingOut`.
    pub fn phase(self) -> &'static str {
        match self {
            Mode::Active => "Active",
            Mode::Paused => "Paused",
            Mode::Deleting => "Deleting",
            Mode::RollingOut => "RollingOut",
        }
    }
}

/// What [`decide`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The declared number of machines.
    pub replicas: u32,
    /// The current template's hash.
    pub template_hash: &'a str,
    /// The health policy.
    pub policy: &'a HealthPolicy,
    /// The creation timeout, seconds.
    pub creation_timeout_secs: i64,
    /// minReadySeconds.
    pub min_ready_secs: i64,
    /// The strategy's maxUnavailable, resolved by the caller.
    pub max_unavailable: u32,
    /// The pool's machines ([`super::join`]).
    pub machines: &'a [Machine],
    /// The remediations in progress.
    pub remediations: &'a [Remediation],
    /// The mode.
    pub mode: Mode,
    /// Now, Unix seconds.
    pub now: i64,
    /// `spec.maintenance` with `applyTo: all` and no window open: when the next one opens, in
    /// words. No remediation starts or moves on meanwhile (a machine whose VM is gone is still
    /// replaced); `None` when a window is open or none gates remediation.
    pub remediation_window_closed: Option<&'a str>,
}

/// What to do now, and what to report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// New machines to start (the caller names them).
    pub create: u32,
    /// DeleteMachine children to start, in order: machines whose VM is gone, replacements of
    /// remediations in progress, the scale-down, new replacements.
    pub delete: Vec<Victim>,
    /// Restart and redeploy actions to run now.
    pub remediate: Vec<Step>,
    /// The remediations carried on (the new state).
    pub remediations: Vec<Remediation>,
    /// Machines of another template and none rolling out: start a RollingUpdate child.
    pub start_rollout: bool,
    /// The unhealthy machines that count, with their reasons.
    pub unhealthy: Vec<Unhealthy>,
    /// Whether remediation is allowed (maxUnhealthy), and the counts.
    pub remediation_allowed: Allowance,
    /// The counts.
    pub counts: Counts,
    /// The earliest time this decision may change with no new observation.
    pub recheck_at: Option<i64>,
    /// Why the controller acts on nothing now (the surprise guard), if so.
    pub held: Option<String>,
}

/// A machine to delete, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Victim {
    /// The machine.
    pub name: String,
    /// Why.
    pub reason: VictimReason,
}

/// Why a machine is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VictimReason {
    /// The pool has more machines than `replicas`.
    ScaleDown,
    /// It is unhealthy and its remediation replaces it.
    Unhealthy,
    /// Its VM is gone; its Node is left.
    VmGone,
    /// The pool is being deleted.
    PoolDeleted,
    /// Azure evicted it (a Spot VM stopped or deallocated): it is replaced at once, and what
    /// is left of it (the VM, its NIC and disk, its Node) goes.
    Evicted,
}

impl std::fmt::Display for VictimReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VictimReason::ScaleDown => "scale down",
            VictimReason::Unhealthy => "unhealthy, replaced",
            VictimReason::VmGone => "its VM is gone",
            VictimReason::PoolDeleted => "the pool is deleted",
            VictimReason::Evicted => "evicted by Azure (Spot)",
        })
    }
}

/// A restart or redeploy to run now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// The machine.
    pub machine: String,
    /// [`Rung::Restart`] or [`Rung::Redeploy`].
    pub rung: Rung,
}

/// An unhealthy machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unhealthy {
    /// The machine.
    pub machine: String,
    /// Why.
    pub reason: String,
    /// Since when, Unix seconds.
    pub since: i64,
}

/// Whether remediation is allowed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Allowance {
    /// Allowed.
    pub allowed: bool,
    /// Not allowed because no maintenance window is open (`applyTo: all`), not because of
    /// maxUnhealthy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub window_closed: bool,
    /// E.g. `2 of 3 machines unhealthy, more than maxUnhealthy 40% (1); remediating none`.
    pub message: String,
}

/// The pool's counts (Deployment's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Machines that count.
    pub replicas: u32,
    /// Of them, Ready.
    pub ready: u32,
    /// Of them, Ready for minReadySeconds.
    pub available: u32,
    /// Of them, of the current template.
    pub updated: u32,
    /// Of them, unhealthy.
    pub unhealthy: u32,
}

/// Decides what the controller does now (see the module documentation for every rule).
pub fn decide(input: &Input<'_>) -> Decision {
    let now = input.now;
    let judged: Vec<(&Machine, Verdict)> = input
        .machines
        .iter()
        .map(|m| (m, judge(m, input.policy, input.creation_timeout_secs, now)))
        .collect();
    let counted: Vec<&(&Machine, Verdict)> = judged.iter().filter(|(m, _)| m.counts()).collect();
    let unhealthy: Vec<Unhealthy> = counted
        .iter()
        .filter_map(|(machine, verdict)| match verdict {
            Verdict::Unhealthy { reason, since } => Some(Unhealthy {
                machine: machine.name.clone(),
                reason: reason.clone(),
                since: *since,
            }),
            _ => None,
        })
        .collect();
    let counts = count(input, &counted, unhealthy.len());
    let remediation_allowed = allowance(input, counts.replicas, counts.unhealthy);
    let mut recheck = Recheck { now, at: None };
    for (machine, verdict) in &judged {
        match verdict {
            Verdict::Pending { at, .. } => recheck.consider(*at),
            Verdict::Starting { until } => recheck.consider(*until),
            Verdict::Healthy | Verdict::Unhealthy { .. } => {}
        }
        if machine.counts()
            && let Some(since) = machine.ready_since()
            && input.min_ready_secs > 0
        {
            recheck.consider(since.saturating_add(input.min_ready_secs));
        }
    }
    let mut decision = Decision {
        create: 0,
        delete: Vec::new(),
        remediate: Vec::new(),
        remediations: input.remediations.to_vec(),
        start_rollout: false,
        unhealthy,
        remediation_allowed,
        counts,
        recheck_at: None,
        held: None,
    };
    match input.mode {
        Mode::Paused | Mode::RollingOut => {
            for remediation in input.remediations {
                if !remediation.is_exhausted(input.policy, now) {
                    recheck.consider(remediation.deadline(input.policy));
                }
            }
        }
        Mode::Deleting => {
            decision.remediations.clear();
            decision.delete = input
                .machines
                .iter()
                .filter(|m| (m.vm.is_some() || m.node.is_some()) && !m.is_deleting())
                .map(|m| Victim {
                    name: m.name.clone(),
                    reason: VictimReason::PoolDeleted,
                })
                .collect();
        }
        Mode::Active => match surprise(input.machines) {
            Some(reason) => decision.held = Some(reason),
            None => active(input, &judged, &mut decision, &mut recheck),
        },
    }
    for remediation in &decision.remediations {
        if remediation.is_exhausted(input.policy, now)
            && let Some(entry) = decision
                .unhealthy
                .iter_mut()
                .find(|u| u.machine == remediation.machine)
        {
            entry.reason.push_str("; remediation ladder exhausted");
        }
    }
    decision.recheck_at = recheck.at;
    decision
}

/// [`Mode::Active`] past the surprise guard: steps 2 to 7 of the module documentation.
fn active(
    input: &Input<'_>,
    judged: &[(&Machine, Verdict)],
    decision: &mut Decision,
    recheck: &mut Recheck,
) {
    let now = input.now;
    let policy = input.policy;
    let verdict_of = |name: &str| judged.iter().find(|(m, _)| m.name == name).map(|(_, v)| v);
    let machine_of = |name: &str| judged.iter().find(|(m, _)| m.name == name).map(|(m, _)| *m);

    // 2. VM gone, or evicted.
    for (machine, _) in judged {
        if is_vm_gone(machine) {
            decision.delete.push(Victim {
                name: machine.name.clone(),
                reason: VictimReason::VmGone,
            });
        } else if machine.is_evicted() && machine.work.is_none() {
            decision.delete.push(Victim {
                name: machine.name.clone(),
                reason: VictimReason::Evicted,
            });
        }
    }

    // 3. Remediations in progress.
    let allowed = decision.remediation_allowed.allowed;
    let carried = carry_on(
        input.remediations,
        machine_of,
        verdict_of,
        policy,
        allowed,
        now,
    );
    for deadline in carried.deadlines {
        recheck.consider(deadline);
    }
    decision.remediations = carried.kept;
    let mut replaced = 0u32;
    for (name, rung) in carried.actions {
        let Some(machine) = machine_of(&name) else {
            continue;
        };
        let already_going = decision.delete.iter().any(|v| v.name == name);
        if already_going || (rung != Rung::Replace && machine.vm.is_none()) {
            continue;
        }
        if rung == Rung::Replace && machine.counts() {
            replaced += 1;
        }
        act(decision, name, rung);
    }

    // 4. Scale down.
    let counted = decision.counts.replicas;
    let surplus = counted
        .saturating_sub(replaced)
        .saturating_sub(input.replicas);
    if surplus > 0 {
        scale_down(input, judged, decision, surplus);
    }

    // 5. New remediations.
    if allowed {
        let in_flight = decision
            .remediations
            .iter()
            .filter(|r| !r.is_exhausted(policy, now))
            .count();
        let slots = usize::try_from(policy.max_in_flight)
            .unwrap_or(usize::MAX)
            .saturating_sub(in_flight);
        let mut candidates: Vec<&Unhealthy> = decision
            .unhealthy
            .iter()
            .filter(|u| {
                machine_of(&u.machine).is_some_and(|m| m.work.is_none())
                    && !decision.remediations.iter().any(|r| r.machine == u.machine)
                    && !decision.delete.iter().any(|v| v.name == u.machine)
            })
            .collect();
        candidates.sort_by(|a, b| {
            a.since
                .cmp(&b.since)
                .then_with(|| a.machine.cmp(&b.machine))
        });
        let starting: Vec<Unhealthy> = candidates.into_iter().take(slots).cloned().collect();
        if let Some(&first) = policy.remediation.first() {
            for unhealthy in starting {
                decision.remediations.push(Remediation {
                    machine: unhealthy.machine.clone(),
                    rung: 0,
                    started_at: now,
                    reason: unhealthy.reason,
                });
                if first != Rung::Replace {
                    recheck.consider(crate::time::deadline_after(now, policy.remediation_timeout));
                }
                act(decision, unhealthy.machine, first);
            }
        }
    }

    // 6. Create.
    decision.create = input.replicas.saturating_sub(counted);

    // 7. Rollout.
    decision.start_rollout = judged.iter().any(|(machine, _)| {
        machine.counts() && machine.vm.is_some() && machine.template_hash != input.template_hash
    });
}

/// Acts on `rung` for `machine`: a [`Step`] for a restart or redeploy, a victim for a replace.
fn act(decision: &mut Decision, machine: String, rung: Rung) {
    match rung {
        Rung::Replace => decision.delete.push(Victim {
            name: machine,
            reason: VictimReason::Unhealthy,
        }),
        Rung::Restart | Rung::Redeploy => decision.remediate.push(Step { machine, rung }),
    }
}

/// Picks `surplus` victims [`VictimReason::ScaleDown`] in the documented order, passing over an
/// available machine whose deletion would leave fewer than `replicas − max_unavailable`
/// available.
fn scale_down(
    input: &Input<'_>,
    judged: &[(&Machine, Verdict)],
    decision: &mut Decision,
    surplus: u32,
) {
    let mut candidates: Vec<&(&Machine, Verdict)> = judged
        .iter()
        .filter(|(m, _)| {
            m.counts() && m.work.is_none() && !decision.delete.iter().any(|v| v.name == m.name)
        })
        .collect();
    candidates.sort_by(|(a, a_verdict), (b, b_verdict)| {
        let key = |m: &Machine, verdict: &Verdict| {
            (
                !(m.node.is_none() || matches!(verdict, Verdict::Unhealthy { .. })),
                m.node.as_ref().and_then(|n| n.delete_priority).unwrap_or(0),
                m.template_hash == input.template_hash,
                std::cmp::Reverse(m.created_at),
            )
        };
        key(a, a_verdict)
            .cmp(&key(b, b_verdict))
            .then_with(|| a.name.cmp(&b.name))
    });
    let floor = input.replicas.saturating_sub(input.max_unavailable);
    let is_available = |m: &Machine| is_available(m, input.now, input.min_ready_secs);
    let mut available = decision.counts.available.saturating_sub(
        u32::try_from(
            decision
                .delete
                .iter()
                .filter(|v| {
                    judged
                        .iter()
                        .any(|(m, _)| m.name == v.name && m.counts() && is_available(m))
                })
                .count(),
        )
        .unwrap_or(u32::MAX),
    );
    let mut taken = 0;
    for (machine, _) in candidates {
        if taken == surplus {
            break;
        }
        if is_available(machine) {
            if available <= floor {
                continue;
            }
            available -= 1;
        }
        taken += 1;
        decision.delete.push(Victim {
            name: machine.name.clone(),
            reason: VictimReason::ScaleDown,
        });
    }
}

/// A Node without a VM, no create in flight, not being deleted.
fn is_vm_gone(machine: &Machine) -> bool {
    machine.vm.is_none()
        && machine.node.is_some()
        && !machine.is_creating()
        && !machine.is_deleting()
}

/// Why the controller must act on nothing (step 1 of the module documentation), if so.
fn surprise(machines: &[Machine]) -> Option<String> {
    let with_vm = machines.iter().filter(|m| m.vm.is_some()).count();
    let nodes = machines.iter().filter(|m| m.node.is_some()).count();
    if with_vm == 0 && nodes > 0 {
        return Some(format!(
            "no VM of the pool is listed but {nodes} of its Nodes are: a listing that came back empty \
             would look the same, so nothing is created or deleted; if the VMs are really gone, \
             delete those Nodes (kubectl delete node) and the controller rebuilds the pool"
        ));
    }
    let gone = machines.iter().filter(|m| is_vm_gone(m)).count();
    let counted = machines.iter().filter(|m| m.counts()).count();
    (gone > counted).then(|| {
        format!(
            "{gone} Nodes of the pool have no VM, more than the {counted} machines that have one: \
             a partial listing would look the same, so nothing is created or deleted; if those \
             VMs are really gone, delete their Nodes (kubectl delete node) and the controller \
             replaces them"
        )
    })
}

/// Counts of the machines that count (see the module documentation).
fn count(input: &Input<'_>, counted: &[&(&Machine, Verdict)], unhealthy: usize) -> Counts {
    let number = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    Counts {
        replicas: number(counted.len()),
        ready: number(counted.iter().filter(|(m, _)| m.is_ready()).count()),
        available: number(
            counted
                .iter()
                .filter(|(m, _)| is_available(m, input.now, input.min_ready_secs))
                .count(),
        ),
        updated: number(
            counted
                .iter()
                .filter(|(m, _)| {
                    if m.vm.is_some() {
                        m.template_hash == input.template_hash
                    } else {
                        m.is_creating()
                    }
                })
                .count(),
        ),
        unhealthy: number(unhealthy),
    }
}

/// Counts, is Ready and has been for `min_ready_secs`.
fn is_available(machine: &Machine, now: i64, min_ready_secs: i64) -> bool {
    machine.counts()
        && machine
            .ready_since()
            .is_some_and(|since| min_ready_secs <= 0 || now.saturating_sub(since) >= min_ready_secs)
}

/// Whether `unhealthy` machines may be remediated in a pool of `counted` machines.
fn allowance(input: &Input<'_>, counted: u32, unhealthy: u32) -> Allowance {
    let total = input.replicas.max(counted);
    let amount = input.policy.max_unhealthy;
    let threshold = amount.resolve(total, false);
    let allowed = unhealthy <= threshold;
    let message = if allowed {
        format!(
            "{unhealthy} of {total} machines unhealthy, within maxUnhealthy {amount} ({threshold})"
        )
    } else {
        format!(
            "{unhealthy} of {total} machines unhealthy, more than maxUnhealthy {amount} \
             ({threshold}); remediating none"
        )
    };
    if allowed && let Some(window) = input.remediation_window_closed {
        return Allowance {
            allowed: false,
            window_closed: true,
            message: format!(
                "{unhealthy} of {total} machines unhealthy; no maintenance window is open ({window}): remediating none until one opens"
            ),
        };
    }
    Allowance {
        allowed,
        window_closed: false,
        message,
    }
}

/// The earliest instant after `now` seen so far.
struct Recheck {
    now: i64,
    at: Option<i64>,
}

impl Recheck {
    fn consider(&mut self, at: i64) {
        if at > self.now && self.at.is_none_or(|earliest| at < earliest) {
            self.at = Some(at);
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod properties;
