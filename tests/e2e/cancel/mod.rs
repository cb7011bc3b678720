//! Cancellation as an ending: each workflow cancelled at its steps — mid-wait among them — from
//! the CLI (`nodewright … cancel`) and from `temporal workflow cancel` (what the Temporal UI's
//! "Request Cancellation" sends). Every run ends Canceled, not Failed, its status says at which
//! step and what was undone and kept, and the world is as its runbook says: nothing a cancelled
//! create made is left; a delete cancelled during its drain gives the machine back; a drain
//! cancelled leaves a Node cordoned before it cordoned, and uncordons one it cordoned itself; a
//! volume move in flight finishes before the Node is given back; runs cancelled before any worker
//! took them, and the runs that only read (InspectPool, Preflight) cancelled mid-read, change
//! nothing and end Canceled too.

mod create;
mod delete;
mod drain;
mod reads;
mod rollout;
mod sweep;
mod unclaimed;
mod volume;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::Node;
use nodewright_model::drain::{CONDITION_TERMINATING, TAINT_DRAINING};
use nodewright_tests::Stack;
use nodewright_tests::documents::MachineRunDocument;
use nodewright_tests::machines::{CliResult, node};
use nodewright_tests::stack::{describe_workflow, temporal_cli};

/// Sends a cancellation request to `workflow_id` the way the Temporal UI does:
/// `temporal workflow cancel`.
pub(crate) async fn temporal_cancel(stack: &Stack, workflow_id: &str) -> Result<()> {
    let mut command = std::process::Command::new(temporal_cli()?);
    command.args([
        "workflow",
        "cancel",
        "--workflow-id",
        workflow_id,
        "--address",
        &stack.temporal_address,
        "--namespace",
        &stack.temporal_namespace,
    ]);
    let output = tokio::task::spawn_blocking(move || command.output()).await??;
    ensure!(
        output.status.success(),
        "temporal workflow cancel {workflow_id}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// The running step of a machine run's status (`machine status --output json`), typed: a
/// status that does not parse fails.
fn running_step(result: &CliResult) -> Result<Option<&'static str>> {
    Ok(result.parse::<MachineRunDocument>()?.running_step())
}

/// What a Node looks like to a scheduler after a drain was undone: schedulable or not, and
/// whether the draining taint or the `Terminating` condition are left.
#[derive(Debug, PartialEq, Eq)]
struct NodeState {
    unschedulable: bool,
    draining_taint: bool,
    terminating: bool,
}

fn node_state(node: &Node) -> NodeState {
    let spec = node.spec.as_ref();
    NodeState {
        unschedulable: spec.and_then(|s| s.unschedulable) == Some(true),
        draining_taint: spec
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|taints| taints.iter().any(|t| t.key == TAINT_DRAINING)),
        terminating: node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == CONDITION_TERMINATING)),
    }
}

/// The state of the Node `name`, which must exist.
async fn state_of(stack: &Stack, name: &str) -> Result<NodeState> {
    let kube = stack.kube_client().await?;
    let found = node(&kube, name).await?;
    let Some(found) = found else {
        anyhow::bail!("Node {name} is gone");
    };
    Ok(node_state(&found))
}

/// The run status of the latest run of `workflow_id` (`temporal workflow describe`).
pub(crate) async fn run_status(stack: &Stack, workflow_id: &str) -> Result<String> {
    let document = describe_workflow(stack, workflow_id).await?;
    Ok(document["workflowExecutionInfo"]["status"]
        .as_str()
        .unwrap_or_default()
        .trim_start_matches("WORKFLOW_EXECUTION_STATUS_")
        .to_owned())
}
