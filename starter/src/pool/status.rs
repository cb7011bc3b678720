//! `nodewright pool rollout status POOL` (the rollout: running, else the latest) and
//! `nodewright pool status POOL` (the machines, by InspectPool, and the rollout under way).

use std::io::IsTerminal;
use std::time::Duration;

use chrono::SecondsFormat;

use nodewright_model::WorkflowId;
use nodewright_model::rollout::{InspectPoolRequest, PoolReport, RolloutStatus};
use nodewright_model::text::quoted;
use nodewright_model::{ClusterName, Operation};
use nodewright_workflows::{InspectPoolWorkflow, search};
use temporalio_client::{
    WorkflowExecutionStatus, WorkflowGetResultOptions, WorkflowIdConflictPolicy,
    WorkflowStartOptions,
};
use temporalio_common::search_attributes::SearchAttributes;

use super::render::{report_lines, status_lines};
use super::summary::{cut, glance, width_from};
use super::{error_chain, flags, history, query_status, rollout_handle, rollout_id};
use crate::handles::no_result;
use crate::{CliError, Output, settings::Settings};

/// How long reading a finished rollout's result may take.
const RESULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Shows the rollout of `pool`: the running one, else the latest.
pub async fn rollout(settings: &Settings, output: Output, pool: &str) -> Result<(), CliError> {
    let pool = flags::pool_name(pool)?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = rollout_id(&cluster, pool);
    let link = settings.ui_link(&workflow_id);
    let Some(latest) = history::latest(&client, &workflow_id).await? else {
        return Err(CliError::RunFailed(format!(
            "no rollout of pool {pool} in cluster {cluster} (none ran, or it is past the namespace's retention); start one with `nodewright pool rollout --pool FILE`"
        )));
    };
    let handle = rollout_handle(&client, &workflow_id, None);
    let run_status = latest.status_word();
    let status: RolloutStatus = if latest.status == WorkflowExecutionStatus::Completed {
        // A completed rollout's result holds its last status: no worker needed.
        let options = WorkflowGetResultOptions::builder()
            .follow_runs(false)
            .build();
        match tokio::time::timeout(RESULT_TIMEOUT, handle.get_result(options)).await {
            Ok(Ok(result)) => result.status,
            Ok(Err(error)) => {
                return Err(CliError::RunFailed(format!(
                    "reading the result of {workflow_id} failed: {}; see {link}",
                    error_chain(&error)
                )));
            }
            Err(_) => {
                return Err(CliError::RunFailed(format!(
                    "reading the result of {workflow_id} took more than {}s; see {link}",
                    RESULT_TIMEOUT.as_secs()
                )));
            }
        }
    } else {
        query_status(&handle).await.map_err(|error| {
            let state = if latest.is_running() {
                "is running".to_owned()
            } else {
                format!("ended {run_status}")
            };
            CliError::RunFailed(format!(
                "{workflow_id} {state} but its status could not be read: {error}; see {link}"
            ))
        })?
    };
    match output {
        Output::Json => {
            let document = status_document(&status, workflow_id.as_str(), &run_status, &link);
            println!("{document}");
        }
        Output::Text => {
            println!("{workflow_id}: {run_status}");
            for line in status_lines(&status, chrono::Utc::now().timestamp()) {
                println!("{line}");
            }
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}

/// The status as JSON with `workflowId`, `runStatus` and `ui` added beside its own fields.
fn status_document(
    status: &RolloutStatus,
    workflow_id: &str,
    run_status: &str,
    link: &str,
) -> serde_json::Value {
    let mut document = serde_json::json!(status);
    if let Some(fields) = document.as_object_mut() {
        fields.insert("workflowId".to_owned(), workflow_id.into());
        fields.insert("runStatus".to_owned(), run_status.into());
        fields.insert("ui".to_owned(), link.into());
    }
    document
}

/// The rollout under way, for `pool status`: `None` when none runs, else its status or why
/// there is none.
async fn running_rollout(
    client: &temporalio_client::Client,
    workflow_id: &WorkflowId,
) -> Result<Option<Result<RolloutStatus, String>>, CliError> {
    match history::latest(client, workflow_id).await? {
        Some(latest) if latest.is_running() => {
            let handle = rollout_handle(client, workflow_id, None);
            Ok(Some(query_status(&handle).await))
        }
        _ => Ok(None),
    }
}

/// What one look at a pool shows: the document `--output json` prints, and the lines for people.
#[derive(Debug, Clone, PartialEq)]
struct PoolLook {
    document: serde_json::Value,
    lines: Vec<String>,
}

impl PoolLook {
    /// Prints the look as `output` asks.
    fn print(&self, output: Output) {
        match output {
            Output::Json => println!("{}", self.document),
            Output::Text => self.lines.iter().for_each(|line| println!("{line}")),
        }
    }
}

/// Shows the pool's machines and the rollout under way (InspectPool), or its controller's
/// status; with `--watch`, again every `--interval` until Ctrl-C.
pub async fn pool(
    settings: &Settings,
    output: Output,
    args: &super::PoolStatusArgs,
) -> Result<(), CliError> {
    let pool = flags::pool_name(&args.look.pool)?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let width = width_from(std::env::var("COLUMNS").ok().as_deref());
    let timeout = args.look.timeout;
    if !args.watch {
        look(settings, &client, &cluster, pool, timeout, width)
            .await?
            .print(output);
        return Ok(());
    }
    let every = *args.interval;
    let terminal = std::io::stdout().is_terminal();
    let mut watch = Watch::default();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let round = async {
            let looked = look(settings, &client, &cluster, pool, timeout, width).await;
            match looked {
                Ok(looked) if terminal && output == Output::Text => {
                    // Redrawn in place: the screen cleared, the look from its top.
                    print!("\x1b[2J\x1b[H");
                    println!(
                        "{}",
                        cut(
                            &format!(
                                "every {}, Ctrl-C ends; {}",
                                humantime::format_duration(every),
                                chrono::Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
                            ),
                            width
                        )
                    );
                    looked.print(output);
                    watch.changed(&looked);
                }
                Ok(looked) => {
                    if watch.changed(&looked) {
                        if output == Output::Text && watch.printed > 1 {
                            println!();
                        }
                        looked.print(output);
                    }
                }
                Err(error) => {
                    if let Some(line) = watch.failed(error_chain(&error)) {
                        eprintln!("{}", cut(&line, width));
                    }
                }
            }
            tokio::time::sleep(every).await;
        };
        tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            () = round => {}
        }
    }
}

/// What `pool status --watch` printed last, so that a pipe gets a look only when it changed.
#[derive(Debug, Default)]
struct Watch {
    last: Option<serde_json::Value>,
    last_error: Option<String>,
    /// Looks printed so far.
    printed: usize,
}

impl Watch {
    /// Whether `looked` differs from the last look beyond the time it was taken; it becomes the
    /// last look.
    fn changed(&mut self, looked: &PoolLook) -> bool {
        let key = change_key(&looked.document);
        self.last_error = None;
        if self.last.as_ref() == Some(&key) {
            return false;
        }
        self.last = Some(key);
        self.printed += 1;
        true
    }

    /// The line a failed look adds (once per distinct error; the watch goes on).
    fn failed(&mut self, error: String) -> Option<String> {
        if self.last_error.as_deref() == Some(error.as_str()) {
            return None;
        }
        let line = format!("  (no status: {error})");
        self.last_error = Some(error);
        Some(line)
    }
}

/// A look's document without what changes at every look (when the machines were observed).
fn change_key(document: &serde_json::Value) -> serde_json::Value {
    let mut key = document.clone();
    if let Some(report) = key
        .get_mut("report")
        .and_then(serde_json::Value::as_object_mut)
    {
        report.remove("observedAt");
    }
    key
}

/// One look at `pool`: its controller's status when a controller runs, else InspectPool's
/// report and the rollout under way.
async fn look(
    settings: &Settings,
    client: &temporalio_client::Client,
    cluster: &ClusterName,
    pool: &str,
    timeout: u64,
    width: usize,
) -> Result<PoolLook, CliError> {
    let controller_id = super::controller::controller_id(cluster, pool);
    if let Some(answer) = super::controller::running_status(client, &controller_id).await? {
        let link = settings.ui_link(&controller_id);
        let document = answer.map_err(|error| {
            CliError::RunFailed(format!(
                "{controller_id} is running but its status could not be read: {error}; see {link}"
            ))
        })?;
        let mut lines = super::render::controller_lines(&document);
        lines.push(format!("  temporal UI  {link}"));
        let mut json = serde_json::json!(document);
        if let Some(fields) = json.as_object_mut() {
            fields.insert("workflowId".to_owned(), controller_id.as_str().into());
            fields.insert("ui".to_owned(), link.into());
        }
        return Ok(PoolLook {
            document: json,
            lines,
        });
    }
    let rollout_id = rollout_id(cluster, pool);
    let rollout = running_rollout(client, &rollout_id).await?;
    let report = inspect(settings, client, cluster, pool, timeout).await?;
    let mut lines = report_lines(&report, cluster.as_str());
    lines.extend(rollout_lines(
        pool,
        &rollout_id,
        rollout.as_ref(),
        chrono::Utc::now().timestamp_millis(),
        width,
    ));
    let rollout = rollout.and_then(Result::ok);
    Ok(PoolLook {
        document: serde_json::json!({ "report": report, "rollout": rollout }),
        lines,
    })
}

/// The rollout under way as `pool status` shows it below the machines: at a glance, each line
/// within `width`.
fn rollout_lines(
    pool: &str,
    rollout_id: &WorkflowId,
    rollout: Option<&Result<RolloutStatus, String>>,
    now: i64,
    width: usize,
) -> Vec<String> {
    const LABEL: &str = "  rollout      ";
    const INDENT: &str = "               ";
    match rollout {
        Some(Ok(status)) => {
            let mut lines: Vec<String> = glance(status, now, width.saturating_sub(LABEL.len()))
                .into_iter()
                .enumerate()
                .map(|(index, line)| {
                    let label = if index == 0 { LABEL } else { INDENT };
                    format!("{label}{line}")
                })
                .collect();
            lines.push(format!(
                "{INDENT}details: nodewright pool rollout status {pool}"
            ));
            lines
        }
        Some(Err(error)) => vec![format!(
            "{LABEL}{rollout_id} is running; its status did not answer: {error}"
        )],
        None => vec![format!("{LABEL}none running")],
    }
}

/// Runs InspectPool on `pool` (joining a look already under way) and returns its report,
/// waiting at most `timeout` seconds for a worker.
pub async fn inspect(
    settings: &Settings,
    client: &temporalio_client::Client,
    cluster: &ClusterName,
    pool: &str,
    timeout: u64,
) -> Result<PoolReport, CliError> {
    let workflow_id = WorkflowId::for_subject(Operation::Inspect, cluster, pool);
    let link = settings.ui_link(&workflow_id);
    let options = WorkflowStartOptions::new(settings.task_queue.clone(), workflow_id.to_string())
        // A look already under way answers the same question: join it instead of refusing.
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .execution_timeout(Duration::from_secs(600))
        .search_attributes(SearchAttributes::new([
            search::CLUSTER.value_set(cluster.to_string()),
            search::POOL.value_set(pool.to_owned()),
            search::OPERATION.value_set(Operation::Inspect.to_string()),
        ]))
        .static_summary(format!("Inspect pool {pool}"))
        .build();
    let request = InspectPoolRequest {
        cluster: cluster.clone(),
        pool: pool.to_owned(),
    };
    request.check()?;
    let handle = client
        .start_workflow(InspectPoolWorkflow::run, request, options)
        .await
        .map_err(|error| {
            CliError::RunFailed(format!(
                "starting {workflow_id} failed: {}",
                error_chain(&error)
            ))
        })?;
    let wait = handle.get_result(WorkflowGetResultOptions::default());
    let report = tokio::time::timeout(Duration::from_secs(timeout), wait)
        .await
        .map_err(|_| {
            CliError::RunFailed(format!(
                "{workflow_id} did not finish within {timeout}s: is nodewright-worker running on task queue {}? See {link}",
                quoted(&settings.task_queue)
            ))
        })?
        .map_err(|error| {
            CliError::RunFailed(format!("{workflow_id} {}; see {link}", no_result(&error)))
        })?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use nodewright_model::pool::Amount;
    use nodewright_model::rollout::{Budget, RolloutPhase, StrategyView};

    use super::*;

    #[test]
    fn the_status_document_is_the_status_with_where_to_find_it() {
        let strategy = StrategyView {
            max_surge: Amount::Count(1),
            max_unavailable: Amount::Count(0),
            budget: Budget {
                surge: 1,
                unavailable: 0,
            },
        };
        let mut status = RolloutStatus::new("web", "abc123", 2, strategy, 3, 0);
        status.phase = RolloutPhase::Paused;
        status.paused_because = Some("paused by ann@cli".to_owned());
        let document = status_document(&status, "rollout/dev/web", "running", "http://ui");
        assert_eq!(document["phase"], "paused");
        assert_eq!(document["pausedBecause"], "paused by ann@cli");
        assert_eq!(document["strategy"]["budget"]["surge"], 1);
        assert_eq!(document["workflowId"], "rollout/dev/web");
        assert_eq!(document["runStatus"], "running");
        assert_eq!(document["ui"], "http://ui");
    }

    #[test]
    fn the_rollout_under_way_is_a_summary_within_the_width_and_why_it_waits() {
        let strategy = StrategyView {
            max_surge: Amount::Percent(10),
            max_unavailable: Amount::Count(0),
            budget: Budget {
                surge: 20,
                unavailable: 0,
            },
        };
        let mut status = RolloutStatus::new("web", "abc123", 200, strategy, 3, 0);
        status.counts.updated = 200;
        status.counts.updated_available = 20;
        status.in_flight = (0..180)
            .map(|index| nodewright_model::rollout::InFlight {
                machine: format!("web-{index:05}"),
                kind: nodewright_model::rollout::ChildKind::Create,
                workflow_id: format!("create/dev/web-{index:05}"),
                started_at: 0,
                zone: None,
                run_id: None,
                capacity_type: None,
            })
            .collect();
        status.phase = RolloutPhase::Paused;
        status.paused_because = Some("paused by ann@cli".to_owned());
        let cluster = ClusterName::parse("cluster", "dev").unwrap_or_else(|e| panic!("{e}"));
        let id = rollout_id(&cluster, "web");
        let lines = rollout_lines("web", &id, Some(&Ok(status.clone())), 90_000, 100);
        assert_eq!(
            lines,
            [
                "  rollout      paused       20/200 done  180 creating  slowest: create web-00000 1m",
                "               ! paused by ann@cli",
                "               details: nodewright pool rollout status web",
            ]
        );
        let narrow = rollout_lines("web", &id, Some(&Ok(status)), 90_000, 80);
        assert_eq!(
            narrow[0], "  rollout      paused       20/200 done  180 creating",
            "the name goes first"
        );
        assert_eq!(
            rollout_lines("web", &id, None, 0, 80),
            ["  rollout      none running"]
        );
    }

    #[test]
    fn a_watch_prints_a_look_when_more_than_its_time_changed() {
        let look = |observed: i64, machines: u32| PoolLook {
            document: serde_json::json!({
                "report": { "pool": "web", "observedAt": observed, "machines": machines },
                "rollout": null,
            }),
            lines: Vec::new(),
        };
        let mut watch = Watch::default();
        assert!(watch.changed(&look(1, 3)), "the first look");
        assert!(!watch.changed(&look(2, 3)), "only its time changed");
        assert!(watch.changed(&look(3, 4)), "a machine more");
        assert_eq!(watch.printed, 2);
        assert!(watch.failed("timeout".to_owned()).is_some());
        assert!(watch.failed("timeout".to_owned()).is_none(), "said once");
        assert!(!watch.changed(&look(4, 4)));
        assert!(
            watch.failed("timeout".to_owned()).is_some(),
            "said again after a look"
        );
    }
}
