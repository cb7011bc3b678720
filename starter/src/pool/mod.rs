//! `nodewright pool ...`: roll a pool to a new template, follow and steer the rollout, roll it
//! back, and look at the pool's machines.
//!
//! One job per module: [`flags`] checks what was typed, [`history`] finds the pool's runs,
//! [`revisions`] reads the pool's revisions (`pool history`), [`rollout`] and [`rollback`]
//! start a rollout, [`follow`] follows one to its end, [`control`]
//! signals and updates the one running, [`status`] shows a rollout or the pool (`--watch`: again
//! and again), [`render`] turns them into text and [`summary`] a rollout at a glance, at any
//! scale and within a width.

mod control;
mod controller;
mod flags;
mod follow;
mod history;
mod image;
mod render;
mod revisions;
mod rollback;
mod rollout;
mod status;
mod summary;

use std::path::PathBuf;

use clap::{Args, Subcommand};
use nodewright_model::pool::Amount;
use nodewright_model::rollout::{DEFAULT_HISTORY_LIMIT, DEFAULT_OBSERVE_INTERVAL, RolloutStatus};
use nodewright_model::{ClusterName, Operation, WorkflowId, limits};
use nodewright_workflows::RollingUpdateWorkflow;
use temporalio_client::{Client, WorkflowHandle, WorkflowQueryOptions};

use crate::{CliError, Output, settings::Settings};

use crate::error_chain;

/// What to do with pools.
#[derive(Debug, Subcommand)]
pub enum PoolCommand {
    /// Keep a pool at the state its file declares: start its controller (PoolController), or
    /// hand the running one the file; prints what changes (machines to create or delete, a
    /// rollout to start).
    Apply(controller::ApplyArgs),
    /// Change the number of machines the pool's controller keeps.
    Scale(controller::ScaleArgs),
    /// Pause the pool's controller: it observes and reports, and acts on nothing.
    Pause {
        /// The pool's name.
        pool: String,
    },
    /// Resume the pool's controller.
    Resume {
        /// The pool's name.
        pool: String,
    },
    /// Delete the pool: its controller drains and deletes every machine, then ends; with
    /// `--orphan` it ends at once and leaves the machines.
    Delete(controller::DeleteArgs),
    /// Roll a pool to the template of its file, replacing machines within the strategy's budget
    /// (RollingUpdate); or, with a subcommand, look at and steer the rollout under way.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Rollout(RolloutArgs),
    /// Roll a pool back to its revision before the current one (the highest-numbered earlier
    /// revision that completed), keeping the current replicas, strategy and drain.
    Rollback(RollbackArgs),
    /// List a pool's revisions as the cluster keeps them: number, template, outcome, when, which
    /// is current and where `pool rollback` would go.
    History(StatusArgs),
    /// Show a pool's machines as a worker sees them in Azure and Kubernetes (InspectPool), and
    /// the rollout under way, if any (or its controller's status); `--watch` keeps showing it.
    Status(PoolStatusArgs),
    /// Show the image versions a pool's controller follows (current, newest, previous, policy),
    /// or with a subcommand pin, unpin or update them.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Image(image::ImageArgs),
    /// Check a pool file without starting anything: every problem with its field and fix, and a
    /// warning when its inline bootstrap looks like it holds a credential.
    Validate(ValidateArgs),
}

/// The flags of `pool validate --pool FILE`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The Pool file (YAML, `kind: Pool`).
    #[arg(long, value_name = "FILE")]
    pool: PathBuf,
}

/// `pool rollout`: start a rollout, or one of its subcommands.
#[derive(Debug, Args)]
pub struct RolloutArgs {
    #[command(subcommand)]
    command: Option<RolloutCommand>,
    #[command(flatten)]
    start: StartArgs,
}

/// The flags of `pool rollout --pool FILE`.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// The Pool file (YAML, `kind: Pool`): the replicas, template and strategy to roll to.
    #[arg(long, value_name = "FILE", required = true)]
    pool: Option<PathBuf>,
    #[command(flatten)]
    budget: BudgetArgs,
    /// Replace only this many machines (at least 1, at most replicas), then wait for
    /// `nodewright pool rollout approve POOL`.
    #[arg(long, value_name = "N")]
    canary: Option<u32>,
    /// Follow the rollout until it ends, printing its progress.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    knobs: KnobArgs,
}

/// `--max-surge` and `--max-unavailable`, overriding the strategy.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct BudgetArgs {
    /// Machines allowed above replicas while rolling: a number (2) or a percentage of replicas
    /// (25%, rounded up); overrides the strategy's maxSurge.
    #[arg(long, value_name = "N|P%", value_parser = flags::amount)]
    max_surge: Option<Amount>,
    /// Machines allowed below replicas while rolling: a number (1) or a percentage of replicas
    /// (25%, rounded down); overrides the strategy's maxUnavailable.
    #[arg(long, value_name = "N|P%", value_parser = flags::amount)]
    max_unavailable: Option<Amount>,
}

/// Test knobs of a rollout, hidden from help.
#[derive(Debug, Clone, Copy, Args)]
pub struct KnobArgs {
    /// How often the rollout looks at its pool when nothing else wakes it (e.g. 2s; at most 1h).
    #[arg(long, hide = true, value_name = "DURATION",
          default_value_t = DEFAULT_OBSERVE_INTERVAL.into(), value_parser = flags::observe_interval)]
    observe_interval: humantime::Duration,
    /// History events after which the rollout continues as a new run (at most 4000).
    #[arg(long, hide = true, value_name = "N", default_value_t = DEFAULT_HISTORY_LIMIT,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(limits::MAX_HISTORY_LIMIT)))]
    history_limit: u32,
}

/// Looking at and steering the rollout of a pool.
#[derive(Debug, Subcommand)]
pub enum RolloutCommand {
    /// Show the rollout of a pool (the one running, else the latest): phase, counts, strategy,
    /// children in flight, failures and every machine.
    Status {
        /// The pool's name (`metadata.name` of its file).
        pool: String,
    },
    /// Pause the running rollout: nothing new starts; creates and deletes in flight finish.
    Pause {
        /// The pool's name.
        pool: String,
    },
    /// Resume a paused rollout (its failure count starts again from 0).
    Resume {
        /// The pool's name.
        pool: String,
    },
    /// Abort the running rollout: creates and deletes in flight finish, nothing new starts,
    /// and it ends `aborted` (the pool may mix templates).
    Abort {
        /// The pool's name.
        pool: String,
    },
    /// Cancel the running rollout (as the Temporal UI's "Request Cancellation"): creates and
    /// deletes in flight are canceled and end by their own runbooks, nothing new starts, and it
    /// ends canceled within maxSurge/maxUnavailable.
    Cancel {
        /// The pool's name.
        pool: String,
    },
    /// Let a canary rollout go on beyond its canary machines.
    Approve {
        /// The pool's name.
        pool: String,
    },
    /// Change maxSurge and/or maxUnavailable of the running rollout, from its next plan.
    SetStrategy {
        /// The pool's name.
        pool: String,
        #[command(flatten)]
        budget: BudgetArgs,
    },
}

/// The flags of `pool rollback POOL`.
#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The pool's name.
    pool: String,
    #[command(flatten)]
    budget: BudgetArgs,
    /// Follow the rollback until it ends, printing its progress.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    knobs: KnobArgs,
}

/// The flags of `pool status POOL` and `pool history POOL`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The pool's name.
    pool: String,
    /// How long to wait for a worker to look at the pool, in seconds (1 to 600).
    #[arg(long, value_name = "SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=limits::MAX_CLI_WAIT_SECONDS))]
    timeout: u64,
}

/// The flags of `pool status POOL`.
#[derive(Debug, Args)]
pub struct PoolStatusArgs {
    #[command(flatten)]
    look: StatusArgs,
    /// Look again every --interval until Ctrl-C: on a terminal redrawn in place, in a pipe
    /// printed when it changed (with --output json, one JSON document a line).
    #[arg(long)]
    watch: bool,
    /// How often --watch looks (e.g. 2s, 30s; 1s to 1h).
    #[arg(long, value_name = "DURATION", default_value = "2s", requires = "watch",
          value_parser = flags::watch_interval)]
    interval: humantime::Duration,
}

/// Runs a `pool` subcommand.
pub async fn run(
    settings: &Settings,
    output: Output,
    command: PoolCommand,
) -> Result<(), CliError> {
    match command {
        PoolCommand::Apply(args) => controller::apply(settings, output, args).await,
        PoolCommand::Scale(args) => controller::scale(settings, output, args).await,
        PoolCommand::Pause { pool } => controller::pause(settings, output, &pool, true).await,
        PoolCommand::Resume { pool } => controller::pause(settings, output, &pool, false).await,
        PoolCommand::Delete(args) => controller::delete(settings, output, args).await,
        PoolCommand::Rollout(RolloutArgs {
            command: None,
            start,
        }) => rollout::run(settings, output, start).await,
        PoolCommand::Rollout(RolloutArgs {
            command: Some(command),
            ..
        }) => match command {
            RolloutCommand::Status { pool } => status::rollout(settings, output, &pool).await,
            RolloutCommand::Pause { pool } => {
                control::signal(settings, output, &pool, control::Ask::Pause).await
            }
            RolloutCommand::Resume { pool } => {
                control::signal(settings, output, &pool, control::Ask::Resume).await
            }
            RolloutCommand::Abort { pool } => {
                control::signal(settings, output, &pool, control::Ask::Abort).await
            }
            RolloutCommand::Cancel { pool } => {
                control::signal(settings, output, &pool, control::Ask::Cancel).await
            }
            RolloutCommand::Approve { pool } => {
                control::signal(settings, output, &pool, control::Ask::Approve).await
            }
            RolloutCommand::SetStrategy { pool, budget } => {
                control::set_strategy(settings, output, &pool, budget).await
            }
        },
        PoolCommand::Rollback(args) => rollback::run(settings, output, args).await,
        PoolCommand::History(args) => {
            revisions::run(settings, output, &args.pool, args.timeout).await
        }
        PoolCommand::Status(args) => status::pool(settings, output, &args).await,
        PoolCommand::Image(args) => image::run(settings, output, args).await,
        PoolCommand::Validate(args) => validate(output, &args.pool),
    }
}

/// `pool validate`: reads and validates the file (warning about an inline credential on stderr,
/// never printing it) and prints what the pool is; touches neither Temporal nor the cluster.
fn validate(output: Output, path: &std::path::Path) -> Result<(), CliError> {
    let pool = crate::pool_file::load(path)?;
    match output {
        Output::Json => println!(
            "{}",
            serde_json::json!({
                "valid": true,
                "pool": pool.name,
                "replicas": pool.replicas,
                "templateHash": pool.template_hash,
                "credentialWarning": crate::pool_file::credential_warning(&pool),
            })
        ),
        Output::Text => println!(
            "pool file {} is valid: pool {}, {} replicas, template {}",
            path.display(),
            pool.name,
            pool.replicas,
            pool.template_hash
        ),
    }
    Ok(())
}

/// `rollout/<cluster>/<pool>`.
fn rollout_id(cluster: &ClusterName, pool: &str) -> WorkflowId {
    WorkflowId::for_subject(Operation::Rollout, cluster, pool)
}

/// A handle on a rollout's runs.
type RolloutHandle = WorkflowHandle<Client, RollingUpdateWorkflow>;

/// The rollout `workflow_id`: its run `run_id`, or without one its latest run.
fn rollout_handle(
    client: &Client,
    workflow_id: &WorkflowId,
    run_id: Option<&str>,
) -> RolloutHandle {
    crate::handles::run_handle(client, workflow_id.as_str(), run_id)
}

/// The rollout's `status` query; the error says why there is no answer.
async fn query_status(handle: &RolloutHandle) -> Result<RolloutStatus, String> {
    crate::handles::answer(handle.query(
        RollingUpdateWorkflow::status,
        (),
        WorkflowQueryOptions::default(),
    ))
    .await
}

/// Who asks, as signals record it: `$USER@cli`, or `cli`.
pub(crate) fn who() -> String {
    match std::env::var("USER") {
        Ok(user) if !user.trim().is_empty() => format!("{}@cli", user.trim()),
        _ => "cli".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: PoolCommand,
    }

    fn parse(args: &[&str]) -> Result<PoolCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("pool").chain(args.iter().copied())).map(|c| c.command)
    }

    #[test]
    fn pool_image_shows_or_steers_by_subcommand() {
        for args in [
            &["image", "web"][..],
            &["image", "pin", "web"],
            &["image", "unpin", "web"],
            &["image", "update", "web"],
        ] {
            assert!(matches!(parse(args), Ok(PoolCommand::Image(_))), "{args:?}");
        }
        assert!(parse(&["image"]).is_err(), "image needs the pool's name");
        assert!(
            parse(&["image", "pin"]).is_err(),
            "pin needs the pool's name"
        );
    }

    #[test]
    fn the_controller_commands_parse_their_flags() {
        assert!(matches!(
            parse(&["apply", "-f", "p.yaml", "--dry-run"]),
            Ok(PoolCommand::Apply(_))
        ));
        assert!(parse(&["apply"]).is_err(), "apply needs -f FILE");
        assert!(matches!(
            parse(&["scale", "web", "--replicas", "5"]),
            Ok(PoolCommand::Scale(_))
        ));
        assert!(parse(&["scale", "web"]).is_err(), "scale needs --replicas");
        assert!(parse(&["scale", "web", "--replicas", "-1"]).is_err());
        assert!(
            matches!(parse(&["pause", "web"]), Ok(PoolCommand::Pause { pool }) if pool == "web")
        );
        assert!(
            matches!(parse(&["resume", "web"]), Ok(PoolCommand::Resume { pool }) if pool == "web")
        );
        assert!(matches!(
            parse(&["delete", "web", "--orphan"]),
            Ok(PoolCommand::Delete(_))
        ));
    }

    #[test]
    fn rollout_takes_a_file_or_a_subcommand() {
        let start = parse(&[
            "rollout",
            "--pool",
            "p.yaml",
            "--max-surge",
            "25%",
            "--canary",
            "1",
        ]);
        match start {
            Ok(PoolCommand::Rollout(RolloutArgs {
                command: None,
                start,
            })) => {
                assert_eq!(start.pool, Some(PathBuf::from("p.yaml")));
                assert_eq!(start.budget.max_surge, Some(Amount::Percent(25)));
                assert_eq!(start.canary, Some(1));
                assert_eq!(*start.knobs.observe_interval, DEFAULT_OBSERVE_INTERVAL);
                assert_eq!(start.knobs.history_limit, DEFAULT_HISTORY_LIMIT);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["rollout", "status", "web"]),
            Ok(PoolCommand::Rollout(RolloutArgs {
                command: Some(RolloutCommand::Status { .. }),
                ..
            }))
        ));
        assert!(matches!(
            parse(&["rollout", "set-strategy", "web", "--max-unavailable", "1"]),
            Ok(PoolCommand::Rollout(RolloutArgs {
                command: Some(RolloutCommand::SetStrategy { .. }),
                ..
            }))
        ));
        assert!(
            parse(&["rollout"]).is_err(),
            "--pool is required without a subcommand"
        );
        assert!(parse(&["rollout", "--pool", "p.yaml", "status", "web"]).is_err());
    }

    #[test]
    fn pool_status_watches_at_an_interval_only_when_asked() {
        match parse(&["status", "web"]) {
            Ok(PoolCommand::Status(args)) => {
                assert_eq!(args.look.pool, "web");
                assert!(!args.watch);
                assert_eq!(*args.interval, std::time::Duration::from_secs(2));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["status", "web", "--watch", "--interval", "30s"]) {
            Ok(PoolCommand::Status(args)) => {
                assert!(args.watch);
                assert_eq!(*args.interval, std::time::Duration::from_secs(30));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            parse(&["status", "web", "--interval", "5s"]).is_err(),
            "--interval needs --watch"
        );
        assert!(parse(&["status", "web", "--watch", "--interval", "0s"]).is_err());
    }

    #[test]
    fn test_knobs_parse_durations_and_counts() {
        let parsed = parse(&[
            "rollout",
            "--pool",
            "p.yaml",
            "--observe-interval",
            "2s",
            "--history-limit",
            "60",
        ]);
        match parsed {
            Ok(PoolCommand::Rollout(RolloutArgs { start, .. })) => {
                assert_eq!(
                    *start.knobs.observe_interval,
                    std::time::Duration::from_secs(2)
                );
                assert_eq!(start.knobs.history_limit, 60);
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["rollout", "--pool", "p", "--observe-interval", "soon"]).is_err());
        assert!(parse(&["rollout", "--pool", "p", "--history-limit", "0"]).is_err());
        assert!(parse(&["rollout", "--pool", "p", "--max-surge", "1.5"]).is_err());
    }
}
