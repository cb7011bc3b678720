//! Sweeps as text: the audit (header, summary, one row per subject, the resources that are not
//! ours), the status of a running sweep, and the line following prints. Pure functions of what
//! they show.

use nodewright_model::sweep::{
    Action, AuditEntry, Brake, ForeignGroup, KeptGroup, RefusedApproval, Rule, SweepAudit,
    SweepStatus,
};

use crate::table;

/// The table's column headers.
const COLUMNS: [&str; 6] = ["KIND", "NAME", "ACTION", "RULE", "OUTCOME", "DETAIL"];

/// A row of the table, one cell per column.
type Row = [String; 6];

/// Every line of an audit: a header, the summary, a table of subjects (removals, then reported,
/// then kept; with `all` also every resource that is not ours), and the not-ours counts.
pub fn audit_lines(workflow_id: &str, audit: &SweepAudit, all: bool) -> Vec<String> {
    let mut lines = vec![header(workflow_id, audit), audit.summary()];
    if let Some(brake) = &audit.brake {
        lines.push(brake_line(brake));
    }
    lines.extend(audit.refused_approvals.iter().map(refused_line));
    let mut rows: Vec<Row> = ordered(&audit.entries).into_iter().map(row).collect();
    rows.extend(audit.kept.iter().flat_map(kept_rows));
    if all {
        rows.extend(audit.not_ours.iter().flat_map(foreign_rows));
    }
    if !rows.is_empty() {
        lines.extend(table::lines("", COLUMNS, rows));
    }
    if let Some(line) = not_ours_line(&audit.not_ours) {
        lines.push(line);
    }
    lines
}

/// `sweep/prod: completed, started …, finished …, approved by ann@cli`.
fn header(workflow_id: &str, audit: &SweepAudit) -> String {
    let mut line = format!(
        "{workflow_id}: {}, started {}, finished {}",
        audit.outcome.word(),
        audit.started_at,
        audit.finished_at
    );
    if let Some(by) = &audit.approved_by {
        line.push_str(&format!(", approved by {by}"));
    }
    line
}

/// Where an entry's row goes: removals, then stale taints removed, then reported (kept subjects
/// come after them all).
fn rank(action: Action) -> u8 {
    match action {
        Action::Delete | Action::Replace => 0,
        Action::Untaint => 1,
        Action::Report => 2,
        Action::Keep => 3,
    }
}

/// The entries in table order, each group in the audit's order.
fn ordered(entries: &[AuditEntry]) -> Vec<&AuditEntry> {
    let mut ordered: Vec<&AuditEntry> = entries.iter().collect();
    ordered.sort_by_key(|entry| rank(entry.decision.action));
    ordered
}

/// One entry's row; DETAIL is the decision's detail, then the outcome's note after ` — `.
fn row(entry: &AuditEntry) -> Row {
    let decision = &entry.decision;
    let note = entry
        .outcome
        .as_ref()
        .map(|outcome| outcome.note())
        .unwrap_or_default();
    let detail = [decision.detail.as_str(), note.as_str()]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" — ");
    [
        decision.kind.to_string(),
        decision.name.clone(),
        decision.action.to_string(),
        decision.rule.to_string(),
        entry
            .outcome
            .as_ref()
            .map_or("-", |outcome| outcome.word())
            .to_owned(),
        detail,
    ]
}

/// A row per subject kept by one rule (the audit keeps no detail for them).
fn kept_rows(group: &KeptGroup) -> impl Iterator<Item = Row> + '_ {
    group.names.iter().map(move |name| {
        [
            group.kind.to_string(),
            name.clone(),
            Action::Keep.to_string(),
            group.rule.to_string(),
            "-".to_owned(),
            String::new(),
        ]
    })
}

/// What a group's owner tag says: `tag staging` or `untagged`.
fn owner(group: &ForeignGroup) -> String {
    match &group.cluster_tag {
        Some(tag) => format!("tag {tag}"),
        None => "untagged".to_owned(),
    }
}

/// A row per resource of a group that is not ours (`--all`).
fn foreign_rows(group: &ForeignGroup) -> impl Iterator<Item = Row> + '_ {
    let owner = owner(group);
    group.names.iter().map(move |name| {
        [
            group.kind.to_string(),
            name.clone(),
            Action::Keep.to_string(),
            Rule::NotOurs.to_string(),
            "-".to_owned(),
            owner.clone(),
        ]
    })
}

/// `not ours: 9998 vm (tag staging), 2 vm (untagged)`, when there are any.
fn not_ours_line(groups: &[ForeignGroup]) -> Option<String> {
    if groups.is_empty() {
        return None;
    }
    let counts: Vec<String> = groups
        .iter()
        .map(|group| format!("{} {} ({})", group.names.len(), group.kind, owner(group)))
        .collect();
    Some(format!("not ours: {}", counts.join(", ")))
}

/// `brake: too-many-removals — 4 machines, 1 with a Node, 0 NotReady; 4 removals planned (4
/// machines, 0 replacements), at most 3 without an approval: …`.
pub fn brake_line(brake: &Brake) -> String {
    let c = brake.counts;
    format!(
        "brake: {} — {} machines, {} with a Node, {} NotReady; {} removals planned ({} machines, {} replacements), at most {} machines without an approval: {}",
        brake.reason.as_str(),
        c.machines,
        c.matched,
        c.not_ready,
        c.planned,
        c.machine_removals,
        c.replacements,
        c.allowed,
        brake.message
    )
}

/// `approval refused (by ann@cli): it approves 11 planned removals, …`.
fn refused_line(refused: &RefusedApproval) -> String {
    let by = if refused.by.is_empty() {
        String::new()
    } else {
        format!(" (by {})", refused.by)
    };
    format!("approval refused{by}: {}", refused.reason)
}

/// `3 delete nic, 1 delete vm`: the plan counted by action and kind.
pub fn plan_line(status: &SweepStatus) -> String {
    if status.plan.is_empty() {
        return "nothing".to_owned();
    }
    status
        .plan
        .iter()
        .map(|(what, count)| format!("{count} {what}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The line following prints when the status changes: `listing            listing`.
pub fn progress_line(status: &SweepStatus) -> String {
    format!("{:<17}  {}", status.phase.as_str(), status.summary)
}

/// Every line of `sweep status` about one running sweep.
pub fn status_lines(workflow_id: &str, run_id: &str, status: &SweepStatus) -> Vec<String> {
    let mut lines = vec![
        format!("{workflow_id} (run {run_id}): running"),
        format!("  phase        {}", status.phase.as_str()),
        format!("  summary      {}", status.summary),
        format!(
            "  progress     seen {}, planned {}, done {}, failed {}",
            status.seen, status.planned, status.done, status.failed
        ),
    ];
    if status.planned > 0 {
        lines.push(format!("  plan         {}", plan_line(status)));
    }
    if let Some(brake) = &status.brake {
        lines.push(format!("  {}", brake_line(brake)));
    }
    if let Some(deadline) = &status.approval_deadline {
        lines.push(format!(
            "  approval     needed by {deadline}: `nodewright sweep approve {workflow_id}` shows the plan and lets it remove; without it every removal is skipped"
        ));
    }
    for refused in &status.refused_approvals {
        lines.push(format!("  {}", refused_line(refused)));
    }
    lines
}

#[cfg(test)]
mod tests {
    use nodewright_model::ClusterName;
    use nodewright_model::sweep::{
        Decision, Outcome, ResourceKind, Seen, SubjectKind, SweepOutcome, SweepPhase,
    };

    use super::*;

    fn decision(
        kind: SubjectKind,
        name: &str,
        rule: Rule,
        action: Action,
        detail: &str,
    ) -> Decision {
        Decision {
            kind,
            name: name.to_owned(),
            rule,
            action,
            detail: detail.to_owned(),
            pool: None,
            uid: None,
        }
    }

    /// A sweep of `prod` that saw three foreign VMs, kept two subjects, reported one and
    /// planned three removals, entries in the classifier's order (resources, then Nodes).
    fn audit() -> SweepAudit {
        let decisions = vec![
            decision(
                SubjectKind::Vm,
                "web-keep1",
                Rule::Healthy,
                Action::Keep,
                "Node web-keep1 Ready",
            ),
            decision(
                SubjectKind::Vm,
                "web-orph1",
                Rule::OrphanVm,
                Action::Delete,
                "no Node, created 2h ago",
            ),
            decision(
                SubjectKind::Vm,
                "stg-aaaaa",
                Rule::NotOurs,
                Action::Keep,
                "staging",
            ),
            decision(
                SubjectKind::Vm,
                "stg-bbbbb",
                Rule::NotOurs,
                Action::Keep,
                "staging",
            ),
            decision(SubjectKind::Vm, "loner", Rule::NotOurs, Action::Keep, ""),
            decision(
                SubjectKind::Vm,
                "web-sick1",
                Rule::Unhealthy,
                Action::Report,
                "Node NotReady for 30m",
            ),
            decision(
                SubjectKind::Nic,
                "web-orph2-nic",
                Rule::OrphanNic,
                Action::Delete,
                "attached to nothing, created 1h ago",
            ),
            decision(
                SubjectKind::Disk,
                "pvc-1",
                Rule::BacksVolume,
                Action::Keep,
                "a PersistentVolume uses it",
            ),
            decision(
                SubjectKind::Node,
                "web-gone1",
                Rule::OrphanNode,
                Action::Delete,
                "VM web-gone1 is not listed",
            ),
        ];
        let seen = Seen {
            vms: 5,
            nics: 1,
            disks: 1,
            nodes: 2,
        };
        let cluster = ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"));
        let mut audit = SweepAudit::of(
            cluster,
            "2026-04-01T10:00:00Z".to_owned(),
            SweepOutcome::Completed,
            seen,
            decisions,
        );
        audit.finished_at = "2026-04-01T10:02:13Z".to_owned();
        audit.approved_by = Some("ann@cli".to_owned());
        // Entries are the removals and reports, in order: web-orph1, web-sick1, web-orph2-nic,
        // web-gone1.
        audit.record(0, Outcome::Deleted);
        audit.record(
            2,
            Outcome::Failed {
                error: "ARM 409 Conflict: NicInUse".to_owned(),
            },
        );
        audit.record(3, Outcome::AlreadyGone);
        audit
    }

    #[test]
    fn the_audit_table_lists_removals_then_reported_then_kept() {
        let lines = audit_lines("sweep/prod", &audit(), false);
        let expected = [
            "sweep/prod: completed, started 2026-04-01T10:00:00Z, finished 2026-04-01T10:02:13Z, approved by ann@cli",
            "completed: 2 of 3 removals done, 1 failed; kept 2 of this cluster, 3 not ours, 1 unhealthy reported; saw 5 VMs, 1 NICs, 1 disks, 2 Nodes",
            "KIND  NAME           ACTION  RULE          OUTCOME       DETAIL",
            "vm    web-orph1      delete  orphan-vm     deleted       no Node, created 2h ago",
            "nic   web-orph2-nic  delete  orphan-nic    failed        attached to nothing, created 1h ago — ARM 409 Conflict: NicInUse",
            "node  web-gone1      delete  orphan-node   already-gone  VM web-gone1 is not listed",
            "vm    web-sick1      report  unhealthy     -             Node NotReady for 30m",
            "vm    web-keep1      keep    healthy       -",
            "disk  pvc-1          keep    backs-volume  -",
            "not ours: 1 vm (untagged), 2 vm (tag staging)",
        ];
        assert_eq!(lines, expected);
    }

    #[test]
    fn all_lists_every_foreign_resource_as_a_not_ours_row() {
        let lines = audit_lines("sweep/prod", &audit(), true);
        let tail: Vec<&str> = lines[lines.len() - 4..]
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(
            tail,
            [
                "vm    loner          keep    not-ours      -             untagged",
                "vm    stg-aaaaa      keep    not-ours      -             tag staging",
                "vm    stg-bbbbb      keep    not-ours      -             tag staging",
                "not ours: 1 vm (untagged), 2 vm (tag staging)",
            ]
        );
    }

    #[test]
    fn notes_without_a_detail_and_dry_run_plans_read_cleanly() {
        let cluster = ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"));
        let mut audit = SweepAudit::of(
            cluster,
            "2026-04-01T10:00:00Z".to_owned(),
            SweepOutcome::DryRun,
            Seen::default(),
            vec![
                decision(SubjectKind::Vm, "web-a", Rule::OrphanVm, Action::Delete, ""),
                decision(
                    SubjectKind::Vm,
                    "web-b",
                    Rule::Unhealthy,
                    Action::Replace,
                    "NotReady 1h",
                ),
            ],
        );
        audit.settle_removals(&Outcome::Planned);
        audit.record(
            0,
            Outcome::Skipped {
                reason: "delete/prod/web-a is already running; left to it".to_owned(),
            },
        );
        assert_eq!(
            audit_lines("sweep/prod-2026-04-01T10:00:00Z", &audit, false),
            [
                "sweep/prod-2026-04-01T10:00:00Z: dry-run, started 2026-04-01T10:00:00Z, finished 2026-04-01T10:00:00Z",
                "dry run: would remove 2; kept 0 of this cluster, 0 not ours; saw 0 VMs, 0 NICs, 0 disks, 0 Nodes",
                "KIND  NAME   ACTION   RULE       OUTCOME  DETAIL",
                "vm    web-a  delete   orphan-vm  skipped  delete/prod/web-a is already running; left to it",
                "vm    web-b  replace  unhealthy  planned  NotReady 1h",
            ]
        );
    }

    #[test]
    fn a_frozen_sweep_is_a_header_and_its_reason() {
        let cluster = ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"));
        let audit = SweepAudit::of(
            cluster,
            "2026-04-01T10:00:00Z".to_owned(),
            SweepOutcome::Frozen {
                reason: "the Kubernetes API is not healthy: /readyz 500".to_owned(),
            },
            Seen::default(),
            Vec::new(),
        );
        assert_eq!(
            audit_lines("sweep/prod", &audit, true),
            [
                "sweep/prod: frozen, started 2026-04-01T10:00:00Z, finished 2026-04-01T10:00:00Z",
                "frozen, nothing deleted: the Kubernetes API is not healthy: /readyz 500",
            ]
        );
    }

    #[test]
    fn foreign_groups_count_by_kind_and_owner() {
        let group = |kind, tag: Option<&str>, n: usize| ForeignGroup {
            kind,
            cluster_tag: tag.map(str::to_owned),
            names: (0..n).map(|i| format!("r{i}")).collect(),
        };
        assert_eq!(
            not_ours_line(&[
                group(ResourceKind::Vm, Some("staging"), 9998),
                group(ResourceKind::Vm, None, 2),
                group(ResourceKind::Disk, Some("dev"), 1),
            ])
            .as_deref(),
            Some("not ours: 9998 vm (tag staging), 2 vm (untagged), 1 disk (tag dev)")
        );
        assert_eq!(not_ours_line(&[]), None);
    }

    #[test]
    fn the_status_shows_phase_counts_the_plan_the_brake_and_the_approval_deadline() {
        let mut status = SweepStatus::starting();
        assert_eq!(
            progress_line(&status),
            "checking           checking the Kubernetes API"
        );
        status.phase = SweepPhase::Braked;
        status.summary = "braked".to_owned();
        status.seen = 40;
        status.planned = 12;
        status.plan = std::collections::BTreeMap::from([
            ("delete nic".to_owned(), 2),
            ("delete vm".to_owned(), 10),
        ]);
        status.brake = Some(Brake {
            reason: nodewright_model::sweep::BrakeReason::NoNodeMatched,
            message: "none of this cluster's 10 VMs has a Node".to_owned(),
            counts: nodewright_model::sweep::BrakeCounts {
                machines: 10,
                matched: 0,
                not_ready: 0,
                planned: 12,
                machine_removals: 10,
                replacements: 0,
                allowed: 3,
            },
        });
        status.approval_deadline = Some("2026-04-01T11:00:00Z".to_owned());
        status.refused_approvals = vec![RefusedApproval {
            by: "ann@cli".to_owned(),
            reason: "it approves 11 planned removals, but this run's plan holds 12".to_owned(),
        }];
        assert_eq!(
            status_lines("sweep/prod", "r1", &status),
            [
                "sweep/prod (run r1): running",
                "  phase        braked",
                "  summary      braked",
                "  progress     seen 40, planned 12, done 0, failed 0",
                "  plan         2 delete nic, 10 delete vm",
                "  brake: no-node-matched — 10 machines, 0 with a Node, 0 NotReady; 12 removals planned (10 machines, 0 replacements), at most 3 machines without an approval: none of this cluster's 10 VMs has a Node",
                "  approval     needed by 2026-04-01T11:00:00Z: `nodewright sweep approve sweep/prod` shows the plan and lets it remove; without it every removal is skipped",
                "  approval refused (by ann@cli): it approves 11 planned removals, but this run's plan holds 12",
            ]
        );
    }
}
