//! `nodewright machine status NAME`: the latest create or delete run of a machine.

use nodewright_model::machine::MachineStatus;
use nodewright_model::machine_name::MachineName;
use nodewright_model::{Operation, WorkflowId};
use nodewright_workflows::{CreateMachineWorkflow, DeleteMachineWorkflow};
use temporalio_client::{
    Client, WorkflowDescribeOptions, WorkflowExecutionStatus, WorkflowQueryOptions,
};

use super::render::print_steps;
use crate::{CliError, Output, settings::Settings};

/// One run of a machine workflow, as found.
struct Found {
    workflow_id: WorkflowId,
    run_status: WorkflowExecutionStatus,
    started: Option<std::time::SystemTime>,
}

async fn describe(client: &Client, workflow_id: WorkflowId) -> Option<Found> {
    let handle = client.get_workflow_handle::<CreateMachineWorkflow>(workflow_id.to_string());
    let description = handle
        .describe(WorkflowDescribeOptions::default())
        .await
        .ok()?;
    Some(Found {
        workflow_id,
        run_status: description.status(),
        started: description.start_time(),
    })
}

/// Prints the steps of the machine's most recent run.
pub async fn run(settings: &Settings, output: Output, name: &str) -> Result<(), CliError> {
    let machine =
        MachineName::parse("NAME", name).map_err(|e| CliError::InvalidInput(e.to_string()))?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let create = describe(
        &client,
        WorkflowId::for_subject(Operation::Create, &cluster, machine.as_str()),
    )
    .await;
    let delete = describe(
        &client,
        WorkflowId::for_subject(Operation::Delete, &cluster, machine.as_str()),
    )
    .await;
    let latest = match (create, delete) {
        (Some(c), Some(d)) => Some(if d.started >= c.started { d } else { c }),
        (c, d) => c.or(d),
    };
    let Some(found) = latest else {
        return Err(CliError::InvalidInput(format!(
            "no create or delete run of machine {machine} in cluster {cluster}; list runs with `nodewright runs --machine {machine}`"
        )));
    };
    let id = found.workflow_id.to_string();
    let query = WorkflowQueryOptions::default();
    let progress: Result<MachineStatus, _> = if id.starts_with("create/") {
        client
            .get_workflow_handle::<CreateMachineWorkflow>(id.clone())
            .query(CreateMachineWorkflow::status, (), query)
            .await
    } else {
        client
            .get_workflow_handle::<DeleteMachineWorkflow>(id.clone())
            .query(DeleteMachineWorkflow::status, (), query)
            .await
    };
    let progress = progress.map_err(|error| {
        CliError::RunFailed(format!(
            "{id} did not answer its status query ({error}); is nodewright-worker running?"
        ))
    })?;
    let link = settings.ui_link(&found.workflow_id);
    let run_status = format!("{:?}", found.run_status).to_lowercase();
    match output {
        Output::Json => {
            let document = serde_json::json!({
                "workflowId": id, "runStatus": run_status, "status": progress, "ui": link,
            });
            println!("{document}");
        }
        Output::Text => {
            println!("{id}: {run_status}");
            print_steps(&progress);
            for (key, value) in &progress.facts {
                println!("  {key:<12} {value}");
            }
            if let Some(failure) = &progress.failure {
                println!("  failure      {failure}");
            }
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}
