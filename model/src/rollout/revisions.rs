//! A pool's revisions, kept in the cluster as a Deployment keeps its ReplicaSets: one entry per
//! template the pool ran, with its number, the pool spec, when and how its last rollout ended.
//! `pool rollback` picks its target here ([`Revisions::rollback_target`]), whatever happened to
//! Temporal's runs, and `pool history` lists them ([`Revisions::rows`]).
//!
//! # Where
//!
//! The ConfigMap `nodewright-revisions-<pool>` ([`config_map_name`]) in the identity namespace
//! (`kubernetes.identity_namespace`), labelled `app.kubernetes.io/managed-by=nodewright` and
//! `nodewright.io/pool=<pool>`; a ConfigMap of that name without the first label is someone
//! else's and is never written. One data key per revision: the template hash, holding the
//! revision as JSON. At most [`REVISION_HISTORY_LIMIT`] revisions are kept (the newest numbers,
//! like a Deployment's `revisionHistoryLimit`), and fewer when their JSON would pass
//! [`MAX_DATA_BYTES`].
//!
//! # Numbers
//!
//! A forward rollout gives its template a new number (the highest plus one) when it starts; a
//! rollback moves its target to a new number only when it completes (the machines then run it).
//! A rollback's target that the revisions do not hold (`pool rollback` found it in Temporal's
//! history) waits below the current revision, at the highest free number (0 at the lowest), or
//! is recorded only when it completes if none is free. The current revision is the highest number; a rollback rolls to the highest number below it
//! that completed at least once. So after an aborted rollback the target is still the one
//! before, after a failed, cancelled or terminated rollout it is the last one that completed,
//! and a completed rollback toggles, like `kubectl rollout undo`.
//!
//! # Secrets
//!
//! A revision holds the [`ValidPool`] without its inline `bootstrap` text ([`kept_spec`]): that
//! text may hold a join token (the CLI warns, and an encrypted namespace keeps it out of plain
//! sight), and a ConfigMap is plain. References to the bootstrap's Secret or Key Vault secret
//! stay (their names, never their content), and a minted join token never enters a run. A
//! revision whose template had inline text says so (`bootstrapOmitted`) and names the run that
//! completed it (`completedRunId`): a rollback to it reads the template from that run's result,
//! within Temporal's retention.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::phase::RolloutOutcome;
use crate::pool::ValidPool;

/// The most revisions kept per pool (a Deployment's default `revisionHistoryLimit` is 10).
pub const REVISION_HISTORY_LIMIT: usize = 10;

/// The most bytes of revision JSON kept in one ConfigMap: below Kubernetes' 1 MiB limit on an
/// object, with room for its metadata.
pub const MAX_DATA_BYTES: usize = 900 * 1024;

/// The label that says nodewright made (and may write) the ConfigMap.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// The value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "nodewright";

/// The name of the ConfigMap holding `pool`'s revisions.
pub fn config_map_name(pool: &str) -> String {
    format!("nodewright-revisions-{pool}")
}

/// How a revision's last rollout went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RevisionOutcome {
    /// Its rollout started and wrote no end yet (running, or terminated without a word).
    Running,
    /// Every machine ran it.
    Completed,
    /// Its rollout was aborted.
    Aborted,
    /// Its rollout was cancelled.
    Canceled,
    /// Its rollout failed.
    Failed,
}

impl RevisionOutcome {
    /// The word `pool history` prints.
    pub fn word(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Aborted => "aborted",
            Self::Canceled => "canceled",
            Self::Failed => "failed",
        }
    }
}

impl From<RolloutOutcome> for RevisionOutcome {
    fn from(outcome: RolloutOutcome) -> Self {
        match outcome {
            RolloutOutcome::Completed => Self::Completed,
            RolloutOutcome::Aborted => Self::Aborted,
            RolloutOutcome::Canceled => Self::Canceled,
        }
    }
}

/// One template the pool ran, and its last rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    /// Its number: the highest is the current revision.
    pub number: u64,
    /// The template's hash (`nodewright.io/template`).
    pub template_hash: String,
    /// The pool as its last rollout rolled it (replicas, template, strategy, drain, timeouts).
    pub pool: ValidPool,
    /// When its last rollout started, Unix seconds.
    pub started_at: i64,
    /// When its last rollout ended, Unix seconds (none while running, or when terminated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    /// How its last rollout went.
    pub outcome: RevisionOutcome,
    /// Whether a rollout to it ever completed (only such a revision is a rollback target).
    #[serde(default)]
    pub completed_once: bool,
    /// The workflow ID of its last rollout.
    pub workflow_id: String,
    /// The run ID of its last rollout's first run.
    pub run_id: String,
    /// Whether its last rollout was a rollback.
    #[serde(default)]
    pub rollback: bool,
    /// Whether the template's inline `bootstrap` text was left out of `pool` (see the module's
    /// Secrets).
    #[serde(default)]
    pub bootstrap_omitted: bool,
    /// The run that last completed a rollout to it: its result holds the whole template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_run_id: Option<String>,
}

/// `pool` as a revision keeps it: without the template's inline `bootstrap` text; and whether
/// there was one.
pub fn kept_spec(pool: &ValidPool) -> (ValidPool, bool) {
    let mut kept = pool.clone();
    let omitted = kept.template.bootstrap.take().is_some();
    (kept, omitted)
}

impl Revision {
    /// Whether this entry records the rollout `start` (the same workflow and start time, which
    /// a run continued as new keeps), not an earlier rollout of the same template.
    fn records(&self, start: &RolloutStart) -> bool {
        self.workflow_id == start.workflow_id
            && self.started_at == start.at
            && self.rollback == start.rollback
    }
}

/// The entry of a rollout that starts with `number`: its outcome running; whether its template
/// completed once, and the run that completed it, from the `existing` entry of that template.
fn entry_of(start: &RolloutStart, number: u64, existing: Option<&Revision>) -> Revision {
    let (pool, bootstrap_omitted) = kept_spec(&start.pool);
    Revision {
        number,
        template_hash: start.pool.template_hash.clone(),
        pool,
        started_at: start.at,
        ended_at: None,
        outcome: RevisionOutcome::Running,
        completed_once: existing.is_some_and(|e| e.completed_once),
        workflow_id: start.workflow_id.clone(),
        run_id: start.run_id.clone(),
        rollback: start.rollback,
        bootstrap_omitted,
        completed_run_id: existing.and_then(|e| e.completed_run_id.clone()),
    }
}

/// A rollout that starts: what the rollout workflow writes first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStart {
    /// The pool it rolls to.
    pub pool: ValidPool,
    /// Its workflow ID.
    pub workflow_id: String,
    /// Its (first) run ID.
    pub run_id: String,
    /// Whether it is a rollback.
    pub rollback: bool,
    /// When it started, Unix seconds.
    pub at: i64,
}

/// A rollout that ended: what the rollout workflow writes last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutEnd {
    /// The rollout as it started (its entry is created from it if the start was never written).
    pub start: RolloutStart,
    /// How it ended.
    pub outcome: RevisionOutcome,
    /// When it ended, Unix seconds.
    pub at: i64,
}

/// What the rollout workflow records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RevisionChange {
    /// A rollout started.
    Started(RolloutStart),
    /// A rollout ended.
    Ended(RolloutEnd),
}

/// The ConfigMap as read, before its revisions are parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StoredRevisions {
    /// No ConfigMap: no revision recorded yet.
    Absent,
    /// A ConfigMap of that name that nodewright did not make (no managed-by label).
    Foreign,
    /// The ConfigMap's data.
    Found(BTreeMap<String, String>),
    /// It could not be read: why.
    Unreadable(String),
}

/// A pool's revisions ConfigMap as read, with where it lives (InspectPool's report carries it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolRevisions {
    /// `<namespace>/<name>` of the ConfigMap.
    pub config_map: String,
    /// What it holds.
    pub stored: StoredRevisions,
}

impl PoolRevisions {
    /// Its revisions, parsed.
    ///
    /// # Errors
    ///
    /// As [`Revisions::parse`].
    pub fn revisions(&self) -> Result<Revisions, RevisionsError> {
        Revisions::parse(&self.config_map, &self.stored)
    }
}

/// Why the revisions cannot be read or a rollback has no target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevisionsError {
    /// A data key does not hold a revision.
    #[error(
        "the ConfigMap {config_map} holds a revision that does not parse at key {key} ({problem}); fix or remove that key (kubectl edit configmap)"
    )]
    Unparsable {
        /// `<namespace>/<name>`.
        config_map: String,
        /// The data key.
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The ConfigMap could not be read.
    #[error("reading the ConfigMap {config_map} failed: {reason}")]
    Unreadable {
        /// `<namespace>/<name>`.
        config_map: String,
        /// Why.
        reason: String,
    },
    /// The ConfigMap is not nodewright's.
    #[error(
        "the ConfigMap {config_map} is not nodewright's (it lacks the label {LABEL_MANAGED_BY}={MANAGED_BY}): nodewright neither reads nor writes it; rename or delete it to let nodewright keep the pool's revisions there"
    )]
    Foreign {
        /// `<namespace>/<name>`.
        config_map: String,
    },
}

/// Why the revisions name no rollback target (`pool rollback` then asks Temporal's history).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoRollback {
    /// No revision recorded.
    Nothing,
    /// The current revision is the only one that ever completed (or the only one).
    NoEarlier {
        /// The current revision's number.
        current: u64,
        /// Its template hash.
        template_hash: String,
    },
}

impl NoRollback {
    /// One line for people, naming the pool (`pool history` shows it).
    pub fn message(&self, pool: &str) -> String {
        match self {
            Self::Nothing => format!(
                "no revision recorded for pool {pool}: `pool rollback` goes by the template before the current one that its newest completed rollout recorded in Temporal's history (within the namespace's retention)"
            ),
            Self::NoEarlier {
                current,
                template_hash,
            } => format!(
                "no earlier revision of pool {pool} to roll back to: rollback needs a revision below the current one (revision {current}, template {template_hash}) that completed at least once, and there is none; `pool rollback` goes by the template before it that the pool's newest completed rollout recorded in Temporal's history (within the namespace's retention)"
            ),
        }
    }
}

/// A pool's revisions, by number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revisions {
    /// The revisions, lowest number first.
    pub entries: Vec<Revision>,
}

/// One row of `pool history`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRow {
    /// The revision's number.
    pub number: u64,
    /// Its template hash.
    pub template_hash: String,
    /// Its last rollout's outcome as shown: `running`, `completed`, ..., or `ended without a word
    /// (terminated?)` for a start without an end while no rollout runs.
    pub outcome: String,
    /// When its last rollout started, Unix seconds.
    pub started_at: i64,
    /// When it ended, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    /// Whether its last rollout was a rollback.
    pub rollback: bool,
    /// Whether it ever completed.
    pub completed_once: bool,
    /// Whether it is the current revision.
    pub current: bool,
    /// Whether `pool rollback` would roll to it.
    pub rollback_target: bool,
    /// Its last rollout's workflow ID and first run ID.
    pub workflow_id: String,
    /// Its last rollout's first run ID.
    pub run_id: String,
}

/// What `pool history` shows for a start that never wrote its end while no rollout runs.
pub const ENDED_WITHOUT_A_WORD: &str = "ended without a word (terminated?)";

impl Revisions {
    /// Parses the ConfigMap's data; `config_map` (`<namespace>/<name>`) names it in errors.
    ///
    /// # Errors
    ///
    /// A foreign ConfigMap, or a key whose value is not a revision of that template hash.
    pub fn parse(config_map: &str, stored: &StoredRevisions) -> Result<Self, RevisionsError> {
        let data = match stored {
            StoredRevisions::Absent => return Ok(Self::default()),
            StoredRevisions::Foreign => {
                return Err(RevisionsError::Foreign {
                    config_map: config_map.to_owned(),
                });
            }
            StoredRevisions::Found(data) => data,
            StoredRevisions::Unreadable(reason) => {
                return Err(RevisionsError::Unreadable {
                    config_map: config_map.to_owned(),
                    reason: reason.clone(),
                });
            }
        };
        let unparsable = |key: &str, problem: String| RevisionsError::Unparsable {
            config_map: config_map.to_owned(),
            key: key.to_owned(),
            problem,
        };
        let mut entries = Vec::with_capacity(data.len());
        for (key, value) in data {
            let revision: Revision = serde_json::from_str(value)
                .map_err(|error| unparsable(key, format!("not a revision: {error}")))?;
            if &revision.template_hash != key {
                return Err(unparsable(
                    key,
                    format!(
                        "it holds template {}, not the key's",
                        revision.template_hash
                    ),
                ));
            }
            if entries
                .iter()
                .any(|e: &Revision| e.number == revision.number)
            {
                return Err(unparsable(
                    key,
                    format!("revision number {} appears twice", revision.number),
                ));
            }
            entries.push(revision);
        }
        entries.sort_by_key(|e| e.number);
        Ok(Self { entries })
    }

    /// The ConfigMap's data: one key per template hash.
    pub fn to_data(&self) -> BTreeMap<String, String> {
        self.entries
            .iter()
            .map(|entry| (entry.template_hash.clone(), revision_json(entry)))
            .collect()
    }

    /// The current revision: the highest number.
    pub fn current(&self) -> Option<&Revision> {
        self.entries.iter().max_by_key(|e| e.number)
    }

    /// Where `pool rollback` goes: the highest-numbered revision below the current one that
    /// completed at least once.
    ///
    /// # Errors
    ///
    /// No revision, or none below the current one that completed.
    pub fn rollback_target(&self) -> Result<&Revision, NoRollback> {
        let current = self.current().ok_or(NoRollback::Nothing)?;
        self.entries
            .iter()
            .filter(|e| e.number < current.number && e.completed_once)
            .max_by_key(|e| e.number)
            .ok_or_else(|| NoRollback::NoEarlier {
                current: current.number,
                template_hash: current.template_hash.clone(),
            })
    }

    /// The revisions after `change`, trimmed to what is kept.
    pub fn apply(&self, change: &RevisionChange) -> Self {
        let mut next = match change {
            RevisionChange::Started(start) => self.started(start),
            RevisionChange::Ended(end) => self.ended(end),
        };
        next.trim();
        next
    }

    /// The revisions after a rollout started: a forward rollout's template gets a new number
    /// (unless it is the current revision already); a rollback's target keeps its number until
    /// it completes, and a target the revisions do not hold (found in Temporal's history) is
    /// recorded below the current revision ([`Self::free_number_below_current`]), or not until
    /// it completes while no number is free there (or no revision is recorded).
    fn started(&self, start: &RolloutStart) -> Self {
        let hash = &start.pool.template_hash;
        let existing = self.entries.iter().find(|e| &e.template_hash == hash);
        let is_current = existing
            .zip(self.current())
            .is_some_and(|(e, c)| e.number == c.number);
        let number = match existing {
            Some(entry) if start.rollback || is_current => entry.number,
            None if start.rollback => match self.free_number_below_current() {
                Some(number) => number,
                None => return self.clone(),
            },
            _ => self.next_number(),
        };
        self.with(entry_of(start, number, existing))
    }

    /// The revisions after a rollout ended: its outcome; a completed rollback moves its target
    /// to a new number. When its start was not written (a run from before revisions were kept,
    /// or a write that failed), the start is recorded first, so that the entry names this
    /// rollout, not an older one of the same template.
    fn ended(&self, end: &RolloutEnd) -> Self {
        let hash = &end.start.pool.template_hash;
        let started = match self.entries.iter().find(|e| &e.template_hash == hash) {
            Some(entry) if entry.records(&end.start) => self.clone(),
            _ => self.started(&end.start),
        };
        let completed = end.outcome == RevisionOutcome::Completed;
        let mut entry = match started.entries.iter().find(|e| &e.template_hash == hash) {
            Some(entry) if entry.records(&end.start) => entry.clone(),
            // A rollback's target with no number free below the current revision: recorded
            // only once it completed.
            _ if completed => entry_of(&end.start, started.next_number(), None),
            _ => return started,
        };
        let is_current = started.current().map(|c| c.number) == Some(entry.number);
        if completed && !is_current {
            entry.number = started.next_number();
        }
        entry.outcome = end.outcome;
        entry.ended_at = Some(end.at);
        entry.completed_once |= completed;
        if completed {
            entry.completed_run_id = Some(end.start.run_id.clone());
        }
        started.with(entry)
    }

    /// The rows of `pool history`, lowest number first; `rollout_running` says whether the
    /// pool's rollout workflow runs now.
    pub fn rows(&self, rollout_running: bool) -> Vec<HistoryRow> {
        let current = self.current().map(|c| c.number);
        let target = self.rollback_target().ok().map(|t| t.number);
        let newest_start = self.entries.iter().map(|e| e.started_at).max();
        self.entries
            .iter()
            .map(|entry| {
                let outcome = match entry.outcome {
                    RevisionOutcome::Running
                        if !rollout_running || Some(entry.started_at) != newest_start =>
                    {
                        ENDED_WITHOUT_A_WORD.to_owned()
                    }
                    outcome => outcome.word().to_owned(),
                };
                HistoryRow {
                    number: entry.number,
                    template_hash: entry.template_hash.clone(),
                    outcome,
                    started_at: entry.started_at,
                    ended_at: entry.ended_at,
                    rollback: entry.rollback,
                    completed_once: entry.completed_once,
                    current: Some(entry.number) == current,
                    rollback_target: Some(entry.number) == target,
                    workflow_id: entry.workflow_id.clone(),
                    run_id: entry.run_id.clone(),
                }
            })
            .collect()
    }

    fn next_number(&self) -> u64 {
        self.entries.iter().map(|e| e.number).max().unwrap_or(0) + 1
    }

    /// The highest number below the current revision's that no revision holds (numbers start
    /// at 0 there): where a rollback's target the revisions did not hold waits until it
    /// completes, so that it is neither current nor a rollback target before then.
    fn free_number_below_current(&self) -> Option<u64> {
        let current = self.current()?.number;
        (0..current)
            .rev()
            .find(|number| self.entries.iter().all(|e| e.number != *number))
    }

    /// These revisions with `entry` in place of the one of its template hash.
    fn with(&self, entry: Revision) -> Self {
        let mut entries: Vec<Revision> = self
            .entries
            .iter()
            .filter(|e| e.template_hash != entry.template_hash)
            .cloned()
            .collect();
        entries.push(entry);
        entries.sort_by_key(|e| e.number);
        Self { entries }
    }

    /// Keeps the newest [`REVISION_HISTORY_LIMIT`] numbers, and drops the oldest while the
    /// JSON passes [`MAX_DATA_BYTES`] (the current revision always stays).
    fn trim(&mut self) {
        let excess = self.entries.len().saturating_sub(REVISION_HISTORY_LIMIT);
        self.entries.drain(..excess);
        while self.entries.len() > 1
            && self
                .entries
                .iter()
                .map(|e| e.template_hash.len() + revision_json(e).len())
                .sum::<usize>()
                > MAX_DATA_BYTES
        {
            self.entries.remove(0);
        }
    }
}

/// A revision as stored.
fn revision_json(entry: &Revision) -> String {
    // Infallible: a revision is strings, numbers, lists and maps with string keys.
    serde_json::to_string(entry).unwrap_or_default()
}

#[cfg(test)]
mod tests;
