//! Machine health: the pool's policy ([`HealthPolicy`], from `spec.health`) and the verdict on
//! one machine at one instant ([`judge`]).
//!
//! A verdict depends only on what was observed and `now`, so the pool controller's decisions are
//! a pure function of its observations (and replay the same). A condition that holds but not yet
//! for its timeout is [`Verdict::Pending`] with the instant it turns unhealthy, so the controller
//! wakes up then instead of polling.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::machines::{Machine, WorkKind};
use super::timestamp::rfc3339;
use crate::pool::Amount;
use crate::time::deadline_after;

/// When a machine is unhealthy and how the pool controller remediates it (`spec.health`,
/// validated). [`Default`] is what a pool without `spec.health` gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthPolicy {
    /// Node conditions that make a machine unhealthy once they held for their timeout.
    pub unhealthy_conditions: Vec<UnhealthyCondition>,
    /// Above this many unhealthy machines nothing is remediated (a percentage of the pool,
    /// rounded down, as Cluster API's `maxUnhealthy`).
    pub max_unhealthy: Amount,
    /// Remediations at once, at least 1.
    pub max_in_flight: u32,
    /// A Node whose Lease was not renewed for this long is unhealthy; `None`: the Lease is not
    /// checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_timeout: Option<Duration>,
    /// The ladder, tried in order; never empty.
    pub remediation: Vec<Rung>,
    /// How long each rung (restart, redeploy) gets to bring a machine back before the next.
    pub remediation_timeout: Duration,
}

impl Default for HealthPolicy {
    /// `Ready=False` 5m, `Ready=Unknown` 5m, `KernelDeadlock=True` 0s; maxUnhealthy 40%;
    /// maxInFlight 1; no Lease check; `[replace]`; remediationTimeout 10m.
    fn default() -> Self {
        let condition = |type_: &str, status: &str, secs: u64| UnhealthyCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            timeout: Duration::from_secs(secs),
        };
        Self {
            unhealthy_conditions: vec![
                condition("Ready", "False", 300),
                condition("Ready", "Unknown", 300),
                condition("KernelDeadlock", "True", 0),
            ],
            max_unhealthy: Amount::Percent(40),
            max_in_flight: 1,
            lease_timeout: None,
            remediation: vec![Rung::Replace],
            remediation_timeout: Duration::from_secs(600),
        }
    }
}

/// A Node condition that makes its machine unhealthy once it held for `timeout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyCondition {
    /// The condition's type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// How long it must hold (zero: at once).
    pub timeout: Duration,
}

/// One rung of the remediation ladder, mildest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rung {
    /// Restart the VM (Azure `restart`): the machine keeps its disk and Node.
    Restart,
    /// Redeploy the VM to another host (Azure `redeploy`): the machine keeps its disk and Node.
    Redeploy,
    /// Delete the machine (drained within its PodDisruptionBudgets); the controller creates a
    /// new one from the current template.
    Replace,
}

impl Rung {
    /// Every rung, in the order a ladder must keep.
    pub const ALL: [Rung; 3] = [Rung::Restart, Rung::Redeploy, Rung::Replace];

    /// The rung written `text` in a pool file (`restart`, `redeploy`, `replace`), if any.
    pub fn parse(text: &str) -> Option<Rung> {
        Rung::ALL.into_iter().find(|rung| rung.as_str() == text)
    }

    /// The rung as a pool file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Rung::Restart => "restart",
            Rung::Redeploy => "redeploy",
            Rung::Replace => "replace",
        }
    }
}

impl fmt::Display for Rung {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one machine is doing at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum Verdict {
    /// Nothing wrong.
    Healthy,
    /// Not judged yet: being created, or not registered and still inside the creation timeout.
    Starting {
        /// Until when (Unix seconds): the creation deadline.
        until: i64,
    },
    /// Will be unhealthy at `at` if nothing changes (a condition holding, not yet for its timeout).
    Pending {
        /// When (Unix seconds).
        at: i64,
        /// What holds, e.g. `Ready=False for 5m`.
        reason: String,
    },
    /// Unhealthy.
    Unhealthy {
        /// Why, for people, e.g. `KernelDeadlock=True` or `its VM is deallocated`.
        reason: String,
        /// Since when (Unix seconds).
        since: i64,
    },
}

/// Judges one machine at `now` (Unix seconds).
///
/// Rules, each giving an unhealthy or pending candidate:
/// - a create in flight (work `Create`): [`Verdict::Starting`] until its start plus
///   `creation_timeout_secs`, and nothing else is judged (the create bounds itself);
/// - VM provisioning `Failed`: unhealthy, "its VM failed to provision" (since the VM's
///   creation: the moment of the failure is not observed);
/// - VM power state `stopped`, `stopping`, `deallocated` or `deallocating`: unhealthy, "its VM
///   is <state>" (since the VM's creation, likewise);
/// - no VM but a Node: unhealthy, "its VM is gone" (since the Node's last Ready transition);
/// - a VM but no Node: [`Verdict::Starting`] until `created_at + creation_timeout_secs`, then
///   unhealthy "its Node never registered within <timeout>" since that deadline;
/// - each condition of the policy that the Node holds (type and status equal; its `since` never
///   before the VM's creation): pending until `since + timeout`, then unhealthy since then,
///   "<Type>=<Status> for <timeout>" (just "<Type>=<Status>" for a zero timeout). A Node
///   observed without a `Ready` entry in its conditions (recorded before they were read) holds
///   `Ready` `True` or `False` from its `ready` flag;
/// - with a Lease timeout and a stale Lease (renewed last at `t`): pending until `t + timeout`,
///   then unhealthy "its Node Lease was not renewed since <RFC 3339 of t>".
///
/// The earliest unhealthy candidate wins, else the earliest pending one, else a machine without
/// a Node is starting, else it is healthy.
pub fn judge(
    machine: &Machine,
    policy: &HealthPolicy,
    creation_timeout_secs: i64,
    now: i64,
) -> Verdict {
    let creation_timeout = Duration::from_secs(u64::try_from(creation_timeout_secs).unwrap_or(0));
    if let Some(work) = machine.work.as_ref().filter(|w| w.kind == WorkKind::Create) {
        return Verdict::Starting {
            until: deadline_after(work.since, creation_timeout),
        };
    }
    let mut candidates = Candidates::default();
    if let Some(vm) = &machine.vm {
        if vm.provisioning_state.eq_ignore_ascii_case("Failed") {
            candidates.unhealthy("its VM failed to provision".to_owned(), vm.created_at);
        }
        if let Some(state) = vm
            .power_state
            .as_deref()
            .filter(|s| super::machines::is_down(s))
        {
            candidates.unhealthy(
                format!("its VM is {}", state.to_ascii_lowercase()),
                vm.created_at,
            );
        }
    }
    let Some(node) = &machine.node else {
        let until = deadline_after(machine.created_at, creation_timeout);
        if now < until {
            return candidates.verdict().unwrap_or(Verdict::Starting { until });
        }
        candidates.unhealthy(
            format!(
                "its Node never registered within {}",
                crate::limits::short(creation_timeout)
            ),
            until,
        );
        return candidates.verdict().unwrap_or(Verdict::Healthy);
    };
    if machine.vm.is_none() {
        candidates.unhealthy("its VM is gone".to_owned(), node.ready_since);
    }
    let has_ready = node.conditions.iter().any(|c| c.type_ == "Ready");
    let synthesized_ready = crate::rollout::NodeCondition {
        type_: "Ready".to_owned(),
        status: if node.ready { "True" } else { "False" }.to_owned(),
        since: node.ready_since,
    };
    let held = node
        .conditions
        .iter()
        .chain((!has_ready).then_some(&synthesized_ready));
    for condition in held {
        for rule in policy
            .unhealthy_conditions
            .iter()
            .filter(|rule| rule.type_ == condition.type_ && rule.status == condition.status)
        {
            let since = condition.since.max(machine.created_at);
            let at = deadline_after(since, rule.timeout);
            let reason = if rule.timeout.is_zero() {
                format!("{}={}", rule.type_, rule.status)
            } else {
                format!(
                    "{}={} for {}",
                    rule.type_,
                    rule.status,
                    crate::limits::short(rule.timeout)
                )
            };
            candidates.timed(reason, at, now);
        }
    }
    if let (Some(timeout), Some(renewed)) = (policy.lease_timeout, node.lease_stale_since) {
        let reason = format!("its Node Lease was not renewed since {}", rfc3339(renewed));
        candidates.timed(reason, deadline_after(renewed, timeout), now);
    }
    candidates.verdict().unwrap_or(Verdict::Healthy)
}

/// The unhealthy and pending findings on one machine so far: the earliest of each.
#[derive(Debug, Default)]
struct Candidates {
    unhealthy: Option<(i64, String)>,
    pending: Option<(i64, String)>,
}

impl Candidates {
    /// Unhealthy since `since`, for `reason`.
    fn unhealthy(&mut self, reason: String, since: i64) {
        if self.unhealthy.as_ref().is_none_or(|(at, _)| since < *at) {
            self.unhealthy = Some((since, reason));
        }
    }

    /// Unhealthy from `at` on: unhealthy when `now` reached it, else pending.
    fn timed(&mut self, reason: String, at: i64, now: i64) {
        if now >= at {
            self.unhealthy(reason, at);
        } else if self.pending.as_ref().is_none_or(|(when, _)| at < *when) {
            self.pending = Some((at, reason));
        }
    }

    /// The earliest unhealthy finding, else the earliest pending one.
    fn verdict(self) -> Option<Verdict> {
        match (self.unhealthy, self.pending) {
            (Some((since, reason)), _) => Some(Verdict::Unhealthy { reason, since }),
            (None, Some((at, reason))) => Some(Verdict::Pending { at, reason }),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests;
