//! What nodewright does about one Scheduled Event ([`decide`] gives an [`EventPlan`]), when it
//! asks the agent to acknowledge it ([`ack_at`], [`may_acknowledge`]) and how long each pod
//! gets to stop ([`grace_for`]).
//!
//! # Rules
//! | event | plan |
//! |---|---|
//! | on a machine nodewright does not manage, or a status other than Scheduled and Started | [`EventPlan::PassThrough`] |
//! | Preempt (Scheduled or Started) | [`EventPlan::DrainNow`]: until `NotBefore`, do-not-disrupt overridden, a replacement at once |
//! | Terminate, Started | [`EventPlan::DrainNow`] with no grace, no replacement asked (the pool controller replaces it if the pool still wants it: a Terminate is a delete someone asked for) |
//! | Redeploy, Terminate, Scheduled | [`EventPlan::DrainThenAck`] by `NotBefore` − `drainMargin` |
//! | Reboot, Freeze, Scheduled | by the pool's rule: [`EventPlan::DrainThenAck`] or [`EventPlan::LeaveAlone`] |
//! | Redeploy, Reboot, Freeze, Started | [`EventPlan::TooLate`]: the VM comes back by itself |
//! | a type nodewright does not know | [`EventPlan::PassThrough`] |
//!
//! A `NotBefore` that is unknown (blank or unreadable) counts as now. A maintenance window
//! never holds a drain: the event starts at `NotBefore` whether or not it is acknowledged, so
//! the pods must be gone by then. It only holds the acknowledgement ([`ack_at`]), which would
//! start the event earlier, and never past `NotBefore`.
//!
//! Times are Unix seconds.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::condition::PendingEvent;
use super::document::{EventStatus, EventType};
use super::policy::{EventAction, SPEC_FIELD, ScheduledEventsPolicy};
use crate::limits::short;
use crate::maintenance::{Gate, utc_words};

/// Below this many seconds left, a Preempt's drain does not wait for volumes to attach
/// elsewhere: the VM is gone before they would.
pub const SKIP_VOLUME_REATTACH_BELOW_SECONDS: i64 = 10;

/// A pod's termination grace when it names none: Kubernetes' default.
pub const DEFAULT_POD_GRACE_SECONDS: i64 = 30;

/// How many VMs a refusal to acknowledge names before it counts the rest.
const NAMED_AT_MOST: usize = 5;

/// What nodewright knows about the machine an event is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineFacts {
    /// Its pool asks for Spot VMs. Only the reason's words depend on it: a Preempt is acted on
    /// either way (Azure's notice says the VM goes, whatever nodewright believed).
    pub spot: bool,
    /// It is a machine of a pool nodewright manages.
    pub managed: bool,
}

/// The pool's maintenance windows at one instant, as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowView {
    /// A window is open, or none gates acknowledgements.
    pub open: bool,
    /// When the next window opens, when closed (`None`: none found).
    pub opens_at: Option<i64>,
}

impl WindowView {
    /// No window gates: always open.
    pub const UNGATED: Self = Self {
        open: true,
        opens_at: None,
    };

    /// The view of a maintenance [`Gate`].
    pub fn from_gate(gate: &Gate) -> Self {
        Self {
            open: gate.allows(),
            opens_at: gate.opens_at(),
        }
    }
}

/// What a workflow does about one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EventPlan {
    /// Drain at once, against the clock: the VM goes at `deadline` whatever happens.
    DrainNow(DrainNow),
    /// Drain by `drain_by`, then (when possible) acknowledge so that the event starts early.
    DrainThenAck(DrainThenAck),
    /// Do nothing: the pool's policy says the event is not worth a drain.
    LeaveAlone {
        /// Why, naming the policy's field.
        reason: String,
    },
    /// Do nothing: the event is under way and the VM comes back by itself.
    TooLate {
        /// Why.
        reason: String,
    },
    /// Published on the Node, not acted on.
    PassThrough {
        /// Why.
        reason: String,
    },
}

/// A drain against the clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainNow {
    /// When the VM goes: `NotBefore`, or now when that is unknown or has passed.
    pub deadline: i64,
    /// No pod gets more grace than this (the seconds left until `deadline`, never negative).
    pub grace_cap_seconds: i64,
    /// PodDisruptionBudgets are honoured until then, pods deleted past it.
    pub honour_pdbs_until: i64,
    /// Pods and the Node marked do-not-disrupt are drained all the same.
    pub override_do_not_disrupt: bool,
    /// Ask for the replacement machine now, not after the drain.
    pub replace_at_once: bool,
    /// Do not wait for the pods' volumes to attach elsewhere (under
    /// [`SKIP_VOLUME_REATTACH_BELOW_SECONDS`] left).
    pub skip_volume_reattach_wait: bool,
    /// In words, for the status.
    pub reason: String,
}

/// A drain ahead of an event, then its acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainThenAck {
    /// The drain's deadline: `NotBefore` − `drainMargin`, or `NotBefore` (never before now)
    /// when less than the margin is left.
    pub drain_by: i64,
    /// When the event starts unacknowledged (now when unknown).
    pub not_before: i64,
    /// Whether to acknowledge once every VM the event names is ready ([`may_acknowledge`]);
    /// false for an event read from a condition, which nothing can acknowledge.
    pub ack_when_all_ready: bool,
    /// The VMs the event names (an acknowledgement starts it on all of them).
    pub resources: Vec<String>,
    /// In words, for the status.
    pub reason: String,
}

/// When to acknowledge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AckTime {
    /// Now.
    Now,
    /// When the maintenance window opens (always before `NotBefore`).
    At(i64),
    /// Never: the event starts by itself at `at` (its `NotBefore`).
    LetItStart {
        /// `NotBefore`.
        at: i64,
        /// Why, for the status.
        reason: String,
    },
    /// The plan acknowledges nothing.
    NotAsked,
}

/// The plan for `event` on a machine with `facts`, under the pool's `policy`, at `now`.
pub fn decide(
    event: &PendingEvent,
    policy: &ScheduledEventsPolicy,
    facts: MachineFacts,
    now: i64,
) -> EventPlan {
    let scheduled = &event.event;
    let kind = &scheduled.event_type;
    if !facts.managed {
        return EventPlan::PassThrough {
            reason: format!(
                "{kind} {}: not a machine of a pool nodewright manages",
                scheduled.id
            ),
        };
    }
    let started = match &scheduled.status {
        EventStatus::Scheduled => false,
        EventStatus::Started => true,
        EventStatus::Other(status) => {
            return EventPlan::PassThrough {
                reason: format!(
                    "{kind} {} has status {}, neither Scheduled nor Started",
                    scheduled.id,
                    crate::text::quoted(status)
                ),
            };
        }
    };
    let not_before = if started {
        now
    } else {
        scheduled.not_before.unwrap_or(now)
    };
    match kind {
        EventType::Preempt => {
            let what = if facts.spot {
                "Spot eviction (Preempt)".to_owned()
            } else {
                "Preempt of a machine not known as Spot (Azure's notice wins)".to_owned()
            };
            EventPlan::DrainNow(drain_now(&what, not_before, now, true))
        }
        EventType::Terminate if started => {
            EventPlan::DrainNow(drain_now("Terminate under way", not_before, now, false))
        }
        EventType::Redeploy if started => too_late(kind),
        EventType::Redeploy | EventType::Terminate => {
            EventPlan::DrainThenAck(drain_then_ack(event, policy, not_before, now))
        }
        EventType::Reboot | EventType::Freeze => {
            if let Some(reason) = left_alone(event, policy) {
                return EventPlan::LeaveAlone { reason };
            }
            if started {
                return too_late(kind);
            }
            EventPlan::DrainThenAck(drain_then_ack(event, policy, not_before, now))
        }
        EventType::Other(_) => EventPlan::PassThrough {
            reason: format!(
                "{} is not an event type nodewright acts on (published only)",
                crate::text::quoted(kind.as_str())
            ),
        },
    }
}

/// When to acknowledge the event of `plan`, its Node ready at `ready_at` (the drain done and
/// every VM it names ready), with the maintenance `window` as it is at `ready_at`: at once in an
/// open window, at the next opening when that comes before `NotBefore`, else never (the event
/// starts by itself at `NotBefore`). Never at or after `NotBefore`: acknowledging then gains
/// nothing.
pub fn ack_at(plan: &EventPlan, ready_at: i64, window: WindowView) -> AckTime {
    let EventPlan::DrainThenAck(plan) = plan else {
        return AckTime::NotAsked;
    };
    if !plan.ack_when_all_ready {
        return AckTime::NotAsked;
    }
    let not_before = plan.not_before;
    if ready_at >= not_before {
        return AckTime::LetItStart {
            at: not_before,
            reason: format!(
                "ready at {}, not before NotBefore {}: the event starts by itself",
                utc_words(ready_at),
                utc_words(not_before)
            ),
        };
    }
    if window.open {
        return AckTime::Now;
    }
    match window.opens_at {
        Some(opens_at) if opens_at < not_before => AckTime::At(opens_at.max(ready_at)),
        Some(opens_at) => AckTime::LetItStart {
            at: not_before,
            reason: format!(
                "the maintenance window opens at {}, after NotBefore {}: the event starts by itself",
                utc_words(opens_at),
                utc_words(not_before)
            ),
        },
        None => AckTime::LetItStart {
            at: not_before,
            reason: format!(
                "no maintenance window opens before NotBefore {}: the event starts by itself",
                utc_words(not_before)
            ),
        },
    }
}

/// Whether the event naming `resources` may be acknowledged, `ready` holding the VMs that are
/// (drained, or not nodewright's to drain; compared without regard to case). An acknowledgement
/// starts the event on every VM it names, so each must be.
///
/// # Errors
///
/// The VMs not ready, in words (at most five named), or that the event names none.
pub fn may_acknowledge(resources: &[String], ready: &BTreeSet<String>) -> Result<(), String> {
    if resources.is_empty() {
        return Err(
            "the event names no VM: nothing says whom an acknowledgement would start it on"
                .to_owned(),
        );
    }
    let ready: BTreeSet<String> = ready.iter().map(|vm| vm.to_ascii_lowercase()).collect();
    let not_ready: Vec<&str> = resources
        .iter()
        .map(|vm| vm.trim())
        .filter(|vm| !ready.contains(&vm.to_ascii_lowercase()))
        .collect();
    if not_ready.is_empty() {
        return Ok(());
    }
    let mut named = not_ready
        .iter()
        .take(NAMED_AT_MOST)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if not_ready.len() > NAMED_AT_MOST {
        named.push_str(&format!(" and {} more", not_ready.len() - NAMED_AT_MOST));
    }
    let verb = if not_ready.len() == 1 { "is" } else { "are" };
    Err(format!(
        "{} of the {} VMs the event names {verb} not ready ({named}); an acknowledgement would \
         start the event on all of them",
        not_ready.len(),
        resources.len()
    ))
}

/// The termination grace of a pod asking for `pod_grace` seconds (`None`: Kubernetes' 30),
/// evicted at `now` for an event at `not_before`: its own, cut to the time left; never negative,
/// never more than its own.
pub fn grace_for(pod_grace: Option<i64>, now: i64, not_before: i64) -> i64 {
    let own = pod_grace.unwrap_or(DEFAULT_POD_GRACE_SECONDS).max(0);
    let left = not_before.saturating_sub(now).max(0);
    own.min(left)
}

/// A drain against the clock until `not_before`, for `what`.
fn drain_now(what: &str, not_before: i64, now: i64, replace_at_once: bool) -> DrainNow {
    let deadline = not_before.max(now);
    let left = deadline.saturating_sub(now);
    let skip_volume_reattach_wait = left < SKIP_VOLUME_REATTACH_BELOW_SECONDS;
    let mut reason = format!(
        "{what} at {}, {left}s left: drain now, each pod's grace cut to the time left, \
         do-not-disrupt overridden",
        utc_words(deadline)
    );
    if skip_volume_reattach_wait {
        reason.push_str(", volumes not waited for");
    }
    if replace_at_once {
        reason.push_str(", a replacement asked for at once");
    }
    DrainNow {
        deadline,
        grace_cap_seconds: left,
        honour_pdbs_until: deadline,
        override_do_not_disrupt: true,
        replace_at_once,
        skip_volume_reattach_wait,
        reason,
    }
}

/// A drain ending `drainMargin` before `not_before` (all the time left when less is), then an
/// acknowledgement when `event` can have one.
fn drain_then_ack(
    event: &PendingEvent,
    policy: &ScheduledEventsPolicy,
    not_before: i64,
    now: i64,
) -> DrainThenAck {
    let margin = i64::try_from(policy.drain_margin.as_secs()).unwrap_or(i64::MAX);
    let with_margin = not_before.saturating_sub(margin);
    let drain_by = if with_margin > now {
        with_margin
    } else {
        not_before.max(now)
    };
    let ack_when_all_ready = event.can_acknowledge();
    let then = if ack_when_all_ready {
        "then acknowledge once every VM it names is ready"
    } else {
        "no acknowledgement (read from a Node condition)"
    };
    DrainThenAck {
        drain_by,
        not_before,
        ack_when_all_ready,
        resources: event.event.resources.clone(),
        reason: format!(
            "{} {} not before {}: drain by {}, {then}",
            event.event.event_type,
            event.event.id,
            utc_words(not_before),
            utc_words(drain_by)
        ),
    }
}

/// Why the pool's rule leaves `event` (a Reboot or Freeze) alone, if it does.
fn left_alone(event: &PendingEvent, policy: &ScheduledEventsPolicy) -> Option<String> {
    let kind = &event.event.event_type;
    let (name, rule) = policy.rule_for(kind)?;
    if rule.action == EventAction::Ignore {
        return Some(format!("{SPEC_FIELD}.{name}.action is ignore"));
    }
    let ignore_below = rule.ignore_below?;
    let seconds = event.event.duration_seconds?;
    (std::time::Duration::from_secs(seconds) <= ignore_below).then(|| {
        format!(
            "{kind} of {} is at most {SPEC_FIELD}.{name}.ignoreBelow ({})",
            short(std::time::Duration::from_secs(seconds)),
            short(ignore_below)
        )
    })
}

/// The plan for an event of `kind` already under way, after which the VM comes back.
fn too_late(kind: &EventType) -> EventPlan {
    EventPlan::TooLate {
        reason: format!(
            "{kind} is under way: the machine comes back by itself, and a drain now would only \
             move pods that are stopped already"
        ),
    }
}

#[cfg(test)]
mod tests;
