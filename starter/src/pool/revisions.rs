//! `nodewright pool history POOL`: the pool's revisions as the cluster keeps them (the ConfigMap
//! `nodewright-revisions-<pool>`, read by InspectPool through a worker, so that the CLI needs no
//! Kubernetes credentials), which one is current and where `pool rollback` would go.

use nodewright_model::rollout::revisions::REVISION_HISTORY_LIMIT;
use nodewright_model::rollout::{HistoryRow, PoolReport, PoolRevisions, Revisions};
use nodewright_model::{ClusterName, WorkflowId};
use temporalio_client::Client;

use super::render::timestamp;
use super::{flags, history, rollout_id, status};
use crate::{CliError, Output, settings::Settings};

/// A pool's revisions as read, with where they live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// `<namespace>/<name>` of the ConfigMap (empty when the worker does not read it yet).
    pub config_map: String,
    /// The revisions, lowest number first (none when the ConfigMap is absent).
    pub revisions: Revisions,
}

/// Reads `pool`'s revisions through InspectPool.
///
/// # Errors
///
/// InspectPool could not run, or the ConfigMap is someone else's, unreadable or holds a
/// revision that does not parse (the message names the ConfigMap and the key).
pub async fn read(
    settings: &Settings,
    client: &Client,
    cluster: &ClusterName,
    pool: &str,
    timeout: u64,
) -> Result<Read, CliError> {
    let report = status::inspect(settings, client, cluster, pool, timeout).await?;
    of_report(&report)
}

/// The revisions InspectPool's `report` carries.
///
/// # Errors
///
/// As [`read`].
pub fn of_report(report: &PoolReport) -> Result<Read, CliError> {
    let Some(stored) = &report.revisions else {
        return Ok(Read {
            config_map: String::new(),
            revisions: Revisions::default(),
        });
    };
    let revisions =
        PoolRevisions::revisions(stored).map_err(|error| CliError::RunFailed(error.to_string()))?;
    Ok(Read {
        config_map: stored.config_map.clone(),
        revisions,
    })
}

/// Runs `pool history`.
pub async fn run(
    settings: &Settings,
    output: Output,
    pool: &str,
    timeout: u64,
) -> Result<(), CliError> {
    let pool = flags::pool_name(pool)?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = rollout_id(&cluster, pool);
    let running = history::latest(&client, &workflow_id)
        .await?
        .is_some_and(|latest| latest.is_running());
    let read = read(settings, &client, &cluster, pool, timeout).await?;
    let rows = read.revisions.rows(running);
    let refusal = read
        .revisions
        .rollback_target()
        .err()
        .map(|refusal| refusal.message(pool));
    match output {
        Output::Json => {
            let document = serde_json::json!({
                "pool": pool,
                "configMap": read.config_map,
                "workflowId": workflow_id.as_str(),
                "rolloutRunning": running,
                "revisions": rows,
                "rollbackRefusal": refusal,
            });
            println!("{document}");
        }
        Output::Text => {
            for line in lines(pool, &read.config_map, &workflow_id, &rows, refusal) {
                println!("{line}");
            }
        }
    }
    Ok(())
}

/// The text of `pool history`.
fn lines(
    pool: &str,
    config_map: &str,
    workflow_id: &WorkflowId,
    rows: &[HistoryRow],
    refusal: Option<String>,
) -> Vec<String> {
    if rows.is_empty() {
        let place = if config_map.is_empty() {
            "the worker does not keep revisions yet (upgrade it)".to_owned()
        } else {
            format!("ConfigMap {config_map} holds none")
        };
        return vec![format!(
            "pool {pool}: no revision recorded ({place}); rollouts record theirs from now on"
        )];
    }
    let mut lines = vec![format!(
        "pool {pool}: {} revisions in ConfigMap {config_map} (the newest {REVISION_HISTORY_LIMIT} are kept), rollouts {workflow_id}",
        rows.len()
    )];
    let table = crate::table::lines(
        "  ",
        [
            "REVISION", "TEMPLATE", "OUTCOME", "STARTED", "ENDED", "NOTE",
        ],
        rows.iter().rev().map(|row| {
            let mut note = Vec::new();
            if row.current {
                note.push("current");
            }
            if row.rollback_target {
                note.push("pool rollback goes here");
            }
            if row.rollback {
                note.push("was a rollback");
            }
            [
                row.number.to_string(),
                row.template_hash.clone(),
                row.outcome.clone(),
                timestamp(row.started_at),
                row.ended_at
                    .map(timestamp)
                    .unwrap_or_else(|| "-".to_owned()),
                note.join(", "),
            ]
        }),
    );
    lines.extend(table);
    if let Some(refusal) = refusal {
        lines.push(format!("  rollback     {refusal}"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use nodewright_model::pool::from_yaml;
    use nodewright_model::rollout::{
        RevisionChange, RevisionOutcome, RolloutEnd, RolloutStart, StoredRevisions,
    };
    use nodewright_model::{ClusterName, Operation};

    use super::*;

    fn revisions(hashes: &[&str]) -> Revisions {
        let mut revisions = Revisions::default();
        for (index, hash) in hashes.iter().enumerate() {
            let mut pool = from_yaml(include_str!("../../../examples/pools/workers.yaml"))
                .unwrap_or_else(|e| panic!("{e}"));
            pool.template_hash = (*hash).to_owned();
            let at = 1_000 * i64::try_from(index).unwrap_or(0);
            let start = RolloutStart {
                pool,
                workflow_id: "rollout/dev/workers".to_owned(),
                run_id: "r".to_owned(),
                rollback: false,
                at,
            };
            revisions = revisions.apply(&RevisionChange::Started(start.clone()));
            revisions = revisions.apply(&RevisionChange::Ended(RolloutEnd {
                start,
                outcome: RevisionOutcome::Completed,
                at: at + 60,
            }));
        }
        revisions
    }

    #[test]
    fn history_lists_the_newest_first_and_says_where_rollback_goes() {
        let cluster = ClusterName::parse("cluster", "dev").unwrap_or_else(|e| panic!("{e}"));
        let id = WorkflowId::for_subject(Operation::Rollout, &cluster, "workers");
        let rows = revisions(&["aaa", "bbb"]).rows(false);
        let text = lines(
            "workers",
            "nodewright/nodewright-revisions-workers",
            &id,
            &rows,
            None,
        );
        assert!(
            text[0].starts_with(
                "pool workers: 2 revisions in ConfigMap nodewright/nodewright-revisions-workers"
            ),
            "{text:?}"
        );
        let words = |line: &str| {
            line.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(words(&text[1])[..3], ["REVISION", "TEMPLATE", "OUTCOME"]);
        assert_eq!(words(&text[2])[..3], ["2", "bbb", "completed"]);
        assert!(text[2].ends_with("current"), "{}", text[2]);
        assert!(text[3].ends_with("pool rollback goes here"), "{}", text[3]);
        let none = lines("workers", "", &id, &[], None);
        assert!(none[0].contains("no revision recorded"), "{none:?}");
    }

    #[test]
    fn a_broken_config_map_is_named_not_panicked_on() {
        let report = PoolReport {
            pool: "workers".to_owned(),
            machines: Vec::new(),
            observed_at: 0,
            revisions: Some(PoolRevisions {
                config_map: "nodewright/nodewright-revisions-workers".to_owned(),
                stored: StoredRevisions::Found(
                    [("aaa".to_owned(), "[]".to_owned())].into_iter().collect(),
                ),
            }),
        };
        let error = of_report(&report).expect_err("a broken key");
        assert!(
            error
                .to_string()
                .contains("nodewright/nodewright-revisions-workers holds a revision that does not parse at key aaa"),
            "{error}"
        );
    }
}
