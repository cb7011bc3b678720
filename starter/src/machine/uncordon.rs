//! `nodewright machine uncordon NAME [--force]`: refused while a drain or delete of the
//! machine runs (pointing to `machine cancel`); otherwise runs `uncordon/<cluster>/<machine>`
//! and waits for it (it takes a second). A cordon an administrator set before nodewright's
//! drain is kept, and said so, unless `--force` (`model::machine::uncordon`).

use std::time::Duration;

use nodewright_model::machine::UncordonRequest;
use nodewright_model::machine::uncordon::{CONFLICTING, may_uncordon};
use nodewright_model::{Operation, WorkflowId};
use nodewright_workflows::UncordonNodeWorkflow;
use temporalio_client::{
    WorkflowGetResultOptions, WorkflowIdConflictPolicy, WorkflowQueryOptions, WorkflowStartOptions,
};

use super::cancel::is_running;
use super::drain::{attributes, machine_name};
use super::follow::follow;
use super::start_error;
use crate::{CliError, Output, settings::Settings};

/// Checks that no drain or delete of the machine runs, then runs the uncordon and prints what
/// it did (whether the cordon was kept).
pub async fn run(
    settings: &Settings,
    output: Output,
    name: &str,
    force: bool,
) -> Result<(), CliError> {
    let machine = machine_name(name)?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let mut running = Vec::new();
    for operation in CONFLICTING {
        let workflow_id = WorkflowId::for_subject(operation, &cluster, machine.as_str());
        if is_running(&client, &workflow_id).await {
            running.push((operation, workflow_id.to_string()));
        }
    }
    may_uncordon(machine.as_str(), &running).map_err(CliError::AlreadyRunning)?;
    let workflow_id = WorkflowId::for_subject(Operation::Uncordon, &cluster, machine.as_str());
    let link = settings.ui_link(&workflow_id);
    let options = WorkflowStartOptions::new(settings.task_queue.clone(), workflow_id.to_string())
        .id_conflict_policy(WorkflowIdConflictPolicy::Fail)
        .search_attributes(attributes(&cluster, &machine, Operation::Uncordon))
        .static_summary(format!("Uncordon node {machine}"))
        .execution_timeout(Duration::from_secs(600))
        .build();
    let request = UncordonRequest {
        cluster,
        machine: machine.to_string(),
        force,
    };
    request.check()?;
    let handle = client
        .start_workflow(UncordonNodeWorkflow::run, request, options)
        .await
        .map_err(|error| start_error(error, &workflow_id, machine.as_str(), &link))?;
    let uncordoned = follow(
        handle.get_result(WorkflowGetResultOptions::default()),
        || {
            handle.query(
                UncordonNodeWorkflow::status,
                (),
                WorkflowQueryOptions::default(),
            )
        },
        Output::Json,
        workflow_id.as_str(),
        &link,
    )
    .await?;
    let message = uncordoned.summary();
    match output {
        Output::Json => {
            let document = serde_json::json!({
                "workflowId": workflow_id.as_str(),
                "message": message,
                "keptCordon": uncordoned.kept_cordon,
            });
            println!("{document}");
        }
        Output::Text => println!("{message}"),
    }
    Ok(())
}
