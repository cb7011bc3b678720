//! What one round of RollingUpdate's loop does after it looked at the pool and planned
//! ([`after_look`]): end, wait for approval, start children, continue as a new run; and the
//! smaller choices around it: the canary's target ([`canary_target`]) and which Nodes carry
//! the outdated taint ([`to_mark_outdated`], [`to_clear_outdated`]).

use std::collections::BTreeSet;

use super::observed::ObservedMachine;
use super::phase::{PhaseEvent, RolloutPhase, next_phase};
use super::plan::Holdup;

/// What a round knows once it looked and planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// The rollout's phase when the round looked.
    pub phase: RolloutPhase,
    /// Whether children are in flight.
    pub in_flight: bool,
    /// Whether the plan found the rollout done (every machine updated, available, `replicas`).
    pub done: bool,
    /// Why the plan starts nothing.
    pub holdup: Option<Holdup>,
    /// Whether the history is long enough to continue as a new run.
    pub continue_due: bool,
    /// Whether a continue-as-new may leave children running: the next run finds them again by
    /// their workflow IDs (runs recorded before that waited for every child to end first).
    pub leave_children: bool,
    /// Whether machines of the new template still wait for the pool's drain settings
    /// ([`super::restamp`]): the rollout does not complete before.
    pub restamping: bool,
}

/// What the round does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterLook {
    /// Aborting and nothing in flight: the rollout ends `aborted`.
    EndAborted,
    /// Done and nothing in flight: the outdated taint comes off and the rollout ends
    /// `completed`.
    Complete,
    /// The rollout goes on.
    GoOn {
        /// The canary's target is reached: the rollout now awaits approval.
        await_approval: bool,
        /// Start the children the plan asks for (unless a cancellation came meanwhile).
        start_children: bool,
        /// The history is long and nothing in flight (or children may be left running):
        /// continue as a new run.
        continue_as_new: bool,
    },
}

/// Decides what the round does: an abort ends once nothing is in flight, a done rollout
/// completes once nothing is in flight and no machine waits for its drain settings (never while
/// aborting), a progressing rollout that
/// reached its canary with nothing in flight awaits approval, only a progressing rollout not
/// about to continue as new starts children, and it continues as new once nothing is in
/// flight, or at once when children may be left running (`leave_children`): the history stays
/// bounded however long a drain takes.
pub fn after_look(round: &Round) -> AfterLook {
    let aborting = round.phase == RolloutPhase::Aborting;
    if aborting && !round.in_flight {
        return AfterLook::EndAborted;
    }
    if round.done && !round.in_flight && !aborting && !round.restamping {
        return AfterLook::Complete;
    }
    let canary = round.holdup == Some(Holdup::CanaryReached) && !round.in_flight;
    let phase = match next_phase(round.phase, PhaseEvent::CanaryReached) {
        Some(awaiting) if canary => awaiting,
        _ => round.phase,
    };
    AfterLook::GoOn {
        await_approval: phase != round.phase,
        start_children: phase == RolloutPhase::Progressing && !round.continue_due,
        continue_as_new: round.continue_due && (!round.in_flight || round.leave_children),
    }
}

/// How many machines of the new template the plan aims at: the canary's size (at most
/// `replicas`) until the rollout is approved, else `replicas`.
pub fn canary_target(canary: Option<u32>, approved: bool, replicas: u32) -> u32 {
    match canary {
        Some(n) if !approved => n.min(replicas),
        _ => replicas,
    }
}

/// The machines whose Nodes get the outdated taint now: of another template than
/// `template_hash`, not tainted yet, and not already tainted by this run (`marked`).
pub fn to_mark_outdated<'a>(
    machines: &'a [ObservedMachine],
    template_hash: &str,
    marked: &BTreeSet<String>,
) -> Vec<&'a ObservedMachine> {
    machines
        .iter()
        .filter(|m| m.template_hash != template_hash && !m.tainted_outdated)
        .filter(|m| !marked.contains(&m.name))
        .collect()
}

/// The machines whose Nodes still carry the outdated taint (removed when the rollout
/// completes).
pub fn to_clear_outdated(machines: &[ObservedMachine]) -> Vec<&ObservedMachine> {
    machines.iter().filter(|m| m.tainted_outdated).collect()
}

#[cfg(test)]
mod tests;
