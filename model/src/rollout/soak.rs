//! The soak (`spec.strategy.soak`): once a batch of new machines (the canary first) is
//! available and no other machine of the new template is still coming up, the rollout waits this long with
//! them healthy before it goes on ([`soak_step`]). Meanwhile the plan starts no create and
//! deletes no machine but a broken one ([`hold`]). A machine of the batch that turns NotReady,
//! fails or goes pauses the rollout: a bad image stops at its first batch.
//!
//! Which machines soaked is kept as a time, not a list: every new machine that became
//! available (Ready, for `minReadySeconds`) at or before `soaked_through` has soaked.

use serde::{Deserialize, Serialize};

use super::observed::{Activity, Health, ObservedMachine};
use super::plan::{DeleteReason, Holdup, Plan};

/// A soak under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Soak {
    /// The machines of the batch.
    pub machines: Vec<String>,
    /// When it ends, Unix seconds.
    pub until: i64,
}

/// What [`soak_step`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct SoakInput<'a> {
    /// The pool's machines.
    pub machines: &'a [ObservedMachine],
    /// The new template.
    pub template_hash: &'a str,
    /// Now, Unix seconds.
    pub now: i64,
    /// `minReadySeconds`.
    pub min_ready_secs: i64,
    /// The soak, seconds (0: none).
    pub soak_secs: i64,
    /// The soak under way, if any.
    pub current: Option<&'a Soak>,
    /// Every new machine available at or before this time (Unix seconds) has soaked.
    pub soaked_through: i64,
}

/// What the soak means for this look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoakStep {
    /// The soak under way after this look.
    pub soak: Option<Soak>,
    /// The new `soaked_through`.
    pub soaked_through: i64,
    /// Whether the plan waits ([`hold`]).
    pub hold: bool,
    /// A machine of the batch that is not healthy any more: the rollout pauses.
    pub unhealthy: Option<String>,
}

/// When `machine` became available (Ready, for `min_ready_secs`), Unix seconds.
fn available_since(machine: &ObservedMachine, min_ready_secs: i64) -> i64 {
    machine.ready_since.saturating_add(min_ready_secs.max(0))
}

/// The soak's step at this look; see the module documentation.
pub fn soak_step(input: &SoakInput<'_>) -> SoakStep {
    let mut step = SoakStep {
        soak: None,
        soaked_through: input.soaked_through,
        hold: false,
        unhealthy: None,
    };
    if input.soak_secs <= 0 {
        return step;
    }
    let find = |name: &str| input.machines.iter().find(|m| m.name == name);
    if let Some(current) = input.current {
        let sick = current.machines.iter().find(|name| {
            find(name).is_none_or(|m| m.health != Health::Ready || m.activity == Activity::Deleting)
        });
        if let Some(name) = sick {
            step.unhealthy = Some(name.clone());
            step.hold = true;
            return step;
        }
        if input.now < current.until {
            step.soak = Some(current.clone());
            step.hold = true;
            return step;
        }
        let through = current
            .machines
            .iter()
            .filter_map(|name| find(name))
            .map(|m| available_since(m, input.min_ready_secs))
            .max()
            .unwrap_or(input.soaked_through);
        step.soaked_through = step.soaked_through.max(through);
    }
    let is_new = |m: &&ObservedMachine| m.template_hash == input.template_hash;
    let batch: Vec<&ObservedMachine> = input
        .machines
        .iter()
        .filter(is_new)
        // A machine whose create has not ended yet counts as soon as it is available: the
        // plan counts it so, and would let an old machine go on its account.
        .filter(|m| m.is_available_at(input.now, input.min_ready_secs))
        .filter(|m| available_since(m, input.min_ready_secs) > step.soaked_through)
        .collect();
    if batch.is_empty() {
        return step;
    }
    step.hold = true;
    let creating = input.machines.iter().filter(is_new).any(|m| {
        m.activity == Activity::Creating && !m.is_available_at(input.now, input.min_ready_secs)
    });
    if !creating {
        step.soak = Some(Soak {
            machines: batch.iter().map(|m| m.name.clone()).collect(),
            until: input.now.saturating_add(input.soak_secs),
        });
    }
    step
}

/// `plan` while a soak holds: no create, only broken machines deleted; it waits with holdup
/// `Soak` when nothing else is to be done, and looks again when the soak ends (`until`).
pub fn hold(plan: Plan, until: Option<i64>) -> Plan {
    hold_as(plan, Holdup::Soak, until)
}

/// `plan` held for `why` (a soak, a closed maintenance window): no create, only broken
/// machines deleted; the holdup is `why` when nothing else is to be done, and the rollout
/// looks again at `until`.
pub fn hold_as(mut plan: Plan, why: Holdup, until: Option<i64>) -> Plan {
    if plan.done {
        return plan;
    }
    plan.create = 0;
    plan.delete
        .retain(|victim| victim.reason == DeleteReason::Unhealthy);
    // The canary's approval waits for its soak too.
    let replaced = plan
        .holdup
        .is_none_or(|h| matches!(h, Holdup::Budget | Holdup::CanaryReached));
    if plan.delete.is_empty() && replaced {
        plan.holdup = Some(why);
    }
    if let Some(until) = until {
        plan.next_available_at = Some(plan.next_available_at.map_or(until, |at| at.min(until)));
    }
    plan
}

#[cfg(test)]
mod tests;
