//! `nodewright`: the operator's CLI. Starts nodewright's jobs on Temporal, follows them and
//! prints where to see them in the Temporal UI.
//!
//! Exit codes: 0 success, 2 invalid input (nothing was started), 3 the run failed or did not
//! finish in time, 4 Temporal could not be reached.

mod preflight;
mod settings;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use settings::Settings;

/// Durable life-cycle management for the worker machines of Kubernetes clusters on Azure.
#[derive(Debug, Parser)]
#[command(name = "nodewright", version)]
struct Cli {
    #[command(flatten)]
    settings: Settings,
    /// How results are printed.
    #[arg(long, global = true, value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(subcommand)]
    command: Command,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// For people.
    Text,
    /// One JSON document, for scripts.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check that a worker runs and reaches the cluster: runs PreflightWorkflow and prints its
    /// report.
    Preflight(preflight::Args),
}

/// A failure of a command, mapped to the CLI's exit codes.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad input; nothing was started.
    #[error("{0}")]
    InvalidInput(String),
    /// Temporal could not be reached.
    #[error(transparent)]
    Unreachable(#[from] nodewright_workflows::connect::ConnectError),
    /// The run failed, or did not finish in time.
    #[error("{0}")]
    RunFailed(String),
}

impl CliError {
    fn exit_code(&self) -> u8 {
        match self {
            CliError::InvalidInput(_) => 2,
            CliError::RunFailed(_) => 3,
            CliError::Unreachable(_) => 4,
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Preflight(args) => preflight::run(&cli.settings, cli.output, args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::from(error.exit_code())
        }
    }
}
