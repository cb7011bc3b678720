//! Following a rollout (`--wait`) to its end: its status every second, a line whenever it
//! changes, then its outcome. A rollout that paused itself after failures stops the following
//! (it is still running and waits for a person).

use std::time::Duration;

use nodewright_model::WorkflowId;
use nodewright_model::rollout::{RolloutOutcome, RolloutPhase, RolloutStatus};
use temporalio_client::errors::WorkflowGetResultError;
use temporalio_client::{Client, WorkflowGetResultOptions};

use super::render::{failure_line, status_line};
use super::{error_chain, query_status, rollout_handle};
use crate::{CliError, Output};

/// How often the status is asked while following.
const POLL: Duration = Duration::from_secs(1);

/// What following has printed so far, so that only changes are printed.
#[derive(Debug, Default)]
pub struct Progress {
    last_line: Option<String>,
    failures: usize,
    last_error: Option<String>,
}

impl Progress {
    /// The lines `status` adds: failures not shown yet, then the status line if it changed.
    pub fn update(&mut self, status: &RolloutStatus) -> Vec<String> {
        let mut lines: Vec<String> = status
            .failures
            .iter()
            .skip(self.failures)
            .map(|failure| format!("  ✗ {}", failure_line(failure)))
            .collect();
        self.failures = self.failures.max(status.failures.len());
        self.last_error = None;
        let line = status_line(status);
        if self.last_line.as_deref() != Some(line.as_str()) {
            lines.push(line.clone());
            self.last_line = Some(line);
        }
        lines
    }

    /// The line a failed status query adds (once per distinct error).
    pub fn query_failed(&mut self, error: String) -> Option<String> {
        if self.last_error.as_deref() == Some(error.as_str()) {
            return None;
        }
        self.last_error = Some(error.clone());
        Some(format!("  (no status: {error})"))
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
    let mut progress = Progress::default();
    let text = output == Output::Text;
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
                        if text {
                            progress.update(&status).iter().for_each(|line| eprintln!("{line}"));
                        }
                        if let Some(because) = paused_itself(&status) {
                            return Err(stopped(output, workflow_id, pool, link, because, &status));
                        }
                    }
                    Err(error) => {
                        if let (true, Some(line)) = (text, progress.query_failed(error)) {
                            eprintln!("{line}");
                        }
                    }
                }
            }
        }
    };
    match ended {
        Ok(result) => {
            if text {
                progress
                    .update(&result.status)
                    .iter()
                    .for_each(|line| eprintln!("{line}"));
            }
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
                    if text {
                        println!("{summary}");
                        println!("  temporal UI  {link}");
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
    fn lines_are_printed_when_something_changes() {
        let mut progress = Progress::default();
        let mut current = status(RolloutPhase::Progressing, None);
        assert_eq!(progress.update(&current).len(), 1);
        assert!(progress.update(&current).is_empty(), "nothing changed");
        current.failures.push(ChildFailure {
            machine: "web-ab12c".to_owned(),
            kind: ChildKind::Create,
            workflow_id: "create/dev/web-ab12c".to_owned(),
            reason: "quota".to_owned(),
            at: 5,
        });
        assert_eq!(
            progress.update(&current),
            ["  ✗ create web-ab12c (create/dev/web-ab12c): quota"],
            "a new failure, the same line"
        );
        current.counts.updated = 1;
        assert_eq!(progress.update(&current).len(), 1);
        assert!(progress.query_failed("timeout".to_owned()).is_some());
        assert!(progress.query_failed("timeout".to_owned()).is_none());
    }
}
