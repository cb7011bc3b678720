//! When to poll an ARM operation next; the activities' `PollClock` follows it.
//!
//! Azure's own `Retry-After` on the operation's response is followed when it comes (bounded to
//! 1 s..[`MAX_RETRY_AFTER_POLL`]). Without it the schedule is per kind of operation: nothing is
//! polled before [`FIRST_POLL_SHARE`] of the kind's usual duration (a VM create takes about 90 s
//! in Azure, a VM delete with its OS disk a few minutes: polling every few seconds from the
//! start spends most requests on answers that cannot be "done"), and from then on the gap
//! between polls keeps the latency bound: at most the larger of [`LATENCY_FLOOR`] and
//! [`LATENCY_SHARE`] of the time the operation has run, so a completion is noticed within
//! 10 s or 10% of its duration once the operation is past its early part.

use std::time::Duration;

/// The kinds of operation nodewright waits on, each with Azure's usual duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationKind {
    /// PUT of a VM (create or update of its model).
    VmCreate,
    /// DELETE of a VM (with its OS disk when `deleteOption` says so).
    VmDelete,
    /// PATCH of a VM that changes no disk or power state (its tags).
    VmUpdate,
    /// A VM action: restart, redeploy, attach or detach of data disks.
    VmAction,
    /// PUT or DELETE of a NIC.
    Nic,
    /// PUT, PATCH or DELETE of a managed disk.
    Disk,
}

impl OperationKind {
    /// How long Azure usually takes for this kind (a create about 90 s, a delete with its OS
    /// disk and NIC about 5 minutes). The sandbox's `realistic` latency profile draws its
    /// durations around these (`sandbox/src/arm/latency.rs`).
    pub fn usual(self) -> Duration {
        Duration::from_secs(match self {
            Self::VmCreate => 90,
            Self::VmDelete => 300,
            Self::VmUpdate => 15,
            Self::VmAction => 60,
            Self::Nic => 3,
            Self::Disk => 10,
        })
    }
}

/// The share of the usual duration before which an operation is not polled.
pub const FIRST_POLL_SHARE: f64 = 0.8;
/// The latency bound's floor: a completion is noticed within this long...
pub const LATENCY_FLOOR: Duration = Duration::from_secs(10);
/// ...or within this share of the time the operation has run, whichever is longer.
pub const LATENCY_SHARE: f64 = 0.1;
/// The shortest wait between polls.
pub const MIN_POLL: Duration = Duration::from_secs(1);
/// The longest `Retry-After` followed between polls of one operation.
pub const MAX_RETRY_AFTER_POLL: Duration = Duration::from_secs(60);

/// The longest gap between polls once an operation has run `elapsed`.
pub fn latency_bound(elapsed: Duration) -> Duration {
    LATENCY_FLOOR.max(elapsed.mul_f64(LATENCY_SHARE))
}

/// How long to wait before the next poll of an operation of `kind` accepted `elapsed` ago;
/// `retry_after` is the `Retry-After` of the operation's last answer (or of the write that
/// started it), if any.
pub fn next_poll(
    kind: OperationKind,
    elapsed: Duration,
    retry_after: Option<Duration>,
) -> Duration {
    if let Some(asked) = retry_after {
        return asked.clamp(MIN_POLL, MAX_RETRY_AFTER_POLL);
    }
    let first = kind.usual().mul_f64(FIRST_POLL_SHARE);
    let wait = match first.checked_sub(elapsed) {
        Some(until_first) if !until_first.is_zero() => until_first,
        _ => latency_bound(elapsed),
    };
    wait.max(MIN_POLL)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The poll times of an operation of `kind` that ends at `ends` (no `Retry-After`), up to
    /// the first poll at or after its end.
    fn polls(kind: OperationKind, ends: Duration) -> Vec<Duration> {
        let mut at = Duration::ZERO;
        let mut times = Vec::new();
        while at < ends {
            at += next_poll(kind, at, None);
            times.push(at);
        }
        times
    }

    #[test]
    fn an_operation_of_its_usual_length_is_polled_a_few_times() {
        let table = [
            (OperationKind::VmCreate, 90, 3),
            (OperationKind::VmDelete, 300, 4),
            (OperationKind::VmUpdate, 15, 2),
            (OperationKind::VmAction, 60, 3),
            (OperationKind::Nic, 3, 2),
            (OperationKind::Disk, 10, 2),
        ];
        for (kind, seconds, expected) in table {
            let times = polls(kind, Duration::from_secs(seconds));
            assert_eq!(times.len(), expected, "{kind:?}: {times:?}");
        }
        let seconds =
            |times: Vec<Duration>| times.iter().map(Duration::as_secs).collect::<Vec<_>>();
        assert_eq!(
            seconds(polls(OperationKind::VmCreate, Duration::from_secs(90))),
            [72, 82, 92]
        );
    }

    #[test]
    fn retry_after_is_followed_within_its_bounds() {
        let kind = OperationKind::VmCreate;
        let at = Duration::from_secs(5);
        assert_eq!(
            next_poll(kind, at, Some(Duration::from_secs(15))),
            Duration::from_secs(15)
        );
        assert_eq!(next_poll(kind, at, Some(Duration::ZERO)), MIN_POLL);
        assert_eq!(
            next_poll(kind, at, Some(Duration::from_secs(3600))),
            MAX_RETRY_AFTER_POLL
        );
    }

    proptest! {
        #[test]
        fn past_its_early_part_a_completion_is_noticed_within_the_latency_bound(
            kind in prop::sample::select(vec![
                OperationKind::VmCreate, OperationKind::VmDelete, OperationKind::VmUpdate,
                OperationKind::VmAction,
                OperationKind::Nic, OperationKind::Disk,
            ]),
            ends_ms in 0u64..3_600_000,
        ) {
            let ends = Duration::from_millis(ends_ms);
            let times = polls(kind, ends);
            let noticed = times.last().copied().unwrap_or_default();
            let early = kind.usual().mul_f64(FIRST_POLL_SHARE);
            if ends > early {
                prop_assert!(noticed - ends <= latency_bound(ends),
                    "{kind:?} ending at {ends:?} noticed at {noticed:?}");
            } else {
                prop_assert!(noticed <= early + MIN_POLL, "{kind:?}: {times:?}");
            }
        }

        #[test]
        fn a_wait_is_never_below_a_second(
            elapsed_ms in 0u64..100_000_000,
            retry in proptest::option::of(0u64..100_000),
        ) {
            let wait = next_poll(
                OperationKind::Nic,
                Duration::from_millis(elapsed_ms),
                retry.map(Duration::from_secs),
            );
            prop_assert!(wait >= MIN_POLL);
        }
    }
}
