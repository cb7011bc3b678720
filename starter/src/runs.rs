//! `nodewright runs [--pool P] [--machine M] [--running]`: nodewright's runs of this cluster,
//! newest first, from Temporal's visibility store.

use chrono::{DateTime, SecondsFormat, Utc};
use futures::StreamExt;
use nodewright_model::ClusterName;
use nodewright_workflows::search;
use temporalio_client::{WorkflowExecutionStatus, WorkflowListOptions};

use crate::{CliError, Output, settings::Settings, table};

/// The arguments of `runs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only runs about this pool.
    #[arg(long)]
    pool: Option<String>,
    /// Only runs about this machine.
    #[arg(long)]
    machine: Option<String>,
    /// Only runs still running.
    #[arg(long)]
    running: bool,
    /// At most this many runs.
    #[arg(long, default_value_t = 50)]
    limit: usize,
}

/// A visibility query value in single quotes; refuses quotes and backslashes instead of
/// escaping them (no valid pool or machine name has them).
fn quoted(field: &str, value: &str) -> Result<String, CliError> {
    if value.contains(['\'', '\\', '"']) {
        return Err(CliError::InvalidInput(format!(
            "{field} {} contains a quote or backslash; pool and machine names never do",
            nodewright_model::text::quoted(value)
        )));
    }
    Ok(format!("'{value}'"))
}

/// A run's status as the CLI prints and the JSON output carries it: `running`, `completed`,
/// `failed`, `canceled`, `terminated`, `continued-as-new`, `timed-out`, `unknown`.
pub fn status_word(status: WorkflowExecutionStatus) -> &'static str {
    match status {
        WorkflowExecutionStatus::Running => "running",
        WorkflowExecutionStatus::Completed => "completed",
        WorkflowExecutionStatus::Failed => "failed",
        WorkflowExecutionStatus::Canceled => "canceled",
        WorkflowExecutionStatus::Terminated => "terminated",
        WorkflowExecutionStatus::ContinuedAsNew => "continued-as-new",
        WorkflowExecutionStatus::TimedOut => "timed-out",
        _ => "unknown",
    }
}

/// The visibility query for `args` in `cluster`.
fn query(cluster: &ClusterName, args: &Args) -> Result<String, CliError> {
    let mut clauses = vec![format!(
        "{} = {}",
        search::CLUSTER.name(),
        quoted("--cluster", cluster.as_str())?
    )];
    if let Some(pool) = &args.pool {
        clauses.push(format!(
            "{} = {}",
            search::POOL.name(),
            quoted("--pool", pool)?
        ));
    }
    if let Some(machine) = &args.machine {
        clauses.push(format!(
            "{} = {}",
            search::MACHINE.name(),
            quoted("--machine", machine)?
        ));
    }
    if args.running {
        clauses.push("ExecutionStatus = 'Running'".to_owned());
    }
    Ok(clauses.join(" AND "))
}

fn time(t: Option<std::time::SystemTime>) -> String {
    t.map(|t| DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// Lists the runs.
pub async fn run(settings: &Settings, output: Output, args: Args) -> Result<(), CliError> {
    let cluster = settings.cluster()?;
    let query = query(&cluster, &args)?;
    let client = settings.temporal().connect().await?;
    let options = WorkflowListOptions::builder().limit(args.limit).build();
    let runs: Vec<_> = client
        .list_workflows(query.clone(), options)
        .collect()
        .await;
    let mut rows = Vec::new();
    for run in runs {
        let run = run.map_err(|error| {
            CliError::RunFailed(format!("listing runs ({query}) failed: {error}"))
        })?;
        let attributes = run.search_attributes();
        rows.push(serde_json::json!({
            "workflowId": run.id(),
            "type": run.workflow_type(),
            "status": status_word(run.status()),
            "pool": attributes.get(&search::POOL),
            "machine": attributes.get(&search::MACHINE),
            "phase": attributes.get(&search::PHASE),
            "started": time(run.start_time()),
            "closed": time(run.close_time()),
        }));
    }
    match output {
        Output::Json => println!("{}", serde_json::Value::Array(rows)),
        Output::Text => {
            if rows.is_empty() {
                println!("no runs match {query}");
                return Ok(());
            }
            let text =
                |row: &serde_json::Value, key: &str| row[key].as_str().unwrap_or("").to_owned();
            let header = ["WORKFLOW ID", "STATUS", "PHASE", "CLOSED", "STARTED"];
            let cells = rows.iter().map(|row| {
                ["workflowId", "status", "phase", "closed", "started"].map(|key| text(row, key))
            });
            for line in table::lines("", header, cells) {
                println!("{line}");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pool: Option<&str>, machine: Option<&str>, running: bool) -> Args {
        Args {
            pool: pool.map(str::to_owned),
            machine: machine.map(str::to_owned),
            running,
            limit: 50,
        }
    }

    #[test]
    fn filters_become_visibility_clauses() {
        let cluster = ClusterName::parse("cluster", "dev").expect("valid");
        assert_eq!(
            query(&cluster, &args(None, None, false)).expect("valid"),
            "NodewrightCluster = 'dev'"
        );
        assert_eq!(
            query(&cluster, &args(Some("web"), Some("web-b2c4d"), true)).expect("valid"),
            "NodewrightCluster = 'dev' AND NodewrightPool = 'web' AND NodewrightMachine = 'web-b2c4d' AND ExecutionStatus = 'Running'"
        );
        assert!(query(&cluster, &args(Some("a' OR 'x"), None, false)).is_err());
    }

    #[test]
    fn run_statuses_read_as_words() {
        let table = [
            (WorkflowExecutionStatus::Running, "running"),
            (WorkflowExecutionStatus::Completed, "completed"),
            (WorkflowExecutionStatus::Failed, "failed"),
            (WorkflowExecutionStatus::Canceled, "canceled"),
            (WorkflowExecutionStatus::Terminated, "terminated"),
            (WorkflowExecutionStatus::ContinuedAsNew, "continued-as-new"),
            (WorkflowExecutionStatus::TimedOut, "timed-out"),
            (WorkflowExecutionStatus::Unspecified, "unknown"),
        ];
        for (status, expected) in table {
            assert_eq!(status_word(status), expected);
        }
    }

    #[test]
    fn a_refused_filter_value_is_quoted_with_its_quotes_escaped() {
        let Err(CliError::InvalidInput(message)) = quoted("--pool", "a\"b") else {
            panic!("refused");
        };
        assert_eq!(
            message,
            r#"--pool "a\"b" contains a quote or backslash; pool and machine names never do"#
        );
    }
}
