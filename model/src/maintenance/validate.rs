//! `spec.maintenance` checked into [`MaintenanceWindows`], or every problem at once, each naming
//! its field and the fix.

use std::time::Duration;

use jiff::tz::TimeZone;

use super::cron::CronSchedule;
use super::schedule::MaintenanceWindows;
use super::spec::{MaintenanceSpec, WindowSpec};
use super::window::MaintenanceWindow;
use crate::limits::{MAX_MAINTENANCE_TEXT_LEN, MAX_MAINTENANCE_WINDOW, MAX_MAINTENANCE_WINDOWS};
use crate::text::quoted;

/// One value of `spec.maintenance` that cannot be used, and how to fix it. Its fields are those
/// of the pool file's `FieldError`, which the pool's validation builds from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowProblem {
    /// The value's path, e.g. `spec.maintenance.windows[1].timeZone`.
    pub field: String,
    /// The value as written, quoted.
    pub value: String,
    /// What is wrong with it.
    pub problem: String,
    /// What to write instead.
    pub fix: String,
}

/// Checks `spec` found at `field` (`spec.maintenance`).
pub fn validate(
    field: &str,
    spec: &MaintenanceSpec,
) -> Result<MaintenanceWindows, Vec<WindowProblem>> {
    let mut problems = Vec::new();
    if spec.windows.len() > MAX_MAINTENANCE_WINDOWS {
        problems.push(WindowProblem {
            field: format!("{field}.windows"),
            value: format!("{} windows", spec.windows.len()),
            problem: format!("holds more than {MAX_MAINTENANCE_WINDOWS} windows"),
            fix: "merge windows: one schedule takes lists and ranges such as \"0 2 * * 1-5\""
                .to_owned(),
        });
    }
    let windows: Vec<MaintenanceWindow> = spec
        .windows
        .iter()
        .take(MAX_MAINTENANCE_WINDOWS)
        .enumerate()
        .filter_map(|(index, window)| {
            check_window(&format!("{field}.windows[{index}]"), window, &mut problems)
        })
        .collect();
    if problems.is_empty() {
        Ok(MaintenanceWindows {
            apply_to: spec.apply_to,
            windows,
        })
    } else {
        Err(problems)
    }
}

fn check_window(
    field: &str,
    window: &WindowSpec,
    problems: &mut Vec<WindowProblem>,
) -> Option<MaintenanceWindow> {
    let schedule = check_schedule(&format!("{field}.schedule"), &window.schedule, problems);
    let duration_secs = check_duration(&format!("{field}.duration"), &window.duration, problems);
    let zone_name = window.time_zone.clone().unwrap_or_else(|| "UTC".to_owned());
    let zone = check_zone(&format!("{field}.timeZone"), &zone_name, problems);
    Some(MaintenanceWindow {
        schedule: schedule?,
        schedule_text: window.schedule.clone(),
        duration_secs: duration_secs?,
        zone: zone?,
        zone_name,
    })
}

const SCHEDULE_FIX: &str = "write 5 cron fields, minute hour day-of-month month day-of-week, \
     such as \"0 2 * * 1-5\" (02:00 Monday to Friday)";

fn check_schedule(
    field: &str,
    text: &str,
    problems: &mut Vec<WindowProblem>,
) -> Option<CronSchedule> {
    let mut refuse = |problem: String, fix: &str| {
        problems.push(WindowProblem {
            field: field.to_owned(),
            value: shown(text),
            problem,
            fix: fix.to_owned(),
        });
        None
    };
    if text.len() > MAX_MAINTENANCE_TEXT_LEN {
        return refuse(
            format!("is longer than {MAX_MAINTENANCE_TEXT_LEN} bytes"),
            SCHEDULE_FIX,
        );
    }
    match CronSchedule::parse(text) {
        Err(error) => refuse(format!("cannot be read: {error}"), SCHEDULE_FIX),
        Ok(schedule) if !schedule.fires_on_some_day() => refuse(
            "never opens: no month has the day it names".to_owned(),
            "name a day that exists in the month, such as \"0 0 28 2 *\" instead of 30 February",
        ),
        Ok(schedule) => Some(schedule),
    }
}

fn check_duration(field: &str, text: &str, problems: &mut Vec<WindowProblem>) -> Option<i64> {
    let problem = match humantime::parse_duration(text) {
        Err(error) => format!("is not a duration ({error})"),
        Ok(duration) if duration < Duration::from_secs(1) => "is shorter than 1s".to_owned(),
        Ok(duration) if duration > MAX_MAINTENANCE_WINDOW => format!(
            "is longer than {}",
            crate::text::duration(MAX_MAINTENANCE_WINDOW)
        ),
        Ok(duration) => return i64::try_from(duration.as_secs()).ok(),
    };
    problems.push(WindowProblem {
        field: field.to_owned(),
        value: shown(text),
        problem,
        fix: "write how long the window stays open, from 1s to 7days, such as \"4h\"".to_owned(),
    });
    None
}

fn check_zone(field: &str, name: &str, problems: &mut Vec<WindowProblem>) -> Option<TimeZone> {
    let known = if name.len() > MAX_MAINTENANCE_TEXT_LEN {
        None
    } else {
        TimeZone::get(name).ok()
    };
    if known.is_none() {
        problems.push(WindowProblem {
            field: field.to_owned(),
            value: shown(name),
            problem: "is not a time zone of the IANA database".to_owned(),
            fix: "write an IANA zone name such as \"Europe/Berlin\" or \"UTC\"".to_owned(),
        });
    }
    known
}

/// `value` quoted for a message, cut after 80 characters.
fn shown(value: &str) -> String {
    let start: String = value.chars().take(80).collect();
    if start.len() < value.len() {
        format!("{}…", quoted(&start))
    } else {
        quoted(value)
    }
}
