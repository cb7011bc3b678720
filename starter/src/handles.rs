//! What the pool and sweep commands share to reach a run: a typed handle on a workflow ID (and
//! run), and a query that gives up after a deadline (a query needs a worker to answer).

use std::future::Future;
use std::time::Duration;

use nodewright_model::cancel::Canceled;
use temporalio_client::errors::WorkflowGetResultError;
use temporalio_client::{Client, NamespacedClient, WorkflowExecutionInfo, WorkflowHandle};

use crate::error_chain;

/// How long a status query may take: it needs a worker.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// A handle on `workflow_id`: its run `run_id`, or without one (or an empty one) its latest run.
pub fn run_handle<W: temporalio_common::HasWorkflowDefinition>(
    client: &Client,
    workflow_id: &str,
    run_id: Option<&str>,
) -> WorkflowHandle<Client, W> {
    let info = WorkflowExecutionInfo::builder()
        .namespace(client.namespace())
        .workflow_id(workflow_id.to_owned())
        .maybe_run_id(run_id.filter(|id| !id.is_empty()).map(str::to_owned))
        .build();
    WorkflowHandle::new(client.clone(), info)
}

/// The answer of `query`, or why there is none (its error, or no answer within
/// [`QUERY_TIMEOUT`]).
pub async fn answer<T, E: std::error::Error>(
    query: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(QUERY_TIMEOUT, query).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => Err(error_chain(&error)),
        Err(_) => Err(format!(
            "the status query got no answer within {}s; is nodewright-worker running?",
            QUERY_TIMEOUT.as_secs()
        )),
    }
}

/// Why a run gave no result, in words for people: `failed: …`, `was canceled (canceled during
/// list-pool-nodes; nothing to undo)`, `was terminated`, `timed out`.
pub fn no_result(error: &WorkflowGetResultError) -> String {
    match error {
        WorkflowGetResultError::Failed(failure) => {
            format!("failed: {}", error_chain(failure.as_ref()))
        }
        WorkflowGetResultError::Cancelled { details } => match details.deserialize::<Canceled>() {
            Ok(canceled) => format!("was canceled ({})", canceled.summary()),
            Err(_) => "was canceled".to_owned(),
        },
        WorkflowGetResultError::Terminated { .. } => "was terminated".to_owned(),
        WorkflowGetResultError::TimedOut => "timed out".to_owned(),
        other => format!("could not be followed: {}", error_chain(other)),
    }
}
