//! The largest value nodewright accepts for every duration and count that comes from outside:
//! a pool file, the drain-policy Node annotation, a CLI flag, a signal or an update.
//!
//! Each maximum is one constant here, so that the pool file's validation, the CLI's flag checks,
//! the workflows' update validators and signal handlers all refuse (or clamp) at the same figure,
//! and the README can list them. A value beyond its maximum is always a mistake (a unit typed
//! wrong, `20h` for `20m`, or a number pasted into the wrong flag); the figures leave operators
//! every value they need and keep well inside what Temporal and chrono can represent, so no sum
//! of a start and such a duration can overflow (and [`crate::time::deadline_after`] saturates
//! anyway).
//!
//! Where a value cannot be refused — a signal has no answer — it is brought down to its maximum
//! with [`clamp`], and the workflow records the returned warning in its status.

use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// The longest pool name. A machine name is `<pool>-<5 characters>`, so a pool of at most 40
/// characters gives machine names of at most 46: within Kubernetes' 63 for Node names and label
/// values and Azure's 64 for VM and Linux computer names (`machine_name` asserts this).
pub const MAX_POOL_NAME_LEN: usize = crate::cluster::MAX_CLUSTER_NAME_LEN;

/// The most machines one pool may have (`spec.replicas`). Beyond a thousand machines a pool's
/// rollout lists and status outgrow a Temporal payload; split them over several pools.
pub const MAX_REPLICAS: u32 = 1000;

/// The largest count `spec.strategy.maxSurge` and `maxUnavailable` take, also as
/// `--max-surge`/`--max-unavailable` and in the `set_strategy` update: a budget of more machines
/// than the largest pool has means nothing more than one of [`MAX_REPLICAS`].
pub const MAX_BUDGET_COUNT: u32 = MAX_REPLICAS;

/// The largest `spec.strategy.maxFailures`: one failure per machine of the largest pool. A
/// rollout that has failed more often than that has a broken template and must pause.
pub const MAX_FAILURES: u32 = MAX_REPLICAS;

/// The longest `spec.strategy.progressDeadline`. It only marks a rollout stalled (it keeps
/// going); a rollout that made no progress for a day has long needed a person.
pub const MAX_PROGRESS_DEADLINE: Duration = DAY;

/// The longest `spec.strategy.minReadySeconds`: a machine that must wait more than an hour after
/// its Node is Ready before it counts available would hold a rollout far longer than any warm-up
/// (caches, DaemonSets, image pulls) takes; a Deployment has no maximum, nodewright keeps one so
/// that a unit typed wrong (`3600` meant as minutes) is refused.
pub const MAX_MIN_READY: Duration = HOUR;

/// The longest `spec.drain.timeout` (and the annotation's `timeout`). machine-controller-manager
/// defaults to 2 h; a drain still waiting on a PodDisruptionBudget after a day needs a person, and
/// `machine extend-drain` moves a running drain's deadline when one decides to wait longer.
pub const MAX_DRAIN_TIMEOUT: Duration = DAY;

/// The longest `spec.drain.pdbRetryInterval`: evictions blocked by a PodDisruptionBudget are
/// retried at least every 10 minutes, so a drain notices within that time that the budget allows
/// one (Kubernetes' own `kubectl drain` retries every 5 s).
pub const MAX_PDB_RETRY_INTERVAL: Duration = Duration::from_secs(10 * 60);

/// The longest `spec.drain.volumeDetachTimeout` and `volumeAttachTimeout`. Azure detaches and
/// attaches a managed disk within a minute or two; one still moving after an hour is stuck, and
/// force mode is what frees it.
pub const MAX_VOLUME_TIMEOUT: Duration = HOUR;

/// The longest `spec.drain.forceAfterUnhealthy`: a Node NotReady (or read-only) for a day runs
/// no pod that a graceful drain could still save.
pub const MAX_FORCE_AFTER_UNHEALTHY: Duration = DAY;

/// The longest `spec.drain.terminationGracePeriod` (the drain's hard deadline, Karpenter's
/// NodePool field, and the annotation's): a week, as long as `machine extend-drain` may move a
/// drain's deadline in one signal; past it a drain that is still held needs a person.
pub const MAX_TERMINATION_GRACE_PERIOD: Duration = Duration::from_secs(7 * 24 * 3600);

/// The most rules `spec.drain.rules` may hold: each pod is matched against them in order at
/// every look, and every distinct `order` is a tier the drain runs after the previous one; a pool
/// that needs more than 32 has rules a person can no longer read.
pub const MAX_DRAIN_RULES: usize = 32;

/// The most `matchLabels` pairs, `matchExpressions` requirements, or values of one requirement,
/// in one selector of a drain rule.
pub const MAX_SELECTOR_TERMS: usize = 16;

/// The longest drain-policy annotation nodewright writes (and reads), in bytes: the rules travel
/// in it, and a Node's annotations together may hold 256 KiB.
pub const MAX_DRAIN_ANNOTATION_BYTES: usize = 16 * 1024;

/// The longest `spec.timeouts.creation`. Azure creates a VM and the Node registers within
/// minutes (default 20 m); a machine not Ready after two hours will not become Ready, and meanwhile
/// it costs money and holds a rollout's budget.
pub const MAX_CREATION_TIMEOUT: Duration = Duration::from_secs(2 * 3600);

/// The shortest `spec.template.bootstrapToken.ttl`: a VM needs minutes to boot and join, and a
/// token that expires before its kubelet has used it only fails the join. (The pool's creation
/// timeout raises the floor further: a token must outlive the create it is minted for.)
pub const MIN_BOOTSTRAP_TOKEN_TTL: Duration = Duration::from_secs(5 * 60);

/// The longest `spec.template.bootstrapToken.ttl`: kubeadm's default for `kubeadm token
/// create`. A join token is deleted once its Node is Ready, and its TTL only bounds how long one
/// left by a killed run stays usable; longer is only a longer exposure.
pub const MAX_BOOTSTRAP_TOKEN_TTL: Duration = DAY;

/// The longest `spec.timeouts.health`: a Node NotReady for a day is broken for good.
pub const MAX_HEALTH_TIMEOUT: Duration = DAY;

/// The most one `machine extend-drain --by` (signal `extend_deadline`) moves a drain's deadline.
/// A week covers waiting for an application owner over a weekend; a Node that must stay
/// cordoned longer should be uncordoned and drained again later. A signal asking for more is
/// clamped to this, with a warning in the drain's status.
pub const MAX_DRAIN_EXTENSION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest `sweep --grace`: nothing younger is an orphan. Creates take at most
/// [`MAX_CREATION_TIMEOUT`]; a week keeps anything a person may still be looking at, and longer
/// only lets orphans cost money.
pub const MAX_SWEEP_GRACE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The shortest `sweep --grace`: the shortest creation timeout a pool may have. A grace of
/// nothing would make a resource an orphan the moment it exists; the grace floor
/// (`model::sweep::grace`) raises this to the cluster's longest creation timeout.
pub const MIN_SWEEP_GRACE: Duration = Duration::from_secs(10);

/// The shortest `sweep --health-timeout`: as the pool's shortest `spec.timeouts.health`. A Node
/// NotReady for an instant (a kubelet restart) is not broken.
pub const MIN_SWEEP_HEALTH_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest `sweep --health-timeout`: as the pool's [`MAX_HEALTH_TIMEOUT`].
pub const MAX_SWEEP_HEALTH_TIMEOUT: Duration = MAX_HEALTH_TIMEOUT;

/// The longest `sweep --approval-timeout`. A scheduled sweep's next runs are skipped while one
/// waits for approval, so a wait of more than a day would stop sweeping for that long.
pub const MAX_APPROVAL_TIMEOUT: Duration = DAY;

/// The longest `sweep schedule --every`: a sweep at least monthly (orphans cost money until one
/// runs).
pub const MAX_SWEEP_INTERVAL: Duration = Duration::from_secs(31 * 24 * 3600);

/// The most removals a sweep has in flight at once (`sweep --parallelism`). ARM writes go through
/// the worker's rate-limited queue, so more in flight only wait there.
pub const MAX_SWEEP_PARALLELISM: u32 = 50;

/// The largest `sweep --brake-percent`: a sweep removes at most this share of the cluster's
/// machines (VMs deleted or replaced) without an approval naming its run. More would let one
/// wrong listing take half a cluster.
pub const MAX_SWEEP_BRAKE_PERCENT: u32 = 50;

/// The most list pages a sweep follows per kind (VMs, NICs, disks: about 1,000 resources a
/// page; Nodes: 500): past it the sweep freezes instead of growing its history without end.
pub const MAX_SWEEP_LIST_PAGES: u32 = 100;

/// The longest `pool rollout --observe-interval` (a hidden test knob, default 15 s): a rollout
/// that looks at its pool less than hourly notices nothing in time.
pub const MAX_OBSERVE_INTERVAL: Duration = HOUR;

/// The longest hold by delete hooks (`machine delete --hook-timeout`): a hold is looked at
/// every minute after its first half hour, so six hours stay a few thousand history events.
pub const MAX_HOOK_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

/// The largest `pool rollout --history-limit` (a hidden test knob, default 2,000). Temporal
/// suggests continuing as new from 4,096 events and warns at 10,240; a rollout continues as new
/// before either.
pub const MAX_HISTORY_LIMIT: u32 = 4_000;

/// The longest `--timeout` of `preflight` and `pool status`, in seconds: the runs they wait for
/// have an execution timeout of 10 minutes, so waiting longer is waiting for nothing.
pub const MAX_CLI_WAIT_SECONDS: u64 = 600;

/// The most entries `spec.health.unhealthyConditions` may hold: each is checked against every
/// Node of the pool at every look; Cluster API's MachineHealthCheck pools need a handful.
pub const MAX_UNHEALTHY_CONDITIONS: usize = 16;

/// The longest `timeout` of an unhealthy condition (`spec.health.unhealthyConditions[].timeout`):
/// a condition that must hold for more than a day before the machine counts unhealthy leaves a
/// broken machine in the pool for that long.
pub const MAX_UNHEALTHY_CONDITION_TIMEOUT: Duration = DAY;

/// The most remediations a pool controller runs at once (`spec.health.maxInFlight`). More at once
/// is the cascade `maxUnhealthy` exists to prevent (a bad image replacing the fleet).
pub const MAX_REMEDIATIONS_IN_FLIGHT: u32 = 100;

/// The shortest `spec.health.leaseTimeout`: the kubelet renews its Node Lease about every 10 s,
/// so a shorter timeout would call a healthy Node unhealthy between two renewals.
pub const MIN_LEASE_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest `spec.health.leaseTimeout`: Kubernetes marks a Node Ready=Unknown 40 s after its
/// last renewal, so a Lease timeout of more than an hour finds nothing the Ready condition has
/// not found long before.
pub const MAX_LEASE_TIMEOUT: Duration = HOUR;

/// The shortest `spec.health.remediationTimeout`: a restart or redeploy takes minutes before the
/// Node is Ready again; judging it earlier moves to the next rung of the ladder for nothing.
pub const MIN_REMEDIATION_TIMEOUT: Duration = MINUTE;

/// The longest `spec.health.remediationTimeout`: a machine a restart has not brought back in six
/// hours will not come back; the next rung (or a person) has to act.
pub const MAX_REMEDIATION_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

/// `value` when it is at most `max`; otherwise `max` and a warning naming `field`, e.g.
/// `extend_deadline asked for 1000000h, more than the maximum 168h: used 168h`.
pub fn clamp(field: &str, value: Duration, max: Duration) -> (Duration, Option<String>) {
    if value <= max {
        return (value, None);
    }
    let warning = format!(
        "{field} asked for {}, more than the maximum {}: used {}",
        short(value),
        short(max),
        short(max)
    );
    (max, Some(warning))
}

/// `problem` when `value` is longer than `max`: `is longer than the maximum 168h`.
pub fn longer_than(value: Duration, max: Duration) -> Option<String> {
    (value > max).then(|| format!("is longer than the maximum {}", short(max)))
}

/// A duration as whole hours, minutes or seconds, in the largest unit that divides it (`24h`,
/// `10m`, `90s`); sub-second parts are dropped.
pub fn short(duration: Duration) -> String {
    let seconds = duration.as_secs();
    if duration >= HOUR && seconds.is_multiple_of(3600) {
        format!("{}h", seconds / 3600)
    } else if duration >= MINUTE && seconds.is_multiple_of(60) {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
}

/// The longest soak (`spec.strategy.soak`): a day of watching one batch is already longer
/// than any rollout should wait between batches.
pub const MAX_SOAK: Duration = Duration::from_secs(24 * 3600);

/// The most subnet addresses a pool's headroom buffer keeps free (`spec.headroom.buffer.addresses`):
/// a /16's usable addresses.
pub const MAX_HEADROOM_BUFFER_ADDRESSES: u32 = 65_531;

/// The most vCPUs a pool's headroom buffer keeps free (`spec.headroom.buffer.vcpus`).
pub const MAX_HEADROOM_BUFFER_VCPUS: u32 = 100_000;

/// The most maintenance windows `spec.maintenance.windows` may hold: every look at the schedule
/// searches each of them, and a pool needing more than 16 recurring windows has a schedule no
/// person can read (one cron line covers weekday ranges and lists).
pub const MAX_MAINTENANCE_WINDOWS: usize = 16;

/// The longest `spec.maintenance.windows[].duration`: a week, the longest a recurring window can
/// be and still close before a weekly schedule opens it again.
pub const MAX_MAINTENANCE_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest `spec.maintenance.windows[].schedule` and `timeZone`, in bytes: a 5-field cron
/// line with every list spelled out fits, and IANA names are at most about 30 characters.
pub const MAX_MAINTENANCE_TEXT_LEN: usize = 128;

/// The most previous image versions a pool keeps (`nodewright pool image NAME`, rollback to the
/// previous version): the status stays small, and older versions are usually past end of life.
pub const MAX_IMAGE_HISTORY: usize = 8;

/// The most image versions one resolution looks at: a gallery image or marketplace SKU lists its
/// versions; past this many the activity hands over the first ones only.
pub const MAX_IMAGE_VERSIONS: usize = 4096;

/// The shortest and longest `spec.imageUpdate.checkInterval`: how often a pool controller lists
/// its image's versions. Ten seconds is for trying it out (one ARM read a check); a week still
/// finds a monthly image in time.
pub const MIN_IMAGE_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// See [`MIN_IMAGE_CHECK_INTERVAL`].
pub const MAX_IMAGE_CHECK_INTERVAL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The shortest and longest `spec.offerings.unavailableFor`: how long an offering Azure refused
/// for capacity is set aside. Ten seconds is for trying it out; beyond a day a region's capacity
/// has long changed.
pub const MIN_OFFERING_TTL: Duration = Duration::from_secs(10);
/// See [`MIN_OFFERING_TTL`].
pub const MAX_OFFERING_TTL: Duration = Duration::from_secs(24 * 3600);

/// The longest image version text (`22.04.202411010`), in bytes.
pub const MAX_IMAGE_VERSION_LEN: usize = 64;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::time::{LATEST, deadline_after};

    #[test]
    fn shows_durations_in_their_natural_unit() {
        for (duration, shown) in [
            (Duration::from_secs(1), "1s"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(600), "10m"),
            (HOUR, "1h"),
            (DAY, "24h"),
            (MAX_DRAIN_EXTENSION, "168h"),
            (Duration::from_millis(1500), "1s"),
        ] {
            assert_eq!(short(duration), shown);
        }
    }

    #[test]
    fn clamping_names_the_field_and_both_values() {
        assert_eq!(
            clamp(
                "extend_deadline",
                Duration::from_secs(60),
                MAX_DRAIN_EXTENSION
            ),
            (Duration::from_secs(60), None)
        );
        assert_eq!(
            clamp("extend_deadline", MAX_DRAIN_EXTENSION, MAX_DRAIN_EXTENSION),
            (MAX_DRAIN_EXTENSION, None)
        );
        assert_eq!(
            clamp(
                "extend_deadline",
                Duration::from_secs(3_600_000_000),
                MAX_DRAIN_EXTENSION
            ),
            (
                MAX_DRAIN_EXTENSION,
                Some(
                    "extend_deadline asked for 1000000h, more than the maximum 168h: used 168h"
                        .to_owned()
                )
            )
        );
        assert_eq!(longer_than(DAY, DAY), None);
        assert_eq!(
            longer_than(DAY + Duration::from_secs(1), DAY).as_deref(),
            Some("is longer than the maximum 24h")
        );
    }

    #[test]
    fn every_maximum_added_to_any_representable_time_stays_representable() {
        let longest = [
            MAX_PROGRESS_DEADLINE,
            MAX_MIN_READY,
            MAX_DRAIN_TIMEOUT,
            MAX_PDB_RETRY_INTERVAL,
            MAX_VOLUME_TIMEOUT,
            MAX_FORCE_AFTER_UNHEALTHY,
            MAX_CREATION_TIMEOUT,
            MAX_BOOTSTRAP_TOKEN_TTL,
            MAX_HEALTH_TIMEOUT,
            MAX_DRAIN_EXTENSION,
            MAX_SWEEP_GRACE,
            MAX_SWEEP_HEALTH_TIMEOUT,
            MAX_APPROVAL_TIMEOUT,
            MAX_SWEEP_INTERVAL,
            MAX_OBSERVE_INTERVAL,
        ]
        .into_iter()
        .max()
        .unwrap_or_default();
        // A month at most: far inside what a protobuf duration (Temporal timers) and chrono hold.
        assert!(longest <= Duration::from_secs(31 * 24 * 3600));
        assert!(deadline_after(1_800_000_000, longest) < LATEST);
        const { assert!(MAX_CLI_WAIT_SECONDS <= 600) };
        const { assert!(MAX_HISTORY_LIMIT < 4_096) };
    }

    proptest! {
        #[test]
        fn clamping_never_exceeds_the_maximum_and_keeps_what_fits(
            secs in any::<u64>(),
            nanos in 0u32..1_000_000_000,
            max_secs in 0u64..=31 * 24 * 3600,
        ) {
            let value = Duration::new(secs, nanos);
            let max = Duration::from_secs(max_secs);
            let (used, warning) = clamp("f", value, max);
            prop_assert!(used <= max);
            prop_assert_eq!(warning.is_some(), value > max);
            if value <= max {
                prop_assert_eq!(used, value);
            }
            prop_assert_eq!(longer_than(value, max).is_some(), value > max);
        }
    }
}
