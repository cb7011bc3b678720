//! `nodewright machine cancel NAME [--reason TEXT] [--wait]`: asks the running create, delete,
//! drain or uncordon of a machine to cancel, as the Temporal UI's "Request Cancellation" and
//! `temporal workflow cancel` do. The run ends Canceled after the clean-up its runbook
//! documents; `--wait` follows it there and prints what was undone and what was kept.

use std::time::Duration;

use nodewright_model::cancel::Canceled;
use nodewright_model::machine::MachineStatus;
use nodewright_model::machine_name::MachineName;
use nodewright_model::{Operation, WorkflowId};
use nodewright_workflows::{
    CreateMachineWorkflow, DeleteMachineWorkflow, DrainNodeWorkflow, UncordonNodeWorkflow,
};
use temporalio_client::{
    Client, WorkflowCancelOptions, WorkflowDescribeOptions, WorkflowExecutionStatus,
    WorkflowQueryOptions,
};

use super::follow::error_chain;
use crate::{CliError, Output, settings::Settings};

/// How long `--wait` waits for the run to end after the request (a create's clean-up deletes
/// a VM: minutes on Azure).
const WAIT_LIMIT: Duration = Duration::from_secs(30 * 60);

/// How often `--wait` looks.
const POLL: Duration = Duration::from_secs(1);

/// What `machine cancel` asks.
pub struct Args {
    /// The machine's name.
    pub name: String,
    /// Why, recorded with the request (default: who asked).
    pub reason: Option<String>,
    /// Follow the run until it has ended.
    pub wait: bool,
}

/// The operations a machine can have running, in the order a cancel looks for them: a delete
/// runs its drain as a child, so cancelling the delete cancels both.
const OPERATIONS: [Operation; 4] = [
    Operation::Delete,
    Operation::Create,
    Operation::Drain,
    Operation::Uncordon,
];

/// What a cancellation does to a run of `operation`, as its runbook says.
fn meaning(operation: Operation) -> &'static str {
    match operation {
        Operation::Create => {
            "it removes what it created (VM, NIC, OS disk, Node), then ends canceled"
        }
        Operation::Delete => {
            "before its VM delete is sent, the machine goes back to service as it was (drain undone); after it, the deletion finishes; then it ends canceled"
        }
        Operation::Drain => {
            "pods already moved stay moved, a volume move under way finishes, the Node is uncordoned unless it was cordoned before; then it ends canceled"
        }
        _ => "it ends canceled",
    }
}

/// Asks the machine's running run to cancel; with `wait`, follows it to its end.
pub async fn run(settings: &Settings, output: Output, args: Args) -> Result<(), CliError> {
    let machine = MachineName::parse("NAME", &args.name)
        .map_err(|e| CliError::InvalidInput(e.to_string()))?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let mut running = None;
    for operation in OPERATIONS {
        let workflow_id = WorkflowId::for_subject(operation, &cluster, machine.as_str());
        if is_running(&client, &workflow_id).await {
            running = Some((operation, workflow_id));
            break;
        }
    }
    let Some((operation, workflow_id)) = running else {
        return Err(CliError::RunFailed(format!(
            "no create, delete, drain or uncordon of machine {machine} is running; `nodewright machine status {machine}` shows the latest run"
        )));
    };
    let reason = args
        .reason
        .unwrap_or_else(|| format!("nodewright machine cancel by {}", crate::pool::who()));
    client
        .get_workflow_handle::<CreateMachineWorkflow>(workflow_id.to_string())
        .cancel(WorkflowCancelOptions::builder().reason(reason).build())
        .await
        .map_err(|e| {
            CliError::RunFailed(format!(
                "asking {workflow_id} to cancel failed: {}",
                error_chain(&e)
            ))
        })?;
    let link = settings.ui_link(&workflow_id);
    if !args.wait {
        let message = format!(
            "asked {workflow_id} to cancel: {}\n  follow it with `nodewright machine status {machine}` or at {link}",
            meaning(operation)
        );
        print(output, &workflow_id, "cancel-requested", None, &message);
        return Ok(());
    }
    if output == Output::Text {
        println!("asked {workflow_id} to cancel: {}", meaning(operation));
    }
    let ended = wait_until_ended(&client, &workflow_id).await?;
    let status = machine_status(&client, operation, &workflow_id).await;
    let canceled = status.as_ref().and_then(|s| s.canceled.clone());
    match (ended, canceled) {
        (WorkflowExecutionStatus::Canceled, Some(canceled)) => {
            let message = format!("{workflow_id} canceled: {}", canceled.summary());
            print(output, &workflow_id, "canceled", Some(&canceled), &message);
            Ok(())
        }
        (WorkflowExecutionStatus::Canceled, None) => {
            print(
                output,
                &workflow_id,
                "canceled",
                None,
                &format!("{workflow_id} canceled"),
            );
            Ok(())
        }
        (other, _) => Err(CliError::RunFailed(format!(
            "{workflow_id} ended {} before the request took effect; see {link}",
            crate::runs::status_word(other)
        ))),
    }
}

pub(super) async fn is_running(client: &Client, workflow_id: &WorkflowId) -> bool {
    client
        .get_workflow_handle::<CreateMachineWorkflow>(workflow_id.to_string())
        .describe(WorkflowDescribeOptions::default())
        .await
        .is_ok_and(|d| d.status() == WorkflowExecutionStatus::Running)
}

/// Waits until the run is no longer running; its final status.
async fn wait_until_ended(
    client: &Client,
    workflow_id: &WorkflowId,
) -> Result<WorkflowExecutionStatus, CliError> {
    let handle = client.get_workflow_handle::<CreateMachineWorkflow>(workflow_id.to_string());
    let started = tokio::time::Instant::now();
    loop {
        if let Ok(description) = handle.describe(WorkflowDescribeOptions::default()).await
            && description.status() != WorkflowExecutionStatus::Running
        {
            return Ok(description.status());
        }
        if started.elapsed() >= WAIT_LIMIT {
            return Err(CliError::RunFailed(format!(
                "{workflow_id} was still running {} minutes after the request; its clean-up goes on, see `nodewright machine status`",
                WAIT_LIMIT.as_secs() / 60
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The run's `status` (a drain's is inside its drain status).
async fn machine_status(
    client: &Client,
    operation: Operation,
    workflow_id: &WorkflowId,
) -> Option<MachineStatus> {
    let id = workflow_id.to_string();
    let query = WorkflowQueryOptions::default();
    match operation {
        Operation::Create => client
            .get_workflow_handle::<CreateMachineWorkflow>(id)
            .query(CreateMachineWorkflow::status, (), query)
            .await
            .ok(),
        Operation::Delete => client
            .get_workflow_handle::<DeleteMachineWorkflow>(id)
            .query(DeleteMachineWorkflow::status, (), query)
            .await
            .ok(),
        Operation::Drain => client
            .get_workflow_handle::<DrainNodeWorkflow>(id)
            .query(DrainNodeWorkflow::status, (), query)
            .await
            .ok()
            .map(|status| status.run),
        _ => client
            .get_workflow_handle::<UncordonNodeWorkflow>(id)
            .query(UncordonNodeWorkflow::status, (), query)
            .await
            .ok(),
    }
}

fn print(
    output: Output,
    workflow_id: &WorkflowId,
    state: &str,
    canceled: Option<&Canceled>,
    message: &str,
) {
    match output {
        Output::Json => {
            let document = serde_json::json!({
                "workflowId": workflow_id.as_str(),
                "state": state,
                "canceled": canceled,
            });
            println!("{document}");
        }
        Output::Text => println!("{message}"),
    }
}
