//! A 5-field cron schedule (`minute hour day-of-month month day-of-week`), parsed by hand: the
//! cron crates build on chrono, which `model` does not depend on (tests/tidy), and the five
//! fields are small enough to check completely.
//!
//! Each field is `*`, a number, a range `a-b`, a step `*/n`, `a-b/n` or `a/n` (from `a` to the
//! field's end), or a comma-separated list of those. Months and days of the week also take
//! English three-letter names (`jan`, `mon`), and day of the week 7 is Sunday like 0. As in Vixie
//! cron, when both day fields are restricted (neither starts with `*`) a day matches either one;
//! otherwise it must match both.

use std::fmt;

/// A parsed schedule: the matching values of each field as bit sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CronSchedule {
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    days_of_week: u8,
    day_of_month_restricted: bool,
    day_of_week_restricted: bool,
}

/// Why a schedule cannot be read: the field (`minute`, `hour`, …) and what is wrong in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError {
    /// The field's name, or `schedule` when the number of fields is wrong.
    pub field: &'static str,
    /// What is wrong, in words.
    pub problem: String,
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.field, self.problem)
    }
}

/// One field's bounds and names.
struct FieldRule {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: FieldRule = FieldRule {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: FieldRule = FieldRule {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY_OF_MONTH: FieldRule = FieldRule {
    name: "day of month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: FieldRule = FieldRule {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DAY_OF_WEEK: FieldRule = FieldRule {
    name: "day of week",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

/// The most comma-separated parts one field may have.
const MAX_LIST_ITEMS: usize = 64;

impl CronSchedule {
    /// Reads a 5-field schedule such as `0 2 * * 1-5`.
    pub fn parse(text: &str) -> Result<Self, CronError> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [minute, hour, day_of_month, month, day_of_week] = fields.as_slice() else {
            return Err(CronError {
                field: "schedule",
                problem: format!(
                    "has {} fields, not 5 (minute hour day-of-month month day-of-week)",
                    fields.len()
                ),
            });
        };
        let days_of_week = parse_field(day_of_week, &DAY_OF_WEEK)?;
        // Day 7 is Sunday, like 0.
        let days_of_week = (days_of_week | (days_of_week >> 7)) & 0x7f;
        Ok(Self {
            minutes: parse_field(minute, &MINUTE)?,
            hours: low_bits(parse_field(hour, &HOUR)?),
            days_of_month: low_bits(parse_field(day_of_month, &DAY_OF_MONTH)?),
            months: u16::try_from(parse_field(month, &MONTH)?).unwrap_or(0),
            days_of_week: u8::try_from(days_of_week).unwrap_or(0),
            day_of_month_restricted: !day_of_month.starts_with('*'),
            day_of_week_restricted: !day_of_week.starts_with('*'),
        })
    }

    /// Whether the schedule fires on this day (`month` 1–12, `day` 1–31, `weekday` 0–6 from
    /// Sunday).
    pub fn matches_day(&self, month: u32, day: u32, weekday: u32) -> bool {
        if !bit(u64::from(self.months), month) {
            return false;
        }
        let by_month_day = bit(u64::from(self.days_of_month), day);
        let by_weekday = bit(u64::from(self.days_of_week), weekday);
        if self.day_of_month_restricted && self.day_of_week_restricted {
            by_month_day || by_weekday
        } else {
            by_month_day && by_weekday
        }
    }

    /// The hours the schedule fires in, ascending.
    pub fn hours(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        (0..24).filter(|hour| bit(u64::from(self.hours), *hour))
    }

    /// The minutes of an hour the schedule fires at, ascending.
    pub fn minutes(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        (0..60).filter(|minute| bit(self.minutes, *minute))
    }

    /// Whether some calendar day matches at all: `0 0 30 2 *` (30 February) never does. A day
    /// of the week always comes round; otherwise some chosen day must exist in a chosen month
    /// (29 February counts: it comes every leap year).
    pub fn fires_on_some_day(&self) -> bool {
        if self.days_of_week == 0 || self.hours == 0 || self.minutes == 0 {
            return false;
        }
        if self.day_of_month_restricted && self.day_of_week_restricted {
            return self.months != 0;
        }
        (1..=12u32).any(|month| {
            bit(u64::from(self.months), month)
                && (1..=longest_month(month)).any(|day| bit(u64::from(self.days_of_month), day))
        })
    }
}

/// The most days `month` can have (29 for February).
fn longest_month(month: u32) -> u32 {
    match month {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn bit(set: u64, index: u32) -> bool {
    index < 64 && set & (1u64 << index) != 0
}

fn low_bits(set: u64) -> u32 {
    u32::try_from(set & u64::from(u32::MAX)).unwrap_or(0)
}

/// Parses one field into the set of its values.
fn parse_field(text: &str, rule: &FieldRule) -> Result<u64, CronError> {
    let error = |problem: String| CronError {
        field: rule.name,
        problem,
    };
    let items: Vec<&str> = text.split(',').collect();
    if items.len() > MAX_LIST_ITEMS {
        return Err(error(format!("lists more than {MAX_LIST_ITEMS} values")));
    }
    let mut set = 0u64;
    for item in items {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (item, None),
        };
        let (low, high) = if range == "*" {
            (rule.min, rule.max)
        } else if let Some((low, high)) = range.split_once('-') {
            (value(low, rule)?, value(high, rule)?)
        } else {
            let single = value(range, rule)?;
            // `a/n` runs from `a` to the field's end.
            (single, if step.is_some() { rule.max } else { single })
        };
        if low > high {
            return Err(error(format!("range {low}-{high} runs backwards")));
        }
        let step = match step {
            None => 1,
            Some(step) => match step.parse::<u32>() {
                Ok(step) if (1..=rule.max.max(1)).contains(&step) => step,
                _ => {
                    return Err(error(format!(
                        "step {} is not a number from 1 to {}",
                        crate::text::quoted(step),
                        rule.max.max(1)
                    )));
                }
            },
        };
        let mut current = low;
        while current <= high {
            set |= 1u64 << current;
            current = current.saturating_add(step);
        }
    }
    Ok(set)
}

/// One value of a field: a number within the field's bounds or one of its names.
fn value(text: &str, rule: &FieldRule) -> Result<u32, CronError> {
    let lower = text.to_ascii_lowercase();
    if let Some(index) = rule.names.iter().position(|name| *name == lower) {
        let index = u32::try_from(index).unwrap_or(0);
        return Ok(if rule.min == 1 { index + 1 } else { index });
    }
    match text.parse::<u32>() {
        Ok(number) if (rule.min..=rule.max).contains(&number) => Ok(number),
        _ => Err(CronError {
            field: rule.name,
            problem: format!(
                "value {} is not a number from {} to {}{}",
                crate::text::quoted(text),
                rule.min,
                rule.max,
                if rule.names.is_empty() {
                    ""
                } else {
                    " or a three-letter English name"
                }
            ),
        }),
    }
}
