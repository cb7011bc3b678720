//! `nodewright preflight [--pool FILE]...`: checks the pool files given, runs PreflightWorkflow
//! and prints the report.

use std::time::Duration;

use nodewright_model::text::quoted;
use nodewright_model::{Operation, WorkflowId};
use nodewright_workflows::{PreflightInput, PreflightWorkflow, search};
use temporalio_client::{WorkflowGetResultOptions, WorkflowIdConflictPolicy, WorkflowStartOptions};
use temporalio_common::search_attributes::SearchAttributes;

use crate::handles::no_result;
use crate::{CliError, Output, settings::Settings};

/// Arguments of `nodewright preflight`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long to wait for a worker to finish the check, in seconds (1 to 600).
    #[arg(long, default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=nodewright_model::limits::MAX_CLI_WAIT_SECONDS))]
    timeout: u64,
    /// A Pool file to check before the run (repeat for several): every problem with its field
    /// and fix, and a warning when its inline bootstrap looks like it holds a credential.
    #[arg(long = "pool", value_name = "FILE")]
    pools: Vec<std::path::PathBuf>,
}

/// Starts the check, waits for its report and prints it.
pub async fn run(settings: &Settings, output: Output, args: Args) -> Result<(), CliError> {
    // The pool files first: an invalid one stops here, before anything starts.
    let pools = args
        .pools
        .iter()
        .map(|path| crate::pool_file::load(path))
        .collect::<Result<Vec<_>, _>>()?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = WorkflowId::for_cluster(Operation::Preflight, &cluster);
    let link = settings.ui_link(&workflow_id);
    let options = WorkflowStartOptions::new(settings.task_queue.clone(), workflow_id.to_string())
        // A check already under way answers the same question: follow it instead of refusing.
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .execution_timeout(Duration::from_secs(600))
        .search_attributes(SearchAttributes::new([
            search::CLUSTER.value_set(cluster.to_string()),
            search::OPERATION.value_set(Operation::Preflight.to_string()),
        ]))
        .static_summary(format!("Preflight check of cluster {cluster}"))
        .build();
    let handle = client
        .start_workflow(
            PreflightWorkflow::run,
            PreflightInput {
                cluster: cluster.clone(),
            },
            options,
        )
        .await
        .map_err(|error| CliError::RunFailed(format!("starting {workflow_id} failed: {error}")))?;
    if output == Output::Text {
        eprintln!(
            "started {workflow_id} (or joined the one already running); waiting for a worker on task queue {}",
            quoted(&settings.task_queue)
        );
    }

    let wait = handle.get_result(WorkflowGetResultOptions::default());
    let report = tokio::time::timeout(Duration::from_secs(args.timeout), wait)
        .await
        .map_err(|_| {
            CliError::RunFailed(format!(
                "{workflow_id} did not finish within {}s: is nodewright-worker running on task queue {}? See {link}",
                args.timeout,
                quoted(&settings.task_queue)
            ))
        })?
        .map_err(|error| {
            CliError::RunFailed(format!("{workflow_id} {}; see {link}", no_result(&error)))
        })?;

    match output {
        Output::Json => {
            let pools: Vec<_> = pools
                .iter()
                .map(|pool| serde_json::json!({ "pool": pool.name, "templateHash": pool.template_hash }))
                .collect();
            let document = serde_json::json!({ "workflowId": workflow_id.as_str(), "report": report, "ui": link, "pools": pools });
            println!("{document}");
        }
        Output::Text => {
            let kubernetes = &report.kubernetes;
            println!("preflight of cluster {} passed", report.cluster);
            println!(
                "  kubernetes   {}, nodes: {} ({} Ready)",
                kubernetes.server_version, kubernetes.nodes, kubernetes.ready_nodes
            );
            println!("  temporal UI  {link}");
            for pool in &pools {
                println!(
                    "  pool         {} valid, template {}",
                    pool.name, pool.template_hash
                );
            }
        }
    }
    Ok(())
}
