//! The safety decisions around the classifier: the plausibility brake (a table and its
//! properties: never more than the share of machines without approval, no Node matched always
//! brakes), approvals bound to a run and a plan, the fresh plan after waiting, and the paging
//! guard.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::ClusterName;
use crate::limits;
use crate::ownership::{TAG_CLUSTER, TAG_CREATED, TAG_MACHINE, TAG_POOL};

const NOW: i64 = 1_800_000_000;
const HOUR: i64 = 3600;
const PREFIX: &str =
    "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/";

fn prod() -> ClusterName {
    ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"))
}

fn policy(remediate: bool) -> SweepPolicy {
    SweepPolicy {
        cluster: prod(),
        vm_id_prefix: PREFIX.to_owned(),
        grace: Duration::from_secs(20 * 60),
        health_timeout: Duration::from_secs(10 * 60),
        remediate,
        now: NOW,
        check_names: true,
        clear_stale_taints: true,
    }
}

/// A VM of this cluster, two hours old.
fn vm(name: &str) -> ArmResource {
    ArmResource {
        kind: ResourceKind::Vm,
        name: name.to_owned(),
        tags: BTreeMap::from([
            (TAG_CLUSTER.to_owned(), "prod".to_owned()),
            (TAG_POOL.to_owned(), "web".to_owned()),
            (TAG_MACHINE.to_owned(), name.to_owned()),
            (TAG_CREATED.to_owned(), "2026-01-01T00:00:00Z".to_owned()),
        ]),
        provisioning_state: "Succeeded".to_owned(),
        attached_to: None,
        created_at: Some(NOW - 2 * HOUR),
        creation_deadline: Some(NOW - 2 * HOUR + 20 * 60),
        creation_ended: None,
    }
}

/// The Node of VM `name`: Ready, or NotReady for two hours.
fn node(name: &str, ready: bool) -> NodeRecord {
    NodeRecord {
        name: name.to_owned(),
        uid: format!("uid-{name}"),
        provider_id: Some(format!("azure://{PREFIX}{name}")),
        machine: Some(name.to_owned()),
        pool: Some("web".to_owned()),
        created_at: NOW - 2 * HOUR,
        tainted_outdated: false,
        readiness: if ready {
            NodeReadiness::Ready
        } else {
            NodeReadiness::NotReady {
                since: NOW - 2 * HOUR,
                last_heartbeat: NOW - 2 * HOUR,
            }
        },
    }
}

/// A cluster of `machines` VMs of which the first `with_node` have a Node, the first
/// `not_ready` of those NotReady.
fn cluster(machines: usize, with_node: usize, not_ready: usize) -> Inventory {
    let names: Vec<String> = (0..machines).map(|i| format!("web-{i:05}")).collect();
    Inventory {
        resources: names.iter().map(|n| vm(n)).collect(),
        nodes: names
            .iter()
            .take(with_node)
            .enumerate()
            .map(|(i, n)| node(n, i >= not_ready))
            .collect(),
        ..Inventory::default()
    }
}

/// The brake's reason for `inventory`, `None` when the plan goes on.
fn brake_of(inventory: &Inventory, remediate: bool, percent: u32) -> Option<BrakeReason> {
    let policy = policy(remediate);
    let decisions = classify(inventory, &policy);
    match decide_brake(inventory, &policy, &decisions, percent) {
        BrakeDecision::Proceed(_) => None,
        BrakeDecision::Hold(brake) => Some(brake.reason),
    }
}

#[test]
fn the_brake_holds_implausible_plans_and_lets_plausible_ones_go() {
    use BrakeReason::*;
    // (case, machines, with a Node, of those NotReady, remediate, expected)
    let table = [
        (
            "an empty Node list sees every VM orphaned",
            10,
            0,
            0,
            false,
            Some(NoNodeMatched),
        ),
        (
            "one VM, no Node: no match at all",
            1,
            0,
            0,
            false,
            Some(NoNodeMatched),
        ),
        ("one orphan among ten machines", 10, 9, 0, false, None),
        ("three orphans: at the minimum count", 5, 2, 0, false, None),
        (
            "four orphans of five: above the minimum and the share",
            5,
            1,
            0,
            false,
            Some(TooManyRemovals),
        ),
        ("twenty of a hundred: at the share", 100, 80, 0, false, None),
        (
            "twenty-one of a hundred: past the share",
            100,
            79,
            0,
            false,
            Some(TooManyRemovals),
        ),
        (
            "every machine matched, nothing planned",
            10,
            10,
            0,
            false,
            None,
        ),
        ("no VM at all, nothing planned", 0, 0, 0, false, None),
        ("two NotReady of ten replaced", 10, 10, 2, true, None),
        (
            "two NotReady of ten reported, not replaced",
            10,
            10,
            2,
            false,
            None,
        ),
        (
            "six NotReady of ten: cluster-wide, remediation braked",
            10,
            10,
            6,
            true,
            Some(TooManyRemovals),
        ),
        (
            "six NotReady of forty: remediation within share",
            40,
            40,
            6,
            true,
            None,
        ),
        (
            "nine NotReady of forty replaced: more than the share",
            40,
            40,
            9,
            true,
            Some(TooManyRemovals),
        ),
        (
            "nine NotReady of forty only reported",
            40,
            40,
            9,
            false,
            None,
        ),
    ];
    for (case, machines, with_node, not_ready, remediate, expected) in table {
        let inventory = cluster(machines, with_node, not_ready);
        assert_eq!(brake_of(&inventory, remediate, 20), expected, "{case}");
    }
}

#[test]
fn a_cluster_wide_not_ready_holds_even_the_replacements_within_the_share() {
    // Forty machines: two NotReady for hours (replaced), eight more NotReady for a minute
    // (inside the health timeout, not replaced): ten NotReady of forty is past 20% (8).
    let mut inventory = cluster(40, 40, 2);
    for node in inventory.nodes.iter_mut().skip(2).take(8) {
        node.readiness = NodeReadiness::NotReady {
            since: NOW - 60,
            last_heartbeat: NOW - 60,
        };
    }
    assert_eq!(
        brake_of(&inventory, true, 20),
        Some(BrakeReason::ClusterWideNotReady)
    );
    assert_eq!(
        brake_of(&inventory, false, 20),
        None,
        "reports hold nothing"
    );
    assert_eq!(brake_of(&inventory, true, 25), None, "25% of 40 allows 10");
}

#[test]
fn the_share_is_the_requests_percent() {
    // 40 machines, 9 NotReady and replaced: 25% allows 10, 22% allows 8.
    let inventory = cluster(40, 40, 9);
    assert_eq!(brake_of(&inventory, true, 25), None, "25% of 40 allows 10");
    assert_eq!(
        brake_of(&inventory, true, 22),
        Some(BrakeReason::TooManyRemovals)
    );
}

#[test]
fn the_brake_counts_what_it_decided_on() {
    let inventory = cluster(5, 1, 0);
    let policy = policy(false);
    let decisions = classify(&inventory, &policy);
    let BrakeDecision::Hold(brake) = decide_brake(&inventory, &policy, &decisions, 20) else {
        panic!("four orphans of five must brake");
    };
    assert_eq!(
        brake.counts,
        BrakeCounts {
            machines: 5,
            matched: 1,
            not_ready: 0,
            planned: 4,
            machine_removals: 4,
            replacements: 0,
            allowed: 3,
        }
    );
    assert_eq!(
        brake.message,
        "4 of this cluster's 5 machines would be removed, more than 20% (at most 3 without an approval)"
    );
}

#[test]
fn another_clusters_vms_and_nodes_are_not_this_clusters_machines() {
    let mut inventory = cluster(2, 0, 0);
    let mut foreign = vm("web-other");
    foreign
        .tags
        .insert(TAG_CLUSTER.to_owned(), "staging".to_owned());
    inventory.resources.push(foreign);
    inventory.nodes.push(node("web-other", true));
    assert_eq!(
        brake_of(&inventory, false, 20),
        Some(BrakeReason::NoNodeMatched),
        "a Node of another cluster's VM is no match"
    );
}

#[test]
fn the_allowed_share_never_falls_below_the_minimum_and_never_overflows() {
    assert_eq!(brake::allowed(0, 20), 3);
    assert_eq!(brake::allowed(10, 20), 3);
    assert_eq!(brake::allowed(100, 20), 20);
    assert_eq!(brake::allowed(u32::MAX, 100), u32::MAX);
}

#[test]
fn the_brake_share_comes_from_the_request_within_its_maximum() {
    let mut request = SweepRequest::new(prod());
    assert_eq!(request.brake_share(), 20);
    request.brake_percent = 1000;
    assert_eq!(request.brake_share(), limits::MAX_SWEEP_BRAKE_PERCENT);
    let parsed: SweepRequest =
        serde_json::from_str(r#"{"cluster":"prod"}"#).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parsed.brake_percent, 20);
}

proptest! {
    #[test]
    fn never_more_than_the_share_of_machines_without_approval(
        machines in 0usize..60,
        with_node in 0usize..60,
        not_ready in 0usize..60,
        remediate in any::<bool>(),
        percent in 0u32..=50,
    ) {
        let with_node = with_node.min(machines);
        let inventory = cluster(machines, with_node, not_ready.min(with_node));
        let policy = policy(remediate);
        let decisions = classify(&inventory, &policy);
        if let BrakeDecision::Proceed(counts) = decide_brake(&inventory, &policy, &decisions, percent) {
            let removed = decisions
                .iter()
                .filter(|d| d.action.removes() && d.kind == SubjectKind::Vm)
                .count();
            let share = machines * percent as usize / 100;
            prop_assert!(removed <= share.max(brake::BRAKE_MIN_COUNT as usize));
            prop_assert_eq!(counts.machine_removals as usize, removed);
        }
    }

    #[test]
    fn no_node_matched_always_brakes_a_plan_that_removes_something(
        machines in 1usize..40,
        percent in 0u32..=50,
        remediate in any::<bool>(),
    ) {
        let inventory = cluster(machines, 0, 0);
        let policy = policy(remediate);
        let decisions = classify(&inventory, &policy);
        let decided = decide_brake(&inventory, &policy, &decisions, percent);
        let held = matches!(
            &decided,
            BrakeDecision::Hold(brake) if brake.reason == BrakeReason::NoNodeMatched
        );
        prop_assert!(held);
    }
}

fn approval(run_id: &str, planned: u32) -> ApproveSignal {
    ApproveSignal::Bound(Approval {
        run_id: run_id.to_owned(),
        planned,
        by: "ana@cli".to_owned(),
    })
}

/// The reason an approval is refused with, `None` when accepted.
fn refusal(waiting: Option<u32>, signal: &ApproveSignal) -> Option<String> {
    match decide_approval("run-1", waiting, signal) {
        ApprovalVerdict::Accept { by } => {
            assert_eq!(by, "ana@cli");
            None
        }
        ApprovalVerdict::Refuse(refused) => Some(refused.reason),
    }
}

#[test]
fn an_approval_counts_only_for_its_run_its_plan_and_while_the_run_waits() {
    assert_eq!(refusal(Some(12), &approval("run-1", 12)), None);
    let table = [
        (
            Some(12),
            approval("run-0", 12),
            "it approves run \"run-0\", not this run run-1",
        ),
        (
            Some(12),
            approval("run-1", 11),
            "it approves 11 planned removals, but this run's plan holds 12",
        ),
        (
            None,
            approval("run-1", 12),
            "this run was not waiting for approval when it came",
        ),
        (
            Some(12),
            ApproveSignal::Unbound(serde_json::json!("ana@cli")),
            "the approval names no run and no planned count",
        ),
        (
            Some(12),
            ApproveSignal::Unbound(serde_json::json!({"weird": [1]})),
            "the approval names no run and no planned count",
        ),
    ];
    for (waiting, signal, expected) in table {
        let reason = refusal(waiting, &signal).unwrap_or_default();
        assert!(reason.starts_with(expected), "{reason}");
    }
}

#[test]
fn a_bare_name_from_an_older_cli_reads_as_an_unbound_approval() {
    let signal: ApproveSignal =
        serde_json::from_str(r#""ana@cli""#).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(signal, ApproveSignal::Unbound(serde_json::json!("ana@cli")));
    let signal: ApproveSignal = serde_json::from_str(r#"{"runId":"r","planned":3,"by":"b"}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        signal,
        ApproveSignal::Bound(Approval {
            run_id: "r".to_owned(),
            planned: 3,
            by: "b".to_owned()
        })
    );
}

#[test]
fn refusals_keep_the_newest_and_long_names_are_cut() {
    let mut list = Vec::new();
    for i in 0..30 {
        record_refusal(
            &mut list,
            RefusedApproval {
                by: format!("user{i}"),
                reason: "r".to_owned(),
            },
        );
    }
    assert_eq!(list.len(), approval::MAX_REFUSED_APPROVALS);
    assert_eq!(list.last().map(|r| r.by.as_str()), Some("user29"));
    let long = ApproveSignal::Bound(Approval {
        run_id: "x".repeat(10_000),
        planned: 1,
        by: "y".repeat(10_000),
    });
    let ApprovalVerdict::Refuse(refused) = decide_approval("run-1", Some(1), &long) else {
        panic!("another run's approval must be refused");
    };
    assert_eq!(refused.by.len(), approval::MAX_APPROVAL_TEXT);
    assert!(refused.reason.len() < approval::MAX_APPROVAL_TEXT + 200);
}

#[test]
fn a_removal_that_changed_while_waiting_is_kept_and_the_rest_go_on() {
    // Planned: three orphan VMs and an orphan Node.
    let mut before = cluster(5, 2, 0);
    let mut orphan_node = node("web-gone1", false);
    orphan_node.provider_id = Some(format!("azure://{PREFIX}web-gone1"));
    before.nodes.push(orphan_node.clone());
    let policy = policy(false);
    let audit = SweepAudit::of(
        prod(),
        "t".to_owned(),
        SweepOutcome::Completed,
        Seen::default(),
        classify(&before, &policy),
    );
    let planned: Vec<String> = audit.removals().map(|e| e.decision.name.clone()).collect();
    assert_eq!(
        planned,
        ["web-00002", "web-00003", "web-00004", "web-gone1"]
    );

    // While waiting: web-00002's Node joined, web-00003 is gone, the Node was recreated.
    let mut after = before.clone();
    after.nodes.push(node("web-00002", true));
    after.resources.retain(|r| r.name != "web-00003");
    after.nodes.retain(|n| n.name != "web-gone1");
    let mut recreated = orphan_node;
    recreated.uid = "uid-new".to_owned();
    after.nodes.push(recreated);
    let changed = changed_while_waiting(&audit.entries, &classify(&after, &policy));
    let reasons: BTreeMap<String, String> = changed
        .iter()
        .map(|(index, outcome)| (audit.entries[*index].decision.name.clone(), outcome.note()))
        .collect();
    assert_eq!(
        reasons,
        BTreeMap::from([
            (
                "web-00002".to_owned(),
                "changed while waiting for approval: now keep by rule healthy (Node web-00002 Ready)"
                    .to_owned()
            ),
            (
                "web-00003".to_owned(),
                "changed while waiting for approval: no longer listed".to_owned()
            ),
            (
                "web-gone1".to_owned(),
                "changed while waiting for approval: node web-gone1 is another object now"
                    .to_owned()
            ),
        ])
    );
    assert!(
        changed
            .iter()
            .all(|(_, outcome)| outcome.word() == "skipped")
    );
}

#[test]
fn an_unchanged_plan_is_acted_on_as_approved() {
    let inventory = cluster(5, 1, 0);
    let policy = policy(false);
    let decisions = classify(&inventory, &policy);
    let audit = SweepAudit::of(
        prod(),
        "t".to_owned(),
        SweepOutcome::Completed,
        Seen::default(),
        decisions.clone(),
    );
    assert!(changed_while_waiting(&audit.entries, &decisions).is_empty());
}

#[test]
fn paging_stops_on_a_repeated_link_and_past_the_maximum() {
    let mut guard = PageGuard::new();
    assert_eq!(
        guard.after_page("VMs", Some("a".to_owned())),
        PageStep::Follow("a".to_owned())
    );
    assert_eq!(
        guard.after_page("VMs", Some("b".to_owned())),
        PageStep::Follow("b".to_owned())
    );
    assert!(matches!(
        guard.after_page("VMs", Some("a".to_owned())),
        PageStep::Stop(reason) if reason.starts_with("listing VMs came back to a page it had read (page 4)")
    ));
    assert_eq!(PageGuard::new().after_page("Nodes", None), PageStep::Done);

    let mut guard = PageGuard::new();
    let mut followed = 0;
    let stopped = loop {
        match guard.after_page("NICs", Some(format!("page-{followed}"))) {
            PageStep::Follow(_) => followed += 1,
            PageStep::Stop(reason) => break reason,
            PageStep::Done => panic!("a page with a next link is not the last"),
        }
    };
    assert_eq!(followed + 1, limits::MAX_SWEEP_LIST_PAGES);
    assert_eq!(
        stopped,
        "listing NICs passed 100 pages, the most a sweep follows: the listing is not trusted"
    );
}
