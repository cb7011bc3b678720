//! `nodewright machine ...`: create, drain, delete and inspect machines.

mod cancel;
mod create;
mod delete;
mod drain;
mod follow;
mod render;
mod status;
mod uncordon;

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
    /// Delete a machine: wait while pre-drain delete hooks hold it, drain its Node (pods
    /// evicted honouring PodDisruptionBudgets, pods with persistent volumes moved one at a
    /// time), wait while pre-terminate delete hooks hold it, delete the VM (NIC and OS disk with
    /// it), leftovers and the Node object. A machine already gone is a quiet success.
    Delete {
        /// The machine's name.
        name: String,
        /// Do not drain: only cordon the Node, then delete.
        #[arg(long)]
        skip_drain: bool,
        /// Drain in force mode: delete the pods with grace period 0, delete the node's
        /// VolumeAttachments and force-detach its data disks, without waiting.
        #[arg(long, conflicts_with = "skip_drain")]
        force: bool,
        /// Go on despite delete hooks on the Node (annotations
        /// `pre-drain.delete.hook.nodewright.io/<owner>` and
        /// `pre-terminate.delete.hook.nodewright.io/<owner>`): the run names them in its status
        /// and result, and leaves them on the Node.
        #[arg(long)]
        skip_hooks: bool,
        /// How long delete hooks may hold the delete, before the drain and again before the VM
        /// delete, e.g. 45m; past it the delete fails and the machine stays. Default 30m, at
        /// most 6h.
        #[arg(long, value_name = "DURATION", conflicts_with = "skip_hooks")]
        hook_timeout: Option<String>,
        /// Follow the run until it ends, showing its steps, pods and volumes.
        #[arg(long)]
        wait: bool,
    },
    /// Drain a machine's Node for maintenance and keep the VM: cordon, evict, move volumes.
    /// It stays cordoned until `machine uncordon`.
    Drain {
        /// The machine's name.
        name: String,
        /// Start in force mode (pods deleted with grace period 0, volumes force-detached).
        #[arg(long)]
        force: bool,
        /// Follow the drain until it ends, showing pods and volumes moving.
        #[arg(long)]
        wait: bool,
        /// Pods with emptyDir volumes or without a controller: `evict` them (their data is lost
        /// and named in the result) or `refuse` (the drain stops before its first eviction).
        /// Default: the pool's `spec.drain.localData`, else refuse (a maintenance drain).
        #[arg(long, value_name = "evict|refuse")]
        local_data: Option<String>,
        /// History events after which the drain continues as a new run (a test knob: at least
        /// 100, at most 4000; default: when Temporal suggests it).
        #[arg(long, hide = true, value_name = "N",
              value_parser = clap::value_parser!(u32).range(
                  i64::from(nodewright_model::drain::MIN_DRAIN_HISTORY_LIMIT)
                      ..=i64::from(nodewright_model::limits::MAX_HISTORY_LIMIT)))]
        history_limit: Option<u32>,
    },
    /// Switch a running drain of a machine to force mode.
    ForceDrain {
        /// The machine's name.
        name: String,
    },
    /// Move the deadline of a running drain later (force mode starts at the deadline).
    ExtendDrain {
        /// The machine's name.
        name: String,
        /// How much later, e.g. 30m or 1h.
        #[arg(long)]
        by: String,
    },
    /// Make a drained machine's Node schedulable again (undoes `machine drain`). Refused while a
    /// drain or delete of the machine runs; a cordon set before nodewright's drain is kept.
    Uncordon {
        /// The machine's name.
        name: String,
        /// Clear also a cordon an administrator set before nodewright's drain.
        #[arg(long)]
        force: bool,
    },
    /// Cancel the running create, delete, drain or uncordon of a machine (as the Temporal UI's
    /// "Request Cancellation"): it undoes what its runbook says, then ends canceled.
    Cancel {
        /// The machine's name.
        name: String,
        /// Why, recorded with the request (default: who asked).
        #[arg(long)]
        reason: Option<String>,
        /// Follow the run until it has ended and print what was undone and kept.
        #[arg(long)]
        wait: bool,
    },
    /// Show the latest create, drain or delete run of a machine, step by step.
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
        MachineCommand::Delete {
            name,
            skip_drain,
            force,
            skip_hooks,
            hook_timeout,
            wait,
        } => {
            delete::run(
                settings,
                output,
                delete::Args {
                    name,
                    skip_drain,
                    force,
                    skip_hooks,
                    hook_timeout,
                    wait,
                },
            )
            .await
        }
        MachineCommand::Drain {
            name,
            force,
            wait,
            local_data,
            history_limit,
        } => {
            let knobs = drain::DrainFlags {
                wait,
                force,
                local_data: local_data.as_deref(),
                history_limit,
            };
            drain::start(settings, output, &name, knobs).await
        }
        MachineCommand::ForceDrain { name } => drain::force(settings, output, &name).await,
        MachineCommand::ExtendDrain { name, by } => {
            drain::extend(settings, output, &name, &by).await
        }
        MachineCommand::Uncordon { name, force } => {
            uncordon::run(settings, output, &name, force).await
        }
        MachineCommand::Cancel { name, reason, wait } => {
            cancel::run(settings, output, cancel::Args { name, reason, wait }).await
        }
        MachineCommand::Status { name } => status::run(settings, output, &name).await,
    }
}

/// Says that `workflow_id` started and how to follow it (text), or, without `wait`, prints
/// `document` (JSON). Returns whether the caller should follow the run.
fn announce_start(
    output: Output,
    wait: bool,
    workflow_id: &nodewright_model::WorkflowId,
    doing: &str,
    machine: &str,
    link: &str,
    document: serde_json::Value,
) -> bool {
    if output == Output::Text {
        eprintln!("started {workflow_id}: {doing}");
        eprintln!("  follow it: nodewright machine status {machine}   or   {link}");
    }
    if !wait && output == Output::Json {
        println!("{document}");
    }
    wait
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: MachineCommand,
    }

    fn history_limit(args: &[&str]) -> Result<Option<u32>, String> {
        let args = ["machine", "drain", "workers-x7k2q"]
            .into_iter()
            .chain(args.iter().copied());
        match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(MachineCommand::Drain { history_limit, .. }) => Ok(history_limit),
            Ok(other) => Err(format!("not a drain: {other:?}")),
            Err(error) => Err(error.to_string()),
        }
    }

    #[test]
    fn drain_takes_a_bounded_hidden_history_limit() {
        assert_eq!(history_limit(&[]), Ok(None));
        assert_eq!(history_limit(&["--history-limit", "150"]), Ok(Some(150)));
        assert_eq!(history_limit(&["--history-limit", "4000"]), Ok(Some(4000)));
        for refused in ["99", "4001", "0", "many"] {
            assert!(
                history_limit(&["--history-limit", refused]).is_err(),
                "--history-limit {refused} was accepted"
            );
        }
    }
}
