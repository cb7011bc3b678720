//! What a PoolController run is given and what it is asked while it runs: its start input
//! ([`ControllerRequest`], carried through continue-as-new with [`Carried`]), the `apply`,
//! `scale` and `delete` updates, and the back-off after failed creates.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::remediation::Remediation;
use super::status::{Action, Condition};
use crate::ClusterName;
use crate::pool::ValidPool;

/// How often the controller lists the pool's VMs when nothing else makes it look (and the
/// longest a Node watch waits before it answers "unchanged").
pub const DEFAULT_OBSERVE_INTERVAL: Duration = Duration::from_secs(60);

/// History events after which the controller continues as a new run, once no child is in
/// flight.
pub const DEFAULT_HISTORY_LIMIT: u32 = 2_000;

/// The input of PoolController: the cluster, the pool as it should be, and what the run
/// before it left (after continue-as-new).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerRequest {
    /// The cluster.
    pub cluster: ClusterName,
    /// The pool as it should be.
    pub pool: ValidPool,
    /// Start paused: observe and report, act on nothing.
    #[serde(default)]
    pub paused: bool,
    /// How often the pool's VMs are listed when nothing else makes the controller look.
    #[serde(default = "default_observe_interval")]
    pub observe_interval: Duration,
    /// History events after which the controller continues as a new run.
    #[serde(default = "default_history_limit")]
    pub history_limit: u32,
    /// Set by continue-as-new: what the run before carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried: Option<Box<Carried>>,
}

fn default_observe_interval() -> Duration {
    DEFAULT_OBSERVE_INTERVAL
}

fn default_history_limit() -> u32 {
    DEFAULT_HISTORY_LIMIT
}

impl ControllerRequest {
    /// How long the controller waits between VM listings when nothing wakes it:
    /// `observe_interval` brought within 1 s and [`crate::limits::MAX_OBSERVE_INTERVAL`].
    pub fn observe_wait(&self) -> Duration {
        self.observe_interval
            .clamp(Duration::from_secs(1), crate::limits::MAX_OBSERVE_INTERVAL)
    }
}

/// What one run of the controller hands the next (continue-as-new happens only when no child
/// is in flight, so no child is carried).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Carried {
    /// The remediations in progress.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remediations: Vec<Remediation>,
    /// The conditions, so their transition times survive.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The last actions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_actions: Vec<Action>,
    /// Failed creates in a row (for the back-off).
    #[serde(default)]
    pub create_failures: u32,
    /// No create before this Unix second (the back-off after failed creates).
    #[serde(default)]
    pub creates_after: i64,
    /// The pool is being deleted (`pool delete`): every machine goes, then the run ends.
    #[serde(default)]
    pub deleting: bool,
    /// How many runs came before this one.
    #[serde(default)]
    pub runs_before: u32,
    /// A rollout asked for (`pool rollout`, `pool rollback`) that has not started yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<super::rollouts::RolloutOptions>,
    /// A template whose rollout ended without completing: not rolled to again on the
    /// controller's own account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_template: Option<String>,
    /// The pool's templates as the last rollout left them.
    #[serde(default)]
    pub history: crate::rollout::PoolHistory,
    /// The pool's image versions (an image written without a concrete version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<crate::image::PoolImage>,
    /// The offerings Azure refused for want of room, set aside until their time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<crate::capacity::Exhausted>,
    /// Spot machines Azure evicted, by zone.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub evictions: std::collections::BTreeMap<String, u32>,
}

/// `pool image pin|unpin|update`: what an operator asks of the pool's image versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ImageOrder {
    /// Hold the image at its current version: `spec.imageUpdate` moves it no more.
    Pin,
    /// Let `spec.imageUpdate` move it again.
    Unpin,
    /// Roll to the newest eligible version the last check found, now (an operator's rollout).
    Update,
}

/// `pool apply` to a running controller: the pool as it should be from now on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyRequest {
    /// The pool (its name must be the controller's).
    pub pool: ValidPool,
    /// Only say what would change.
    #[serde(default)]
    pub dry_run: bool,
}

/// How a PoolController run ended (it ends only when the pool is deleted or orphaned).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerResult {
    /// The pool.
    pub pool: String,
    /// `deleted` (every machine drained and deleted) or `orphaned` (machines left as they are).
    pub ended: String,
    /// The last status.
    pub status: super::status::PoolStatusDocument,
}

/// `pool scale`: the new number of machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleRequest {
    /// The new `replicas`, at most [`crate::limits::MAX_REPLICAS`].
    pub replicas: u32,
}

/// `pool delete`: drain and delete every machine then end, or (`orphan`) end at once and leave
/// the machines as they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteRequest {
    /// End the controller and leave every machine.
    #[serde(default)]
    pub orphan: bool,
}

/// What an `apply` or `scale` changes, as the controller will act on it: for `pool apply`'s
/// output and `--dry-run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Changes {
    /// `replicas` before and after, when it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<(u32, u32)>,
    /// The template hash before and after, when it changes (a rollout will start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<(String, String)>,
    /// Other settings that change (strategy, drain, timeouts, health, headroom, maintenance,
    /// imageUpdate), by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<String>,
}

impl Changes {
    /// What changes from `before` to `after`.
    pub fn between(before: &ValidPool, after: &ValidPool) -> Self {
        let mut settings = Vec::new();
        if before.strategy != after.strategy {
            settings.push("strategy".to_owned());
        }
        if before.drain != after.drain {
            settings.push("drain".to_owned());
        }
        if before.timeouts != after.timeouts {
            settings.push("timeouts".to_owned());
        }
        if before.health != after.health {
            settings.push("health".to_owned());
        }
        if before.headroom != after.headroom {
            settings.push("headroom".to_owned());
        }
        if before.maintenance != after.maintenance {
            settings.push("maintenance".to_owned());
        }
        if before.image_update != after.image_update {
            settings.push("imageUpdate".to_owned());
        }
        Self {
            replicas: (before.replicas != after.replicas)
                .then_some((before.replicas, after.replicas)),
            template: (before.template_hash != after.template_hash)
                .then(|| (before.template_hash.clone(), after.template_hash.clone())),
            settings,
        }
    }

    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.replicas.is_none() && self.template.is_none() && self.settings.is_empty()
    }

    /// One line per change, for people: `replicas 3 → 5`, `template 1a2b3c → 4d5e6f (a rollout
    /// starts)`, `strategy, health changed`; `nothing changes` when empty.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some((from, to)) = self.replicas {
            let what = if to > from {
                format!("{} machine(s) to create", to - from)
            } else {
                format!("{} machine(s) to delete", from - to)
            };
            lines.push(format!("replicas {from} → {to}: {what}"));
        }
        if let Some((from, to)) = &self.template {
            lines.push(format!("template {from} → {to}: a rollout starts"));
        }
        if !self.settings.is_empty() {
            lines.push(format!("{} changed", self.settings.join(", ")));
        }
        if lines.is_empty() {
            lines.push("nothing changes".to_owned());
        }
        lines
    }
}

/// How long the controller waits before creating again after `failures` failed creates in a
/// row: 30 s doubling up to 10 minutes; none after a success.
pub fn create_backoff(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let doublings = failures.saturating_sub(1).min(5);
    Duration::from_secs(30u64 << doublings).min(Duration::from_secs(600))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_setting_a_file_can_change_is_named() {
        let before = crate::pool::from_yaml(include_str!("../../../examples/pools/workers.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut after = before.clone();
        after.headroom.vcpus = 4;
        after.image_update.policy = crate::image::ImageUpdatePolicy::Pinned;
        after.maintenance = Some(crate::maintenance::MaintenanceSpec::default());
        let changes = Changes::between(&before, &after);
        assert_eq!(changes.settings, ["headroom", "maintenance", "imageUpdate"]);
        assert!(changes.replicas.is_none() && changes.template.is_none());
        assert!(Changes::between(&before, &before).is_empty());
    }

    use super::*;

    #[test]
    fn creates_back_off_from_30_seconds_to_10_minutes() {
        let table = [
            (0, 0),
            (1, 30),
            (2, 60),
            (3, 120),
            (4, 240),
            (5, 480),
            (6, 600),
            (60, 600),
        ];
        for (failures, secs) in table {
            assert_eq!(
                create_backoff(failures),
                Duration::from_secs(secs),
                "{failures}"
            );
        }
    }
}
