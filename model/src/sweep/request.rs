//! How an orphan sweep is asked for, and the progress it answers its `status` query with.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::approval::RefusedApproval;
use super::brake::{Brake, DEFAULT_BRAKE_PERCENT};
use crate::ClusterName;
use crate::limits;

/// Default cap on deletions a sweep makes without an `approve` signal.
pub const DEFAULT_MAX_DELETIONS: u32 = 10;
/// Default wait for an approval before the deletions are skipped.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(3600);
/// Default grace period: the default machine creation timeout (a create may take that long).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(20 * 60);
/// Default health timeout: a Node NotReady this long makes its machine unhealthy.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// Default number of deletions in flight at once.
pub const DEFAULT_PARALLELISM: u32 = 5;

/// The input of an OrphanSweep run (also what a schedule starts each run with).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepRequest {
    /// The cluster swept.
    pub cluster: ClusterName,
    /// Only report: delete and replace nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Replace unhealthy machines (otherwise they are reported).
    #[serde(default)]
    pub remediate: bool,
    /// More deletions than this wait for `approve`.
    #[serde(default = "default_max_deletions")]
    pub max_deletions: u32,
    /// How long to wait for `approve` before skipping the deletions.
    #[serde(default = "default_approval_timeout", with = "seconds")]
    pub approval_timeout: Duration,
    /// Nothing younger than this is an orphan.
    #[serde(default = "default_grace", with = "seconds")]
    pub grace: Duration,
    /// A Node NotReady this long makes its machine unhealthy.
    #[serde(default = "default_health_timeout", with = "seconds")]
    pub health_timeout: Duration,
    /// Deletions in flight at once.
    #[serde(default = "default_parallelism")]
    pub parallelism: u32,
    /// The plausibility brake: removing more than this percentage of the cluster's machines
    /// (and more than [`super::brake::BRAKE_MIN_COUNT`]) needs an approval naming the run.
    #[serde(default = "default_brake_percent")]
    pub brake_percent: u32,
}

impl SweepRequest {
    /// A sweep of `cluster` with every default.
    pub fn new(cluster: ClusterName) -> Self {
        Self {
            cluster,
            dry_run: false,
            remediate: false,
            max_deletions: DEFAULT_MAX_DELETIONS,
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            grace: DEFAULT_GRACE,
            health_timeout: DEFAULT_HEALTH_TIMEOUT,
            parallelism: DEFAULT_PARALLELISM,
            brake_percent: DEFAULT_BRAKE_PERCENT,
        }
    }
}

impl SweepRequest {
    /// How long the sweep waits for `approve`: `approval_timeout` brought within 1 s and
    /// [`limits::MAX_APPROVAL_TIMEOUT`] (the CLI refuses more; a request started by other means
    /// is clamped rather than trusted, as a Temporal timer cannot be longer than about 292 billion
    /// years and a wait of more than a day blocks every scheduled sweep).
    pub fn approval_wait(&self) -> Duration {
        self.approval_timeout
            .clamp(Duration::from_secs(1), limits::MAX_APPROVAL_TIMEOUT)
    }

    /// The brake's share in percent: `brake_percent` brought within
    /// [`limits::MAX_SWEEP_BRAKE_PERCENT`] (the CLI refuses more; a request started by other
    /// means is clamped rather than trusted).
    pub fn brake_share(&self) -> u32 {
        self.brake_percent.min(limits::MAX_SWEEP_BRAKE_PERCENT)
    }

    /// What the run does, for its first details line: `dry run`, `remediating` or
    /// `deleting orphans`.
    pub fn mode(&self) -> &'static str {
        match (self.dry_run, self.remediate) {
            (true, _) => "dry run",
            (false, true) => "remediating",
            (false, false) => "deleting orphans",
        }
    }

    /// How many removals run at once: `parallelism`, at least one.
    pub fn removals_at_once(&self) -> usize {
        usize::try_from(self.parallelism.max(1)).unwrap_or(1)
    }
}

fn default_brake_percent() -> u32 {
    DEFAULT_BRAKE_PERCENT
}

fn default_max_deletions() -> u32 {
    DEFAULT_MAX_DELETIONS
}
fn default_approval_timeout() -> Duration {
    DEFAULT_APPROVAL_TIMEOUT
}
fn default_grace() -> Duration {
    DEFAULT_GRACE
}
fn default_health_timeout() -> Duration {
    DEFAULT_HEALTH_TIMEOUT
}
fn default_parallelism() -> u32 {
    DEFAULT_PARALLELISM
}

/// Durations as whole seconds in JSON (readable in the Temporal UI and in schedule actions).
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(duration.as_secs())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_secs)
    }
}

/// Where a sweep is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SweepPhase {
    /// Checking that the Kubernetes API is healthy.
    Checking,
    /// Listing VMs, NICs, disks, Nodes, volumes and running workflows.
    Listing,
    /// More deletions than `max_deletions`: waiting for `approve`.
    AwaitingApproval,
    /// The plausibility brake holds the plan: waiting for an `approve` naming the run.
    Braked,
    /// Deleting orphans and replacing machines.
    Acting,
    /// Done.
    Done,
}

impl SweepPhase {
    /// The phase as the `NodewrightPhase` search attribute and the CLI show it.
    pub const fn as_str(self) -> &'static str {
        match self {
            SweepPhase::Checking => "checking",
            SweepPhase::Listing => "listing",
            SweepPhase::AwaitingApproval => "awaiting-approval",
            SweepPhase::Braked => "braked",
            SweepPhase::Acting => "acting",
            SweepPhase::Done => "done",
        }
    }

    /// Whether the sweep waits for an approval in this phase.
    pub const fn waits_for_approval(self) -> bool {
        matches!(self, SweepPhase::AwaitingApproval | SweepPhase::Braked)
    }
}

/// The answer to a sweep's `status` query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepStatus {
    /// Where it is.
    pub phase: SweepPhase,
    /// One line for people.
    pub summary: String,
    /// Resources and Nodes listed so far.
    pub seen: u32,
    /// Deletions and replacements planned.
    pub planned: u32,
    /// Of those, done.
    pub done: u32,
    /// Of those, failed.
    pub failed: u32,
    /// When awaiting approval: until when (RFC 3339), after which the deletions are skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_deadline: Option<String>,
    /// The planned removals by action and kind (`delete vm`, `delete nic`, `replace vm`...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plan: BTreeMap<String, u32>,
    /// When the plausibility brake holds (or held) the plan: why, and its counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brake: Option<Brake>,
    /// Approvals refused (another run, another count, not waiting), the newest last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_approvals: Vec<RefusedApproval>,
}

impl SweepStatus {
    /// The status of a sweep that has just started.
    pub fn starting() -> Self {
        Self {
            phase: SweepPhase::Checking,
            summary: "checking the Kubernetes API".to_owned(),
            seen: 0,
            planned: 0,
            done: 0,
            failed: 0,
            approval_deadline: None,
            plan: BTreeMap::new(),
            brake: None,
            refused_approvals: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_with_only_a_cluster_takes_every_default_and_durations_are_seconds() {
        let request: SweepRequest = serde_json::from_str(r#"{"cluster":"prod"}"#).unwrap();
        assert_eq!(
            request,
            SweepRequest::new(ClusterName::parse("cluster", "prod").unwrap())
        );
        let json = serde_json::to_value(&request).unwrap();
        assert_eq!(json["grace"], 1200);
        assert_eq!(json["healthTimeout"], 600);
        assert_eq!(json["approvalTimeout"], 3600);
        assert_eq!(json["maxDeletions"], 10);
    }

    #[test]
    fn the_approval_wait_is_clamped_to_its_bounds() {
        let mut request: SweepRequest =
            serde_json::from_str(r#"{"cluster":"prod","approvalTimeout":18446744073709551615}"#)
                .unwrap();
        assert_eq!(request.approval_wait(), limits::MAX_APPROVAL_TIMEOUT);
        request.approval_timeout = Duration::ZERO;
        assert_eq!(request.approval_wait(), Duration::from_secs(1));
        request.approval_timeout = Duration::from_secs(1800);
        assert_eq!(request.approval_wait(), Duration::from_secs(1800));
    }
}

#[cfg(test)]
mod properties {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Whatever a request carries, the approval wait is a timer Temporal can take, within
        /// its documented bounds, and the brake's share never exceeds its maximum.
        #[test]
        fn waits_and_shares_stay_within_bounds(secs in any::<u64>(), nanos in 0u32..1_000_000_000, percent in any::<u32>()) {
            let mut request = SweepRequest::new(ClusterName::parse("cluster", "prod").map_err(|e| TestCaseError::fail(e.to_string()))?);
            request.approval_timeout = Duration::new(secs, nanos);
            request.brake_percent = percent;
            let wait = request.approval_wait();
            prop_assert!(wait >= Duration::from_secs(1) && wait <= limits::MAX_APPROVAL_TIMEOUT);
            prop_assert!(request.brake_share() <= limits::MAX_SWEEP_BRAKE_PERCENT);
        }
    }
}
