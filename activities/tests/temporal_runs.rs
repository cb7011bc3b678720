//! `temporal.workflow_ends` and `temporal.cancel_workflows` against the local stack's Temporal
//! server: a workflow ID whose first run ended and whose second run runs (as when `machine
//! delete`, the sweep or a retry reuses a rollout child's ID). Asked by the first run's ID, the
//! activities answer the first run's end and leave the second run alone; asked by the workflow
//! ID only (runs recorded before run IDs were kept), they see the latest run.
//!
//! Run with `cargo test -p nodewright-activities --test temporal_runs` after `dev/stack up`.
//! The server's address and namespace come from `TEMPORAL_ADDRESS` and `TEMPORAL_NAMESPACE`, or
//! else from the stack's env file (`.run/env`, found as `stack` finds the kubeconfig). The runs
//! go to a task queue no worker polls (`nwt-runs-<suffix>`), so they run until terminated; the
//! test terminates what it started whether it passed or not.

#[cfg(test)]
#[allow(dead_code)] // Only the stack's env file is read here, not its Kubernetes client.
mod stack;

#[cfg(test)]
mod temporal_runs {
    use std::str::FromStr;

    use futures::FutureExt;
    use nodewright_activities::temporal::{TemporalActivities, Workflows};
    use nodewright_model::rollout::RunEnd;
    use temporalio_client::{
        Client, ClientOptions, Connection, ConnectionOptions, Url, WorkflowExecutionInfo,
        WorkflowFetchHistoryOptions, WorkflowHandle, WorkflowStartOptions,
        WorkflowTerminateOptions,
    };
    use temporalio_common::protos::temporal::api::history::v1::history_event::Attributes;
    use temporalio_common::{HasWorkflowDefinition, WorkflowDefinition};

    use super::stack::{self, StackResult};

    /// A workflow type no worker runs: its runs wait until terminated.
    struct Idle;

    impl WorkflowDefinition for Idle {
        type Input = ();
        type Output = ();
        fn name(&self) -> &str {
            "NodewrightTestIdle"
        }
    }

    impl HasWorkflowDefinition for Idle {
        type Run = Self;
    }

    async fn client() -> StackResult<Client> {
        let address = stack::env_value("TEMPORAL_ADDRESS").ok_or(
            "needs the local stack: TEMPORAL_ADDRESS is not set and no stack env file (.run/env) names it; run `dev/stack up`",
        )?;
        let namespace = stack::env_value("TEMPORAL_NAMESPACE").unwrap_or_else(|| "default".into());
        let url = if address.contains("://") {
            address
        } else {
            format!("http://{address}")
        };
        let options = ConnectionOptions::new(Url::from_str(&url)?)
            .identity("nodewright-activities-test".to_owned())
            .build();
        let connection = Connection::connect(options).await?;
        Ok(Client::new(
            connection,
            ClientOptions::new(namespace).build(),
        )?)
    }

    fn run(client: &Client, workflow_id: &str, run_id: &str) -> WorkflowHandle<Client, Idle> {
        let info = WorkflowExecutionInfo::builder()
            .namespace(temporalio_client::NamespacedClient::namespace(client))
            .workflow_id(workflow_id.to_owned())
            .run_id(run_id.to_owned())
            .build();
        WorkflowHandle::new(client.clone(), info)
    }

    /// Whether the run was asked to cancel (its history has the request).
    async fn cancel_requested(handle: &WorkflowHandle<Client, Idle>) -> StackResult<bool> {
        let events = handle
            .fetch_history(WorkflowFetchHistoryOptions::default())
            .into_events()
            .await?;
        Ok(events.into_iter().any(|event| {
            matches!(
                event.attributes,
                Some(Attributes::WorkflowExecutionCancelRequestedEventAttributes(
                    _
                ))
            )
        }))
    }

    async fn terminate(handle: &WorkflowHandle<Client, Idle>, reason: &str) -> StackResult<()> {
        let options = WorkflowTerminateOptions::builder()
            .reason(reason.to_owned())
            .build();
        Ok(handle.terminate(options).await?)
    }

    #[tokio::test]
    async fn a_known_run_is_asked_about_and_cancelled_never_a_newer_run_of_its_id()
    -> StackResult<()> {
        let client = client().await?;
        let suffix = format!(
            "{:x}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_nanos()
        );
        let task_queue = format!("nwt-runs-{suffix}");
        let workflow_id = format!("delete/nwt-runs/m-{suffix}");
        let start = || WorkflowStartOptions::new(task_queue.clone(), workflow_id.clone()).build();
        let first = client.start_workflow(Idle, (), start()).await?;
        let first_run = first.run_id().ok_or("the first run's ID")?.to_owned();
        terminate(&first, "the child ended").await?;
        let second = client.start_workflow(Idle, (), start()).await?;
        let second_run = second.run_id().ok_or("the second run's ID")?.to_owned();
        let checks = async {
            let activities = TemporalActivities::new(client.clone());
            let by_run = |run_ids: Vec<Option<String>>| Workflows {
                workflow_ids: vec![workflow_id.clone()],
                run_ids,
                reason: "rollout canceled".to_owned(),
                wait_secs: 0,
            };
            // By the first run's ID: its end, though the ID's latest run runs.
            let ends = activities
                .ends(&by_run(vec![Some(first_run.clone())]))
                .await?;
            assert_eq!(
                ends,
                [Some(RunEnd::Terminated {
                    reason: String::new()
                })],
                "the first run's end"
            );
            // By the workflow ID only (as runs recorded before asked): the latest run, running.
            assert_eq!(activities.ends(&by_run(Vec::new())).await?, [None]);
            assert_eq!(activities.ends(&by_run(vec![None])).await?, [None]);
            // By the second run's ID: running.
            let ends = activities
                .ends(&by_run(vec![Some(second_run.clone())]))
                .await?;
            assert_eq!(ends, [None]);
            // Cancelling the first run (it ended) leaves the second run alone.
            activities
                .cancel(&by_run(vec![Some(first_run.clone())]))
                .await?;
            let second_handle = run(&client, &workflow_id, &second_run);
            assert!(
                !cancel_requested(&second_handle).await?,
                "the second run was not asked to cancel"
            );
            assert_eq!(activities.ends(&by_run(Vec::new())).await?, [None]);
            // Cancelling by the second run's ID asks it (and it still runs: no worker).
            activities
                .cancel(&by_run(vec![Some(second_run.clone())]))
                .await?;
            assert!(
                cancel_requested(&second_handle).await?,
                "the second run was asked to cancel"
            );
            StackResult::Ok(())
        };
        let outcome = std::panic::AssertUnwindSafe(checks).catch_unwind().await;
        terminate(&second, "test over").await?;
        match outcome {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}
