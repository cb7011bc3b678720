//! Maintenance windows (`spec.maintenance`): recurring times, on a time zone's wall clock, in
//! which nodewright may disrupt a pool's machines, and whether they are open at an instant.
//!
//! Time zones come from jiff with the IANA database compiled in and no std feature: no clock,
//! no file read (chrono-tz and the cron crates build on chrono, which `model` keeps out). The
//! 5-field cron schedule is parsed here (`cron`).
//!
//! Rules of the schedule: cron times are wall-clock times of the window's zone; a time in a
//! spring-forward gap opens at the end of the gap, a time in a fall-back overlap opens once, at
//! its first occurrence; the duration is absolute time; overlapping or touching windows are one.

mod cron;
mod gate;
mod local;
mod schedule;
mod spec;
mod state;
mod validate;
mod window;

pub use cron::{CronError, CronSchedule};
pub use gate::{Gate, gate};
pub use local::utc_words;
pub use schedule::MaintenanceWindows;
pub use spec::{ApplyTo, DisruptionKind, MaintenanceSpec, WindowSpec};
pub use state::WindowState;
pub use validate::{WindowProblem, validate};
pub use window::{LOOK_AHEAD_DAYS, MaintenanceWindow};

#[cfg(test)]
mod tests;
