//! Following a machine run to its end: live progress from the `status` query, then the result
//! or the failure's reason.

use std::future::Future;
use std::time::Duration;

use temporalio_client::errors::{WorkflowGetResultError, WorkflowQueryError};

use super::render::{LiveProgress, ShowsProgress};
use crate::{CliError, Output};

/// How often the status query is asked while following.
const POLL: Duration = Duration::from_millis(1000);

/// Waits for `result`, showing `query`'s progress meanwhile (text output only). On failure,
/// the reason is the status's `failure` when the workflow recorded one.
pub async fn follow<T, S, R, Q, QF>(
    result: R,
    query: Q,
    output: Output,
    workflow_id: &str,
    link: &str,
) -> Result<T, CliError>
where
    R: Future<Output = Result<T, WorkflowGetResultError>>,
    Q: Fn() -> QF,
    QF: Future<Output = Result<S, WorkflowQueryError>>,
    S: ShowsProgress,
{
    let mut live = (output == Output::Text).then(LiveProgress::new);
    tokio::pin!(result);
    let outcome = loop {
        tokio::select! {
            outcome = &mut result => break outcome,
            _ = tokio::time::sleep(POLL) => {
                if let (Some(live), Ok(status)) = (live.as_mut(), query().await) {
                    live.update(&status);
                }
            }
        }
    };
    let last = query().await.ok();
    if let Some(live) = live.as_mut() {
        if let Some(status) = &last {
            live.update(status);
        }
        live.finish();
    }
    match outcome {
        Ok(value) => Ok(value),
        Err(error) => {
            if let Some(canceled) = last.as_ref().and_then(|s| s.run_status().canceled.clone()) {
                return Err(CliError::RunFailed(format!(
                    "{workflow_id} was canceled: {}\n  see {link}",
                    canceled.summary()
                )));
            }
            let reason = last
                .as_ref()
                .and_then(|s| s.run_status().failure.clone())
                .unwrap_or_else(|| error_chain(&error));
            Err(CliError::RunFailed(format!(
                "{workflow_id} failed: {reason}\n  see {link}"
            )))
        }
    }
}

pub use crate::error_chain;
