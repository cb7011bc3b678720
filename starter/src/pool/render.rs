//! Rollouts and pools as text: a rollout's full status and a pool's machines (a rollout at a
//! glance is [`super::summary`]'s). Pure functions of what they show and of "now" (Unix seconds).

use chrono::{DateTime, SecondsFormat, Utc};
use nodewright_model::capacity::Exhausted;
use nodewright_model::rollout::{
    Activity, ChildFailure, ChildKind, DeleteRetry, HOLD_RECHECK_SECS, Health, Holdup, InFlight,
    MachineView, PoolReport, RolloutPhase, RolloutStatus, StrategyView,
};

use crate::table;

/// A span of seconds, short: `45s`, `12m`, `2h05m`, `3d4h`.
pub fn span(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m", seconds / 60),
        3600..86_400 => {
            let minutes = (seconds % 3600) / 60;
            if minutes == 0 {
                format!("{}h", seconds / 3600)
            } else {
                format!("{}h{minutes:02}m", seconds / 3600)
            }
        }
        _ => {
            let hours = (seconds % 86_400) / 3600;
            if hours == 0 {
                format!("{}d", seconds / 86_400)
            } else {
                format!("{}d{hours}h", seconds / 86_400)
            }
        }
    }
}

/// Seconds from `then` to `now`, never negative.
fn since(then: i64, now: i64) -> u64 {
    u64::try_from(now.saturating_sub(then)).unwrap_or(0)
}

/// A machine's health: `Ready`, `NotReady for 42s` or `Failed`.
pub fn health(health: Health, now: i64) -> String {
    match health {
        Health::Ready => "Ready".to_owned(),
        Health::NotReady { since: at } => format!("NotReady for {}", span(since(at, now))),
        Health::Failed => "Failed".to_owned(),
    }
}

/// A machine's health in a rollout's status: [`health`], and for a machine still warming up for
/// minReadySeconds `Ready (available in 25s)` (as of the last look).
fn machine_health(machine: &MachineView, now: i64) -> String {
    match machine.available_in {
        Some(seconds) if machine.health == Health::Ready => format!(
            "Ready (available in {})",
            span(u64::try_from(seconds).unwrap_or(0))
        ),
        _ => health(machine.health, now),
    }
}

/// What is being done to a machine: `idle`, `creating`, `deleting`.
pub fn activity(activity: Activity) -> &'static str {
    match activity {
        Activity::Idle => "idle",
        Activity::Creating => "creating",
        Activity::Deleting => "deleting",
    }
}

/// A child's kind as a word: `create`, `delete`.
pub fn kind(kind: ChildKind) -> &'static str {
    match kind {
        ChildKind::Create => "create",
        ChildKind::Delete => "delete",
    }
}

/// Why the rollout waits, paused or stalls, when it does: the paused reason, the canary's
/// approval, the stall.
pub fn reasons(status: &RolloutStatus) -> Vec<String> {
    let mut reasons = Vec::new();
    if let Some(because) = &status.paused_because {
        reasons.push(because.clone());
    }
    if status.phase == RolloutPhase::AwaitingApproval {
        let canary = status.canary.unwrap_or(0);
        reasons.push(format!(
            "canary of {canary} done; `nodewright pool rollout approve {}` lets it go on",
            status.pool
        ));
    }
    if let Some(stalled) = &status.stalled {
        reasons.push(format!("stalled: {stalled}"));
    }
    reasons
}

/// A failed child in one line: `create web-ab12c (create/dev/web-ab12c): reason`.
pub fn failure_line(failure: &ChildFailure) -> String {
    format!(
        "{} {} ({}): {}",
        kind(failure.kind),
        failure.machine,
        failure.workflow_id,
        failure.reason
    )
}

/// The strategy in force: `maxSurge 25%, maxUnavailable 0 (up to 2 machines above replicas, 0
/// below)`.
pub fn strategy(view: &StrategyView) -> String {
    format!(
        "maxSurge {}, maxUnavailable {} (up to {} machines above replicas, {} below)",
        view.max_surge, view.max_unavailable, view.budget.surge, view.budget.unavailable
    )
}

fn holdup(holdup: Holdup, pool: &str, machines: &[MachineView]) -> String {
    match holdup {
        Holdup::InFlight => "creates and deletes in flight must finish first".to_owned(),
        Holdup::Budget => {
            let warming: Vec<&MachineView> = machines
                .iter()
                .filter(|m| m.available_in.is_some())
                .collect();
            match warming.iter().filter_map(|m| m.available_in).min() {
                Some(first) => format!(
                    "the budget is used up: {} Ready but not yet for minReadySeconds (the first counts available in {}) before more old ones can go",
                    match warming.len() {
                        1 => "1 new machine is".to_owned(),
                        n => format!("{n} new machines are"),
                    },
                    span(u64::try_from(first).unwrap_or(0))
                ),
                None => "the budget is used up: new machines must become Ready before more old ones can go"
                    .to_owned(),
            }
        }
        Holdup::CanaryReached => format!(
            "the canary is done; the rest waits for `nodewright pool rollout approve {pool}`"
        ),
        Holdup::DoNotDisrupt => format!(
            "the machines left to replace carry do-not-disrupt marks or wait out the back-off after a failed delete (see held); a marked one is looked at again {HOLD_RECHECK_SECS}s after it was held"
        ),
        Holdup::Capacity => "no room for a new machine (see capacity); the rollout goes on by itself when room returns".to_owned(),
        Holdup::Soak => "the last batch of new machines soaks (strategy.soak; see soak) before the rollout goes on".to_owned(),
        Holdup::MaintenanceWindow => "no maintenance window is open (see window): machines in flight finish, nothing new starts until the next one opens".to_owned(),
    }
}

fn in_flight_line(child: &InFlight, now: i64) -> String {
    let zone = child
        .zone
        .as_ref()
        .map_or_else(String::new, |zone| format!(" in zone {zone}"));
    format!(
        "{} {:<24} {}  {} ago{zone}",
        kind(child.kind),
        child.machine,
        child.workflow_id,
        span(since(child.started_at, now))
    )
}

/// A VM size out of capacity in a zone: `zone 2 for Standard_D2s_v5 (ZonalAllocationFailed)
/// until 2026-11-27T10:03:00Z (2m left)`, `every zone for spot Standard_D2s_v5 (…) …` for an
/// offering of one capacity type set aside everywhere, or `(over)` once past.
fn exhausted_line(exhausted: &Exhausted, now: i64) -> String {
    let until = DateTime::<Utc>::from_timestamp(exhausted.until, 0).map_or_else(
        || exhausted.until.to_string(),
        |t| t.to_rfc3339_opts(SecondsFormat::Secs, true),
    );
    let left = if exhausted.until > now {
        format!("{} left", span(since(now, exhausted.until)))
    } else {
        "over".to_owned()
    };
    let zone = if exhausted.zone.is_empty() {
        "every zone".to_owned()
    } else {
        format!("zone {}", exhausted.zone)
    };
    let kind = exhausted
        .capacity_type
        .map(|kind| format!("{kind} "))
        .unwrap_or_default();
    format!(
        "{zone} for {kind}{} ({}) until {until} ({left})",
        exhausted.vm_size, exhausted.code
    )
}

/// A machine left deleting with no delete running: `p-1 (its delete failed: ...; 2 failed
/// deletes); deleted again in 1m`, or `now` once due, or why it is left alone.
fn retry_line(retry: &DeleteRetry, now: i64) -> String {
    if retry.left_alone {
        return format!("{}: {}", retry.machine, retry.reason);
    }
    let due = retry.due_at();
    let when = if due > now {
        format!("in {}", span(since(now, due)))
    } else {
        "at the next look".to_owned()
    };
    let failures = match retry.failures {
        0 => String::new(),
        1 => "; 1 failed delete".to_owned(),
        n => format!("; {n} failed deletes"),
    };
    format!(
        "{} ({}{failures}); deleted again {when}",
        retry.machine, retry.reason
    )
}

/// Every line of `pool rollout status`.
/// Machines per availability zone: `zone 1: 2, zone 2: 2`.
fn zones_line(zones: &std::collections::BTreeMap<String, u32>) -> String {
    zones
        .iter()
        .map(|(zone, count)| format!("zone {zone}: {count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn status_lines(status: &RolloutStatus, now: i64) -> Vec<String> {
    let pool = status.pool.as_str();
    let counts = &status.counts;
    let mut lines = vec![format!("  phase        {}", status.phase.as_str())];
    let template = match &status.previous_template_hash {
        Some(previous) => format!("{} (was {previous})", status.template_hash),
        None => status.template_hash.clone(),
    };
    lines.push(format!("  template     {template}"));
    lines.push(format!(
        "  machines     {}/{} updated, {} ready, {} available, {} old; {} in all, {} creating, {} deleting, {} unhealthy",
        counts.updated,
        status.desired,
        counts.ready,
        counts.available,
        counts.old,
        counts.total,
        counts.creating,
        counts.deleting,
        counts.unhealthy
    ));
    if !status.zones.is_empty() {
        lines.push(format!("  zones        {}", zones_line(&status.zones)));
    }
    if let Some(stamps) = &status.drain_stamps {
        lines.push(format!("  drain        {}", stamps.summary()));
    }
    lines.push(format!("  strategy     {}", strategy(&status.strategy)));
    if let Some(canary) = status.canary {
        let approval = match (&status.approved_by, status.phase) {
            (Some(by), _) => format!("approved by {by}"),
            (None, RolloutPhase::AwaitingApproval) => {
                format!("awaiting approval: `nodewright pool rollout approve {pool}`")
            }
            (None, _) => "not approved yet".to_owned(),
        };
        lines.push(format!("  canary       {canary} machines; {approval}"));
    }
    if let Some(because) = &status.paused_because {
        lines.push(format!("  paused       {because}"));
    }
    if let Some(stalled) = &status.stalled {
        lines.push(format!("  stalled      {stalled}"));
    }
    if let Some(why) = status.holdup {
        lines.push(format!(
            "  waiting      {}",
            holdup(why, pool, &status.machines)
        ));
    }
    if let Some(limit) = &status.capacity {
        lines.push(format!("  capacity     {limit}"));
    }
    if let Some(window) = &status.window {
        lines.push(format!("  window       {window}"));
    }
    if let Some(soak) = &status.soak {
        lines.push(format!(
            "  soak         {} until {} ({} left)",
            soak.machines.join(", "),
            timestamp(soak.until),
            span(since(now, soak.until))
        ));
    }
    for (index, held) in status.held.iter().enumerate() {
        let label = if index == 0 { "held" } else { "" };
        let why = if held.after_failed_delete {
            let left = if held.recheck_at > now {
                format!("chosen again in {}", span(since(now, held.recheck_at)))
            } else {
                "may be chosen again".to_owned()
            };
            format!("{}; {left}", held.reason)
        } else {
            format!("do not disrupt: {}", held.reason)
        };
        lines.push(format!(
            "  {label:<12} {} since {} ago: {why}",
            held.machine,
            span(since(held.since, now)),
        ));
    }
    for (index, exhausted) in status.exhausted.iter().enumerate() {
        let label = if index == 0 { "exhausted" } else { "" };
        lines.push(format!("  {label:<12} {}", exhausted_line(exhausted, now)));
    }
    for (index, retry) in status.retries.iter().enumerate() {
        let label = if index == 0 { "stranded" } else { "" };
        lines.push(format!("  {label:<12} {}", retry_line(retry, now)));
    }
    for (index, child) in status.in_flight.iter().enumerate() {
        let label = if index == 0 { "in flight" } else { "" };
        lines.push(format!("  {label:<12} {}", in_flight_line(child, now)));
    }
    if !status.failures.is_empty() || status.failures_counted > 0 {
        lines.push(format!(
            "  failures     {} counted of maxFailures {} ({} in all)",
            status.failures_counted,
            status.max_failures,
            status.failures.len()
        ));
        for failure in &status.failures {
            lines.push(format!("               {}", failure_line(failure)));
        }
    }
    lines.push(format!(
        "  done         {} created, {} deleted",
        status.created, status.deleted
    ));
    match status.estimated_seconds_left {
        Some(seconds) => lines.push(format!("  time left    ~{}", span(seconds))),
        None if !matches!(
            status.phase,
            RolloutPhase::Completed | RolloutPhase::Aborted
        ) =>
        {
            lines.push("  time left    unknown until a create and a delete finished".to_owned())
        }
        None => {}
    }
    if status.continuation > 0 {
        lines.push(format!(
            "  continued    {} times as a new run",
            status.continuation
        ));
    }
    if let Some(summary) = &status.summary {
        lines.push(format!("  summary      {summary}"));
    }
    if !status.machines.is_empty() {
        let rows = status.machines.iter().map(|machine| {
            [
                machine.name.clone(),
                machine.template_hash.clone(),
                if machine.updated { "yes" } else { "no" }.to_owned(),
                machine_health(machine, now),
                activity(machine.activity).to_owned(),
            ]
        });
        lines.extend(table::lines(
            "  ",
            ["NAME", "TEMPLATE", "UPDATED", "HEALTH", "ACTIVITY"],
            rows,
        ));
    }
    lines
}

/// A Unix second as RFC 3339.
pub fn timestamp(seconds: i64) -> String {
    DateTime::<Utc>::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_else(|| seconds.to_string())
}

/// Every line of `pool status` about the machines (ages and health as of the observation).
pub fn report_lines(report: &PoolReport, cluster: &str) -> Vec<String> {
    let now = report.observed_at;
    if report.machines.is_empty() {
        return vec![format!(
            "pool {} has no machines in cluster {cluster} (observed {})",
            report.pool,
            timestamp(now)
        )];
    }
    let mut lines = vec![format!(
        "pool {}: {} machines, {} Ready (observed {})",
        report.pool,
        report.machines.len(),
        report.ready(),
        timestamp(now)
    )];
    let rows = report.machines.iter().map(|machine| {
        let template = if machine.template_hash.is_empty() {
            "-"
        } else {
            machine.template_hash.as_str()
        };
        [
            machine.name.clone(),
            template.to_owned(),
            health(machine.health, now),
            activity(machine.activity).to_owned(),
            span(since(machine.created_at, now)),
        ]
    });
    lines.extend(table::lines(
        "  ",
        ["NAME", "TEMPLATE", "HEALTH", "ACTIVITY", "AGE"],
        rows,
    ));
    let templates: Vec<String> = report
        .by_template()
        .into_iter()
        .map(|(hash, count)| {
            let hash = if hash.is_empty() { "(untagged)" } else { hash };
            format!("{hash} ×{count}")
        })
        .collect();
    lines.push(format!("  templates    {}", templates.join(", ")));
    lines
}

/// `pool status` of a pool under a controller, at a glance:
///
/// ```text
/// pool web: Active, 3 of 3 ready, 3 available, 3 updated, 0 unhealthy (template 1a2b3c)
///   conditions  Available=True (MinimumReplicasAvailable), Progressing=False (Steady), ...
///   unhealthy   web-ab12c: KernelDeadlock=True for 0s
///   last        2026-11-27T22:40:01Z creating machine(s) web-ab12c (template 1a2b3c)
/// ```
pub fn controller_lines(
    document: &nodewright_model::controller::PoolStatusDocument,
) -> Vec<String> {
    let status = &document.status;
    let paused = if document.spec.paused { ", paused" } else { "" };
    let mut lines = vec![format!(
        "pool {}: {}{paused}, {} of {} ready, {} available, {} updated, {} unhealthy (template {})",
        document.pool,
        status.phase,
        status.ready_replicas,
        document.spec.replicas,
        status.available_replicas,
        status.updated_replicas,
        status.unhealthy_replicas,
        document.spec.template_hash
    )];
    if !status.conditions.is_empty() {
        let conditions: Vec<String> = status
            .conditions
            .iter()
            .map(|c| format!("{}={} ({})", c.type_, c.status, c.reason))
            .collect();
        lines.push(format!("  conditions  {}", conditions.join(", ")));
        for condition in status.conditions.iter().filter(|c| !c.message.is_empty()) {
            lines.push(format!(
                "              {}: {}",
                condition.type_, condition.message
            ));
        }
    }
    if let Some(window) = &status.maintenance {
        lines.push(format!("  window      {window}"));
    }
    if let Some(image) = &status.image {
        lines.push(format!("  image       {}", image.message));
    }
    let observed = status
        .observed_at
        .as_deref()
        .and_then(|at| DateTime::parse_from_rfc3339(at).ok())
        .map_or(0, |at| at.timestamp());
    if !status.evictions.is_empty() {
        let zones: Vec<String> = status
            .evictions
            .iter()
            .map(|(zone, count)| format!("zone {zone}: {count}"))
            .collect();
        lines.push(format!("  evicted     {} (Spot)", zones.join(", ")));
    }
    for (index, offering) in status.unavailable_offerings.iter().enumerate() {
        let label = if index == 0 { "set aside" } else { "" };
        lines.push(format!(
            "  {label:<11} {}",
            exhausted_line(offering, observed)
        ));
    }
    for unhealthy in &status.unhealthy {
        lines.push(format!(
            "  unhealthy   {}: {}",
            unhealthy.machine, unhealthy.reason
        ));
    }
    for action in status.last_actions.iter().rev().take(5).rev() {
        lines.push(format!("  last        {} {}", action.at, action.text));
    }
    lines
}

#[cfg(test)]
mod tests {
    use nodewright_model::pool::Amount;
    use nodewright_model::rollout::{Budget, Counts, MachineView, ObservedMachine, Timings};

    use super::*;

    fn status() -> RolloutStatus {
        RolloutStatus {
            pool: "web".to_owned(),
            template_hash: "abc123".to_owned(),
            previous_template_hash: Some("def456".to_owned()),
            phase: RolloutPhase::Progressing,
            paused_because: None,
            stalled: None,
            holdup: None,
            capacity: None,
            window: None,
            soak: None,
            soaked_through: 0,
            desired: 6,
            counts: Counts {
                total: 8,
                updated: 4,
                ready: 6,
                available: 6,
                old: 2,
                creating: 1,
                deleting: 1,
                unhealthy: 0,
                updated_available: 3,
            },
            strategy: StrategyView {
                max_surge: Amount::Percent(25),
                max_unavailable: Amount::Count(0),
                budget: Budget {
                    surge: 2,
                    unavailable: 0,
                },
            },
            canary: None,
            approved_by: None,
            failures_counted: 0,
            max_failures: 3,
            failures: Vec::new(),
            held: Vec::new(),
            exhausted: Vec::new(),
            retries: Vec::new(),
            drain_stamps: Some(nodewright_model::rollout::DrainStamps {
                pending: 1,
                restamped: 2,
                kept_edits: std::collections::BTreeMap::from([(
                    "web-new1".to_owned(),
                    vec!["timeout".to_owned()],
                )]),
                failures: std::collections::BTreeMap::new(),
            }),
            in_flight: vec![
                InFlight {
                    machine: "web-ab12c".to_owned(),
                    kind: ChildKind::Create,
                    workflow_id: "create/dev/web-ab12c".to_owned(),
                    started_at: 1000,
                    zone: Some("3".to_owned()),
                    run_id: None,
                    capacity_type: None,
                },
                InFlight {
                    machine: "web-x9z8y".to_owned(),
                    kind: ChildKind::Delete,
                    workflow_id: "delete/dev/web-x9z8y".to_owned(),
                    started_at: 1010,
                    zone: None,
                    run_id: None,
                    capacity_type: None,
                },
            ],
            machines: vec![MachineView {
                name: "web-ab12c".to_owned(),
                template_hash: "abc123".to_owned(),
                updated: true,
                health: Health::NotReady { since: 1000 },
                activity: Activity::Creating,
                zone: Some("3".to_owned()),
                available_in: None,
            }],
            zones: std::collections::BTreeMap::from([
                ("1".to_owned(), 3),
                ("2".to_owned(), 2),
                ("3".to_owned(), 3),
            ]),
            created: 3,
            deleted: 2,
            started_at: 500,
            last_progress_at: 900,
            timings: Timings::default(),
            estimated_seconds_left: Some(150),
            continuation: 0,
            summary: None,
        }
    }

    #[test]
    fn spans_are_short() {
        for (seconds, text) in [
            (0, "0s"),
            (59, "59s"),
            (60, "1m"),
            (150, "2m"),
            (3600, "1h"),
            (7500, "2h05m"),
            (86_400, "1d"),
            (97_200, "1d3h"),
        ] {
            assert_eq!(span(seconds), text, "{seconds}");
        }
    }

    #[test]
    fn the_full_status_lists_children_failures_and_machines() {
        let mut status = status();
        status.failures.push(ChildFailure {
            machine: "web-q2w4e".to_owned(),
            kind: ChildKind::Create,
            workflow_id: "create/dev/web-q2w4e".to_owned(),
            reason: "AllocationFailed".to_owned(),
            at: 900,
        });
        status.failures_counted = 1;
        status.exhausted = vec![
            Exhausted {
                vm_size: "Standard_D2s_v5".to_owned(),
                zone: "2".to_owned(),
                code: "ZonalAllocationFailed".to_owned(),
                until: 1162,
                capacity_type: None,
            },
            Exhausted {
                vm_size: "Standard_D2s_v5".to_owned(),
                zone: "1".to_owned(),
                code: "AllocationFailed".to_owned(),
                until: 1000,
                capacity_type: None,
            },
        ];
        status.retries = vec![
            DeleteRetry {
                machine: "web-old1".to_owned(),
                failures: 2,
                last_at: 1000,
                reason: "its delete failed: VM delete ended Failed".to_owned(),
                left_alone: false,
            },
            DeleteRetry {
                machine: "web-new9".to_owned(),
                failures: 0,
                last_at: 1000,
                reason: "drained by someone else".to_owned(),
                left_alone: true,
            },
        ];
        let lines = status_lines(&status, 1042);
        let text = lines.join("\n");
        assert!(
            text.contains("  stranded     web-old1 (its delete failed: VM delete ended Failed; 2 failed deletes); deleted again in 18s\n               web-new9: drained by someone else"),
            "{text}"
        );
        assert!(
            text.contains("  template     abc123 (was def456)"),
            "{text}"
        );
        assert!(
            text.contains("  strategy     maxSurge 25%, maxUnavailable 0 (up to 2 machines above replicas, 0 below)"),
            "{text}"
        );
        assert!(
            text.contains(
                "  in flight    create web-ab12c                create/dev/web-ab12c  42s ago in zone 3"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "               create web-q2w4e (create/dev/web-q2w4e): AllocationFailed"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "  exhausted    zone 2 for Standard_D2s_v5 (ZonalAllocationFailed) until 1970-01-01T00:19:22Z (2m left)\n               zone 1 for Standard_D2s_v5 (AllocationFailed) until 1970-01-01T00:16:40Z (over)"
            ),
            "{text}"
        );
        assert!(text.contains("  time left    ~2m"), "{text}");
        assert!(
            text.contains("  zones        zone 1: 3, zone 2: 2, zone 3: 3"),
            "{text}"
        );
        assert!(
            text.contains("  drain        restamped 2 (1 pending); kept an operator's edits: web-new1 (timeout)\n"),
            "{text}"
        );
        let machine = lines.last().map(String::as_str).unwrap_or_default();
        assert_eq!(
            machine.split_whitespace().collect::<Vec<_>>(),
            [
                "web-ab12c",
                "abc123",
                "yes",
                "NotReady",
                "for",
                "42s",
                "creating"
            ]
        );
    }

    #[test]
    fn a_machine_warming_up_shows_when_it_counts_available_and_why_the_rollout_waits() {
        let mut status = status();
        status.holdup = Some(Holdup::Budget);
        let before = status_lines(&status, 1100);
        assert!(
            before.iter().any(|l| l
                == "  waiting      the budget is used up: new machines must become Ready before more old ones can go"),
            "{before:#?}"
        );
        status.machines.push(MachineView {
            name: "web-n3w00".to_owned(),
            template_hash: "abc123".to_owned(),
            updated: true,
            health: Health::Ready,
            activity: Activity::Idle,
            zone: Some("1".to_owned()),
            available_in: Some(25),
        });
        let lines = status_lines(&status, 1100);
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("  web-n3w00") && l.contains("Ready (available in 25s)")),
            "{lines:#?}"
        );
        assert!(
            lines.iter().any(|l| l
                == "  waiting      the budget is used up: 1 new machine is Ready but not yet for minReadySeconds (the first counts available in 25s) before more old ones can go"),
            "{lines:#?}"
        );
    }

    #[test]
    fn held_machines_are_listed_with_their_marks() {
        let mut status = status();
        status.holdup = Some(Holdup::DoNotDisrupt);
        status.held.push(nodewright_model::rollout::HeldMachine {
            machine: "web-zz9yy".to_owned(),
            reason: "pod shop/db-0 (karpenter.sh/do-not-disrupt)".to_owned(),
            since: 942,
            recheck_at: 1072,
            after_failed_delete: false,
        });
        status.held.push(nodewright_model::rollout::HeldMachine {
            machine: "web-zz9yz".to_owned(),
            reason: "its delete failed: a hook refused (1 failed delete); not chosen again until its back-off of 30s has passed".to_owned(),
            since: 1022,
            recheck_at: 1052,
            after_failed_delete: true,
        });
        let text = status_lines(&status, 1042).join("\n");
        assert!(
            text.contains("  held         web-zz9yy since 1m ago: do not disrupt: pod shop/db-0 (karpenter.sh/do-not-disrupt)"),
            "{text}"
        );
        assert!(
            text.contains("               web-zz9yz since 20s ago: its delete failed: a hook refused (1 failed delete); not chosen again until its back-off of 30s has passed; chosen again in 10s"),
            "{text}"
        );
        assert!(
            text.contains("  waiting      the machines left to replace carry do-not-disrupt marks"),
            "{text}"
        );
    }

    #[test]
    fn a_pool_report_shows_machines_and_templates() {
        let machine = |name: &str, template: &str, health, created_at| ObservedMachine {
            name: name.to_owned(),
            template_hash: template.to_owned(),
            health,
            created_at,
            activity: Activity::Idle,
            tainted_outdated: false,
            zone: None,
            ready_since: 0,
        };
        let report = PoolReport {
            pool: "web".to_owned(),
            machines: vec![
                machine("web-aaaaa", "abc123", Health::Ready, 0),
                machine("web-bbbbb", "def456", Health::Failed, 7000),
                machine(
                    "web-ccccc",
                    "abc123",
                    Health::NotReady { since: 7170 },
                    7100,
                ),
            ],
            observed_at: 7200,
            revisions: None,
        };
        let lines = report_lines(&report, "dev");
        assert_eq!(
            lines[0],
            "pool web: 3 machines, 1 Ready (observed 1970-01-01T02:00:00Z)"
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["web-aaaaa", "abc123", "Ready", "idle", "2h"]
        );
        assert_eq!(
            lines[4].split_whitespace().collect::<Vec<_>>(),
            [
                "web-ccccc",
                "abc123",
                "NotReady",
                "for",
                "30s",
                "idle",
                "1m"
            ]
        );
        assert_eq!(lines[5], "  templates    abc123 ×2, def456 ×1");
        let empty = PoolReport {
            machines: Vec::new(),
            ..report
        };
        assert_eq!(
            report_lines(&empty, "dev"),
            ["pool web has no machines in cluster dev (observed 1970-01-01T02:00:00Z)"]
        );
    }
}
