//! What `nodewright pool status` shows: the controller's query result ([`PoolStatusDocument`]),
//! its Kubernetes-style conditions ([`conditions`]) and its last actions ([`push_action`]).
//!
//! # Conditions
//!
//! Positive polarity, as Kubernetes recommends; `status` is `True` or `False`:
//!
//! | type | True (reason) | False (reason) |
//! |---|---|---|
//! | `Available` | available ≥ replicas − maxUnavailable (`MinimumReplicasAvailable`) | fewer (`MinimumReplicasUnavailable`) |
//! | `Progressing` | deleting the pool (`Deleting`), rolling out (`RollingOut`), creating (`ScalingUp`), deleting machines (`ScalingDown`), remediating (`Remediating`): the first that holds | held by the surprise guard (`Held`), or nothing in progress (`Steady`) |
//! | `RemediationAllowed` | unhealthy within maxUnhealthy (`WithinMaxUnhealthy`) | more (`TooManyUnhealthy`), or no maintenance window open with `applyTo: all` (`MaintenanceWindowClosed`) |
//! | `CapacityAvailable` | see [`super::CapacityView`] (`NotChecked`, `Fits`, a batch cut) | no room for a machine (`SubnetFull`, `QuotaExhausted`, `SizeRestricted`) |
//!
//! A condition keeps its `lastTransitionTime` while its status stays the same (its reason and
//! message may change); a new status takes `now`.

use serde::{Deserialize, Serialize};

use super::decide::{Decision, Unhealthy};
use super::remediation::Remediation;

/// The most actions [`PoolState::last_actions`] keeps.
pub const MAX_LAST_ACTIONS: usize = 20;

/// The pool controller's status query result, and the CLI's `--output json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatusDocument {
    /// The pool's name.
    pub pool: String,
    /// What is declared.
    pub spec: SpecView,
    /// What is observed and done.
    pub status: PoolState,
}

/// The declared state, as `pool status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecView {
    /// Declared machines.
    pub replicas: u32,
    /// The current template's hash.
    pub template_hash: String,
    /// Whether the controller is paused.
    pub paused: bool,
}

/// The observed state and what the controller did, Deployment-style.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolState {
    /// Machines that count.
    pub replicas: u32,
    /// Of them, Ready.
    pub ready_replicas: u32,
    /// Of them, Ready for minReadySeconds.
    pub available_replicas: u32,
    /// Of them, of the current template.
    pub updated_replicas: u32,
    /// Of them, unhealthy.
    pub unhealthy_replicas: u32,
    /// The unhealthy machines with their reasons.
    #[serde(default)]
    pub unhealthy: Vec<Unhealthy>,
    /// The remediations in progress.
    #[serde(default)]
    pub remediations: Vec<Remediation>,
    /// The last actions, newest last, at most [`MAX_LAST_ACTIONS`].
    #[serde(default)]
    pub last_actions: Vec<Action>,
    /// The conditions.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `Active`, `Paused`, `RollingOut` or `Deleting` (see [`super::Mode::phase`]).
    pub phase: String,
    /// When the controller last looked, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<String>,
    /// The maintenance windows (`spec.maintenance` with `applyTo: all`), in words: `open until
    /// …` or `closed; opens …`; none when none gates the pool's disruptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<String>,
    /// The image's versions (an image the file names without a concrete version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<crate::image::ImageStatus>,
    /// The offerings (size, zone, capacity type) Azure refused for want of room, set aside
    /// until their time (see [`crate::capacity::offering`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable_offerings: Vec<crate::capacity::Exhausted>,
    /// Spot machines Azure evicted since the controller started (carried across its runs), by
    /// availability zone (`none` for a pool without zones).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub evictions: std::collections::BTreeMap<String, u32>,
}

/// Something the controller did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    /// When, RFC 3339.
    pub at: String,
    /// What, for people.
    pub text: String,
}

/// A Kubernetes-style condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Available`, `Progressing` or `RemediationAllowed`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    /// CamelCase reason.
    pub reason: String,
    /// For people.
    pub message: String,
    /// When the status last changed, RFC 3339.
    pub last_transition_time: String,
}

/// What the controller has in flight besides this decision's actions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Creates in flight.
    pub creating: u32,
    /// Deletes in flight.
    pub deleting: u32,
    /// Remediations in flight.
    pub remediating: u32,
    /// A RollingUpdate child runs.
    pub rolling_out: bool,
    /// The pool is being deleted.
    pub deleting_pool: bool,
}

/// The conditions after `decision` (see the module documentation), keeping the
/// `lastTransitionTime` of each condition of `previous` whose status did not change.
/// `in_progress` is what was in flight before this decision; its actions are added.
pub fn conditions(
    previous: &[Condition],
    decision: &Decision,
    in_progress: Progress,
    max_unavailable: u32,
    replicas: u32,
    now_rfc3339: &str,
) -> Vec<Condition> {
    let number = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let needed = replicas.saturating_sub(max_unavailable);
    let available = decision.counts.available;
    let available_message = format!(
        "{available} of {replicas} machines available, at least {needed} needed (replicas {replicas} \
         minus maxUnavailable {max_unavailable})"
    );
    let available_condition = if available >= needed {
        ("True", "MinimumReplicasAvailable", available_message)
    } else {
        ("False", "MinimumReplicasUnavailable", available_message)
    };

    let creating = in_progress.creating.saturating_add(decision.create);
    let deleting = in_progress
        .deleting
        .saturating_add(number(decision.delete.len()));
    let remediating = in_progress
        .remediating
        .saturating_add(number(decision.remediate.len()));
    let progressing = if let Some(held) = &decision.held {
        ("False", "Held", held.clone())
    } else if in_progress.deleting_pool {
        (
            "True",
            "Deleting",
            format!("deleting the pool: {deleting} machines being deleted"),
        )
    } else if in_progress.rolling_out || decision.start_rollout {
        (
            "True",
            "RollingOut",
            format!(
                "rolling out: {} of {} machines of the current template",
                decision.counts.updated, decision.counts.replicas
            ),
        )
    } else if creating > 0 {
        (
            "True",
            "ScalingUp",
            format!(
                "creating {creating} machines ({} of {replicas})",
                decision.counts.replicas
            ),
        )
    } else if deleting > 0 {
        (
            "True",
            "ScalingDown",
            format!(
                "deleting {deleting} machines ({} of {replicas})",
                decision.counts.replicas
            ),
        )
    } else if remediating > 0 {
        (
            "True",
            "Remediating",
            format!("remediating {remediating} machines"),
        )
    } else {
        (
            "False",
            "Steady",
            format!("{replicas} machines as declared; nothing in progress"),
        )
    };

    let allowance = &decision.remediation_allowed;
    let remediation_condition = if allowance.allowed {
        ("True", "WithinMaxUnhealthy", allowance.message.clone())
    } else if allowance.window_closed {
        (
            "False",
            "MaintenanceWindowClosed",
            allowance.message.clone(),
        )
    } else {
        ("False", "TooManyUnhealthy", allowance.message.clone())
    };

    [
        ("Available", available_condition),
        ("Progressing", progressing),
        ("RemediationAllowed", remediation_condition),
    ]
    .into_iter()
    .map(|(type_, (status, reason, message))| {
        let last_transition_time = previous
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map_or_else(
                || now_rfc3339.to_owned(),
                |c| c.last_transition_time.clone(),
            );
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message,
            last_transition_time,
        }
    })
    .collect()
}

/// Appends an action at `at` (RFC 3339) and keeps the last [`MAX_LAST_ACTIONS`].
pub fn push_action(actions: &mut Vec<Action>, at: &str, text: String) {
    actions.push(Action {
        at: at.to_owned(),
        text,
    });
    if actions.len() > MAX_LAST_ACTIONS {
        let excess = actions.len() - MAX_LAST_ACTIONS;
        actions.drain(..excess);
    }
}

#[cfg(test)]
mod tests;
