//! Steering the running rollout of a pool: `pool rollout pause|resume|abort|approve POOL`
//! (signals) and `pool rollout set-strategy POOL` (the `set_strategy` update).

use std::time::Duration;

use nodewright_model::WorkflowId;
use nodewright_workflows::RollingUpdateWorkflow;
use temporalio_client::errors::WorkflowUpdateError;
use temporalio_client::{
    Client, WorkflowCancelOptions, WorkflowExecuteUpdateOptions, WorkflowSignalOptions,
};

use super::render::strategy;
use super::summary::{glance, width_from};
use super::{
    BudgetArgs, error_chain, flags, history, query_status, rollout_handle, rollout_id, who,
};
use crate::{CliError, Output, settings::Settings};

/// What a signal asks of the rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// `pause`.
    Pause,
    /// `resume`.
    Resume,
    /// `abort`.
    Abort,
    /// `approve`.
    Approve,
    /// A cancellation request (not a signal).
    Cancel,
}

impl Ask {
    /// The signal's name.
    pub fn name(self) -> &'static str {
        match self {
            Ask::Pause => "pause",
            Ask::Resume => "resume",
            Ask::Abort => "abort",
            Ask::Approve => "approve",
            Ask::Cancel => "cancel",
        }
    }

    /// What it asks, for people.
    fn meaning(self) -> &'static str {
        match self {
            Ask::Pause => "nothing new starts; creates and deletes in flight finish",
            Ask::Resume => "it goes on, its failure count back to 0",
            Ask::Abort => {
                "creates and deletes in flight finish, nothing new starts, then it ends aborted"
            }
            Ask::Approve => "it goes on beyond its canary",
            Ask::Cancel => {
                "creates and deletes in flight are canceled (a create removes what it made, a delete gives its machine back unless its VM delete was sent), nothing new starts, then it ends canceled"
            }
        }
    }
}

/// How long after a signal the status is asked, so that it shows the signal's effect.
const SETTLE: Duration = Duration::from_secs(1);

/// How long `set_strategy` may take to be accepted (it needs a worker).
const UPDATE_TIMEOUT: Duration = Duration::from_secs(30);

/// Refuses (exit 3) when no rollout of the pool is running.
async fn require_running(
    client: &Client,
    workflow_id: &WorkflowId,
    pool: &str,
) -> Result<(), CliError> {
    match history::latest(client, workflow_id).await? {
        Some(latest) if latest.is_running() => Ok(()),
        _ => Err(not_running(pool)),
    }
}

fn not_running(pool: &str) -> CliError {
    CliError::RunFailed(format!(
        "no rollout of pool {pool} is running; `nodewright pool rollout status {pool}` shows the latest one, `nodewright runs --pool {pool}` lists its runs"
    ))
}

/// Sends `ask` to the running rollout of `pool`, then shows its phase a moment later.
pub async fn signal(
    settings: &Settings,
    output: Output,
    pool: &str,
    ask: Ask,
) -> Result<(), CliError> {
    let pool = flags::pool_name(pool)?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = rollout_id(&cluster, pool);
    let link = settings.ui_link(&workflow_id);
    require_running(&client, &workflow_id, pool).await?;
    let handle = rollout_handle(&client, &workflow_id, None);
    let by = who();
    let options = WorkflowSignalOptions::default;
    let sent = match ask {
        Ask::Pause => {
            handle
                .signal(RollingUpdateWorkflow::pause, by.clone(), options())
                .await
        }
        Ask::Resume => {
            handle
                .signal(RollingUpdateWorkflow::resume, by.clone(), options())
                .await
        }
        Ask::Abort => {
            handle
                .signal(RollingUpdateWorkflow::abort, by.clone(), options())
                .await
        }
        Ask::Approve => {
            handle
                .signal(RollingUpdateWorkflow::approve, by.clone(), options())
                .await
        }
        Ask::Cancel => {
            handle
                .cancel(
                    WorkflowCancelOptions::builder()
                        .reason(format!("nodewright pool rollout cancel by {by}"))
                        .build(),
                )
                .await
        }
    };
    sent.map_err(|error| match error {
        temporalio_client::errors::WorkflowInteractionError::NotFound(_) => not_running(pool),
        other => CliError::RunFailed(format!(
            "signalling {} to {workflow_id} failed: {}",
            ask.name(),
            error_chain(&other)
        )),
    })?;
    tokio::time::sleep(SETTLE).await;
    let status = query_status(&handle).await;
    match output {
        Output::Json => {
            let document = serde_json::json!({
                "workflowId": workflow_id.as_str(), "signal": ask.name(), "by": by,
                "status": status.as_ref().ok(), "ui": link,
            });
            println!("{document}");
        }
        Output::Text => {
            println!(
                "asked {workflow_id} to {} (as {by}): {}",
                ask.name(),
                ask.meaning()
            );
            match &status {
                Ok(status) => {
                    let width = width_from(std::env::var("COLUMNS").ok().as_deref());
                    let now = chrono::Utc::now().timestamp_millis();
                    for (index, line) in glance(status, now, width.saturating_sub(7))
                        .iter()
                        .enumerate()
                    {
                        let label = if index == 0 { "  now  " } else { "       " };
                        println!("{label}{line}");
                    }
                    if ask == Ask::Approve && status.canary.is_none() {
                        println!("  note: this rollout has no canary; approving changes nothing");
                    }
                }
                Err(error) => println!("  its status did not answer: {error}"),
            }
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}

/// Runs the `set_strategy` update on the running rollout of `pool` and shows the strategy in
/// force; a change its validator refuses is invalid input (exit 2) with the rollout's reason.
pub async fn set_strategy(
    settings: &Settings,
    output: Output,
    pool: &str,
    budget: BudgetArgs,
) -> Result<(), CliError> {
    let pool = flags::pool_name(pool)?;
    if budget.is_empty() {
        return Err(CliError::InvalidInput(format!(
            "nothing to change: give --max-surge and/or --max-unavailable, e.g. `nodewright pool rollout set-strategy {pool} --max-surge 2`"
        )));
    }
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = rollout_id(&cluster, pool);
    let link = settings.ui_link(&workflow_id);
    require_running(&client, &workflow_id, pool).await?;
    let handle = rollout_handle(&client, &workflow_id, None);
    let update = handle.execute_update(
        RollingUpdateWorkflow::set_strategy,
        budget.change(),
        WorkflowExecuteUpdateOptions::default(),
    );
    let view = match tokio::time::timeout(UPDATE_TIMEOUT, update).await {
        Ok(Ok(view)) => view,
        Ok(Err(WorkflowUpdateError::Failed(failure))) => {
            return Err(CliError::InvalidInput(format!(
                "{workflow_id} refused the change: {}; the strategy stays as it was",
                failure.message
            )));
        }
        Ok(Err(WorkflowUpdateError::NotFound(_))) => return Err(not_running(pool)),
        Ok(Err(other)) => {
            return Err(CliError::RunFailed(format!(
                "changing the strategy of {workflow_id} failed: {}",
                error_chain(&other)
            )));
        }
        Err(_) => {
            return Err(CliError::RunFailed(format!(
                "{workflow_id} did not accept the change within {}s: is nodewright-worker running? The change may still apply when a worker picks it up; check with `nodewright pool rollout status {pool}`",
                UPDATE_TIMEOUT.as_secs()
            )));
        }
    };
    match output {
        Output::Json => {
            let document = serde_json::json!({
                "workflowId": workflow_id.as_str(), "strategy": view, "ui": link,
            });
            println!("{document}");
        }
        Output::Text => {
            println!("{workflow_id} uses from its next plan: {}", strategy(&view));
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}
