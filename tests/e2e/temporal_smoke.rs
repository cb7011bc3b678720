//! The Temporal dev server is real: an in-test worker runs a workflow with one activity, and the
//! run is found again through a visibility query on a nodewright search attribute.

use std::time::Duration;

use anyhow::Result;
use nodewright_tests::{Stack, stack::ensure_eq, temporal_worker};
use nodewright_workflows::search;
use temporalio_client::{WorkflowExecutionStatus, WorkflowGetResultOptions, WorkflowStartOptions};
use temporalio_macros::{activities, workflow, workflow_methods};
use temporalio_sdk::{
    ActivityOptions, WorkerOptions, WorkflowContext, WorkflowResult,
    activities::{ActivityContext, ActivityError},
};

/// Tags itself with a cluster name given as input, then has an activity reverse a word.
#[workflow]
#[derive(Default)]
pub struct SmokeWorkflow;

#[workflow_methods]
impl SmokeWorkflow {
    #[run(name = "SmokeWorkflow")]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        input: (String, String),
    ) -> WorkflowResult<String> {
        let (cluster, word) = input;
        ctx.upsert_search_attributes([search::CLUSTER.value_set(cluster)]);
        let reversed = ctx
            .execute_activity(
                SmokeActivities::reverse,
                word,
                ActivityOptions::start_to_close_timeout(Duration::from_secs(10)),
            )
            .await?;
        Ok(reversed)
    }
}

pub struct SmokeActivities;

#[activities]
impl SmokeActivities {
    #[activity]
    pub async fn reverse(_ctx: ActivityContext, word: String) -> Result<String, ActivityError> {
        Ok(word.chars().rev().collect())
    }
}

#[tokio::test]
async fn in_test_worker_runs_a_workflow_found_by_search_attribute() -> Result<()> {
    let stack = Stack::load()?;
    let client = stack.temporal_client().await?;
    let task_queue = temporal_worker::unique_task_queue("smoke");
    let cluster = format!("smoke-{}", uuid::Uuid::new_v4().simple());
    let workflow_id = format!("smoke/{cluster}");

    let options = WorkerOptions::new(task_queue.clone())
        .register_workflow::<SmokeWorkflow>()?
        .register_activities(SmokeActivities)
        .build();
    let result = temporal_worker::with_worker(client.clone(), options, async {
        let handle = client
            .start_workflow(
                SmokeWorkflow::run,
                (cluster.clone(), "nodewright".to_owned()),
                WorkflowStartOptions::new(task_queue.clone(), workflow_id.clone()).build(),
            )
            .await?;
        Ok(handle
            .get_result(WorkflowGetResultOptions::default())
            .await?)
    })
    .await?;
    ensure_eq("the activity's result", result.as_str(), "thgirwedon")?;

    // Visibility is eventually consistent: poll until the run shows up, then check it.
    let query = format!("NodewrightCluster = '{cluster}'");
    let found = temporal_worker::wait_for_listed_run(&client, &query, |run| {
        run.status() == WorkflowExecutionStatus::Completed
    })
    .await?;
    ensure_eq("listed workflow id", found.id(), workflow_id.as_str())?;
    ensure_eq(
        "listed workflow type",
        found.workflow_type(),
        "SmokeWorkflow",
    )?;
    ensure_eq(
        "NodewrightCluster on the listed run",
        found.search_attributes().get(&search::CLUSTER),
        Some(cluster.clone()),
    )?;
    Ok(())
}
