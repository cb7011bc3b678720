//! `nodewright machine create --pool FILE [--name NAME] [--wait]`.

use std::path::PathBuf;
use std::time::Duration;

use nodewright_model::machine::CreateMachineRequest;
use nodewright_model::machine_name::MachineName;
use nodewright_model::{Operation, WorkflowId};
use nodewright_workflows::{CreateMachineWorkflow, search};
use temporalio_client::{
    WorkflowGetResultOptions, WorkflowIdConflictPolicy, WorkflowQueryOptions, WorkflowStartOptions,
};
use temporalio_common::search_attributes::SearchAttributes;

use super::follow::follow;
use super::{announce_start, start_error};
use crate::{CliError, Output, pool_file, settings::Settings};

/// The arguments of `machine create`.
pub struct Args {
    pub pool: PathBuf,
    pub name: Option<String>,
    pub wait: bool,
    pub keep_on_failure: bool,
}

/// Validates everything, starts `create/<cluster>/<machine>`, and follows it with `--wait`.
pub async fn run(settings: &Settings, output: Output, args: Args) -> Result<(), CliError> {
    let pool = pool_file::load(&args.pool)?;
    let cluster = settings.cluster()?;
    let machine = match &args.name {
        Some(name) => {
            MachineName::parse("--name", name).map_err(|e| CliError::InvalidInput(e.to_string()))?
        }
        None => MachineName::generate(&pool.name, rand::random()),
    };
    let request = CreateMachineRequest {
        cluster: cluster.clone(),
        pool: pool.name.clone(),
        machine: machine.to_string(),
        template: pool.template.clone(),
        template_hash: pool.template_hash.clone(),
        creation_timeout: pool.timeouts.creation,
        keep_on_failure: args.keep_on_failure,
        drain: pool.drain.clone(),
        zone: None,
        capacity_type: None,
    };
    request.check()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = WorkflowId::for_subject(Operation::Create, &cluster, machine.as_str());
    let link = settings.ui_link(&workflow_id);
    let options = WorkflowStartOptions::new(settings.task_queue.clone(), workflow_id.to_string())
        .id_conflict_policy(WorkflowIdConflictPolicy::Fail)
        // The creation timeout bounds the run; compensation may need a while more.
        .execution_timeout(
            pool.timeouts
                .creation
                .saturating_add(Duration::from_secs(3600)),
        )
        .search_attributes(SearchAttributes::new([
            search::CLUSTER.value_set(cluster.to_string()),
            search::POOL.value_set(pool.name.clone()),
            search::MACHINE.value_set(machine.to_string()),
            search::OPERATION.value_set(Operation::Create.to_string()),
        ]))
        .static_summary(format!(
            "Create machine {machine} of pool {} ({}, template {})",
            pool.name, pool.template.vm_size, pool.template_hash
        ))
        .build();
    let handle = client
        .start_workflow(CreateMachineWorkflow::run, request, options)
        .await
        .map_err(|error| start_error(error, &workflow_id, &machine.to_string(), &link))?;
    let document = serde_json::json!({
        "workflowId": workflow_id.as_str(), "machine": machine.as_str(),
        "pool": pool.name, "ui": link,
    });
    let doing = format!("creating machine {machine} of pool {}", pool.name);
    if !announce_start(
        output,
        args.wait,
        &workflow_id,
        &doing,
        machine.as_str(),
        &link,
        document,
    ) {
        return Ok(());
    }
    let created = follow(
        handle.get_result(WorkflowGetResultOptions::default()),
        || {
            handle.query(
                CreateMachineWorkflow::status,
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
                "workflowId": workflow_id.as_str(), "result": created, "ui": link,
            });
            println!("{document}");
        }
        Output::Text => {
            println!("machine {} is Ready", created.machine);
            println!("  node         {}", created.node);
            println!("  providerID   {}", created.provider_id);
            println!("  template     {}", created.template_hash);
            for warning in &created.warnings {
                println!("  warning      {warning}");
            }
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}
