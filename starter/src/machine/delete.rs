//! `nodewright machine delete NAME [--wait]`.

use nodewright_model::machine::DeleteMachineRequest;
use nodewright_model::machine_name::MachineName;
use nodewright_model::{Operation, WorkflowId};
use nodewright_workflows::{DeleteMachineWorkflow, search};
use temporalio_client::{
    WorkflowGetResultOptions, WorkflowIdConflictPolicy, WorkflowQueryOptions, WorkflowStartOptions,
};
use temporalio_common::search_attributes::SearchAttributes;

use super::follow::follow;
use super::start_error;
use crate::{CliError, Output, settings::Settings};

/// Starts `delete/<cluster>/<machine>`, and follows it with `--wait`.
pub async fn run(
    settings: &Settings,
    output: Output,
    name: &str,
    wait: bool,
) -> Result<(), CliError> {
    let machine =
        MachineName::parse("NAME", name).map_err(|e| CliError::InvalidInput(e.to_string()))?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = WorkflowId::for_subject(Operation::Delete, &cluster, machine.as_str());
    let link = settings.ui_link(&workflow_id);
    let mut attributes = vec![
        search::CLUSTER.value_set(cluster.to_string()),
        search::MACHINE.value_set(machine.to_string()),
        search::OPERATION.value_set(Operation::Delete.to_string()),
    ];
    if let Some(pool) = machine.pool_of() {
        attributes.push(search::POOL.value_set(pool.to_owned()));
    }
    let options = WorkflowStartOptions::new(settings.task_queue.clone(), workflow_id.to_string())
        .id_conflict_policy(WorkflowIdConflictPolicy::Fail)
        .search_attributes(SearchAttributes::new(attributes))
        .static_summary(format!("Delete machine {machine}"))
        .build();
    let request = DeleteMachineRequest {
        cluster: cluster.clone(),
        machine: machine.to_string(),
    };
    let handle = client
        .start_workflow(DeleteMachineWorkflow::run, request, options)
        .await
        .map_err(|error| start_error(error, &workflow_id, machine.as_str(), &link))?;
    if output == Output::Text {
        eprintln!("started {workflow_id}: deleting machine {machine}");
        eprintln!("  follow it: nodewright machine status {machine}   or   {link}");
    }
    if !wait {
        if output == Output::Json {
            let document = serde_json::json!({
                "workflowId": workflow_id.as_str(), "machine": machine.as_str(), "ui": link,
            });
            println!("{document}");
        }
        return Ok(());
    }
    let deleted = follow(
        handle.get_result(WorkflowGetResultOptions::default()),
        || {
            handle.query(
                DeleteMachineWorkflow::status,
                (),
                WorkflowQueryOptions::default(),
            )
        },
        output,
        workflow_id.as_str(),
        &link,
    )
    .await?;
    match output {
        Output::Json => {
            let document = serde_json::json!({
                "workflowId": workflow_id.as_str(), "result": deleted, "ui": link,
            });
            println!("{document}");
        }
        Output::Text => {
            if deleted.vm_deleted || deleted.node_deleted || !deleted.leftovers_deleted.is_empty() {
                println!("machine {} is gone", deleted.machine);
            } else {
                println!(
                    "machine {} was already gone; nothing to delete",
                    deleted.machine
                );
            }
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}
