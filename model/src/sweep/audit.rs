//! A sweep's result: the audit of every resource and Node it saw, the rule that classified it,
//! and what was done about it.
//!
//! Removals and reports are listed one by one, with the facts behind their rule and what
//! happened. Everything kept is listed by name, grouped by kind and rule (resources of other
//! clusters or of nobody also by the cluster tag they carry), so that the audit of a resource
//! group of 10,000 machines stays well under Temporal's payload limit.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::approval::RefusedApproval;
use super::brake::Brake;
use super::classify::{Action, Decision, Rule, SubjectKind};
use super::inventory::{Inventory, ResourceKind};
use crate::ClusterName;

/// What happened to a subject the sweep acted on (or would have).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "result")]
pub enum Outcome {
    /// Dry run: it would have been done.
    Planned,
    /// Deleted.
    Deleted,
    /// Already gone when the sweep came to delete it.
    AlreadyGone,
    /// Looked at again just before deleting, it no longer qualified (attached, re-tagged...).
    LeftAlone {
        /// Why.
        reason: String,
    },
    /// The stale `nodewright.io/outdated` taint was removed (other taints kept).
    Untainted,
    /// Machine replacement started.
    Replacing {
        /// The workflows started (DeleteMachine, CreateMachine).
        workflows: Vec<String>,
    },
    /// Not done, by decision: not approved, frozen, a workflow started meanwhile...
    Skipped {
        /// Why.
        reason: String,
    },
    /// Tried and failed (after the activity's retries).
    Failed {
        /// The error, in ARM or Kubernetes terms.
        error: String,
    },
}

impl Outcome {
    /// One word for tables: `deleted`, `failed`...
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Planned => "planned",
            Outcome::Deleted => "deleted",
            Outcome::AlreadyGone => "already-gone",
            Outcome::Untainted => "untainted",
            Outcome::LeftAlone { .. } => "left-alone",
            Outcome::Replacing { .. } => "replacing",
            Outcome::Skipped { .. } => "skipped",
            Outcome::Failed { .. } => "failed",
        }
    }

    /// The reason, error or workflows, when there is one.
    pub fn note(&self) -> String {
        match self {
            Outcome::LeftAlone { reason } | Outcome::Skipped { reason } => reason.clone(),
            Outcome::Failed { error } => error.clone(),
            Outcome::Replacing { workflows } => workflows.join(", "),
            Outcome::Planned | Outcome::Deleted | Outcome::AlreadyGone | Outcome::Untainted => {
                String::new()
            }
        }
    }

    /// Whether the thing is gone (or being replaced) as planned.
    pub fn succeeded(&self) -> bool {
        matches!(
            self,
            Outcome::Deleted | Outcome::AlreadyGone | Outcome::Replacing { .. }
        )
    }
}

/// One subject of the audit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// The decision.
    #[serde(flatten)]
    pub decision: Decision,
    /// What happened, for subjects the sweep acted on (or would have).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
}

/// Resources of one kind carrying another cluster's tag (or none), by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForeignGroup {
    /// VM, NIC or disk.
    pub kind: ResourceKind,
    /// The `nodewright.io-cluster` tag they carry (`None`: no such tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_tag: Option<String>,
    /// Their names.
    pub names: Vec<String>,
}

/// Subjects of this cluster (and Nodes) kept by one rule, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptGroup {
    /// VM, NIC, disk or Node.
    pub kind: SubjectKind,
    /// The rule that kept them.
    pub rule: Rule,
    /// Their names.
    pub names: Vec<String>,
}

/// How the sweep as a whole ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum SweepOutcome {
    /// It acted on its plan (some actions may have failed: see the entries).
    Completed,
    /// A dry run: nothing deleted or replaced.
    DryRun,
    /// The Kubernetes API was not healthy (or failed while listing): nothing deleted.
    Frozen {
        /// What was wrong.
        reason: String,
    },
    /// More deletions than allowed and no approval came in time: nothing deleted.
    #[serde(rename_all = "camelCase")]
    NotApproved {
        /// Deletions planned.
        planned: u32,
        /// The cap.
        max_deletions: u32,
    },
    /// The plausibility brake held the plan and no approval naming the run came in time:
    /// nothing deleted (the brake and its counts are in the audit's `brake`).
    Braked {
        /// Why it braked, with its numbers.
        reason: String,
    },
    /// Its settings cannot be safe for this cluster (a `--grace` shorter than the longest
    /// creation timeout of the cluster's pools): nothing deleted.
    Refused {
        /// What is wrong and the fix.
        reason: String,
    },
    /// Another sweep of the cluster was running when this scheduled run started: it did
    /// nothing.
    Skipped {
        /// Which sweep ran.
        reason: String,
    },
    /// A cancellation request ended it: no removal started after the request; those under
    /// way finished and are in the entries.
    Canceled {
        /// The request's reason, when it gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl SweepOutcome {
    /// One word: `completed`, `dry-run`, `frozen`, `not-approved`, `braked`, `skipped`,
    /// `refused`, `canceled`.
    pub fn word(&self) -> &'static str {
        match self {
            SweepOutcome::Completed => "completed",
            SweepOutcome::DryRun => "dry-run",
            SweepOutcome::Frozen { .. } => "frozen",
            SweepOutcome::NotApproved { .. } => "not-approved",
            SweepOutcome::Braked { .. } => "braked",
            SweepOutcome::Skipped { .. } => "skipped",
            SweepOutcome::Refused { .. } => "refused",
            SweepOutcome::Canceled { .. } => "canceled",
        }
    }
}

/// How many of each kind the sweep saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Seen {
    /// VMs listed.
    pub vms: u32,
    /// NICs listed.
    pub nics: u32,
    /// Disks listed.
    pub disks: u32,
    /// Nodes listed.
    pub nodes: u32,
}

impl Seen {
    /// What `inventory` holds, by kind.
    pub fn of(inventory: &Inventory) -> Self {
        let count = |kind| {
            let n = inventory
                .resources
                .iter()
                .filter(|r| r.kind == kind)
                .count();
            u32::try_from(n).unwrap_or(u32::MAX)
        };
        Seen {
            vms: count(ResourceKind::Vm),
            nics: count(ResourceKind::Nic),
            disks: count(ResourceKind::Disk),
            nodes: u32::try_from(inventory.nodes.len()).unwrap_or(u32::MAX),
        }
    }

    /// Everything seen, all kinds together.
    pub fn total(&self) -> u32 {
        self.vms + self.nics + self.disks + self.nodes
    }
}

/// A sweep's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepAudit {
    /// The cluster swept.
    pub cluster: ClusterName,
    /// When it started (RFC 3339, workflow time).
    pub started_at: String,
    /// When it ended.
    pub finished_at: String,
    /// How it ended.
    pub outcome: SweepOutcome,
    /// What it saw, by kind.
    pub seen: Seen,
    /// Who approved the deletions, when approval was needed and given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// When the plausibility brake held the plan: why, and its counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brake: Option<Brake>,
    /// Approvals refused (another run, another count, not waiting), with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_approvals: Vec<RefusedApproval>,
    /// Every removal and report, with its decision, the facts behind it and its outcome.
    pub entries: Vec<AuditEntry>,
    /// Resources of this cluster and Nodes kept, by kind and rule.
    pub kept: Vec<KeptGroup>,
    /// Resources of other clusters or of nobody (rule `not-ours`), by kind and owner.
    pub not_ours: Vec<ForeignGroup>,
}

impl SweepAudit {
    /// The audit of `decisions` before anything is done: removals and reports one by one
    /// without outcomes, everything kept grouped.
    pub fn of(
        cluster: ClusterName,
        started_at: String,
        outcome: SweepOutcome,
        seen: Seen,
        decisions: Vec<Decision>,
    ) -> Self {
        let mut entries = Vec::new();
        let mut foreign: BTreeMap<(ResourceKind, Option<String>), Vec<String>> = BTreeMap::new();
        let mut kept: BTreeMap<(SubjectKind, Rule), Vec<String>> = BTreeMap::new();
        for decision in decisions {
            if decision.action != Action::Keep {
                entries.push(AuditEntry {
                    decision,
                    outcome: None,
                });
            } else if decision.rule == Rule::NotOurs
                && let Some(kind) = resource_kind(&decision)
            {
                let owner = Some(decision.detail).filter(|tag| !tag.is_empty());
                foreign
                    .entry((kind, owner))
                    .or_default()
                    .push(decision.name);
            } else {
                kept.entry((decision.kind, decision.rule))
                    .or_default()
                    .push(decision.name);
            }
        }
        let kept = kept
            .into_iter()
            .map(|((kind, rule), names)| KeptGroup { kind, rule, names })
            .collect();
        let not_ours = foreign
            .into_iter()
            .map(|((kind, cluster_tag), names)| ForeignGroup {
                kind,
                cluster_tag,
                names,
            })
            .collect();
        Self {
            cluster,
            finished_at: started_at.clone(),
            started_at,
            outcome,
            seen,
            approved_by: None,
            brake: None,
            refused_approvals: Vec::new(),
            entries,
            kept,
            not_ours,
        }
    }

    /// The entries the sweep acts on (delete or replace), in order.
    pub fn removals(&self) -> impl Iterator<Item = &AuditEntry> {
        self.entries
            .iter()
            .filter(|entry| entry.decision.action.removes())
    }

    /// How many deletions and replacements the plan holds.
    pub fn planned(&self) -> u32 {
        u32::try_from(self.removals().count()).unwrap_or(u32::MAX)
    }

    /// The planned removals counted by action and kind: `delete vm`, `delete nic`,
    /// `replace vm`.
    pub fn plan_by_kind(&self) -> BTreeMap<String, u32> {
        let mut plan = BTreeMap::new();
        for entry in self.removals() {
            let key = format!("{} {}", entry.decision.action, entry.decision.kind);
            let count = plan.entry(key).or_insert(0u32);
            *count = count.saturating_add(1);
        }
        plan
    }

    /// The indexes of the removals still without an outcome, in order: what acting does.
    pub fn pending_removals(&self) -> Vec<usize> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.decision.action.removes() && e.outcome.is_none())
            .map(|(index, _)| index)
            .collect()
    }

    /// Sets the outcome of every removal still without one.
    pub fn settle_removals(&mut self, outcome: &Outcome) {
        for entry in &mut self.entries {
            if entry.decision.action.removes() && entry.outcome.is_none() {
                entry.outcome = Some(outcome.clone());
            }
        }
    }

    /// The indexes of the stale taints to remove ([`Action::Untaint`]) still without an
    /// outcome, in order.
    pub fn pending_untaints(&self) -> Vec<usize> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.decision.action == Action::Untaint && e.outcome.is_none())
            .map(|(index, _)| index)
            .collect()
    }

    /// `, 2 of 3 stale outdated taints removed` (`, 3 stale outdated taints to remove` in a dry
    /// run), or nothing when there are none.
    fn untaints_part(&self) -> String {
        let untaints: Vec<&AuditEntry> = self
            .entries
            .iter()
            .filter(|entry| entry.decision.action == Action::Untaint)
            .collect();
        if untaints.is_empty() {
            return String::new();
        }
        let plural = if untaints.len() == 1 { "" } else { "s" };
        if self.outcome == SweepOutcome::DryRun {
            return format!(
                ", {} stale outdated taint{plural} to remove",
                untaints.len()
            );
        }
        let removed = untaints
            .iter()
            .filter(|entry| {
                matches!(
                    entry.outcome,
                    Some(Outcome::Untainted | Outcome::AlreadyGone)
                )
            })
            .count();
        format!(
            ", {removed} of {} stale outdated taint{plural} removed",
            untaints.len()
        )
    }

    /// Records what happened to the entry `index`.
    pub fn record(&mut self, index: usize, outcome: Outcome) {
        if let Some(entry) = self.entries.get_mut(index) {
            entry.outcome = Some(outcome);
        }
    }

    /// How many removals succeeded and how many failed.
    pub fn tally(&self) -> (u32, u32) {
        let mut done = 0;
        let mut failed = 0;
        for outcome in self.removals().filter_map(|entry| entry.outcome.as_ref()) {
            if outcome.succeeded() {
                done += 1;
            } else if matches!(outcome, Outcome::Failed { .. }) {
                failed += 1;
            }
        }
        (done, failed)
    }

    /// How many resources of other clusters or of nobody were seen.
    pub fn not_ours_count(&self) -> usize {
        self.not_ours.iter().map(|group| group.names.len()).sum()
    }

    /// One line for the UI summary and the CLI: `completed: 4 deleted, 0 failed; kept 9 …`.
    pub fn summary(&self) -> String {
        let (done, failed) = self.tally();
        let kept: usize = self.kept.iter().map(|group| group.names.len()).sum();
        let reported = self
            .entries
            .iter()
            .filter(|entry| entry.decision.action == Action::Report)
            .count();
        let seen = format!(
            "saw {} VMs, {} NICs, {} disks, {} Nodes",
            self.seen.vms, self.seen.nics, self.seen.disks, self.seen.nodes
        );
        let mut tail = format!(
            "kept {kept} of this cluster, {} not ours",
            self.not_ours_count()
        );
        if reported > 0 {
            tail.push_str(&format!(", {reported} unhealthy reported"));
        }
        tail.push_str(&self.untaints_part());
        match &self.outcome {
            SweepOutcome::Completed => format!(
                "completed: {done} of {} removals done, {failed} failed; {tail}; {seen}",
                self.planned()
            ),
            SweepOutcome::DryRun => {
                format!("dry run: would remove {}; {tail}; {seen}", self.planned())
            }
            SweepOutcome::Frozen { reason } => format!("frozen, nothing deleted: {reason}"),
            SweepOutcome::NotApproved {
                planned,
                max_deletions,
            } => format!(
                "not approved, nothing deleted: {planned} removals planned, more than max_deletions {max_deletions}, and no approve came in time; {tail}; {seen}"
            ),
            SweepOutcome::Braked { reason } => {
                let counts = self
                    .brake
                    .as_ref()
                    .map(|brake| brake.counts)
                    .unwrap_or_default();
                format!(
                    "braked, nothing deleted: {reason}; no approval naming the run came in time ({} machines, {} with a Node, {} removals planned); {tail}; {seen}",
                    counts.machines, counts.matched, counts.planned
                )
            }
            SweepOutcome::Skipped { reason } => format!("skipped, nothing done: {reason}"),
            SweepOutcome::Refused { reason } => format!("refused, nothing deleted: {reason}"),
            SweepOutcome::Canceled { reason } => {
                let why = reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default();
                format!(
                    "canceled{why}: {done} of {} removals done before the request, {failed} failed, the rest not started; {tail}; {seen}",
                    self.planned()
                )
            }
        }
    }
}

fn resource_kind(decision: &Decision) -> Option<ResourceKind> {
    match decision.kind {
        SubjectKind::Vm => Some(ResourceKind::Vm),
        SubjectKind::Nic => Some(ResourceKind::Nic),
        SubjectKind::Disk => Some(ResourceKind::Disk),
        SubjectKind::Node => None,
    }
}
