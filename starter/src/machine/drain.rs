//! `nodewright machine drain NAME [--wait] [--force]`, `machine force-drain NAME`,
//! and `machine extend-drain NAME --by D`.

use std::time::Duration;

use nodewright_model::disruption::Disruption;
use nodewright_model::drain::{
    DrainPurpose, DrainRequest, DrainStatus, DrainedNode, LocalDataPolicy,
};
use nodewright_model::machine_name::MachineName;
use nodewright_model::text::quoted;
use nodewright_model::{ClusterName, Operation, WorkflowId, limits};
use nodewright_workflows::{DrainNodeWorkflow, search};
use temporalio_client::{
    Client, WorkflowGetResultOptions, WorkflowIdConflictPolicy, WorkflowQueryOptions,
    WorkflowSignalOptions, WorkflowStartOptions,
};
use temporalio_common::search_attributes::SearchAttributes;

use super::follow::{error_chain, follow};
use super::{announce_start, start_error};
use crate::{CliError, Output, settings::Settings};

pub(super) fn machine_name(name: &str) -> Result<MachineName, CliError> {
    MachineName::parse("NAME", name).map_err(|e| CliError::InvalidInput(e.to_string()))
}

pub(super) fn attributes(
    cluster: &ClusterName,
    machine: &MachineName,
    operation: Operation,
) -> SearchAttributes {
    let mut attributes = vec![
        search::CLUSTER.value_set(cluster.to_string()),
        search::MACHINE.value_set(machine.to_string()),
        search::OPERATION.value_set(operation.to_string()),
    ];
    if let Some(pool) = machine.pool_of() {
        attributes.push(search::POOL.value_set(pool.to_owned()));
    }
    SearchAttributes::new(attributes)
}

/// `--local-data` of `machine drain`: `evict` or `refuse`.
///
/// # Errors
///
/// Anything else; nothing is started.
fn local_data_flag(written: Option<&str>) -> Result<Option<LocalDataPolicy>, CliError> {
    written
        .map(|text| {
            LocalDataPolicy::parse(text).ok_or_else(|| {
                CliError::InvalidInput(format!(
                    "--local-data {} is neither evict nor refuse; write evict to evict pods with emptyDir volumes or without a controller (their data is lost) or refuse to stop before evicting them",
                    nodewright_model::text::quoted(text)
                ))
            })
        })
        .transpose()
}

/// The flags of `machine drain`.
#[derive(Debug, Clone, Copy)]
pub struct DrainFlags<'a> {
    /// `--wait`: follow the drain until it ends.
    pub wait: bool,
    /// `--force`: start in force mode.
    pub force: bool,
    /// `--local-data`, as written.
    pub local_data: Option<&'a str>,
    /// `--history-limit` (hidden): history events after which the drain continues as new.
    pub history_limit: Option<u32>,
}

/// Starts a maintenance drain `drain/<cluster>/<machine>` (the VM stays), and follows it with
/// `--wait`.
pub async fn start(
    settings: &Settings,
    output: Output,
    name: &str,
    flags: DrainFlags<'_>,
) -> Result<(), CliError> {
    let DrainFlags {
        wait,
        force,
        local_data,
        history_limit,
    } = flags;
    let machine = machine_name(name)?;
    let local_data = local_data_flag(local_data)?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = WorkflowId::for_subject(Operation::Drain, &cluster, machine.as_str());
    let link = settings.ui_link(&workflow_id);
    let options = WorkflowStartOptions::new(settings.task_queue.clone(), workflow_id.to_string())
        .id_conflict_policy(WorkflowIdConflictPolicy::Fail)
        .search_attributes(attributes(&cluster, &machine, Operation::Drain))
        .static_summary(format!("Drain node {machine} for maintenance"))
        .build();
    let request = DrainRequest {
        cluster: cluster.clone(),
        node: machine.to_string(),
        purpose: DrainPurpose::Maintenance,
        policy: None,
        force,
        local_data,
        resume: None,
        disruption: Disruption::Operator,
        history_limit,
    };
    request.check()?;
    let handle = client
        .start_workflow(DrainNodeWorkflow::run, request, options)
        .await
        .map_err(|error| start_error(error, &workflow_id, machine.as_str(), &link))?;
    let document = serde_json::json!({
        "workflowId": workflow_id.as_str(), "machine": machine.as_str(), "ui": link,
    });
    let doing = format!("draining node {machine} (the VM stays)");
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
    let drained = follow(
        handle.get_result(WorkflowGetResultOptions::default()),
        || {
            handle.query(
                DrainNodeWorkflow::status,
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
                "workflowId": workflow_id.as_str(), "result": drained, "ui": link,
            });
            println!("{document}");
        }
        Output::Text => {
            print_drained(&drained);
            println!("  it stays cordoned: `nodewright machine uncordon {machine}` undoes it");
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}

/// Prints what a drain did.
pub fn print_drained(drained: &DrainedNode) {
    if !drained.node_found {
        println!("no Node {}: nothing to drain", drained.node);
        return;
    }
    match &drained.forced {
        Some(reason) => println!("{} drained in force mode ({reason})", drained.node),
        None => println!("{} drained", drained.node),
    }
    println!(
        "  {} evicted, {} deleted with grace period 0, {} volumes moved",
        drained.evicted.len(),
        drained.force_deleted.len(),
        drained.volumes_moved.len()
    );
    for (pv, node) in &drained.volumes_moved {
        println!("    {pv} → {node}");
    }
    if !drained.local_data_lost.is_empty() {
        println!(
            "  {} pods left with their local data lost:",
            drained.local_data_lost.len()
        );
        for lost in &drained.local_data_lost {
            println!("    {lost}");
        }
    }
    for overridden in &drained.overridden {
        println!("  do-not-disrupt overridden: {overridden}");
    }
    for warning in &drained.warnings {
        println!("  warning: {warning}");
    }
}

/// The running drain of `name`, or a clear error when there is none.
async fn running_drain(
    settings: &Settings,
    name: &str,
) -> Result<(Client, WorkflowId, MachineName), CliError> {
    let machine = machine_name(name)?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = WorkflowId::for_subject(Operation::Drain, &cluster, machine.as_str());
    Ok((client, workflow_id, machine))
}

fn signal_error(workflow_id: &WorkflowId, error: &dyn std::error::Error) -> CliError {
    CliError::RunFailed(format!(
        "signalling {workflow_id} failed: {}; is a drain of that machine running? `nodewright runs --machine <name> --running` lists them",
        error_chain(error)
    ))
}

/// Sends `force` to the running drain: it switches to force mode at its next look.
pub async fn force(settings: &Settings, output: Output, name: &str) -> Result<(), CliError> {
    let (client, workflow_id, machine) = running_drain(settings, name).await?;
    let handle = client.get_workflow_handle::<DrainNodeWorkflow>(workflow_id.to_string());
    handle
        .signal(
            DrainNodeWorkflow::force,
            "nodewright machine force-drain".to_owned(),
            WorkflowSignalOptions::default(),
        )
        .await
        .map_err(|e| signal_error(&workflow_id, &e))?;
    report_signal(
        output,
        &workflow_id,
        &format!(
            "{machine}: force mode requested; pods are deleted with grace period 0 at the drain's next look"
        ),
    );
    Ok(())
}

/// Sends `extend_deadline` to the running drain.
pub async fn extend(
    settings: &Settings,
    output: Output,
    name: &str,
    by: &str,
) -> Result<(), CliError> {
    let by = extension(by)?;
    let (client, workflow_id, machine) = running_drain(settings, name).await?;
    let handle = client.get_workflow_handle::<DrainNodeWorkflow>(workflow_id.to_string());
    handle
        .signal(
            DrainNodeWorkflow::extend_deadline,
            by.as_secs(),
            WorkflowSignalOptions::default(),
        )
        .await
        .map_err(|e| signal_error(&workflow_id, &e))?;
    let deadline = handle
        .query(
            DrainNodeWorkflow::status,
            (),
            WorkflowQueryOptions::default(),
        )
        .await
        .ok()
        .and_then(|status: DrainStatus| status.deadline);
    let message = match deadline {
        Some(deadline) => format!("{machine}: drain deadline moved to {deadline}"),
        None => format!(
            "{machine}: asked the drain to move its deadline {}s later (its status did not answer; check with `nodewright machine status {machine}`)",
            by.as_secs()
        ),
    };
    report_signal(output, &workflow_id, &message);
    Ok(())
}

/// `--by` of `extend-drain`: a duration longer than zero and at most
/// [`limits::MAX_DRAIN_EXTENSION`].
///
/// # Errors
///
/// Not a duration, zero, or longer than the maximum; nothing is signalled.
fn extension(by: &str) -> Result<Duration, CliError> {
    let parsed: Duration = humantime::parse_duration(by).map_err(|e| {
        CliError::InvalidInput(format!(
            "--by {} is not a duration ({e}); write e.g. 30m or 1h",
            quoted(by)
        ))
    })?;
    if parsed.is_zero() {
        return Err(CliError::InvalidInput(
            "--by must be longer than zero; write e.g. 30m".to_owned(),
        ));
    }
    if let Some(problem) = limits::longer_than(parsed, limits::MAX_DRAIN_EXTENSION) {
        return Err(CliError::InvalidInput(format!(
            "--by {} {problem}; write e.g. 30m or 1h, and extend again later if the drain needs more",
            quoted(by)
        )));
    }
    Ok(parsed)
}

fn report_signal(output: Output, workflow_id: &WorkflowId, message: &str) {
    match output {
        Output::Json => {
            let document =
                serde_json::json!({ "workflowId": workflow_id.as_str(), "message": message });
            println!("{document}");
        }
        Output::Text => println!("{message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(result: Result<Duration, CliError>) -> String {
        match result {
            Err(CliError::InvalidInput(message)) => message,
            other => panic!("expected invalid input, got {other:?}"),
        }
    }

    #[test]
    fn local_data_is_evict_or_refuse() {
        assert_eq!(local_data_flag(None).ok(), Some(None));
        assert_eq!(
            local_data_flag(Some("evict")).ok(),
            Some(Some(LocalDataPolicy::Evict))
        );
        assert_eq!(
            local_data_flag(Some("refuse")).ok(),
            Some(Some(LocalDataPolicy::Refuse))
        );
        assert!(
            message(local_data_flag(Some("keep")).map(|_| Duration::ZERO))
                .starts_with(r#"--local-data "keep" is neither evict nor refuse"#)
        );
    }

    #[test]
    fn an_extension_is_a_duration_up_to_a_week() {
        assert_eq!(extension("30m").ok(), Some(Duration::from_secs(1800)));
        assert_eq!(extension("7days").ok(), Some(limits::MAX_DRAIN_EXTENSION));
        assert_eq!(
            message(extension("169h")),
            r#"--by "169h" is longer than the maximum 168h; write e.g. 30m or 1h, and extend again later if the drain needs more"#
        );
        assert!(message(extension("1000000000years")).starts_with(r#"--by "1000000000years" "#));
        assert!(message(extension("99999999999999999999999s")).contains("is not a duration"));
        assert_eq!(
            message(extension("0s")),
            "--by must be longer than zero; write e.g. 30m"
        );
        assert!(message(extension("soon")).starts_with(r#"--by "soon" is not a duration"#));
    }
}
