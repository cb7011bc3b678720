//! One checked maintenance window and the two bounded searches over its openings: the first
//! opening at or after an instant, and the last one at or before it.

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;

use super::cron::CronSchedule;
use super::local::{instant_of, local_at};

/// How many days the forward search looks at, at most: eight years and a day, so that a
/// schedule for 29 February finds its next opening even across 2100, which is no leap year.
pub const LOOK_AHEAD_DAYS: u32 = 8 * 366 + 1;

/// How far past an instant, in seconds, the backward search starts on the wall clock: more than
/// any fall-back overlap of the IANA database since 1970 (at most two hours), so that a time in
/// the overlap's second pass still finds the openings of its first pass.
const OVERLAP_MARGIN_SECS: i64 = 3 * 3600;

/// One window: when it opens (a cron schedule on the zone's wall clock) and for how long.
#[derive(Debug, Clone, PartialEq)]
pub struct MaintenanceWindow {
    pub(super) schedule: CronSchedule,
    pub(super) schedule_text: String,
    pub(super) duration_secs: i64,
    pub(super) zone: TimeZone,
    pub(super) zone_name: String,
}

impl MaintenanceWindow {
    /// The schedule as written (`0 2 * * 1-5`).
    pub fn schedule(&self) -> &str {
        &self.schedule_text
    }

    /// How long each opening lasts, in seconds (absolute time, whatever the clocks do).
    pub fn duration_secs(&self) -> i64 {
        self.duration_secs
    }

    /// The IANA name of the zone the schedule is read in.
    pub fn time_zone(&self) -> &str {
        &self.zone_name
    }

    /// The first opening at or after `instant`, within [`LOOK_AHEAD_DAYS`].
    pub fn first_opening_from(&self, instant: i64) -> Option<i64> {
        // Wall-clock times before this one open before `instant` (the map never goes back).
        let lower = local_at(&self.zone, instant.checked_sub(1)?)?;
        let mut day = lower.date();
        for _ in 0..LOOK_AHEAD_DAYS {
            if self.fires_on(day) {
                for hour in self.schedule.hours() {
                    for minute in self.schedule.minutes() {
                        let Some(local) = at(day, hour, minute) else {
                            continue;
                        };
                        if local < lower {
                            continue;
                        }
                        match instant_of(&self.zone, local) {
                            Some(opening) if opening >= instant => return Some(opening),
                            _ => {}
                        }
                    }
                }
            }
            day = day.tomorrow().ok()?;
        }
        None
    }

    /// The last opening at or before `instant` that is later than `not_before`.
    pub fn last_opening_until(&self, instant: i64, not_before: i64) -> Option<i64> {
        let upper = local_at(&self.zone, instant.checked_add(OVERLAP_MARGIN_SECS)?)?;
        let floor = local_at(&self.zone, not_before.checked_sub(OVERLAP_MARGIN_SECS)?)?.date();
        let mut day = upper.date();
        // The span is at most a week and a few hours; the bound only guards the loop.
        for _ in 0..16 {
            if day < floor {
                return None;
            }
            if self.fires_on(day) {
                for hour in self.schedule.hours().rev() {
                    for minute in self.schedule.minutes().rev() {
                        let Some(local) = at(day, hour, minute) else {
                            continue;
                        };
                        if local > upper {
                            continue;
                        }
                        match instant_of(&self.zone, local) {
                            Some(opening) if opening <= instant => {
                                return (opening > not_before).then_some(opening);
                            }
                            _ => {}
                        }
                    }
                }
            }
            day = day.yesterday().ok()?;
        }
        None
    }

    /// When the opening that covers `instant` closes, if one does (`opening <= instant <
    /// opening + duration`).
    pub fn open_until(&self, instant: i64) -> Option<i64> {
        let not_before = instant.checked_sub(self.duration_secs)?;
        self.last_opening_until(instant, not_before)
            .and_then(|opening| opening.checked_add(self.duration_secs))
    }

    fn fires_on(&self, day: Date) -> bool {
        let weekday = u32::try_from(day.weekday().to_sunday_zero_offset()).unwrap_or(0);
        let month = u32::try_from(day.month()).unwrap_or(0);
        let day_of_month = u32::try_from(day.day()).unwrap_or(0);
        self.schedule.matches_day(month, day_of_month, weekday)
    }
}

/// The wall-clock time `hour:minute` on `day`.
fn at(day: Date, hour: u32, minute: u32) -> Option<DateTime> {
    let hour = i8::try_from(hour).ok()?;
    let minute = i8::try_from(minute).ok()?;
    DateTime::new(day.year(), day.month(), day.day(), hour, minute, 0, 0).ok()
}
