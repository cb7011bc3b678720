//! `nodewright machine delete NAME [--skip-drain] [--force] [--skip-hooks] [--hook-timeout D]
//! [--wait]`.

use std::time::Duration;

use nodewright_model::disruption::Disruption;
use nodewright_model::drain::DrainStatus;
use nodewright_model::hooks::HookSet;
use nodewright_model::machine::{DeleteMachineRequest, HookHold, MachineStatus, Step};
use nodewright_model::machine_name::MachineName;
use nodewright_model::text::quoted;
use nodewright_model::{Operation, WorkflowId};
use nodewright_workflows::{DeleteMachineWorkflow, DrainNodeWorkflow, search};
use temporalio_client::{
    WorkflowGetResultOptions, WorkflowIdConflictPolicy, WorkflowQueryOptions, WorkflowStartOptions,
};
use temporalio_common::search_attributes::SearchAttributes;

use super::drain::print_drained;
use super::follow::follow;
use super::render::{ShowsProgress, drain_events};
use super::{announce_start, start_error};
use crate::{CliError, Output, settings::Settings};

/// How to delete.
pub struct Args {
    /// The machine.
    pub name: String,
    /// Only cordon, do not drain.
    pub skip_drain: bool,
    /// Drain in force mode from the start.
    pub force: bool,
    /// Go on despite delete hooks.
    pub skip_hooks: bool,
    /// How long delete hooks may hold the run, as written (`45m`).
    pub hook_timeout: Option<String>,
    /// Follow the run.
    pub wait: bool,
}

/// A delete's progress with its drain's, while the drain runs.
struct DeleteProgress {
    run: MachineStatus,
    drain: Option<DrainStatus>,
}

impl ShowsProgress for DeleteProgress {
    fn run_status(&self) -> &MachineStatus {
        &self.run
    }

    fn events(&self) -> Vec<String> {
        let mut events: Vec<String> = self.run.hold.iter().map(hold_line).collect();
        events.extend(self.drain.as_ref().map(drain_events).unwrap_or_default());
        events
    }
}

/// Starts `delete/<cluster>/<machine>`, and follows it (and its drain) with `--wait`.
pub async fn run(settings: &Settings, output: Output, args: Args) -> Result<(), CliError> {
    let Args {
        name,
        skip_drain,
        force,
        skip_hooks,
        hook_timeout,
        wait,
    } = args;
    let name = name.as_str();
    let hook_timeout = hook_timeout
        .as_deref()
        .map(parse_hook_timeout)
        .transpose()?;
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
        .static_summary(if skip_drain {
            format!("Delete machine {machine} without draining it")
        } else {
            format!("Drain and delete machine {machine}")
        })
        .build();
    let request = DeleteMachineRequest {
        cluster: cluster.clone(),
        machine: machine.to_string(),
        skip_drain,
        force,
        drain_policy: None,
        skip_hooks,
        hook_timeout,
        disruption: Disruption::Operator,
    };
    request.check()?;
    let handle = client
        .start_workflow(DeleteMachineWorkflow::run, request, options)
        .await
        .map_err(|error| start_error(error, &workflow_id, machine.as_str(), &link))?;
    let document = serde_json::json!({
        "workflowId": workflow_id.as_str(), "machine": machine.as_str(), "ui": link,
    });
    let doing = format!("deleting machine {machine}");
    if !announce_start(
        output,
        wait,
        &workflow_id,
        &doing,
        machine.as_str(),
        &link,
        document,
    ) {
        return Ok(());
    }
    let drain_id = WorkflowId::for_subject(Operation::Drain, &cluster, machine.as_str());
    let drain = client.get_workflow_handle::<DrainNodeWorkflow>(drain_id.to_string());
    let deleted = follow(
        handle.get_result(WorkflowGetResultOptions::default()),
        || async {
            let run = handle
                .query(
                    DeleteMachineWorkflow::status,
                    (),
                    WorkflowQueryOptions::default(),
                )
                .await?;
            let draining = run
                .steps
                .iter()
                .any(|s| s.step == Step::Drain && s.started_at.is_some());
            let drain = if draining {
                drain
                    .query(
                        DrainNodeWorkflow::status,
                        (),
                        WorkflowQueryOptions::default(),
                    )
                    .await
                    .ok()
            } else {
                None
            };
            Ok(DeleteProgress { run, drain })
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
            if let Some(drained) = &deleted.drained {
                print_drained(drained);
            }
            if !deleted.skipped_hooks.is_empty() {
                println!(
                    "  skipped hooks  {} (--skip-hooks; they stay on the Node)",
                    deleted.skipped_hooks.join(", ")
                );
            }
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

/// `--hook-timeout` as a duration, within the bounds `DeleteMachineRequest::check` applies.
fn parse_hook_timeout(text: &str) -> Result<Duration, CliError> {
    humantime::parse_duration(text).map_err(|e| {
        CliError::InvalidInput(format!(
            "--hook-timeout {} is not a duration ({e}); write e.g. 30m or 2h",
            quoted(text)
        ))
    })
}

/// A hold by delete hooks in one line: `held by pre-drain hooks since T until U: a, b`.
pub fn hold_line(hold: &HookHold) -> String {
    let hooks = HookSet {
        names: hold.hooks.clone(),
        total: hold.total,
    };
    format!(
        "held by {} hooks since {} until {}: {}",
        hold.stage,
        hold.since,
        hold.until,
        hooks.describe()
    )
}
