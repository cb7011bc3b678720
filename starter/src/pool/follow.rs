//! Following a rollout (`--wait`) to its end: its status every second, shown as a summary that
//! stays readable at any scale (counts per phase, rate, time left, the few slowest machines;
//! [`super::summary`]), then its outcome. On a terminal the summary is a live progress bar
//! redrawn in place; in a pipe it is plain lines at a steady pace (a line when the counts change,
//! at most one every 10 s, and one a minute while nothing changes). Failed machines and why the
//! rollout waits are printed as they appear. Every line fits the width: the terminal's, else
//! `COLUMNS`, else 100. A rollout that paused itself after failures stops the following (it is
//! still running and waits for a person).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use nodewright_model::WorkflowId;
use nodewright_model::rollout::{ChildFailure, RolloutOutcome, RolloutPhase, RolloutStatus};
use temporalio_client::errors::WorkflowGetResultError;
use temporalio_client::{Client, WorkflowGetResultOptions};

use super::render::{kind, reasons};
use super::summary::{Pace, Pacer, Summary, cut, done, width_from, wrap};
use super::{error_chain, query_status, rollout_handle};
use crate::{CliError, Output};

/// How often the status is asked while following.
const POLL: Duration = Duration::from_secs(1);

/// The events following prints as they appear, each once: failed machines, why the rollout
/// waits, a status query that failed. Pure; every line is cut to the width.
#[derive(Debug, Default)]
pub struct Progress {
    failures: usize,
    reasons: Vec<String>,
    last_error: Option<String>,
}

impl Progress {
    /// The lines `status` adds: failures not shown yet, then why it waits when that changed.
    pub fn update(&mut self, status: &RolloutStatus, width: usize) -> Vec<String> {
        let mut lines: Vec<String> = status
            .failures
            .iter()
            .skip(self.failures)
            .map(|failure| cut(&format!("  ✗ {}", failure_line(failure)), width))
            .collect();
        self.failures = self.failures.max(status.failures.len());
        self.last_error = None;
        let reasons = reasons(status);
        if reasons != self.reasons {
            lines.extend(
                reasons
                    .iter()
                    .filter(|reason| !self.reasons.contains(reason))
                    .map(|reason| cut(&format!("  ! {reason}"), width)),
            );
            self.reasons = reasons;
        }
        lines
    }

    /// The line a failed status query adds (once per distinct error).
    pub fn query_failed(&mut self, error: String, width: usize) -> Option<String> {
        if self.last_error.as_deref() == Some(error.as_str()) {
            return None;
        }
        let line = cut(&format!("  (no status: {error})"), width);
        self.last_error = Some(error);
        Some(line)
    }
}

/// A failed child in one line, shorter than the full status's (its workflow ID is the kind,
/// the cluster and the machine): `create web-ab12c: reason`.
fn failure_line(failure: &ChildFailure) -> String {
    format!(
        "{} {}: {}",
        kind(failure.kind),
        failure.machine,
        failure.reason
    )
}

/// Where following shows its progress: a live bar on a terminal, paced lines in a pipe, nothing
/// for `--output json` (which prints one document at the end).
struct Display {
    /// Text lines for people.
    text: bool,
    width: usize,
    events: Progress,
    pace: Pace,
    pacer: Pacer,
    /// The live bar, on a terminal.
    bar: Option<ProgressBar>,
}

impl Display {
    fn new(output: Output) -> Self {
        let text = output == Output::Text;
        let width = width_from(std::env::var("COLUMNS").ok().as_deref());
        let bar = (text && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(0);
            // The bar fills what the counts leave of the line; the message line is cut to the
            // terminal's width by indicatif (names last, so they go first).
            let style = ProgressStyle::with_template(
                "{prefix} {wide_bar} {pos}/{len} {elapsed}\n{wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(500));
            bar
        });
        Self {
            text,
            width,
            events: Progress::default(),
            pace: Pace::default(),
            pacer: Pacer::default(),
            bar,
        }
    }

    /// Shows `status` as seen now.
    fn show(&mut self, status: &RolloutStatus) {
        if !self.text {
            return;
        }
        let now = chrono::Utc::now().timestamp_millis();
        self.pace.observe(now, done(status));
        for line in self.events.update(status, self.width) {
            self.line(line);
        }
        let summary = Summary::of(status, self.pace.per_minute(), now);
        match &self.bar {
            Some(bar) => {
                bar.set_prefix(summary.phase);
                bar.set_length(u64::from(summary.desired));
                bar.set_position(u64::from(summary.done));
                bar.set_message(summary.line(self.width));
            }
            None => {
                if self.pacer.due(summary.counts(), now) {
                    eprintln!("{}", summary.line(self.width));
                }
            }
        }
    }

    /// Shows that the status did not answer.
    fn query_failed(&mut self, error: String) {
        if !self.text {
            return;
        }
        if let Some(line) = self.events.query_failed(error, self.width) {
            self.line(line);
        }
    }

    /// Shows the last status: the bar goes, its summary stays as a line.
    fn finish(&mut self, status: &RolloutStatus) {
        if !self.text {
            return;
        }
        let now = chrono::Utc::now().timestamp_millis();
        self.pace.observe(now, done(status));
        for line in self.events.update(status, self.width) {
            self.line(line);
        }
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        let summary = Summary::of(status, self.pace.per_minute(), now);
        eprintln!("{}", summary.line(self.width));
    }

    /// Prints the result's lines on stdout, each within the width (the summary broken at
    /// spaces; the link whole, on a line of its own when it does not fit beside its label).
    fn result(&self, summary: &str, link: &str) {
        for line in wrap(summary, self.width, "  ") {
            println!("{line}");
        }
        println!("{}", link_line("temporal UI", link, self.width));
    }

    /// Takes the live bar away (the run ended without a status to show).
    fn abandon(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn line(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }
}

/// `  LABEL  LINK` when it fits `width`, else the label and the link on a line of its own (a
/// link is never cut: a terminal opens it only whole).
pub fn link_line(label: &str, link: &str, width: usize) -> String {
    let line = format!("  {label}  {link}");
    if line.chars().count() <= width {
        line
    } else {
        format!("  {label}\n  {link}")
    }
}

/// Why the rollout paused itself, when it did (after `maxFailures` failed children): a person
/// has to look, so following stops.
pub fn paused_itself(status: &RolloutStatus) -> Option<&str> {
    match (&status.phase, &status.paused_because) {
        (RolloutPhase::Paused, Some(because)) if because.starts_with("paused itself") => {
            Some(because.as_str())
        }
        _ => None,
    }
}

/// Follows the rollout started as `run_id` (through the runs it continues as) until it ends or
/// pauses itself.
///
/// Completed: exit 0 with its summary. Aborted, failed, terminated, or paused itself: exit 3
/// with the reason.
pub async fn follow(
    client: &Client,
    run_id: Option<&str>,
    output: Output,
    workflow_id: &WorkflowId,
    pool: &str,
    link: &str,
) -> Result<(), CliError> {
    let mut display = Display::new(output);
    let started = rollout_handle(client, workflow_id, run_id);
    // Queries go to the latest run: after a continue-as-new that is the new one.
    let handle = rollout_handle(client, workflow_id, None);
    let result = started.get_result(WorkflowGetResultOptions::default());
    tokio::pin!(result);
    let ended = loop {
        tokio::select! {
            ended = &mut result => break ended,
            _ = tokio::time::sleep(POLL) => {
                match query_status(&handle).await {
                    Ok(status) => {
                        if let Some(because) = paused_itself(&status) {
                            display.finish(&status);
                            return Err(stopped(output, workflow_id, pool, link, because, &status));
                        }
                        display.show(&status);
                    }
                    Err(error) => display.query_failed(error),
                }
            }
        }
    };
    match ended {
        Ok(result) => {
            display.finish(&result.status);
            let summary = result.status.summary.clone().unwrap_or_else(|| {
                format!("pool {pool} runs template {}", result.pool.template_hash)
            });
            if output == Output::Json {
                let document = serde_json::json!({
                    "workflowId": workflow_id.as_str(), "result": result, "ui": link,
                });
                println!("{document}");
            }
            match result.outcome {
                RolloutOutcome::Completed => {
                    if output == Output::Text {
                        display.result(&summary, link);
                    }
                    Ok(())
                }
                RolloutOutcome::Aborted => Err(CliError::RunFailed(format!(
                    "{workflow_id} was aborted: {summary}\n  see {link}"
                ))),
                RolloutOutcome::Canceled => Err(CliError::RunFailed(format!(
                    "{workflow_id} was canceled: {summary}\n  see {link}"
                ))),
            }
        }
        Err(error) => {
            display.abandon();
            let reason = match &error {
                WorkflowGetResultError::Failed(failure) => {
                    format!("failed: {}", error_chain(failure.as_ref()))
                }
                WorkflowGetResultError::Terminated { .. } => "was terminated".to_owned(),
                WorkflowGetResultError::Cancelled { .. } => "was cancelled".to_owned(),
                WorkflowGetResultError::TimedOut => "timed out".to_owned(),
                other => format!("could not be followed: {}", error_chain(other)),
            };
            if output == Output::Json {
                let document = serde_json::json!({
                    "workflowId": workflow_id.as_str(), "error": reason, "ui": link,
                });
                println!("{document}");
            }
            Err(CliError::RunFailed(format!(
                "{workflow_id} {reason}\n  see {link}"
            )))
        }
    }
}

/// The answer when the rollout paused itself: it still runs and waits for resume or abort.
fn stopped(
    output: Output,
    workflow_id: &WorkflowId,
    pool: &str,
    link: &str,
    because: &str,
    status: &RolloutStatus,
) -> CliError {
    if output == Output::Json {
        let document = serde_json::json!({
            "workflowId": workflow_id.as_str(), "runStatus": "running", "status": status,
            "ui": link,
        });
        println!("{document}");
    }
    CliError::RunFailed(format!(
        "{workflow_id} {because}\n  the rollout is still running, paused: fix the cause, then `nodewright pool rollout resume {pool}`; or end it with `nodewright pool rollout abort {pool}`\n  see `nodewright pool rollout status {pool}` or {link}"
    ))
}

#[cfg(test)]
mod tests {
    use nodewright_model::pool::Amount;
    use nodewright_model::rollout::{Budget, ChildFailure, ChildKind, StrategyView};

    use super::*;

    fn status(phase: RolloutPhase, because: Option<&str>) -> RolloutStatus {
        let strategy = StrategyView {
            max_surge: Amount::Count(1),
            max_unavailable: Amount::Count(0),
            budget: Budget {
                surge: 1,
                unavailable: 0,
            },
        };
        let mut status = RolloutStatus::new("web", "abc123", 2, strategy, 3, 0);
        status.phase = phase;
        status.paused_because = because.map(str::to_owned);
        status
    }

    #[test]
    fn only_a_pause_after_failures_stops_the_following() {
        let itself = "paused itself after 3 failed machine operations (maxFailures 3); last: ...";
        assert_eq!(
            paused_itself(&status(RolloutPhase::Paused, Some(itself))),
            Some(itself)
        );
        assert_eq!(
            paused_itself(&status(RolloutPhase::Paused, Some("paused by ann@cli"))),
            None
        );
        assert_eq!(
            paused_itself(&status(RolloutPhase::Progressing, None)),
            None
        );
        assert_eq!(
            paused_itself(&status(RolloutPhase::Aborting, Some("aborted by ann@cli"))),
            None
        );
    }

    #[test]
    fn failures_and_reasons_are_printed_once_as_they_appear_within_the_width() {
        let mut progress = Progress::default();
        let mut current = status(RolloutPhase::Progressing, None);
        assert!(progress.update(&current, 80).is_empty(), "nothing to say");
        current.failures.push(ChildFailure {
            machine: "web-ab12c".to_owned(),
            kind: ChildKind::Create,
            workflow_id: "create/dev/web-ab12c".to_owned(),
            reason: "quota".to_owned(),
            at: 5,
        });
        assert_eq!(
            progress.update(&current, 80),
            ["  ✗ create web-ab12c: quota"]
        );
        assert!(progress.update(&current, 80).is_empty(), "printed once");
        current.failures.push(ChildFailure {
            machine: "web-cd34e".to_owned(),
            kind: ChildKind::Delete,
            workflow_id: "delete/dev/web-cd34e".to_owned(),
            reason: "the drain did not finish within its timeout of 10m".to_owned(),
            at: 6,
        });
        current.phase = RolloutPhase::Paused;
        current.paused_because = Some("paused by ann@cli".to_owned());
        assert_eq!(
            progress.update(&current, 40),
            [
                "  ✗ delete web-cd34e: the drain did not…",
                "  ! paused by ann@cli"
            ]
        );
        assert!(progress.update(&current, 40).is_empty(), "the same reason");
        assert!(progress.query_failed("timeout".to_owned(), 80).is_some());
        assert!(progress.query_failed("timeout".to_owned(), 80).is_none());
    }

    #[test]
    fn the_link_stays_whole_on_a_line_of_its_own_when_it_does_not_fit() {
        assert_eq!(
            link_line("temporal UI", "http://ui/x", 80),
            "  temporal UI  http://ui/x"
        );
        assert_eq!(
            link_line(
                "temporal UI",
                "http://ui/namespaces/default/workflows/rollout%2Fdev%2Fweb",
                40
            ),
            "  temporal UI\n  http://ui/namespaces/default/workflows/rollout%2Fdev%2Fweb"
        );
    }
}
