//! `nodewright sweep approve [RUN]`: finds the sweep run that waits for approval (RUN, or the
//! cluster's one waiting), shows its plan (what it would remove, counted by kind, and why it
//! waits), and sends the `approve` signal naming that run and the planned count it showed. It
//! asks nothing interactively; the sweep refuses an approval for another run or another count,
//! and one that comes when it does not wait.

use std::time::Duration;

use nodewright_model::ClusterName;
use nodewright_model::sweep::{Approval, ApproveSignal, SweepPhase, SweepStatus};
use nodewright_workflows::OrphanSweepWorkflow;
use temporalio_client::WorkflowSignalOptions;
use temporalio_client::errors::WorkflowInteractionError;

use super::find::{self, SweepRun};
use super::render::{brake_line, plan_line};
use super::{error_chain, flags, query_status, sweep_handle};
use crate::pool::who;
use crate::{CliError, Output, settings::Settings};

/// How long `sweep approve` looks for the sweep's answer after signalling (it goes on either
/// way; a refusal seen in that time is exit 3).
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// A running sweep and what its `status` query answered (or why it did not).
type Looked = (SweepRun, Result<SweepStatus, String>);

/// Approves the plan of `run`, or of the cluster's one sweep waiting for approval.
pub async fn approve(
    settings: &Settings,
    output: Output,
    run: Option<&str>,
) -> Result<(), CliError> {
    let named = run.map(flags::run_id).transpose()?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let running = find::running(&client, &cluster).await?;
    let mut looked = Vec::new();
    for candidate in running {
        if named
            .as_ref()
            .is_some_and(|id| id.as_str() != candidate.workflow_id)
        {
            continue;
        }
        let handle = sweep_handle(&client, &candidate.workflow_id, Some(&candidate.run_id));
        let status = query_status(&handle).await;
        looked.push((candidate, status));
    }
    let named_text = named.as_ref().map(|id| id.as_str().to_owned());
    let (target, status) = waiting_one(&cluster, named_text.as_deref(), looked)?;
    let by = who();
    let approval = Approval {
        run_id: target.run_id.clone(),
        planned: status.planned,
        by: by.clone(),
    };
    if matches!(output, Output::Text) {
        for line in plan_lines(&target, &status) {
            println!("{line}");
        }
    }
    let handle = sweep_handle(&client, &target.workflow_id, Some(&target.run_id));
    handle
        .signal(
            OrphanSweepWorkflow::approve,
            ApproveSignal::Bound(approval),
            WorkflowSignalOptions::default(),
        )
        .await
        .map_err(|error| match error {
            WorkflowInteractionError::NotFound(_) => CliError::RunFailed(format!(
                "{} (run {}) ended before the approval reached it: nothing was approved; `nodewright sweep report {}` shows its audit",
                target.workflow_id, target.run_id, target.workflow_id
            )),
            other => CliError::RunFailed(format!(
                "signalling approve to {} failed: {}",
                target.workflow_id,
                error_chain(&other)
            )),
        })?;
    if let Some(reason) = refused(&handle, status.refused_approvals.len()).await {
        return Err(CliError::RunFailed(format!(
            "{} refused the approval: {reason}",
            target.workflow_id
        )));
    }
    match output {
        Output::Json => {
            let document = serde_json::json!({
                "workflowId": target.workflow_id, "runId": target.run_id, "approvedBy": by,
                "planned": status.planned, "plan": status.plan, "brake": status.brake,
            });
            println!("{document}");
        }
        Output::Text => println!(
            "approved {} (run {}): its {} planned removals, as {by}",
            target.workflow_id, target.run_id, status.planned
        ),
    }
    Ok(())
}

/// The one run of `looked` that waits for approval. None running is exit 3; running but not
/// waiting is exit 3 naming its phase; several waiting (without RUN) ask for RUN (exit 2).
fn waiting_one(
    cluster: &ClusterName,
    named: Option<&str>,
    looked: Vec<Looked>,
) -> Result<(SweepRun, SweepStatus), CliError> {
    if looked.is_empty() {
        return Err(CliError::RunFailed(match named {
            Some(id) => format!(
                "{id} is not running: there is nothing to approve; `nodewright sweep status` shows the sweep running, if any"
            ),
            None => format!(
                "no sweep of cluster {cluster} is running: there is nothing to approve (`nodewright sweep status` shows the newest one)"
            ),
        }));
    }
    let mut waiting = Vec::new();
    let mut others = Vec::new();
    for (run, status) in looked {
        match status {
            Ok(status) if status.phase.waits_for_approval() => waiting.push((run, status)),
            Ok(status) => others.push(format!("{} is {}", run.workflow_id, status.phase.as_str())),
            Err(error) => others.push(format!(
                "{}'s status could not be read: {error}",
                run.workflow_id
            )),
        }
    }
    match waiting.len() {
        0 => Err(CliError::RunFailed(format!(
            "no sweep of cluster {cluster} waits for approval ({}): there is nothing to approve, and an approval is not kept for later; a sweep waits only when its plan is over --max-deletions or the brake holds it",
            others.join("; ")
        ))),
        1 => Ok(waiting.remove(0)),
        _ => {
            let ids: Vec<&str> = waiting
                .iter()
                .map(|(run, _)| run.workflow_id.as_str())
                .collect();
            Err(CliError::InvalidInput(format!(
                "{} sweeps of cluster {cluster} wait for approval ({}); name the one to approve: nodewright sweep approve RUN",
                ids.len(),
                ids.join(", ")
            )))
        }
    }
}

/// What `sweep approve` shows before it approves: the run, why it waits, and its plan.
fn plan_lines(run: &SweepRun, status: &SweepStatus) -> Vec<String> {
    let why = match status.phase {
        SweepPhase::Braked => "the plausibility brake holds its plan",
        _ => "its plan is over --max-deletions",
    };
    let mut lines = vec![
        format!(
            "{} (run {}) waits for approval: {why}",
            run.workflow_id, run.run_id
        ),
        format!(
            "  plan         {} ({} removals)",
            plan_line(status),
            status.planned
        ),
    ];
    if let Some(brake) = &status.brake {
        lines.push(format!("  {}", brake_line(brake)));
    }
    lines
}

/// The reason of a refusal the sweep recorded after the first `before` (looked for during
/// [`ANSWER_WAIT`], until the sweep leaves its wait).
async fn refused(handle: &super::SweepHandle, before: usize) -> Option<String> {
    let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
    while tokio::time::Instant::now() < deadline {
        if let Ok(status) = query_status(handle).await {
            if status.refused_approvals.len() > before {
                return status.refused_approvals.last().map(|r| r.reason.clone());
            }
            if !status.phase.waits_for_approval() {
                return None;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use temporalio_client::WorkflowExecutionStatus;

    use super::*;

    fn cluster() -> ClusterName {
        ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"))
    }

    fn run(id: &str) -> SweepRun {
        SweepRun {
            workflow_id: id.to_owned(),
            run_id: "r1".to_owned(),
            status: WorkflowExecutionStatus::Running,
            started: None,
            closed: None,
        }
    }

    fn status(phase: SweepPhase) -> SweepStatus {
        let mut status = SweepStatus::starting();
        status.phase = phase;
        status.planned = 5;
        status.plan = BTreeMap::from([("delete nic".to_owned(), 2), ("delete vm".to_owned(), 3)]);
        status
    }

    fn message(result: Result<(SweepRun, SweepStatus), CliError>) -> (u8, String) {
        match result {
            Err(CliError::RunFailed(message)) => (3, message),
            Err(CliError::InvalidInput(message)) => (2, message),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn approving_needs_exactly_one_sweep_waiting_for_approval() {
        assert_eq!(
            message(waiting_one(&cluster(), None, Vec::new())),
            (
                3,
                "no sweep of cluster prod is running: there is nothing to approve (`nodewright sweep status` shows the newest one)".to_owned()
            )
        );
        assert_eq!(
            message(waiting_one(&cluster(), Some("sweep/prod"), Vec::new())).0,
            3
        );
        let acting = vec![(run("sweep/prod"), Ok(status(SweepPhase::Acting)))];
        assert_eq!(
            message(waiting_one(&cluster(), None, acting)),
            (
                3,
                "no sweep of cluster prod waits for approval (sweep/prod is acting): there is nothing to approve, and an approval is not kept for later; a sweep waits only when its plan is over --max-deletions or the brake holds it".to_owned()
            )
        );
        let one = vec![
            (run("sweep/prod"), Ok(status(SweepPhase::Braked))),
            (
                run("sweep/prod-2026-04-01T10:15:00Z"),
                Err("no worker".to_owned()),
            ),
        ];
        let (found, _) = waiting_one(&cluster(), None, one).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(found.workflow_id, "sweep/prod");
        let two = vec![
            (run("sweep/prod"), Ok(status(SweepPhase::Braked))),
            (
                run("sweep/prod-2026-04-01T10:15:00Z"),
                Ok(status(SweepPhase::AwaitingApproval)),
            ),
        ];
        assert_eq!(
            message(waiting_one(&cluster(), None, two)),
            (
                2,
                "2 sweeps of cluster prod wait for approval (sweep/prod, sweep/prod-2026-04-01T10:15:00Z); name the one to approve: nodewright sweep approve RUN".to_owned()
            )
        );
    }

    #[test]
    fn the_plan_shown_counts_removals_by_kind() {
        assert_eq!(
            plan_lines(&run("sweep/prod"), &status(SweepPhase::AwaitingApproval)),
            [
                "sweep/prod (run r1) waits for approval: its plan is over --max-deletions",
                "  plan         2 delete nic, 3 delete vm (5 removals)",
            ]
        );
    }
}
