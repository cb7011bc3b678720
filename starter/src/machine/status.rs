//! `nodewright machine status NAME`: the latest create, drain or delete run of a machine.

use nodewright_model::drain::DrainStatus;
use nodewright_model::machine::MachineStatus;
use nodewright_model::machine_name::MachineName;
use nodewright_model::{Operation, WorkflowId};
use nodewright_workflows::{CreateMachineWorkflow, DeleteMachineWorkflow, DrainNodeWorkflow};
use temporalio_client::{
    Client, WorkflowDescribeOptions, WorkflowExecutionStatus, WorkflowQueryOptions,
};

use super::render::print_steps;
use crate::{CliError, Output, settings::Settings, table};

/// One run of a machine workflow, as found.
struct Found {
    workflow_id: WorkflowId,
    run_status: WorkflowExecutionStatus,
    started: Option<std::time::SystemTime>,
    closed: Option<std::time::SystemTime>,
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
        closed: description.close_time(),
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
    let drain = describe(
        &client,
        WorkflowId::for_subject(Operation::Drain, &cluster, machine.as_str()),
    )
    .await;
    // A drain that started while the latest delete ran is that delete's first step: show the
    // delete (with the drain's pods and volumes), not the drain alone. One that started after
    // the delete ended (a cancelled delete gives the machine back) is a drain of its own.
    let drain_of_delete = matches!(
        (&drain, &delete),
        (Some(d), Some(x)) if d.started >= x.started && x.closed.is_none_or(|closed| d.started <= Some(closed))
    );
    let drain_id = drain.as_ref().map(|d| d.workflow_id.to_string());
    let latest = [
        create,
        (!drain_of_delete).then_some(drain).flatten(),
        delete,
    ]
    .into_iter()
    .flatten()
    .max_by_key(|found| found.started);
    let Some(found) = latest else {
        return Err(CliError::InvalidInput(format!(
            "no create, drain or delete run of machine {machine} in cluster {cluster}; list runs with `nodewright runs --machine {machine}`"
        )));
    };
    let id = found.workflow_id.to_string();
    let query = WorkflowQueryOptions::default();
    let mut drain_status: Option<DrainStatus> = None;
    let progress: Result<MachineStatus, _> = if id.starts_with("create/") {
        client
            .get_workflow_handle::<CreateMachineWorkflow>(id.clone())
            .query(CreateMachineWorkflow::status, (), query)
            .await
    } else if id.starts_with("drain/") {
        client
            .get_workflow_handle::<DrainNodeWorkflow>(id.clone())
            .query(DrainNodeWorkflow::status, (), query)
            .await
            .map(|status| {
                let run = status.run.clone();
                drain_status = Some(status);
                run
            })
    } else {
        if let (true, Some(drain_id)) = (drain_of_delete, &drain_id) {
            drain_status = client
                .get_workflow_handle::<DrainNodeWorkflow>(drain_id.clone())
                .query(
                    DrainNodeWorkflow::status,
                    (),
                    WorkflowQueryOptions::default(),
                )
                .await
                .ok();
        }
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
    let run_status = crate::runs::status_word(found.run_status);
    match output {
        Output::Json => {
            let document = match (&drain_status, id.starts_with("drain/")) {
                (Some(drain), true) => serde_json::json!({
                    "workflowId": id, "runStatus": run_status, "status": drain, "ui": link,
                }),
                (drain, _) => serde_json::json!({
                    "workflowId": id, "runStatus": run_status, "status": progress,
                    "drain": drain, "ui": link,
                }),
            };
            println!("{document}");
        }
        Output::Text => {
            println!("{id}: {run_status}");
            print_steps(&progress);
            for (key, value) in &progress.facts {
                println!("  {key:<12} {value}");
            }
            if let Some(hold) = &progress.hold {
                println!("  hooks        {}", super::delete::hold_line(hold));
            }
            if !progress.skipped_hooks.is_empty() {
                println!(
                    "  skipped      {} (--skip-hooks; they stay on the Node)",
                    progress.skipped_hooks.join(", ")
                );
            }
            for warning in &progress.warnings {
                println!("  warning      {warning}");
            }
            if let Some(drain) = &drain_status {
                print_drain(drain);
            }
            if let Some(failure) = &progress.failure {
                println!("  failure      {failure}");
            }
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}

/// The drain's mode, deadline, pods left, PDBs blocking and volumes.
fn print_drain(drain: &DrainStatus) {
    match &drain.mode {
        nodewright_model::drain::DrainMode::Graceful => println!("  mode         graceful"),
        nodewright_model::drain::DrainMode::Force { reason } => {
            println!("  mode         force ({reason})")
        }
    }
    if let Some(deadline) = &drain.deadline {
        println!("  deadline     {deadline}");
    }
    if let Some(hard) = &drain.hard_deadline {
        println!("  hard         {hard} (terminationGracePeriod: do-not-disrupt overridden then)");
    }
    let left: Vec<_> = drain.pods_left().collect();
    println!("  pods left    {}", left.len());
    if !left.is_empty() {
        let rows = left.iter().map(|pod| {
            [
                pod.pod.clone(),
                pod.state.as_str().to_owned(),
                pod.detail.clone().unwrap_or_default(),
            ]
        });
        for line in table::lines("    ", ["POD", "STATE", "DETAIL"], rows) {
            println!("{line}");
        }
    }
    for block in &drain.pdbs_blocking {
        let note = if block.misconfigured {
            "misconfigured: all its pods are healthy and it allows no disruption"
        } else {
            "allows no disruption now"
        };
        println!(
            "  PDB blocking {} ({note}): {}",
            block.pdb,
            block.pods.join(", ")
        );
    }
    for volume in &drain.volumes {
        let node = volume.new_node.as_deref().unwrap_or("");
        let detail = volume
            .detail
            .as_deref()
            .map(|d| format!("({}: {d})", volume.pod))
            .unwrap_or_default();
        println!(
            "  volume       {:<30} {:<18} {node}{detail}",
            volume.persistent_volume,
            volume.state.as_str()
        );
    }
    for lost in &drain.local_data_lost {
        println!("  data lost    {lost}");
    }
    for overridden in &drain.overridden {
        println!("  overridden   do-not-disrupt of {overridden}");
    }
    for warning in &drain.warnings {
        println!("  warning      {warning}");
    }
}
