//! `nodewright pool rollout --pool FILE [--max-surge X] [--max-unavailable Y] [--canary N]
//! [--wait]`, and the start every rollout (rollbacks too) goes through.

use nodewright_model::Operation;
use nodewright_model::pool::ValidPool;
use nodewright_model::rollout::{PoolHistory, RolloutRequest};
use nodewright_model::{ClusterName, WorkflowId};
use nodewright_workflows::{RollingUpdateWorkflow, search};
use temporalio_client::errors::WorkflowStartError;
use temporalio_client::{Client, WorkflowIdConflictPolicy, WorkflowStartOptions};
use temporalio_common::search_attributes::SearchAttributes;

use nodewright_model::controller::RolloutOrder;

use super::follow::link_line;
use super::summary::{width_from, wrap};
use super::{KnobArgs, StartArgs, controller, error_chain, flags, follow, history, rollout_id};
use crate::{CliError, Output, pool_file, settings::Settings};

/// A rollout about to start, every value checked.
pub struct Start {
    /// The pool to roll to (strategy overrides applied).
    pub pool: ValidPool,
    /// The canary size.
    pub canary: Option<u32>,
    /// The pool's templates before this rollout.
    pub history: PoolHistory,
    /// Whether it is a rollback.
    pub rollback: bool,
    /// Follow it to its end.
    pub wait: bool,
    /// Test knobs.
    pub knobs: KnobArgs,
}

/// Validates the file and flags, reads the pool's history, starts `rollout/<cluster>/<pool>`
/// and follows it with `--wait`.
pub async fn run(settings: &Settings, output: Output, args: StartArgs) -> Result<(), CliError> {
    let Some(path) = args.pool else {
        return Err(CliError::InvalidInput(
            "give the pool file: nodewright pool rollout --pool FILE".to_owned(),
        ));
    };
    let mut pool = pool_file::load(&path)?;
    pool.strategy = args.budget.apply(&pool.strategy, "the pool file's")?;
    let canary = flags::check_canary(args.canary, pool.replicas)?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = rollout_id(&cluster, &pool.name);
    let link = settings.ui_link(&workflow_id);
    refuse_if_running(&client, &workflow_id, &pool.name, &link).await?;
    let history = history::last_completed(&client, &workflow_id)
        .await?
        .map(|last| last.result.history)
        .unwrap_or_default();
    let start = Start {
        pool,
        canary,
        history,
        rollback: false,
        wait: args.wait,
        knobs: args.knobs,
    };
    begin(settings, output, &client, &cluster, start).await
}

/// Refuses (exit 5) when a rollout of the pool is running, saying how to follow it.
pub async fn refuse_if_running(
    client: &Client,
    workflow_id: &WorkflowId,
    pool: &str,
    link: &str,
) -> Result<(), CliError> {
    match history::latest(client, workflow_id).await? {
        Some(latest) if latest.is_running() => Err(already_running(workflow_id, pool, link)),
        _ => Ok(()),
    }
}

fn already_running(workflow_id: &WorkflowId, pool: &str, link: &str) -> CliError {
    CliError::AlreadyRunning(format!(
        "{workflow_id} is already running; nothing new was started. Follow it with `nodewright pool rollout status {pool}` or {link}; stop it with `nodewright pool rollout abort {pool}`"
    ))
}

/// The one-line summary of a rollout, shown in the Temporal UI:
/// `Roll pool web to template abc123 (maxSurge 2, maxUnavailable 0)`.
pub fn summary(pool: &ValidPool, canary: Option<u32>, rollback: bool) -> String {
    let to = if rollback { "back to" } else { "to" };
    let canary = canary.map(|n| format!(", canary {n}")).unwrap_or_default();
    format!(
        "Roll pool {} {to} template {} (maxSurge {}, maxUnavailable {}{canary})",
        pool.name, pool.template_hash, pool.strategy.max_surge, pool.strategy.max_unavailable
    )
}

/// Starts the rollout, says so, and follows it when asked. When the pool's controller runs, the
/// rollout is handed to it (it starts the rollout at its next look; test knobs do not apply).
pub async fn begin(
    settings: &Settings,
    output: Output,
    client: &Client,
    cluster: &ClusterName,
    start: Start,
) -> Result<(), CliError> {
    let Start {
        pool,
        canary,
        history,
        rollback,
        wait,
        knobs,
    } = start;
    let workflow_id = rollout_id(cluster, &pool.name);
    let link = settings.ui_link(&workflow_id);
    let controller = controller::controller_id(cluster, &pool.name);
    if controller::is_running(client, &controller).await? {
        let order = RolloutOrder {
            pool,
            canary,
            history,
            rollback,
        };
        return controller::order_rollout(settings, output, client, &controller, order, wait).await;
    }
    let summary = summary(&pool, canary, rollback);
    let pool_name = pool.name.clone();
    let template_hash = pool.template_hash.clone();
    let options = WorkflowStartOptions::new(settings.task_queue.clone(), workflow_id.to_string())
        .id_conflict_policy(WorkflowIdConflictPolicy::Fail)
        .search_attributes(SearchAttributes::new([
            search::CLUSTER.value_set(cluster.to_string()),
            search::POOL.value_set(pool_name.clone()),
            search::OPERATION.value_set(Operation::Rollout.to_string()),
        ]))
        .static_summary(summary.clone())
        .build();
    let request = RolloutRequest {
        cluster: cluster.clone(),
        pool,
        canary,
        history,
        rollback,
        observe_interval: *knobs.observe_interval,
        history_limit: knobs.history_limit,
        resume: None,
        automatic: false,
    };
    request.check()?;
    let handle = client
        .start_workflow(RollingUpdateWorkflow::run, request, options)
        .await
        .map_err(|error| match error {
            WorkflowStartError::AlreadyStarted { .. } => {
                already_running(&workflow_id, &pool_name, &link)
            }
            other => CliError::RunFailed(format!(
                "starting {workflow_id} failed: {}",
                error_chain(&other)
            )),
        })?;
    if output == Output::Text {
        // Within the width, as following is (a long line is broken at spaces, the link kept whole).
        let width = width_from(std::env::var("COLUMNS").ok().as_deref());
        for line in wrap(&format!("started {workflow_id}: {summary}"), width, "  ") {
            eprintln!("{line}");
        }
        for line in wrap(
            &format!("  follow it: nodewright pool rollout status {pool_name}"),
            width,
            "  ",
        ) {
            eprintln!("{line}");
        }
        eprintln!("{}", link_line("or", &link, width));
    }
    if !wait {
        if output == Output::Json {
            let document = serde_json::json!({
                "workflowId": workflow_id.as_str(), "pool": pool_name,
                "templateHash": template_hash, "ui": link,
            });
            println!("{document}");
        }
        return Ok(());
    }
    follow::follow(
        client,
        handle.run_id(),
        output,
        &workflow_id,
        &pool_name,
        &link,
    )
    .await
}

#[cfg(test)]
mod tests {
    use nodewright_model::pool::{Amount, from_yaml};

    use super::*;

    fn pool() -> ValidPool {
        let mut pool = from_yaml(include_str!("../../../examples/pools/workers.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        pool.template_hash = "abc123".to_owned();
        pool.strategy.max_surge = Amount::Count(2);
        pool.strategy.max_unavailable = Amount::Percent(25);
        pool
    }

    #[test]
    fn the_summary_names_pool_template_and_budget() {
        assert_eq!(
            summary(&pool(), None, false),
            "Roll pool workers to template abc123 (maxSurge 2, maxUnavailable 25%)"
        );
        assert_eq!(
            summary(&pool(), Some(1), true),
            "Roll pool workers back to template abc123 (maxSurge 2, maxUnavailable 25%, canary 1)"
        );
    }
}
