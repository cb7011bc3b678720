//! `nodewright`: the operator's CLI. Starts nodewright's jobs on Temporal, follows them and
//! prints where to see them in the Temporal UI.
//!
//! Exit codes: 0 success, 2 invalid input (nothing was started), 3 the run failed or did not
//! finish in time, 4 Temporal could not be reached, 5 the same job is already running (nothing
//! new was started).

mod codec_server;
mod handles;
mod machine;
mod pool;
mod pool_file;
mod preflight;
mod runs;
mod settings;
mod sweep;
mod table;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use settings::{Settings, SettingsArgs};

/// Durable life-cycle management for the worker machines of Kubernetes clusters on Azure.
#[derive(Debug, Parser)]
#[command(name = "nodewright", version)]
struct Cli {
    #[command(flatten)]
    settings: SettingsArgs,
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
    /// Create, delete and inspect machines.
    #[command(subcommand)]
    Machine(machine::MachineCommand),
    /// Roll pools to a new template, steer and roll back rollouts, and look at pools.
    #[command(subcommand)]
    Pool(pool::PoolCommand),
    /// List nodewright's runs of this cluster, newest first.
    Runs(runs::Args),
    /// Find and remove what nobody owns (OrphanSweep): run a sweep now or on a schedule,
    /// approve its removals, and read its audit.
    #[command(subcommand)]
    Sweep(sweep::SweepCommand),
    /// Serve Temporal's codec server protocol with the payload encryption keys, so that the
    /// Temporal UI shows decoded inputs to those who reach it.
    CodecServer(codec_server::Args),
}

/// A failure of a command, mapped to the CLI's exit codes.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad input; nothing was started.
    #[error("{0}")]
    InvalidInput(String),
    /// Temporal could not be reached.
    #[error(transparent)]
    Unreachable(#[from] nodewright_connect::ConnectError),
    /// The run failed, or did not finish in time.
    #[error("{0}")]
    RunFailed(String),
    /// The same job is already running; nothing new was started.
    #[error("{0}")]
    AlreadyRunning(String),
}

/// An input the CLI built that its workflow would refuse (`nodewright_model::input`, the same
/// rules the workflow checks before its first step): every problem, one a line; exit 2.
impl From<nodewright_model::input::InputError> for CliError {
    fn from(error: nodewright_model::input::InputError) -> Self {
        let mut message = error
            .errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        message.push_str("\nnothing was started");
        CliError::InvalidInput(message)
    }
}

impl CliError {
    fn exit_code(&self) -> u8 {
        match self {
            CliError::InvalidInput(_) => 2,
            CliError::RunFailed(_) => 3,
            CliError::Unreachable(_) => 4,
            CliError::AlreadyRunning(_) => 5,
        }
    }
}

/// Runs one command with the loaded settings.
async fn run(settings: &Settings, output: Output, command: Command) -> Result<(), CliError> {
    match command {
        Command::Preflight(args) => preflight::run(settings, output, args).await,
        Command::Machine(command) => machine::run(settings, output, command).await,
        Command::Pool(command) => pool::run(settings, output, command).await,
        Command::Runs(args) => runs::run(settings, output, args).await,
        Command::Sweep(command) => sweep::run(settings, output, command).await,
        Command::CodecServer(args) => codec_server::run(settings, args).await,
    }
}

/// `error: cause: cause`, on one line: the one rendering of an error and its causes, shared
/// with the workflows' failure reasons and the worker's logs.
pub use nodewright_model::text::error_chain;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.settings.load() {
        Ok(settings) => run(&settings, cli.output, cli.command).await,
        Err(error) => Err(error),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", error_chain(&error));
            ExitCode::from(error.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nodewright_model::ClusterName;
    use nodewright_model::sweep::SweepRequest;

    use super::CliError;

    #[test]
    fn an_input_its_workflow_would_refuse_is_refused_with_exit_2_naming_each_field() {
        let cluster = ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"));
        let mut request = SweepRequest::new(cluster);
        request.grace = Duration::ZERO;
        request.parallelism = 0;
        let error = match request.check() {
            Err(refused) => CliError::from(refused),
            Ok(()) => panic!("a zero grace and parallelism passed"),
        };
        assert_eq!(error.exit_code(), 2);
        assert_eq!(
            error.to_string(),
            "grace: is not from 10s to 168h (got 0s); give --grace from 10s to 168h (e.g. 90s, 20m, 1h)\n\
             parallelism: is not from 1 to 50 (got 0); give --parallelism from 1 to 50\n\
             nothing was started"
        );
    }
}
