//! `nodewright machine ...`: create, delete and inspect machines.

mod create;
mod delete;
mod follow;
mod render;
mod status;

use std::path::PathBuf;

use clap::Subcommand;

use crate::{CliError, Output, settings::Settings};

/// What to do with machines.
#[derive(Debug, Subcommand)]
pub enum MachineCommand {
    /// Create a machine of a pool: NIC + VM, wait for its Node to be Ready, label and taint it.
    Create {
        /// The Pool file (YAML, `kind: Pool`).
        #[arg(long)]
        pool: PathBuf,
        /// The machine's name; default `<pool>-<5 random characters>`.
        #[arg(long)]
        name: Option<String>,
        /// Follow the run until it ends, showing its steps.
        #[arg(long)]
        wait: bool,
        /// Leave the VM, NIC, disk and Node in place when the create fails (for debugging).
        #[arg(long)]
        keep_on_failure: bool,
    },
    /// Delete a machine: cordon its Node, delete the VM (NIC and OS disk with it), leftovers
    /// and the Node object. A machine already gone is a quiet success.
    Delete {
        /// The machine's name.
        name: String,
        /// Follow the run until it ends, showing its steps.
        #[arg(long)]
        wait: bool,
    },
    /// Show the latest create or delete run of a machine, step by step.
    Status {
        /// The machine's name.
        name: String,
    },
}

/// Runs a `machine` subcommand.
pub async fn run(
    settings: &Settings,
    output: Output,
    command: MachineCommand,
) -> Result<(), CliError> {
    match command {
        MachineCommand::Create {
            pool,
            name,
            wait,
            keep_on_failure,
        } => {
            create::run(
                settings,
                output,
                create::Args {
                    pool,
                    name,
                    wait,
                    keep_on_failure,
                },
            )
            .await
        }
        MachineCommand::Delete { name, wait } => delete::run(settings, output, &name, wait).await,
        MachineCommand::Status { name } => status::run(settings, output, &name).await,
    }
}

/// The CLI's answer to a start Temporal refused: "already running" says how to follow the run.
fn start_error(
    error: temporalio_client::errors::WorkflowStartError,
    workflow_id: &nodewright_model::WorkflowId,
    machine: &str,
    link: &str,
) -> CliError {
    match error {
        temporalio_client::errors::WorkflowStartError::AlreadyStarted { .. } => {
            CliError::AlreadyRunning(format!(
                "{workflow_id} is already running; nothing new was started. Follow it with `nodewright machine status {machine}` or {link}"
            ))
        }
        other => CliError::RunFailed(format!(
            "starting {workflow_id} failed: {}",
            follow::error_chain(&other)
        )),
    }
}
