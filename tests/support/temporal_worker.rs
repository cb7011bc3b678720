//! Running a Temporal worker inside a test, on its own task queue, for as long as the test body.

use std::future::Future;

use anyhow::{Result, anyhow};
use temporalio_sdk::{Runtime, Worker, WorkerOptions};

/// A task queue no other test or worker polls.
pub fn unique_task_queue(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// Runs a worker with `options` while `body` runs, then shuts the worker down and returns the
/// body's result. The worker's future is not `Send`, so both run on the current task.
pub async fn with_worker<T>(
    client: temporalio_client::Client,
    options: WorkerOptions,
    body: impl Future<Output = Result<T>>,
) -> Result<T> {
    let runtime = Runtime::from_current_tokio(Default::default())
        .map_err(|e| anyhow!("creating the Temporal runtime: {e}"))?;
    let mut worker = Worker::new(&runtime, client, options)?;
    let shutdown = worker.shutdown_handle();
    let body = async {
        let result = body.await;
        shutdown();
        result
    };
    let (worker_result, body_result) = tokio::join!(worker.run(), body);
    let value = body_result?;
    worker_result.map_err(|e| anyhow!("the in-test worker failed: {e}"))?;
    Ok(value)
}

/// Polls a visibility query until a run satisfying `wanted` is listed (visibility is eventually
/// consistent), and returns it.
pub async fn wait_for_listed_run(
    client: &temporalio_client::Client,
    query: &str,
    wanted: impl Fn(&temporalio_client::WorkflowExecution) -> bool,
) -> Result<temporalio_client::WorkflowExecution> {
    use futures::StreamExt;
    crate::eventually(
        &format!(
            "a run matching {wanted_query:?} to be listed",
            wanted_query = query
        ),
        std::time::Duration::from_secs(20),
        std::time::Duration::from_millis(250),
        || async {
            let options = temporalio_client::WorkflowListOptions::builder()
                .limit(10)
                .build();
            let runs: Vec<_> = client
                .list_workflows(query.to_owned(), options)
                .collect()
                .await;
            let runs = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
            Ok(runs.into_iter().find(|run| wanted(run)))
        },
    )
    .await
}
