//! `nodewright sweep schedule [--every 15m] [flags]` and `nodewright sweep unschedule`: the
//! Temporal Schedule `sweep/<cluster>` that starts OrphanSweep every interval (overlap: skip;
//! its runs are named `sweep/<cluster>-<time>`). On an existing schedule only the flags given
//! change ([`super::merge`]); the schedule's own request and interval keep the rest.

use std::time::{Duration, SystemTime};

use nodewright_model::sweep::{SweepRequest, human};
use nodewright_workflows::OrphanSweepWorkflow;
use temporalio_client::schedules::{
    CreateScheduleOptions, DeleteScheduleOptions, ScheduleAction, ScheduleDescription,
    ScheduleDescriptionAction, ScheduleError, ScheduleHandle, ScheduleOverlapPolicy, ScheduleSpec,
};
use temporalio_client::tonic::Code;
use temporalio_client::{Client, RpcOptions};
use temporalio_common::WorkflowDefinition;

use super::merge::{self, Current, Merged, Origin, Typed};
use super::{ScheduleArgs, error_chain, flags, sweep_id, timestamp};
use crate::pool::who;
use crate::{CliError, Output, settings::Settings};

/// How many next run times the text shows.
const NEXT_RUNS_SHOWN: usize = 3;

/// Creates the schedule with the flags given and the defaults, or, when it exists, changes only
/// the flags given and keeps the schedule's other settings; then prints every setting, which
/// ones this command changed, and the next run times.
pub async fn schedule(
    settings: &Settings,
    output: Output,
    args: ScheduleArgs,
) -> Result<(), CliError> {
    let cluster = settings.cluster()?;
    let typed = Typed {
        every: flags::every(args.every.as_deref())?,
        sweep: args.flags.checked()?,
    };
    let client = settings.temporal().connect().await?;
    let schedule_id = sweep_id(&cluster);
    let failed = |doing: &str, error: &ScheduleError| {
        CliError::RunFailed(format!(
            "{doing} the schedule {schedule_id} failed: {}",
            error_chain(error)
        ))
    };
    let handle = client.get_schedule_handle(schedule_id.to_string());
    let existing = match handle.describe(RpcOptions::default()).await {
        Ok(description) => Some(current(&schedule_id.to_string(), description).await?),
        Err(ScheduleError::Rpc(status)) if status.code() == Code::NotFound => None,
        Err(error) => return Err(failed("reading", &error)),
    };
    let merged = merge::merge(
        &cluster,
        &typed,
        existing.as_ref().map(|(current, _)| current),
    )?;
    let summary = flags::summary(&merged.request);
    let note = format!("{summary}; set by {}", who());
    let action = ScheduleAction::start_workflow(
        OrphanSweepWorkflow::run,
        merged.request.clone(),
        settings.task_queue.clone(),
        schedule_id.to_string(),
    );
    match existing {
        None => {
            let options = CreateScheduleOptions::builder()
                .action(action)
                .spec(ScheduleSpec::from_interval(merged.every))
                .overlap_policy(ScheduleOverlapPolicy::Skip)
                .note(note)
                .build();
            client
                .create_schedule(schedule_id.to_string(), options)
                .await
                .map_err(|error| match error {
                    ScheduleError::Rpc(status) if status.code() == Code::AlreadyExists => {
                        CliError::RunFailed(format!(
                            "the schedule {schedule_id} was created meanwhile by someone else; run the command again to change it"
                        ))
                    }
                    error => failed("creating", &error),
                })?;
        }
        Some((_, description)) => {
            // The schedule as it is (paused or not, its state and policies), with this command's
            // request; its spec changes only with --every (its offset and jitter stay otherwise).
            let mut update = description.into_update();
            update
                .set_action(action)
                .set_overlap_policy(ScheduleOverlapPolicy::Skip)
                .set_note(note);
            if typed.every.is_some() {
                update.set_spec(ScheduleSpec::from_interval(merged.every));
            }
            handle
                .send_update(update, RpcOptions::default())
                .await
                .map_err(|error| failed("updating", &error))?;
        }
    }
    let link = schedule_link(&settings.ui_link(&schedule_id));
    print(output, &handle, &merged, &summary, &link).await;
    Ok(())
}

/// What the schedule `schedule_id` has: its interval and the sweep request of its action.
///
/// # Errors
///
/// Its action starts another workflow or has no request nodewright can read (exit 3): the
/// message says to remove it with `sweep unschedule`.
async fn current(
    schedule_id: &str,
    description: ScheduleDescription,
) -> Result<(Current, ScheduleDescription), CliError> {
    let unreadable = |why: String| {
        CliError::RunFailed(format!(
            "the schedule {schedule_id} {why}; nothing was changed. Remove it with `nodewright sweep unschedule`, then schedule again"
        ))
    };
    let ScheduleDescriptionAction::StartWorkflow(action) = description.action() else {
        return Err(unreadable("does not start a workflow".to_owned()));
    };
    let sweep = OrphanSweepWorkflow::run.name();
    if action.workflow_type() != sweep {
        return Err(unreadable(format!(
            "starts {}, not {sweep}",
            action.workflow_type()
        )));
    }
    let request = match action.args::<SweepRequest>().await {
        Ok(Some(request)) => request,
        Ok(None) => return Err(unreadable("starts its sweeps without a request".to_owned())),
        Err(error) => {
            return Err(unreadable(format!(
                "has a sweep request nodewright cannot read ({})",
                error_chain(&error)
            )));
        }
    };
    let every = one_interval(&description);
    Ok((Current { every, request }, description))
}

/// The interval of a schedule whose spec is exactly one interval (as `sweep schedule` makes
/// it); `None` for a calendar, a cron string or several intervals.
fn one_interval(description: &ScheduleDescription) -> Option<Duration> {
    let spec = description.raw().schedule.as_ref()?.spec.as_ref()?;
    let only_intervals = spec.calendar.is_empty()
        && spec.structured_calendar.is_empty()
        && spec.cron_string.is_empty();
    match spec.interval.as_slice() {
        [one] if only_intervals => {
            let every = one.interval.as_ref()?;
            let seconds = u64::try_from(every.seconds).ok()?;
            let nanos = u32::try_from(every.nanos).ok()?;
            Some(Duration::new(seconds, nanos))
        }
        _ => None,
    }
}

/// Prints the schedule after this command: every setting and where it comes from, the next
/// run times (a courtesy: the schedule is in place when they cannot be read) and its page.
async fn print(
    output: Output,
    handle: &ScheduleHandle<Client>,
    merged: &Merged,
    summary: &str,
    link: &str,
) {
    let schedule_id = handle.schedule_id();
    let (next_runs, paused) = match handle.describe(RpcOptions::default()).await {
        Ok(description) => (description.future_action_times(), description.paused()),
        Err(_) => (Vec::new(), false),
    };
    let every = human(merged.every);
    match output {
        Output::Json => {
            let next: Vec<Option<String>> = next_runs
                .iter()
                .map(|time| timestamp(Some(*time)))
                .collect();
            let values: serde_json::Map<String, serde_json::Value> = merged
                .settings
                .iter()
                .map(|setting| (setting.key.to_owned(), setting.value.clone()))
                .collect();
            let changed: Vec<&str> = merged.changed().map(|setting| setting.key).collect();
            let was: serde_json::Map<String, serde_json::Value> = merged
                .settings
                .iter()
                .filter_map(|setting| match &setting.origin {
                    Origin::Changed { was } => Some((setting.key.to_owned(), was.clone())),
                    _ => None,
                })
                .collect();
            let document = serde_json::json!({
                "scheduleId": schedule_id, "every": every, "nextRuns": next,
                "updated": !merged.created, "paused": paused, "ui": link,
                "settings": values, "changed": changed, "was": was,
            });
            println!("{document}");
        }
        Output::Text => {
            println!(
                "{}",
                scheduled_line(schedule_id, &every, &next_runs, paused)
            );
            println!("  each run     {summary}, as {schedule_id}-<time>");
            for line in settings_lines(merged) {
                println!("{line}");
            }
            println!("  temporal UI  {link}");
        }
    }
}
/// Every setting of the schedule on a line of its own: flag, value, and where the value comes
/// from (`kept`, `changed (was 1h)`, ...), under a line that says what the flags not given do.
fn settings_lines(merged: &Merged) -> Vec<String> {
    let heading = if merged.created {
        "  settings     a new schedule: the flags not given take the defaults"
    } else {
        "  settings     the schedule existed: the flags not given keep its values"
    };
    let values: Vec<String> = merged
        .settings
        .iter()
        .map(|setting| merge::text(&setting.value))
        .collect();
    let flag_width = merged
        .settings
        .iter()
        .map(|s| s.flag.len())
        .max()
        .unwrap_or(0);
    let value_width = values.iter().map(String::len).max().unwrap_or(0);
    let mut lines = vec![heading.to_owned()];
    for (setting, value) in merged.settings.iter().zip(&values) {
        let origin = match (&setting.origin, merged.created) {
            (Origin::Default, _) => "default".to_owned(),
            (Origin::Kept, _) => "kept".to_owned(),
            (Origin::Unchanged, true) => "given (the default)".to_owned(),
            (Origin::Unchanged, false) => "given (as it was)".to_owned(),
            (Origin::Changed { was }, true) => format!("given (default {})", merge::text(was)),
            (Origin::Changed { was }, false) => format!("changed (was {})", merge::text(was)),
        };
        lines.push(format!(
            "    {:flag_width$}  {value:value_width$}  {origin}",
            setting.flag
        ));
    }
    lines
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
    use nodewright_model::ClusterName;

    use super::super::flags::TypedSweep;
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
    fn the_settings_say_what_was_kept_and_what_changed() {
        let cluster = ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"));
        let first = Typed {
            every: Some(Duration::from_secs(3600)),
            sweep: TypedSweep {
                dry_run: Some(true),
                max_deletions: Some(3),
                ..TypedSweep::default()
            },
        };
        let created = merge::merge(&cluster, &first, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            settings_lines(&created),
            [
                "  settings     a new schedule: the flags not given take the defaults",
                "    every             1h     given (default 15m)",
                "    dry-run           true   given (default false)",
                "    remediate         false  default",
                "    max-deletions     3      given (default 10)",
                "    grace             20m    default",
                "    health-timeout    10m    default",
                "    approval-timeout  1h     default",
                "    parallelism       5      default",
                "    brake-percent     20     default",
            ]
        );
        let current = Current {
            every: Some(created.every),
            request: created.request,
        };
        let again = Typed {
            every: Some(Duration::from_secs(7200)),
            sweep: TypedSweep {
                max_deletions: Some(3),
                ..TypedSweep::default()
            },
        };
        let updated =
            merge::merge(&cluster, &again, Some(&current)).unwrap_or_else(|e| panic!("{e}"));
        let lines = settings_lines(&updated);
        assert_eq!(
            lines[0],
            "  settings     the schedule existed: the flags not given keep its values"
        );
        assert_eq!(lines[1], "    every             2h     changed (was 1h)");
        assert_eq!(lines[2], "    dry-run           true   kept");
        assert_eq!(lines[4], "    max-deletions     3      given (as it was)");
    }

    #[test]
    fn the_schedule_page_sits_beside_the_workflows() {
        assert_eq!(
            schedule_link("http://ui:8233/namespaces/default/workflows/sweep%2Fprod"),
            "http://ui:8233/namespaces/default/schedules/sweep%2Fprod"
        );
    }
}
