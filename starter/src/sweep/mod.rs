//! `nodewright sweep ...`: run an orphan sweep (OrphanSweep) now or on a schedule, approve its
//! removals, follow it, and read its audit.
//!
//! One job per module: [`flags`] checks what was typed, [`find`] finds the cluster's sweeps,
//! [`start`] starts one, [`follow`] follows it to its end, [`approve`] shows the plan of the one
//! waiting for approval and approves it, [`control`] cancels and shows the one running,
//! [`report`] prints an audit, [`schedule`] manages the Temporal Schedule (and [`merge`] decides
//! what an existing one keeps), [`render`] turns sweeps into text and [`verdict`] turns an audit
//! into an exit code.

mod approve;
mod control;
mod find;
mod flags;
mod follow;
mod merge;
mod render;
mod report;
mod schedule;
mod start;
mod verdict;

use clap::{Args, Subcommand};
use nodewright_model::sweep::SweepStatus;
use nodewright_model::{ClusterName, Operation, WorkflowId};
use nodewright_workflows::OrphanSweepWorkflow;
use temporalio_client::{Client, WorkflowHandle, WorkflowQueryOptions};

use crate::{CliError, Output, error_chain, settings::Settings};

/// What to do with orphan sweeps.
#[derive(Debug, Subcommand)]
pub enum SweepCommand {
    /// Start an orphan sweep of the cluster now (`sweep/<cluster>`): find the VMs, NICs, OS
    /// disks and Node objects nothing owns and remove those carrying this cluster's tag.
    Run(RunArgs),
    /// Approve the plan of the sweep waiting for approval (over --max-deletions, or held by the
    /// brake): shows what it would remove, counted by kind, and sends `approve` naming the run
    /// and that count.
    Approve {
        /// The sweep's workflow ID (default: the one of this cluster waiting for approval).
        #[arg(value_name = "RUN")]
        run: Option<String>,
    },
    /// Cancel the running sweep (as the Temporal UI's "Request Cancellation"): no removal
    /// starts after the request, those under way finish, and it ends canceled with its audit.
    Cancel {
        /// The sweep's workflow ID (default: the one running in this cluster).
        #[arg(value_name = "RUN")]
        run: Option<String>,
    },
    /// Show the running sweep: phase, counts, approval deadline.
    Status,
    /// Print a sweep's audit: every resource it saw, the rule that decided and what was done.
    Report(ReportArgs),
    /// Sweep the cluster on a Temporal Schedule `sweep/<cluster>` (overlapping runs are skipped):
    /// created with the flags given and the defaults, or, when it exists, only the flags given
    /// change and every other setting keeps the schedule's value.
    Schedule(ScheduleArgs),
    /// Delete the schedule `sweep/<cluster>` (runs under way go on).
    Unschedule,
}

/// What a sweep does: the flags `sweep run` and `sweep schedule` share. Each is `None` when not
/// given: `sweep run` and a new schedule take the default, an existing schedule keeps its value.
#[derive(Debug, Clone, Default, Args)]
pub struct SweepFlags {
    /// Only report what would be removed: delete and replace nothing (`--dry-run=false` turns it
    /// off on a schedule that has it) [default: false].
    #[arg(long, value_name = "true|false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true")]
    dry_run: Option<bool>,
    /// Replace machines whose Node has been NotReady longer than --health-timeout (otherwise
    /// they are reported; `--remediate=false` turns it off on a schedule) [default: false].
    #[arg(long, value_name = "true|false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true")]
    remediate: Option<bool>,
    /// More removals than this wait for `nodewright sweep approve` (0: every removal does)
    /// [default: 10].
    #[arg(long, value_name = "N")]
    max_deletions: Option<u32>,
    /// Nothing younger than this is an orphan (e.g. 20m) [default: 20m].
    #[arg(long, value_name = "DURATION")]
    grace: Option<String>,
    /// A Node NotReady this long makes its machine unhealthy (e.g. 10m) [default: 10m].
    #[arg(long, value_name = "DURATION")]
    health_timeout: Option<String>,
    /// How long the sweep waits for an approval before skipping its removals (e.g. 1h)
    /// [default: 1h].
    #[arg(long, value_name = "DURATION")]
    approval_timeout: Option<String>,
    /// Removals in flight at once (at least 1) [default: 5].
    #[arg(long, value_name = "N")]
    parallelism: Option<u32>,
    /// The plausibility brake: removing more than this percentage of the cluster's machines
    /// (and more than 3), or replacing machines while more Nodes than that are NotReady, waits
    /// for `nodewright sweep approve` naming the run (at most 50) [default: 20].
    #[arg(long, value_name = "PERCENT")]
    brake_percent: Option<u32>,
}

/// The flags of `sweep run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    flags: SweepFlags,
    /// Follow the sweep until it ends, then print its audit; the exit code says how it ended.
    #[arg(long)]
    wait: bool,
}

/// The flags of `sweep report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The sweep's workflow ID, e.g. sweep/prod or sweep/prod-2026-04-01T10:15:00Z (default: the
    /// cluster's newest completed sweep).
    #[arg(value_name = "RUN")]
    run: Option<String>,
    /// The run of RUN (default: its latest).
    #[arg(long, value_name = "ID", requires = "run")]
    run_id: Option<String>,
    /// Also list every resource of other clusters or of nobody, by name.
    #[arg(long)]
    all: bool,
}

/// The flags of `sweep schedule`: on an existing schedule, only those given change.
#[derive(Debug, Args)]
pub struct ScheduleArgs {
    /// How often a sweep starts (at least 1s) [default: 15m, or the schedule's interval].
    #[arg(long, value_name = "DURATION")]
    every: Option<String>,
    #[command(flatten)]
    flags: SweepFlags,
}

/// Runs a `sweep` subcommand.
pub async fn run(
    settings: &Settings,
    output: Output,
    command: SweepCommand,
) -> Result<(), CliError> {
    match command {
        SweepCommand::Run(args) => start::run(settings, output, args).await,
        SweepCommand::Approve { run } => approve::approve(settings, output, run.as_deref()).await,
        SweepCommand::Cancel { run } => control::cancel(settings, output, run.as_deref()).await,
        SweepCommand::Status => control::status(settings, output).await,
        SweepCommand::Report(args) => report::run(settings, output, args).await,
        SweepCommand::Schedule(args) => schedule::schedule(settings, output, args).await,
        SweepCommand::Unschedule => schedule::unschedule(settings, output).await,
    }
}

/// `sweep/<cluster>`: the on-demand sweep's workflow ID and the schedule's ID.
fn sweep_id(cluster: &ClusterName) -> WorkflowId {
    WorkflowId::for_cluster(Operation::Sweep, cluster)
}

/// A handle on a sweep's runs.
type SweepHandle = WorkflowHandle<Client, OrphanSweepWorkflow>;

/// The sweep `workflow_id`: its run `run_id`, or without one its latest run.
fn sweep_handle(client: &Client, workflow_id: &str, run_id: Option<&str>) -> SweepHandle {
    crate::handles::run_handle(client, workflow_id, run_id)
}

/// The sweep's `status` query; the error says why there is no answer.
async fn query_status(handle: &SweepHandle) -> Result<SweepStatus, String> {
    crate::handles::answer(handle.query(
        OrphanSweepWorkflow::status,
        (),
        WorkflowQueryOptions::default(),
    ))
    .await
}

/// A time as RFC 3339, seconds.
fn timestamp(time: Option<std::time::SystemTime>) -> Option<String> {
    time.map(|t| {
        chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: SweepCommand,
    }

    fn parse(args: &[&str]) -> Result<SweepCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("sweep").chain(args.iter().copied())).map(|c| c.command)
    }

    #[test]
    fn run_takes_the_sweep_flags_with_their_defaults() {
        match parse(&["run"]) {
            Ok(SweepCommand::Run(args)) => {
                assert!(!args.wait);
                assert_eq!(args.flags.dry_run, None);
                assert_eq!(args.flags.remediate, None);
                assert_eq!(
                    args.flags.max_deletions, None,
                    "the default comes from flags"
                );
                assert_eq!(args.flags.parallelism, None);
                assert_eq!(args.flags.grace, None);
            }
            other => panic!("{other:?}"),
        }
        match parse(&[
            "run",
            "--dry-run",
            "--remediate",
            "--max-deletions",
            "0",
            "--grace",
            "soon",
            "--parallelism",
            "0",
            "--wait",
        ]) {
            Ok(SweepCommand::Run(args)) => {
                assert!(args.wait);
                assert_eq!(args.flags.dry_run, Some(true));
                assert_eq!(args.flags.remediate, Some(true));
                assert_eq!(args.flags.max_deletions, Some(0));
                // Checked by `flags`, which names the flag and the syntax.
                assert_eq!(args.flags.grace.as_deref(), Some("soon"));
                assert_eq!(args.flags.parallelism, Some(0));
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["run", "--max-deletions", "-1"]).is_err());
    }

    #[test]
    fn report_takes_a_run_its_run_id_and_all() {
        match parse(&["report", "sweep/prod", "--run-id", "abc", "--all"]) {
            Ok(SweepCommand::Report(args)) => {
                assert_eq!(args.run.as_deref(), Some("sweep/prod"));
                assert_eq!(args.run_id.as_deref(), Some("abc"));
                assert!(args.all);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            parse(&["report", "--run-id", "abc"]).is_err(),
            "--run-id needs RUN"
        );
        assert!(matches!(
            parse(&["approve", "sweep/prod-2026-04-01T10:15:00Z"]),
            Ok(SweepCommand::Approve { run: Some(_) })
        ));
        assert!(matches!(
            parse(&["approve"]),
            Ok(SweepCommand::Approve { run: None })
        ));
    }

    #[test]
    fn schedule_takes_every_and_the_sweep_flags() {
        match parse(&[
            "schedule",
            "--every",
            "1h",
            "--dry-run",
            "--max-deletions",
            "3",
        ]) {
            Ok(SweepCommand::Schedule(args)) => {
                assert_eq!(args.every.as_deref(), Some("1h"));
                assert_eq!(args.flags.dry_run, Some(true));
                assert_eq!(args.flags.max_deletions, Some(3));
                assert_eq!(args.flags.remediate, None, "not given: kept");
            }
            other => panic!("{other:?}"),
        }
        match parse(&["schedule", "--dry-run=false", "--remediate=true"]) {
            Ok(SweepCommand::Schedule(args)) => {
                assert_eq!(args.every, None);
                assert_eq!(args.flags.dry_run, Some(false), "turned off");
                assert_eq!(args.flags.remediate, Some(true));
            }
            other => panic!("{other:?}"),
        }
        // A boolean's value is attached with `=`: `--dry-run false` is refused, not read as on.
        assert!(parse(&["schedule", "--dry-run", "false"]).is_err());
        assert!(parse(&["schedule", "--dry-run=maybe"]).is_err());
        assert!(parse(&["schedule", "--wait"]).is_err());
        assert!(matches!(
            parse(&["unschedule"]),
            Ok(SweepCommand::Unschedule)
        ));
    }

    #[test]
    fn the_help_states_the_defaults_the_request_takes() {
        use clap::CommandFactory;
        use nodewright_model::sweep::brake::DEFAULT_BRAKE_PERCENT;
        use nodewright_model::sweep::request::{DEFAULT_MAX_DELETIONS, DEFAULT_PARALLELISM};
        let mut command = Cli::command();
        let help = match command.find_subcommand_mut("schedule") {
            Some(schedule) => schedule.render_long_help().to_string(),
            None => panic!("no schedule subcommand"),
        };
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for expected in [
            format!("[default: {DEFAULT_MAX_DELETIONS}]"),
            format!("[default: {DEFAULT_PARALLELISM}]"),
            format!("[default: {DEFAULT_BRAKE_PERCENT}]"),
            "--dry-run[=<true|false>]".to_owned(),
            "`--dry-run=false` turns it off".to_owned(),
        ] {
            assert!(help.contains(&expected), "{expected} in {help}");
        }
    }

    #[test]
    fn the_sweeps_id_is_per_cluster() {
        let cluster = ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sweep_id(&cluster).as_str(), "sweep/prod");
    }
}
