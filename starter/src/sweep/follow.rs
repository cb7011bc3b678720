//! Following a sweep (`sweep run --wait`) to its end: its status every second, a line whenever
//! it changes, a note once when it waits for approval, then its audit and the exit code the
//! audit calls for.

use std::time::Duration;

use nodewright_model::sweep::SweepStatus;
use temporalio_client::{Client, WorkflowGetResultOptions};

use super::render::{audit_lines, progress_line};
use super::verdict::verdict;
use super::{query_status, sweep_handle};
use crate::handles::no_result;
use crate::{CliError, Output};

/// How often the status is asked while following.
const POLL: Duration = Duration::from_secs(1);

/// What following has printed so far, so that only changes are printed.
#[derive(Debug, Default)]
pub struct Progress {
    last_line: Option<String>,
    told_approval: bool,
    last_error: Option<String>,
}

impl Progress {
    /// The progress line of `status`, when it changed.
    pub fn update(&mut self, status: &SweepStatus) -> Option<String> {
        self.last_error = None;
        let line = progress_line(status);
        if self.last_line.as_deref() == Some(line.as_str()) {
            return None;
        }
        self.last_line = Some(line.clone());
        Some(line)
    }

    /// What the sweep waits for and how to approve, the first time it awaits approval.
    pub fn approval(&mut self, status: &SweepStatus) -> Option<String> {
        if self.told_approval || !status.phase.waits_for_approval() {
            return None;
        }
        self.told_approval = true;
        let deadline = status
            .approval_deadline
            .as_deref()
            .map_or_else(|| "its approval timeout".to_owned(), str::to_owned);
        if let Some(brake) = &status.brake {
            return Some(format!(
                "braked: {}. Look at the plan and approve it with `nodewright sweep approve` before {deadline}; without it nothing is removed",
                brake.message
            ));
        }
        Some(format!(
            "awaiting approval: {} removals planned, more than --max-deletions allows. Approve them with `nodewright sweep approve` before {deadline}; without it every removal is skipped",
            status.planned
        ))
    }

    /// The line a failed status query adds (once per distinct error; a query needs a worker).
    pub fn query_failed(&mut self, error: String) -> Option<String> {
        if self.last_error.as_deref() == Some(error.as_str()) {
            return None;
        }
        self.last_error = Some(error.clone());
        Some(format!("  (no status: {error})"))
    }
}

/// Follows the run `run_id` of `workflow_id` until it ends, prints its audit (text or JSON)
/// and exits as [`verdict`] says; a sweep that failed, was terminated or cancelled is exit 3.
pub async fn follow(
    client: &Client,
    output: Output,
    workflow_id: &str,
    run_id: &str,
    link: &str,
) -> Result<(), CliError> {
    let text = output == Output::Text;
    let mut progress = Progress::default();
    let handle = sweep_handle(client, workflow_id, Some(run_id));
    let result = handle.get_result(WorkflowGetResultOptions::default());
    tokio::pin!(result);
    let ended = loop {
        // The result wins over a status query under way, so that the end shows at once.
        let poll = async {
            tokio::time::sleep(POLL).await;
            query_status(&handle).await
        };
        tokio::select! {
            ended = &mut result => break ended,
            answer = poll => {
                match answer {
                    Ok(status) => {
                        if let (true, Some(line)) = (text, progress.update(&status)) {
                            eprintln!("{line}");
                        }
                        if let Some(note) = progress.approval(&status) {
                            eprintln!("{note}");
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
        Ok(audit) => {
            match output {
                Output::Json => {
                    let document = serde_json::to_string(&audit).map_err(|error| {
                        CliError::RunFailed(format!("printing the audit failed: {error}"))
                    })?;
                    println!("{document}");
                }
                Output::Text => {
                    for line in audit_lines(workflow_id, &audit, false) {
                        println!("{line}");
                    }
                }
            }
            verdict(&audit)
        }
        Err(error) => {
            let reason = no_result(&error);
            if output == Output::Json {
                let document = serde_json::json!({
                    "workflowId": workflow_id, "runId": run_id, "error": reason, "ui": link,
                });
                println!("{document}");
            }
            Err(CliError::RunFailed(format!(
                "{workflow_id} {reason}\n  see {link}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use nodewright_model::sweep::SweepPhase;

    use super::*;

    #[test]
    fn lines_are_printed_when_the_status_changes() {
        let mut progress = Progress::default();
        let mut status = SweepStatus::starting();
        assert!(progress.update(&status).is_some());
        assert!(progress.update(&status).is_none(), "nothing changed");
        status.phase = SweepPhase::Listing;
        status.summary = "listing".to_owned();
        assert_eq!(
            progress.update(&status).as_deref(),
            Some("listing            listing")
        );
        assert!(progress.query_failed("timeout".to_owned()).is_some());
        assert!(progress.query_failed("timeout".to_owned()).is_none());
    }

    #[test]
    fn the_approval_is_asked_for_once() {
        let mut progress = Progress::default();
        let mut status = SweepStatus::starting();
        assert_eq!(progress.approval(&status), None);
        status.phase = SweepPhase::AwaitingApproval;
        status.planned = 12;
        status.approval_deadline = Some("2026-04-01T11:00:00Z".to_owned());
        assert_eq!(
            progress.approval(&status).as_deref(),
            Some(
                "awaiting approval: 12 removals planned, more than --max-deletions allows. Approve them with `nodewright sweep approve` before 2026-04-01T11:00:00Z; without it every removal is skipped"
            )
        );
        assert_eq!(progress.approval(&status), None, "only once");
    }
}
