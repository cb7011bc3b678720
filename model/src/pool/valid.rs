//! A pool that passed validation: what workflows take as input.
//!
//! Durations are parsed, percentages are [`Amount`]s and the template carries its hash, so no
//! workflow ever parses a string or meets a value validation would have refused.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::amount::Amount;
use super::spec::MachineTemplate;

/// A validated pool: only [`super::validate()`] builds one from a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidPool {
    /// The pool's name (`metadata.name`), at most [`super::MAX_POOL_NAME_LEN`] characters.
    pub name: String,
    /// How many machines the pool should have.
    pub replicas: u32,
    /// The machine template, as written (with the parser's defaults filled in).
    pub template: MachineTemplate,
    /// [`super::template_hash`] of `template`: the `nodewright.io/template` label and tag.
    pub template_hash: String,
    /// How a rolling update replaces machines.
    pub strategy: RolloutStrategy,
    /// How nodes are drained.
    pub drain: DrainPolicy,
    /// How long machines may take.
    pub timeouts: MachineTimeouts,
    /// When a machine is unhealthy and how the pool controller remediates it (`spec.health`);
    /// the defaults in inputs recorded before it existed. Not part of the template: changing it
    /// never changes the template hash.
    #[serde(default)]
    pub health: crate::controller::HealthPolicy,
    /// What a batch of creates keeps free (`spec.headroom.buffer`); none in inputs recorded
    /// before it existed. Not part of the template.
    #[serde(default, skip_serializing_if = "is_no_buffer")]
    pub headroom: crate::headroom::Buffer,
    /// When nodewright may disrupt the machines (`spec.maintenance`, checked); none: any time.
    /// Not part of the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<crate::maintenance::MaintenanceSpec>,
    /// What a pool controller does when a newer version of the image appears
    /// (`spec.imageUpdate`); the default (`notify`, hourly) in inputs recorded before it
    /// existed. Not part of the template.
    #[serde(default, skip_serializing_if = "crate::image::ImageUpdate::is_default")]
    pub image_update: crate::image::ImageUpdate,
    /// How long an offering Azure refused for capacity is set aside
    /// (`spec.offerings.unavailableFor`); none: [`crate::capacity::offering::OFFERING_TTL`].
    /// Not part of the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offering_ttl: Option<Duration>,
    /// What nodewright does about Azure's Scheduled Events (`spec.scheduledEvents`, checked,
    /// the defaults filled in). Not part of the template.
    #[serde(default, skip_serializing_if = "is_default_events")]
    pub scheduled_events: crate::scheduled_events::ScheduledEventsPolicy,
}

/// Whether a policy is the default one (left out of inputs, as before it existed).
fn is_default_events(policy: &crate::scheduled_events::ScheduledEventsPolicy) -> bool {
    *policy == crate::scheduled_events::ScheduledEventsPolicy::default()
}

impl ValidPool {
    /// How long an offering Azure refused for capacity is set aside.
    pub fn offering_ttl(&self) -> Duration {
        self.offering_ttl
            .unwrap_or(crate::capacity::offering::OFFERING_TTL)
    }
}

/// Whether a buffer keeps nothing (left out of inputs, as before it existed).
fn is_no_buffer(buffer: &crate::headroom::Buffer) -> bool {
    *buffer == crate::headroom::Buffer::default()
}

/// How a rolling update replaces machines (Kubernetes Deployment semantics).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutStrategy {
    /// Machines above `replicas` allowed during a rollout; percentages round up.
    pub max_surge: Amount,
    /// Machines below `replicas` allowed during a rollout; percentages round down.
    pub max_unavailable: Amount,
    /// Failed machine creations or deletions after which a rollout pauses itself; at least 1.
    pub max_failures: u32,
    /// A rollout that makes no progress for this long is marked stalled.
    pub progress_deadline: Duration,
    /// How long a machine's Node must have been Ready before the machine counts available
    /// (`spec.minReadySeconds` when set, else `spec.strategy.minReadySeconds`); zero in requests
    /// recorded before it existed.
    #[serde(default)]
    pub min_ready: Duration,
    /// How long each batch of new machines must stay healthy once available before the
    /// rollout goes on (`spec.strategy.soak`); zero (none) in requests recorded before it.
    #[serde(default, skip_serializing_if = "Duration::is_zero")]
    pub soak: Duration,
}

impl RolloutStrategy {
    /// [`min_ready`](Self::min_ready) in whole seconds, as the planner takes it.
    pub fn min_ready_secs(&self) -> i64 {
        i64::try_from(self.min_ready.as_secs()).unwrap_or(i64::MAX)
    }
}

/// How nodes are drained (machine-controller-manager's settings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainPolicy {
    /// After this long the drain switches to force mode.
    pub timeout: Duration,
    /// How often an eviction blocked by a PodDisruptionBudget is retried.
    pub pdb_retry_interval: Duration,
    /// How long to wait for a pod's volumes to detach, on top of its grace period.
    pub volume_detach_timeout: Duration,
    /// How long to wait for a moved volume to attach on its new node.
    pub volume_attach_timeout: Duration,
    /// A node unhealthy this long is drained in force mode.
    pub force_after_unhealthy: Duration,
    /// What a drain does with pods whose eviction loses data (`emptyDir` volumes, no
    /// controller); `None` for the default of the drain's purpose (see
    /// [`crate::drain::LocalDataPolicy::or_default_for`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_data: Option<crate::drain::LocalDataPolicy>,
    /// The drain rules (`spec.drain.rules`, checked): per pod, `Drain`, `Skip` or
    /// `WaitCompleted` and the tier; none for a pool without them (see
    /// [`crate::drain::plan_with_rules`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<crate::drain::DrainRule>,
    /// The drain's hard deadline, counted from its start (`spec.drain.terminationGracePeriod`,
    /// Karpenter's NodePool field): force mode comes at the latest then, whatever extends the
    /// deadline, and past it pods marked do-not-disrupt are deleted too (see
    /// [`crate::drain::hard_deadline`]). `None`: the drain's deadline is its hard deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<Duration>,
}

/// How long machines may take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineTimeouts {
    /// From the start of a create until the Node is Ready.
    pub creation: Duration,
    /// A Node NotReady this long is unhealthy.
    pub health: Duration,
}
