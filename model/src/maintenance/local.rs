//! Wall-clock times of a time zone turned into instants, with the maintenance windows' DST
//! rules: a time in a spring-forward gap is the first instant after the gap (the transition);
//! a time in a fall-back overlap is its first occurrence only.
//!
//! With these rules the map from wall-clock time to instant never goes backwards, which lets
//! the searches in `window` skip wall-clock times cheaply by comparing them, not converting.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, Offset, TimeZone};

/// The instant (Unix seconds) at which the wall-clock time `local` of `zone` comes, by the
/// rules above; `None` only outside the years jiff can represent.
pub fn instant_of(zone: &TimeZone, local: DateTime) -> Option<i64> {
    let instant = match zone.to_ambiguous_timestamp(local).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(local).ok()?,
        // `before` is the offset in force before the transition: the first occurrence.
        AmbiguousOffset::Fold { before, .. } => before.to_timestamp(local).ok()?,
        AmbiguousOffset::Gap { before, after } => {
            // With the offset after the gap the time reads as an instant before the transition,
            // with the offset before it as one after: the transition lies between.
            // (jiff's `TimeZone::preceding` skipped some rule-made transitions here, so the
            // transition is found by bisection on the offset.)
            let earlier = after.to_timestamp(local).ok()?.as_second();
            let later = before.to_timestamp(local).ok()?.as_second();
            return Some(first_instant_at(zone, after, earlier, later));
        }
    };
    Some(instant.as_second())
}

/// The first instant in `earlier..=later` at which `zone` is at `offset`, by bisection (at most
/// 64 steps: a gap lasts hours): the end of a spring-forward gap.
fn first_instant_at(zone: &TimeZone, offset: Offset, mut earlier: i64, mut later: i64) -> i64 {
    for _ in 0..64 {
        if later.saturating_sub(earlier) <= 1 {
            break;
        }
        let middle = earlier + later.saturating_sub(earlier) / 2;
        match Timestamp::from_second(middle) {
            Ok(timestamp) if zone.to_offset(timestamp) == offset => later = middle,
            _ => earlier = middle,
        }
    }
    later
}

/// The wall-clock time of `zone` at `instant` (Unix seconds); `None` outside jiff's years.
pub fn local_at(zone: &TimeZone, instant: i64) -> Option<DateTime> {
    Timestamp::from_second(instant)
        .ok()
        .map(|timestamp| zone.to_datetime(timestamp))
}

/// `instant` (Unix seconds) as people read it in a status: `2026-11-30 06:00 UTC`, with seconds
/// only when they are not zero.
pub fn utc_words(instant: i64) -> String {
    match local_at(&TimeZone::UTC, instant) {
        None => format!("{instant} seconds after 1970 UTC"),
        Some(time) if time.second() == 0 => format!(
            "{:04}-{:02}-{:02} {:02}:{:02} UTC",
            time.year(),
            time.month(),
            time.day(),
            time.hour(),
            time.minute()
        ),
        Some(time) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
            time.year(),
            time.month(),
            time.day(),
            time.hour(),
            time.minute(),
            time.second()
        ),
    }
}
