//! A rollout at a glance, as following it shows it at any scale: the machines per phase (done,
//! creating, deleting, failed, left), how fast machines finish over a sliding window of what the
//! follower saw and the time left at that pace, and only the few slowest machines in flight by
//! name. Every line is cut to a width: whole parts are left out first (names before counts),
//! then the rest is cut with an ellipsis; a line never wraps.
//!
//! Pure: the time, the width and what was seen come in as values.

use std::collections::VecDeque;

use nodewright_model::rollout::{ChildKind, RolloutStatus};

use super::render::{kind, reasons, span};

/// How many of the slowest machines in flight a summary names.
pub const SLOWEST: usize = 3;
/// The width of lines when none is known (not a terminal, `COLUMNS` unset).
pub const DEFAULT_WIDTH: usize = 100;
/// The narrowest width lines are cut to: a narrower `COLUMNS` counts as this.
pub const MIN_WIDTH: usize = 20;
/// How far back the rate looks, in milliseconds.
pub const RATE_WINDOW_MILLIS: i64 = 5 * 60 * 1000;
/// The shortest stretch a rate is given for, in milliseconds: less says nothing yet.
pub const MIN_RATE_SPAN_MILLIS: i64 = 15_000;
/// In a pipe, the least time between two summary lines, in milliseconds.
pub const STEADY_MILLIS: i64 = 10_000;
/// In a pipe, the most time between two summary lines while nothing changes (a heartbeat), in
/// milliseconds.
pub const HEARTBEAT_MILLIS: i64 = 60_000;

/// The width lines are cut to from `COLUMNS` as set (a number of at least [`MIN_WIDTH`]), else
/// [`DEFAULT_WIDTH`].
pub fn width_from(columns: Option<&str>) -> usize {
    columns
        .and_then(|text| text.trim().parse::<usize>().ok())
        .filter(|width| *width > 0)
        .map_or(DEFAULT_WIDTH, |width| width.max(MIN_WIDTH))
}

/// The machines of a rollout that are done: of its template and available, at most `replicas`.
pub fn done(status: &RolloutStatus) -> u32 {
    status.counts.updated_available.min(status.desired)
}

/// How many machines finished, as the follower saw it over time: `(when, done)` pairs, Unix
/// milliseconds, from the last one before the window to now.
#[derive(Debug, Clone, Default)]
pub struct Pace {
    seen: VecDeque<(i64, u32)>,
}

impl Pace {
    /// Records that `done` machines were done at `at` (Unix milliseconds); forgets what lies
    /// before the window (keeping the last look before it, so the rate spans the whole window).
    pub fn observe(&mut self, at: i64, done: u32) {
        if self.seen.back().is_some_and(|(last, _)| at < *last) {
            // A clock that went back: start again rather than divide by a negative span.
            self.seen.clear();
        }
        self.seen.push_back((at, done));
        let start = at.saturating_sub(RATE_WINDOW_MILLIS);
        while self.seen.len() > 2 && self.seen.get(1).is_some_and(|(then, _)| *then <= start) {
            self.seen.pop_front();
        }
    }

    /// Machines finished per minute over the window; `None` until the follower has seen
    /// [`MIN_RATE_SPAN_MILLIS`] of it. Machines that stop counting (a machine that broke) do
    /// not make it negative.
    pub fn per_minute(&self) -> Option<f64> {
        let (first_at, first) = *self.seen.front()?;
        let (last_at, last) = *self.seen.back()?;
        let span = last_at.saturating_sub(first_at);
        if span < MIN_RATE_SPAN_MILLIS {
            return None;
        }
        Some(f64::from(last.saturating_sub(first)) * 60_000.0 / span as f64)
    }
}

/// A machine in flight for long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slow {
    /// Create or delete.
    pub kind: ChildKind,
    /// The machine.
    pub machine: String,
    /// Seconds since its create or delete started.
    pub seconds: u64,
}

/// A rollout at a glance.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Its phase's word (`progressing`, `completed`...).
    pub phase: &'static str,
    /// Machines done ([`done`]).
    pub done: u32,
    /// The pool's replicas.
    pub desired: u32,
    /// Creates in flight.
    pub creating: u32,
    /// Deletes (drain included) in flight.
    pub deleting: u32,
    /// Creates and deletes that failed.
    pub failed: u32,
    /// Machines of the new template no create has started for yet: the replicas less those
    /// done and those being created (`done + creating + left` is the replicas).
    pub left: u32,
    /// Machines finished per minute lately, once known.
    pub per_minute: Option<f64>,
    /// Seconds until every machine is done at that rate, when it is above zero.
    pub eta_seconds: Option<u64>,
    /// The machines in flight for longest, longest first, at most [`SLOWEST`].
    pub slowest: Vec<Slow>,
}

/// The counts of a summary: what makes a line "changed" for [`Pacer`] (the rate, the time left
/// and the ages move with the clock alone).
pub type Counts = (&'static str, u32, u32, u32, u32, u32, u32);

impl Summary {
    /// `status` at a glance at `now` (Unix milliseconds), with the rate the follower saw.
    pub fn of(status: &RolloutStatus, per_minute: Option<f64>, now: i64) -> Self {
        let done = done(status);
        let count = |kind: ChildKind| {
            let n = status.in_flight.iter().filter(|c| c.kind == kind).count();
            u32::try_from(n).unwrap_or(u32::MAX)
        };
        let creating = count(ChildKind::Create);
        let to_finish = status.desired.saturating_sub(done);
        let eta_seconds = per_minute
            .filter(|rate| *rate > 0.0 && to_finish > 0 && !status.phase.is_terminal())
            .map(|rate| (f64::from(to_finish) * 60.0 / rate).ceil() as u64);
        let mut in_flight: Vec<_> = status.in_flight.iter().collect();
        in_flight.sort_by(|a, b| (a.started_at, &a.machine).cmp(&(b.started_at, &b.machine)));
        let slowest = in_flight
            .into_iter()
            .take(SLOWEST)
            .map(|child| Slow {
                kind: child.kind,
                machine: child.machine.clone(),
                seconds: u64::try_from(now.saturating_sub(child.started_at) / 1000).unwrap_or(0),
            })
            .collect();
        Self {
            phase: status.phase.as_str(),
            done,
            desired: status.desired,
            creating,
            deleting: count(ChildKind::Delete),
            failed: u32::try_from(status.failures.len()).unwrap_or(u32::MAX),
            left: to_finish.saturating_sub(creating),
            per_minute,
            eta_seconds,
            slowest,
        }
    }

    /// What makes this summary differ from another, beyond the clock.
    pub fn counts(&self) -> Counts {
        (
            self.phase,
            self.done,
            self.desired,
            self.creating,
            self.deleting,
            self.failed,
            self.left,
        )
    }

    /// The summary in one line of at most `width` characters:
    /// `progressing  120/200 done  18 creating  2 deleting  1 failed  60 left  12.5/min  eta 5m
    /// slowest: create web-ab12c 4m, delete web-x9z8y 3m`.
    pub fn line(&self, width: usize) -> String {
        fit(self.parts(), width)
    }

    /// The parts of [`Self::line`], each with when it is left out.
    fn parts(&self) -> Vec<Part> {
        let mut parts = vec![Part::kept(format!(
            "{:<11}  {}/{} done",
            self.phase, self.done, self.desired
        ))];
        if self.creating > 0 {
            parts.push(Part::new(
                format!("{} creating", self.creating),
                Drop::Flight,
            ));
        }
        if self.deleting > 0 {
            parts.push(Part::new(
                format!("{} deleting", self.deleting),
                Drop::Flight,
            ));
        }
        if self.failed > 0 {
            parts.push(Part::new(format!("{} failed", self.failed), Drop::Failed));
        }
        if self.left > 0 {
            parts.push(Part::new(format!("{} left", self.left), Drop::Left));
        }
        if let Some(rate) = self.per_minute {
            parts.push(Part::new(format!("{}/min", rate_text(rate)), Drop::Rate));
        }
        if let Some(seconds) = self.eta_seconds {
            parts.push(Part::new(format!("eta {}", span(seconds)), Drop::Eta));
        }
        for (index, slow) in self.slowest.iter().enumerate() {
            let text = format!(
                "{} {} {}",
                kind(slow.kind),
                slow.machine,
                span(slow.seconds)
            );
            parts.push(if index == 0 {
                Part::new(format!("slowest: {text}"), Drop::Name)
            } else {
                Part {
                    separator: ", ",
                    ..Part::new(text, Drop::Name)
                }
            });
        }
        parts
    }
}

/// A rollout in lines for one look at it (`pool status`, the answer to a signal): its summary
/// at `now` (Unix milliseconds) without a rate, then why it waits, each line within `width`.
pub fn glance(status: &RolloutStatus, now: i64, width: usize) -> Vec<String> {
    let mut lines = vec![Summary::of(status, None, now).line(width)];
    lines.extend(
        reasons(status)
            .iter()
            .map(|reason| cut(&format!("! {reason}"), width)),
    );
    lines
}

/// A rate, short: `12/min` from 10 a minute up, else one decimal (`0.5/min`).
fn rate_text(rate: f64) -> String {
    if rate >= 10.0 {
        format!("{rate:.0}")
    } else {
        format!("{rate:.1}")
    }
}

/// When a part of a line is left out for room, first to last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Drop {
    /// The slowest machines' names (the last named first).
    Name,
    /// The rate.
    Rate,
    /// The time left.
    Eta,
    /// The machines left.
    Left,
    /// The machines in flight.
    Flight,
    /// The failed ones.
    Failed,
    /// Never: cut with an ellipsis instead.
    Never,
}

/// A part of a line.
#[derive(Debug, Clone)]
struct Part {
    /// What goes before it (after another part).
    separator: &'static str,
    text: String,
    drop: Drop,
}

impl Part {
    fn new(text: String, drop: Drop) -> Self {
        Self {
            separator: "  ",
            text,
            drop,
        }
    }

    fn kept(text: String) -> Self {
        Self::new(text, Drop::Never)
    }
}

/// The parts joined, leaving parts out (first [`Drop`] first, the last of a kind first) until
/// the line fits `width`; what still does not fit is cut with an ellipsis.
fn fit(mut parts: Vec<Part>, width: usize) -> String {
    loop {
        let line = join(&parts);
        if columns(&line) <= width {
            return line;
        }
        let droppable = parts
            .iter()
            .enumerate()
            .filter(|(_, part)| part.drop != Drop::Never)
            .min_by_key(|(index, part)| (part.drop, std::cmp::Reverse(*index)))
            .map(|(index, _)| index);
        match droppable {
            Some(index) => {
                parts.remove(index);
            }
            None => return cut(&line, width),
        }
    }
}

fn join(parts: &[Part]) -> String {
    let mut line = String::new();
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            line.push_str(part.separator);
        }
        line.push_str(&part.text);
    }
    line
}

/// The columns `text` takes on a terminal: one a character (the CLI's lines hold no wide or
/// combining characters).
pub fn columns(text: &str) -> usize {
    text.chars().count()
}

/// `text` in at most `width` columns: as it is when it fits, else cut with `…` at the end.
pub fn cut(text: &str, width: usize) -> String {
    if columns(text) <= width {
        return text.to_owned();
    }
    let Some(kept) = width.checked_sub(1) else {
        return String::new();
    };
    let mut line: String = text.chars().take(kept).collect();
    line.push('…');
    line
}

/// `text` broken at spaces into lines of at most `width` columns, the lines after the first
/// indented by `indent` (the first keeps the text's own indentation); a word longer than a line is cut ([`cut`]). For a result printed once
/// at the end, where every word counts.
pub fn wrap(text: &str, width: usize, indent: &str) -> Vec<String> {
    // The first line keeps the text's own indentation.
    let lead = &text[..text.len() - text.trim_start().len()];
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let prefix = if lines.is_empty() { lead } else { indent };
        if line.is_empty() {
            line = format!("{prefix}{word}");
        } else if columns(&line) + 1 + columns(word) <= width {
            line.push(' ');
            line.push_str(word);
        } else {
            lines.push(cut(&line, width));
            line = format!("{indent}{word}");
        }
    }
    if !line.is_empty() {
        lines.push(cut(&line, width));
    }
    lines
}

/// When a pipe gets a summary line: at once the first time; then when the counts changed
/// since the last line printed, at most one every [`STEADY_MILLIS`]; and one at least every
/// [`HEARTBEAT_MILLIS`] while nothing changes.
#[derive(Debug, Clone, Default)]
pub struct Pacer {
    last: Option<(i64, Counts)>,
}

impl Pacer {
    /// Whether a line with `counts` is printed at `now` (Unix milliseconds); when it is, it
    /// counts as printed.
    pub fn due(&mut self, counts: Counts, now: i64) -> bool {
        let due = match &self.last {
            None => true,
            Some((at, printed)) => {
                let since = now.saturating_sub(*at);
                (*printed != counts && since >= STEADY_MILLIS) || since >= HEARTBEAT_MILLIS
            }
        };
        if due {
            self.last = Some((now, counts));
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use nodewright_model::pool::Amount;
    use nodewright_model::rollout::{
        Budget, ChildFailure, Counts as PoolCounts, InFlight, RolloutPhase, StrategyView,
    };

    use super::*;

    /// Unix milliseconds of "now" in these tests.
    const NOW: i64 = 1_000_000_000;

    fn status(desired: u32) -> RolloutStatus {
        let strategy = StrategyView {
            max_surge: Amount::Percent(10),
            max_unavailable: Amount::Count(0),
            budget: Budget {
                surge: desired / 10,
                unavailable: 0,
            },
        };
        RolloutStatus::new("web", "abc123", desired, strategy, 3, 0)
    }

    /// A rollout of 200 machines from none: 120 done, 80 creates in flight started a second
    /// apart (the first 10 minutes ago), 2 failed.
    fn two_hundred() -> RolloutStatus {
        let mut status = status(200);
        status.counts = PoolCounts {
            total: 200,
            updated: 200,
            ready: 120,
            available: 120,
            creating: 80,
            updated_available: 120,
            ..PoolCounts::default()
        };
        status.in_flight = (0..80)
            .map(|index| InFlight {
                machine: format!("web-{index:05}"),
                kind: ChildKind::Create,
                workflow_id: format!("create/dev/web-{index:05}"),
                started_at: NOW - 600_000 + index * 1000,
                zone: None,
                run_id: None,
                capacity_type: None,
            })
            .collect();
        status.failures = (0..2)
            .map(|index| ChildFailure {
                machine: format!("web-f{index:04}"),
                kind: ChildKind::Create,
                workflow_id: format!("create/dev/web-f{index:04}"),
                reason: "AllocationFailed".to_owned(),
                at: 0,
            })
            .collect();
        status
    }

    #[test]
    fn a_two_hundred_machine_rollout_is_counted_not_listed() {
        let summary = Summary::of(&two_hundred(), Some(12.5), NOW);
        assert_eq!(
            summary.counts(),
            ("progressing", 120, 200, 80, 0, 2, 0),
            "{summary:?}"
        );
        assert_eq!(summary.eta_seconds, Some(384), "80 machines at 12.5/min");
        assert_eq!(
            summary.slowest,
            [
                Slow {
                    kind: ChildKind::Create,
                    machine: "web-00000".to_owned(),
                    seconds: 600
                },
                Slow {
                    kind: ChildKind::Create,
                    machine: "web-00001".to_owned(),
                    seconds: 599
                },
                Slow {
                    kind: ChildKind::Create,
                    machine: "web-00002".to_owned(),
                    seconds: 598
                },
            ]
        );
    }

    /// Checks `summary` at each width against the line expected there.
    fn check(summary: &Summary, table: &[(usize, &str)]) {
        for (width, expected) in table {
            let line = summary.line(*width);
            assert_eq!(line, *expected, "width {width}");
            assert!(columns(&line) <= *width, "width {width}: {line}");
        }
    }

    #[test]
    fn names_go_before_counts_as_the_width_shrinks() {
        let summary = Summary::of(&two_hundred(), Some(12.5), NOW);
        check(
            &summary,
            &[
                (
                    200,
                    "progressing  120/200 done  80 creating  2 failed  12/min  eta 6m  slowest: create web-00000 10m, create web-00001 9m, create web-00002 9m",
                ),
                (
                    120,
                    "progressing  120/200 done  80 creating  2 failed  12/min  eta 6m  slowest: create web-00000 10m, create web-00001 9m",
                ),
                (
                    80,
                    "progressing  120/200 done  80 creating  2 failed  12/min  eta 6m",
                ),
                (
                    60,
                    "progressing  120/200 done  80 creating  2 failed  eta 6m",
                ),
                (40, "progressing  120/200 done  2 failed"),
                (20, "progressing  120/20…"),
            ],
        );
    }

    #[test]
    fn every_line_of_a_large_rollout_fits_every_width() {
        let mut status = two_hundred();
        status.in_flight.extend((0..120).map(|index| InFlight {
            machine: format!("web-old{index:03}-with-a-long-name-for-its-pool"),
            kind: ChildKind::Delete,
            workflow_id: String::new(),
            started_at: NOW - 30_000,
            zone: None,
            run_id: None,
            capacity_type: None,
        }));
        for rate in [None, Some(0.0), Some(0.25), Some(250.0)] {
            let summary = Summary::of(&status, rate, NOW);
            for width in [MIN_WIDTH, 40, 80, 120] {
                let line = summary.line(width);
                assert!(columns(&line) <= width, "{width}: {line}");
                assert!(line.starts_with("progressing"), "{line}");
            }
        }
    }

    #[test]
    fn a_replacement_counts_deletes_and_the_machines_left() {
        let mut status = status(6);
        status.counts = PoolCounts {
            total: 8,
            updated: 4,
            updated_available: 3,
            old: 3,
            creating: 1,
            deleting: 1,
            ..PoolCounts::default()
        };
        status.in_flight = vec![
            InFlight {
                machine: "web-new01".to_owned(),
                kind: ChildKind::Create,
                workflow_id: String::new(),
                started_at: NOW - 42_000,
                zone: None,
                run_id: None,
                capacity_type: None,
            },
            InFlight {
                machine: "web-old01".to_owned(),
                kind: ChildKind::Delete,
                workflow_id: String::new(),
                started_at: NOW - 90_000,
                zone: None,
                run_id: None,
                capacity_type: None,
            },
        ];
        let summary = Summary::of(&status, None, NOW);
        check(
            &summary,
            &[(
                120,
                "progressing  3/6 done  1 creating  1 deleting  2 left  slowest: delete web-old01 1m, create web-new01 42s",
            )],
        );
    }

    #[test]
    fn an_ended_rollout_shows_no_time_left() {
        let mut status = status(200);
        status.phase = RolloutPhase::Completed;
        status.counts.updated_available = 200;
        status.counts.updated = 200;
        let summary = Summary::of(&status, Some(40.0), NOW);
        assert_eq!(summary.line(80), "completed    200/200 done  40/min");
        status.phase = RolloutPhase::Aborted;
        status.counts.updated_available = 10;
        let summary = Summary::of(&status, Some(1.0), NOW);
        assert_eq!(summary.eta_seconds, None);
    }

    #[test]
    fn the_rate_is_over_the_window_and_waits_for_enough_time() {
        let mut pace = Pace::default();
        assert_eq!(pace.per_minute(), None);
        pace.observe(0, 0);
        pace.observe(10_000, 5);
        assert_eq!(pace.per_minute(), None, "10 s is too short to say");
        pace.observe(30_000, 10);
        assert_eq!(pace.per_minute(), Some(20.0));
        // Ten minutes on at 1 a minute: the window holds the last five minutes only.
        for minute in 1..=10 {
            pace.observe(
                30_000 + minute * 60_000,
                10 + u32::try_from(minute).unwrap_or(0),
            );
        }
        let rate = pace.per_minute().unwrap_or_default();
        assert!((rate - 1.0).abs() < 1e-9, "{rate}");
        // Fewer done than before (a machine broke) is no negative rate.
        pace.observe(700_000, 0);
        assert_eq!(pace.per_minute(), Some(0.0));
        // A clock that went back starts again.
        pace.observe(1000, 3);
        assert_eq!(pace.per_minute(), None);
    }

    #[test]
    fn a_pipe_gets_changes_at_a_steady_pace_and_a_heartbeat() {
        let counts = |done| ("progressing", done, 200, 0, 0, 0, 0);
        let mut pacer = Pacer::default();
        let table = [
            (0, 0, true, "the first line at once"),
            (1_000, 1, false, "a change within 10 s waits"),
            (9_999, 2, false, "still within 10 s"),
            (10_000, 2, true, "10 s after the last line, changed"),
            (25_000, 2, false, "nothing changed"),
            (69_999, 2, false, "nothing changed, no heartbeat yet"),
            (70_000, 2, true, "the heartbeat, 60 s after the last line"),
            (80_000, 3, true, "a change 10 s after the heartbeat"),
        ];
        for (now, done, expected, why) in table {
            assert_eq!(pacer.due(counts(done), now), expected, "{why}");
        }
    }

    #[test]
    fn lines_are_cut_with_an_ellipsis_and_results_wrapped_at_spaces() {
        assert_eq!(cut("abcdef", 6), "abcdef");
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abcdef", 0), "");
        assert_eq!(
            wrap(
                "pool web runs template abc123: 200 machines Ready (200 created, 0 deleted)",
                40,
                "  "
            ),
            [
                "pool web runs template abc123: 200",
                "  machines Ready (200 created, 0",
                "  deleted)"
            ]
        );
        assert_eq!(wrap("a-very-long-word", 8, "  "), ["a-very-…"]);
        assert_eq!(wrap("  see: a b", 7, "    "), ["  see:", "    a b"]);
    }

    #[test]
    fn the_width_is_columns_when_set_else_a_hundred() {
        assert_eq!(width_from(None), DEFAULT_WIDTH);
        assert_eq!(width_from(Some("80")), 80);
        assert_eq!(width_from(Some(" 132 ")), 132);
        assert_eq!(width_from(Some("5")), MIN_WIDTH);
        assert_eq!(width_from(Some("0")), DEFAULT_WIDTH);
        assert_eq!(width_from(Some("wide")), DEFAULT_WIDTH);
    }
}
