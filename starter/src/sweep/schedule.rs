//! `nodewright sweep schedule [--every 15m] [flags]` and `nodewright sweep unschedule`: the
//! Temporal Schedule `sweep/<cluster>` that starts OrphanSweep every interval (overlap: skip;
//! its runs are named `sweep/<cluster>-<time>`).

use std::time::SystemTime;

use nodewright_model::sweep::human;
use nodewright_workflows::OrphanSweepWorkflow;
use temporalio_client::RpcOptions;
use temporalio_client::schedules::{
    CreateScheduleOptions, DeleteScheduleOptions, ScheduleAction, ScheduleError,
    ScheduleOverlapPolicy, ScheduleSpec,
};
use temporalio_client::tonic::Code;

use super::{ScheduleArgs, error_chain, flags, sweep_id, timestamp};
use crate::pool::who;
use crate::{CliError, Output, settings::Settings};

/// How many next run times the text shows.
const NEXT_RUNS_SHOWN: usize = 3;

/// Creates the schedule, or updates its interval, action and overlap policy when it exists,
/// then prints its next run times.
pub async fn schedule(
    settings: &Settings,
    output: Output,
    args: ScheduleArgs,
) -> Result<(), CliError> {
    let cluster = settings.cluster()?;
    let every = flags::every(args.every.as_deref())?;
    let request = args.flags.request(&cluster)?;
    let client = settings.temporal().connect().await?;
    let schedule_id = sweep_id(&cluster);
    let summary = flags::summary(&request);
    let note = format!("{summary}; set by {}", who());
    let action = ScheduleAction::start_workflow(
        OrphanSweepWorkflow::run,
        request,
        settings.task_queue.clone(),
        schedule_id.to_string(),
    );
    let options = CreateScheduleOptions::builder()
        .action(action.clone())
        .spec(ScheduleSpec::from_interval(every))
        .overlap_policy(ScheduleOverlapPolicy::Skip)
        .note(note.clone())
        .build();
    let failed = |doing: &str, error: &ScheduleError| {
        CliError::RunFailed(format!(
            "{doing} the schedule {schedule_id} failed: {}",
            error_chain(error)
        ))
    };
    let handle = client.get_schedule_handle(schedule_id.to_string());
    let updated = match client
        .create_schedule(schedule_id.to_string(), options)
        .await
    {
        Ok(_) => false,
        Err(ScheduleError::Rpc(status)) if status.code() == Code::AlreadyExists => {
            let change = move |update: &mut temporalio_client::schedules::ScheduleUpdate| {
                update
                    .set_spec(ScheduleSpec::from_interval(every))
                    .set_action(action)
                    .set_overlap_policy(ScheduleOverlapPolicy::Skip)
                    .set_note(note);
            };
            handle
                .update(change, RpcOptions::default())
                .await
                .map_err(|error| failed("updating", &error))?;
            true
        }
        Err(error) => return Err(failed("creating", &error)),
    };
    // The schedule is in place; its next run times are a courtesy.
    let (next_runs, paused) = match handle.describe(RpcOptions::default()).await {
        Ok(description) => (description.future_action_times(), description.paused()),
        Err(_) => (Vec::new(), false),
    };
    let link = schedule_link(&settings.ui_link(&schedule_id));
    match output {
        Output::Json => {
            let next: Vec<Option<String>> = next_runs
                .iter()
                .map(|time| timestamp(Some(*time)))
                .collect();
            let document = serde_json::json!({
                "scheduleId": schedule_id.as_str(), "every": human(every), "nextRuns": next,
                "updated": updated, "paused": paused, "ui": link,
            });
            println!("{document}");
        }
        Output::Text => {
            println!(
                "{}",
                scheduled_line(schedule_id.as_str(), &human(every), &next_runs, paused)
            );
            println!("  each run     {summary}, as {schedule_id}-<time>");
            if updated {
                println!(
                    "  updated      the schedule existed: its interval and sweep flags are replaced"
                );
            }
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}

/// `scheduled sweep/prod every 15m (overlap: skip); next runs: …`.
fn scheduled_line(
    schedule_id: &str,
    every: &str,
    next_runs: &[SystemTime],
    paused: bool,
) -> String {
    let next: Vec<String> = next_runs
        .iter()
        .take(NEXT_RUNS_SHOWN)
        .filter_map(|time| timestamp(Some(*time)))
        .collect();
    let next = match (paused, next.is_empty()) {
        (true, _) => "none, the schedule is paused".to_owned(),
        (false, true) => "unknown".to_owned(),
        (false, false) => next.join(", "),
    };
    format!("scheduled {schedule_id} every {every} (overlap: skip); next runs: {next}")
}

/// The Temporal UI page of a schedule, from the page of the workflow with the same ID.
fn schedule_link(workflow_link: &str) -> String {
    match workflow_link.rsplit_once("/workflows/") {
        Some((namespace, id)) => format!("{namespace}/schedules/{id}"),
        None => workflow_link.to_owned(),
    }
}

/// Deletes the schedule; none is a quiet success.
pub async fn unschedule(settings: &Settings, output: Output) -> Result<(), CliError> {
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let schedule_id = sweep_id(&cluster);
    let handle = client.get_schedule_handle(schedule_id.to_string());
    let deleted = match handle.delete(DeleteScheduleOptions::default()).await {
        Ok(()) => true,
        Err(ScheduleError::Rpc(status)) if status.code() == Code::NotFound => false,
        Err(error) => {
            return Err(CliError::RunFailed(format!(
                "deleting the schedule {schedule_id} failed: {}",
                error_chain(&error)
            )));
        }
    };
    match output {
        Output::Json => {
            let document = serde_json::json!({
                "scheduleId": schedule_id.as_str(), "deleted": deleted,
            });
            println!("{document}");
        }
        Output::Text if deleted => {
            println!("unscheduled {schedule_id}; a sweep it started and still running goes on")
        }
        Output::Text => println!("no schedule {schedule_id}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_line_names_interval_overlap_and_next_runs() {
        let at = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let next = [at(900), at(1800), at(2700), at(3600)];
        assert_eq!(
            scheduled_line("sweep/prod", "15m", &next, false),
            "scheduled sweep/prod every 15m (overlap: skip); next runs: 1970-01-01T00:15:00Z, 1970-01-01T00:30:00Z, 1970-01-01T00:45:00Z"
        );
        assert_eq!(
            scheduled_line("sweep/prod", "1h", &[], false),
            "scheduled sweep/prod every 1h (overlap: skip); next runs: unknown"
        );
        assert_eq!(
            scheduled_line("sweep/prod", "1h", &next, true),
            "scheduled sweep/prod every 1h (overlap: skip); next runs: none, the schedule is paused"
        );
    }

    #[test]
    fn the_schedule_page_sits_beside_the_workflows() {
        assert_eq!(
            schedule_link("http://ui:8233/namespaces/default/workflows/sweep%2Fprod"),
            "http://ui:8233/namespaces/default/schedules/sweep%2Fprod"
        );
    }
}
