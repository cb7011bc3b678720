//! Tests of [`conditions`] and [`push_action`].

use super::*;
use crate::controller::decide::{Allowance, Counts, Victim, VictimReason};

const EARLIER: &str = "2026-11-27T22:00:00Z";
const NOW: &str = "2026-11-27T23:00:00Z";

fn decision(available: u32, allowed: bool) -> Decision {
    Decision {
        create: 0,
        delete: Vec::new(),
        remediate: Vec::new(),
        remediations: Vec::new(),
        start_rollout: false,
        unhealthy: Vec::new(),
        remediation_allowed: Allowance {
            allowed,
            window_closed: false,
            message: "m".to_owned(),
        },
        counts: Counts {
            replicas: 3,
            ready: available,
            available,
            updated: 3,
            unhealthy: 0,
        },
        recheck_at: None,
        held: None,
    }
}

/// (type, status, reason, lastTransitionTime) of each condition.
fn shown(conditions: &[Condition]) -> Vec<(&str, &str, &str, &str)> {
    conditions
        .iter()
        .map(|c| {
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_str(),
                c.last_transition_time.as_str(),
            )
        })
        .collect()
}

#[test]
fn a_steady_pool_is_available_not_progressing_and_may_remediate() {
    let conditions = conditions(&[], &decision(3, true), Progress::default(), 0, 3, NOW);
    assert_eq!(
        shown(&conditions),
        [
            ("Available", "True", "MinimumReplicasAvailable", NOW),
            ("Progressing", "False", "Steady", NOW),
            ("RemediationAllowed", "True", "WithinMaxUnhealthy", NOW),
        ]
    );
    assert_eq!(
        conditions[0].message,
        "3 of 3 machines available, at least 3 needed (replicas 3 minus maxUnavailable 0)"
    );
}

#[test]
fn keeps_the_transition_time_of_a_status_that_did_not_change() {
    let before = conditions(&[], &decision(3, true), Progress::default(), 0, 3, EARLIER);
    let mut scaling = decision(2, false);
    scaling.create = 1;
    let after = conditions(&before, &scaling, Progress::default(), 1, 3, NOW);
    assert_eq!(
        shown(&after),
        [
            ("Available", "True", "MinimumReplicasAvailable", EARLIER),
            ("Progressing", "True", "ScalingUp", NOW),
            ("RemediationAllowed", "False", "TooManyUnhealthy", NOW),
        ]
    );
    let unavailable = conditions(
        &after,
        &decision(1, false),
        Progress::default(),
        1,
        3,
        "later",
    );
    assert_eq!(
        shown(&unavailable)[0],
        ("Available", "False", "MinimumReplicasUnavailable", "later")
    );
    assert_eq!(shown(&unavailable)[2].3, NOW, "still False since NOW");
}

#[test]
fn progressing_names_what_is_in_progress_first_deleting_the_pool() {
    let mut deleting = decision(3, true);
    deleting.delete.push(Victim {
        name: "p-a".to_owned(),
        reason: VictimReason::ScaleDown,
    });
    let table = [
        (
            Progress {
                deleting_pool: true,
                rolling_out: true,
                ..Progress::default()
            },
            decision(3, true),
            "Deleting",
        ),
        (
            Progress {
                rolling_out: true,
                creating: 1,
                ..Progress::default()
            },
            decision(3, true),
            "RollingOut",
        ),
        (
            Progress {
                creating: 1,
                ..Progress::default()
            },
            deleting.clone(),
            "ScalingUp",
        ),
        (Progress::default(), deleting, "ScalingDown"),
        (
            Progress {
                remediating: 1,
                ..Progress::default()
            },
            decision(3, true),
            "Remediating",
        ),
    ];
    for (progress, decision, reason) in table {
        let conditions = conditions(&[], &decision, progress, 0, 3, NOW);
        assert_eq!(
            (conditions[1].status.as_str(), conditions[1].reason.as_str()),
            ("True", reason),
            "{progress:?}"
        );
    }
    let mut held = decision(3, true);
    held.held = Some("no VM listed".to_owned());
    let conditions = conditions(&[], &held, Progress::default(), 0, 3, NOW);
    assert_eq!(
        (
            conditions[1].status.as_str(),
            conditions[1].reason.as_str(),
            conditions[1].message.as_str()
        ),
        ("False", "Held", "no VM listed")
    );
}

#[test]
fn keeps_the_last_twenty_actions_newest_last() {
    let mut actions = Vec::new();
    for n in 0..25 {
        push_action(&mut actions, &format!("t{n}"), format!("action {n}"));
    }
    assert_eq!(actions.len(), MAX_LAST_ACTIONS);
    assert_eq!(
        (actions[0].at.as_str(), actions[19].text.as_str()),
        ("t5", "action 24")
    );
}

#[test]
fn the_document_is_camel_case_json() {
    let document = PoolStatusDocument {
        pool: "workers".to_owned(),
        spec: SpecView {
            replicas: 3,
            template_hash: "abc".to_owned(),
            paused: false,
        },
        status: PoolState {
            replicas: 3,
            ready_replicas: 3,
            phase: "Active".to_owned(),
            conditions: conditions(&[], &decision(3, true), Progress::default(), 0, 3, NOW),
            ..PoolState::default()
        },
    };
    let json = serde_json::to_value(&document).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(json["spec"]["templateHash"], "abc");
    assert_eq!(json["status"]["readyReplicas"], 3);
    assert_eq!(json["status"]["unhealthyReplicas"], 0);
    assert_eq!(json["status"]["conditions"][0]["type"], "Available");
    assert_eq!(json["status"]["conditions"][0]["lastTransitionTime"], NOW);
    assert!(json["status"].get("observedAt").is_none());
    let back: PoolStatusDocument = serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, document);
}

#[test]
fn a_closed_maintenance_window_holds_remediation_with_its_own_reason() {
    let mut held = decision(3, false);
    held.remediation_allowed.window_closed = true;
    let conditions = conditions(&[], &held, Progress::default(), 0, 3, NOW);
    assert_eq!(
        shown(&conditions)[2],
        (
            "RemediationAllowed",
            "False",
            "MaintenanceWindowClosed",
            NOW
        )
    );
}
