//! Deadline arithmetic that never panics. A deadline is a start plus a duration that may come
//! from outside (a pool file, an annotation, a CLI flag, a signal), so every sum saturates at
//! [`LATEST`] instead of overflowing, which would panic a workflow task that Temporal then
//! retries for ever. Times are Unix seconds, as everywhere in `model` (no clock, no chrono).

use std::time::Duration;

/// The latest instant a deadline can name, `9999-12-31T23:59:59Z`: the last second RFC 3339
/// writes with four year digits (activities read deadlines back from that text).
pub const LATEST: i64 = 253_402_300_799;

/// The earliest instant a deadline can name, `0000-01-01T00:00:00Z`.
pub const EARLIEST: i64 = -62_167_219_200;

/// `start + duration` in Unix seconds (sub-second parts dropped), or [`LATEST`] when that is
/// later; a `start` outside [`EARLIEST`]..=[`LATEST`] is first brought inside.
pub fn deadline_after(start: i64, duration: Duration) -> i64 {
    let start = start.clamp(EARLIEST, LATEST);
    let secs = i64::try_from(duration.as_secs()).unwrap_or(i64::MAX);
    start.saturating_add(secs).min(LATEST)
}

/// The whole seconds from `now` until `deadline`, zero when it has passed.
pub fn left_until(now: i64, deadline: i64) -> Duration {
    Duration::from_secs(u64::try_from(deadline.saturating_sub(now)).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ordinary_sums_are_exact() {
        assert_eq!(deadline_after(1_000, Duration::from_secs(90)), 1_090);
        assert_eq!(deadline_after(1_000, Duration::from_millis(1_999)), 1_001);
        assert_eq!(left_until(1_000, 1_010), Duration::from_secs(10));
        assert_eq!(left_until(1_010, 1_000), Duration::ZERO);
    }

    #[test]
    fn huge_durations_saturate_at_the_latest_writable_instant() {
        assert_eq!(deadline_after(1_000, Duration::MAX), LATEST);
        assert_eq!(deadline_after(LATEST, Duration::from_secs(1)), LATEST);
        assert_eq!(deadline_after(i64::MAX, Duration::ZERO), LATEST);
        assert_eq!(deadline_after(i64::MIN, Duration::ZERO), EARLIEST);
    }

    proptest! {
        #[test]
        fn never_panics_never_goes_back_never_passes_the_latest(
            start in any::<i64>(),
            secs in any::<u64>(),
            nanos in 0u32..1_000_000_000,
        ) {
            let deadline = deadline_after(start, Duration::new(secs, nanos));
            let inside = start.clamp(EARLIEST, LATEST);
            prop_assert!(deadline >= inside);
            prop_assert!(deadline <= LATEST);
            prop_assert!(left_until(inside, deadline) <= Duration::new(secs, 0));
            prop_assert!(left_until(deadline, start) == Duration::ZERO || start > deadline);
        }
    }
}
