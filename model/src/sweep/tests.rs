//! The classifier's table (one case per rule, the end-to-end scenario among them) and its
//! properties: whatever the inventory, nothing that is not ours, no disk nodewright did not make,
//! nothing of a machine with a running workflow, nothing kept for debugging (nor the Node of a
//! kept machine), nothing inside grace and nothing whose create may still be running is ever
//! removed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::ClusterName;
use crate::limits::MAX_CREATION_TIMEOUT;
use crate::machine::{nic_name, os_disk_name};
use crate::ownership::{TAG_CLUSTER, TAG_CREATED, TAG_KEPT, TAG_MACHINE, TAG_POOL};

const NOW: i64 = 1_800_000_000;

/// `unwrap` for the fixtures, with the error in the panic.
trait Must<T> {
    fn must(self) -> T;
}

impl<T, E: std::fmt::Debug> Must<T> for Result<T, E> {
    fn must(self) -> T {
        self.unwrap_or_else(|e| panic!("{e:?}"))
    }
}
const HOUR: i64 = 3600;
/// The creation timeout of the fixtures' creates (the default).
const CREATION_TIMEOUT: i64 = 20 * 60;
const PREFIX: &str =
    "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/";

fn prod() -> ClusterName {
    ClusterName::parse("cluster", "prod").must()
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

/// Tags of this cluster's machine `machine` in pool `web`.
fn ours(machine: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (TAG_CLUSTER.to_owned(), "prod".to_owned()),
        (TAG_POOL.to_owned(), "web".to_owned()),
        (TAG_MACHINE.to_owned(), machine.to_owned()),
    ])
}

fn resource(
    kind: ResourceKind,
    name: &str,
    tags: BTreeMap<String, String>,
    age: i64,
) -> ArmResource {
    ArmResource {
        kind,
        name: name.to_owned(),
        tags,
        provisioning_state: "Succeeded".to_owned(),
        attached_to: None,
        created_at: Some(NOW - age),
        creation_deadline: Some(NOW - age + CREATION_TIMEOUT),
        creation_ended: None,
    }
}

fn vm(name: &str, age: i64) -> ArmResource {
    resource(ResourceKind::Vm, name, ours(name), age)
}

fn node(name: &str, vm: &str, readiness: NodeReadiness) -> NodeRecord {
    NodeRecord {
        name: name.to_owned(),
        uid: format!("uid-{name}"),
        provider_id: Some(format!("azure://{PREFIX}{vm}")),
        machine: Some(name.to_owned()),
        pool: Some("web".to_owned()),
        created_at: NOW - 2 * HOUR,
        readiness,
        tainted_outdated: false,
    }
}

fn not_ready(for_secs: i64) -> NodeReadiness {
    NodeReadiness::NotReady {
        since: NOW - for_secs,
        last_heartbeat: NOW - for_secs,
    }
}

fn running(operation: &str, machine: Option<&str>, pool: Option<&str>) -> RunningWorkflow {
    RunningWorkflow {
        workflow_id: format!("{operation}/prod/{}", machine.or(pool).unwrap_or("x")),
        operation: operation.to_owned(),
        machine: machine.map(str::to_owned),
        pool: pool.map(str::to_owned),
    }
}

fn decision_of<'a>(decisions: &'a [Decision], kind: SubjectKind, name: &str) -> &'a Decision {
    decisions
        .iter()
        .find(|d| d.kind == kind && d.name == name)
        .unwrap_or_else(|| panic!("no decision for {kind} {name}"))
}

/// The end-to-end scenario, plus one case for every other rule.
fn scenario() -> Inventory {
    let mut other_cluster = vm("other-vm", 3 * HOUR);
    other_cluster
        .tags
        .insert(TAG_CLUSTER.to_owned(), "staging".to_owned());
    let mut pv_disk = resource(ResourceKind::Disk, "pvc-0a1b", ours("web-aaaaa"), 3 * HOUR);
    pv_disk.tags.remove(TAG_MACHINE);
    let mut volume_tagged_like_os = resource(
        ResourceKind::Disk,
        &os_disk_name("web-vvvvv"),
        ours("web-vvvvv"),
        3 * HOUR,
    );
    volume_tagged_like_os.provisioning_state = "Succeeded".to_owned();
    let mut attached_nic = resource(
        ResourceKind::Nic,
        "web-hhhhh-nic",
        ours("web-hhhhh"),
        3 * HOUR,
    );
    attached_nic.attached_to = Some("web-hhhhh".to_owned());
    let mut deleting = vm("web-ddddd", 3 * HOUR);
    deleting.provisioning_state = "Deleting".to_owned();
    let mut undated = vm("web-nnnnn", 3 * HOUR);
    undated.created_at = None;
    let mut renamed = vm("web-rrrrr", 3 * HOUR);
    renamed
        .tags
        .insert(TAG_MACHINE.to_owned(), "web-sssss".to_owned());
    let mut foreign_node = node("aks-1", "aks-1", not_ready(5 * HOUR));
    foreign_node.provider_id = Some(
        "azure:///subscriptions/s/resourceGroups/other/providers/Microsoft.Compute/virtualMachines/aks-1".to_owned(),
    );
    let mut unlabelled = node("hand-made", "hand-made", not_ready(5 * HOUR));
    unlabelled.machine = None;
    Inventory {
        resources: vec![
            vm("web-ooooo", 2 * HOUR),
            vm("web-yyyyy", 60),
            resource(
                ResourceKind::Nic,
                "web-lllll-nic",
                ours("web-lllll"),
                2 * HOUR,
            ),
            resource(
                ResourceKind::Disk,
                &os_disk_name("web-kkkkk"),
                ours("web-kkkkk"),
                2 * HOUR,
            ),
            other_cluster,
            resource(ResourceKind::Vm, "untagged", BTreeMap::new(), 3 * HOUR),
            pv_disk,
            volume_tagged_like_os,
            vm("web-ccccc", 2 * HOUR),
            vm("web-hhhhh", 3 * HOUR),
            attached_nic,
            vm("web-uuuuu", 3 * HOUR),
            vm("web-ttttt", 3 * HOUR),
            vm("ro-ppppp", 3 * HOUR),
            deleting,
            undated,
            renamed,
        ],
        nodes: vec![
            node("web-gggggg", "web-gggggg", not_ready(HOUR)),
            node("web-hhhhh", "web-hhhhh", NodeReadiness::Ready),
            node("web-uuuuu", "web-uuuuu", not_ready(15 * 60)),
            node("web-ttttt", "web-ttttt", not_ready(5 * 60)),
            {
                let mut rolled = node("ro-ppppp", "ro-ppppp", not_ready(HOUR));
                rolled.pool = Some("ro".to_owned());
                rolled
            },
            node("web-fffff", "web-fffff", NodeReadiness::Ready),
            node("web-qqqqq", "web-qqqqq", not_ready(5 * 60)),
            foreign_node,
            unlabelled,
        ],
        volume_disks: BTreeSet::from([os_disk_name("web-vvvvv")]),
        running: vec![
            running("create", Some("web-ccccc"), Some("web")),
            running("rollout", None, Some("ro")),
        ],
    }
}

#[test]
fn an_unhealthy_machine_of_a_pool_with_a_running_controller_is_left_to_the_controller() {
    let mut inventory = scenario();
    for name in ["ro-ppppp", "web-uuuuu"] {
        if let Some(vm) = inventory.resources.iter_mut().find(|r| r.name == name) {
            vm.tags.insert(TAG_POOL.to_owned(), "kept".to_owned());
        }
    }
    inventory.running.push(running("pool", None, Some("kept")));
    let decisions = classify(&inventory, &policy(true));
    for name in ["ro-ppppp", "web-uuuuu"] {
        let decision = decisions
            .iter()
            .find(|d| d.kind == SubjectKind::Vm && d.name == name)
            .unwrap_or_else(|| panic!("no decision for {name}"));
        assert_eq!(
            (decision.rule, decision.action),
            (Rule::ControllerRunning, Action::Keep),
            "{name}: {}",
            decision.detail
        );
        assert!(
            decision.detail.contains("pool/prod/kept is running"),
            "{}",
            decision.detail
        );
    }
    // Without the controller the same machines are replaced.
    inventory.running.retain(|w| w.operation != "pool");
    let decisions = classify(&inventory, &policy(true));
    let replaced = decisions
        .iter()
        .filter(|d| d.rule == Rule::Unhealthy && d.action == Action::Replace)
        .count();
    assert_eq!(replaced, 2);
}

#[test]
fn every_rule_decides_its_case() {
    let mut inventory = scenario();
    // The rollout's pool tag for ro-ppppp.
    if let Some(vm) = inventory
        .resources
        .iter_mut()
        .find(|r| r.name == "ro-ppppp")
    {
        vm.tags.insert(TAG_POOL.to_owned(), "ro".to_owned());
    }
    let decisions = classify(&inventory, &policy(false));
    assert_eq!(
        decisions.len(),
        inventory.resources.len() + inventory.nodes.len()
    );
    let table = [
        (SubjectKind::Vm, "web-ooooo", Rule::OrphanVm, Action::Delete),
        (
            SubjectKind::Vm,
            "web-yyyyy",
            Rule::InsideGrace,
            Action::Keep,
        ),
        (
            SubjectKind::Nic,
            "web-lllll-nic",
            Rule::OrphanNic,
            Action::Delete,
        ),
        (
            SubjectKind::Disk,
            "web-kkkkk-osdisk",
            Rule::OrphanDisk,
            Action::Delete,
        ),
        (
            SubjectKind::Node,
            "web-gggggg",
            Rule::OrphanNode,
            Action::Delete,
        ),
        (SubjectKind::Vm, "other-vm", Rule::NotOurs, Action::Keep),
        (SubjectKind::Vm, "untagged", Rule::NotOurs, Action::Keep),
        (
            SubjectKind::Disk,
            "pvc-0a1b",
            Rule::NotCreatedByNodewright,
            Action::Keep,
        ),
        (
            SubjectKind::Disk,
            "web-vvvvv-osdisk",
            Rule::BacksVolume,
            Action::Keep,
        ),
        (
            SubjectKind::Vm,
            "web-ccccc",
            Rule::WorkflowRunning,
            Action::Keep,
        ),
        (SubjectKind::Vm, "web-hhhhh", Rule::Healthy, Action::Keep),
        (
            SubjectKind::Nic,
            "web-hhhhh-nic",
            Rule::Attached,
            Action::Keep,
        ),
        (SubjectKind::Node, "web-hhhhh", Rule::VmExists, Action::Keep),
        (
            SubjectKind::Vm,
            "web-uuuuu",
            Rule::Unhealthy,
            Action::Report,
        ),
        (
            SubjectKind::Vm,
            "web-ttttt",
            Rule::NotReadyWithinTimeout,
            Action::Keep,
        ),
        (
            SubjectKind::Vm,
            "ro-ppppp",
            Rule::RolloutRunning,
            Action::Keep,
        ),
        (SubjectKind::Vm, "web-ddddd", Rule::Busy, Action::Keep),
        (
            SubjectKind::Vm,
            "web-nnnnn",
            Rule::NoCreationTime,
            Action::Keep,
        ),
        (
            SubjectKind::Vm,
            "web-rrrrr",
            Rule::TagsDisagree,
            Action::Keep,
        ),
        (
            SubjectKind::Node,
            "web-fffff",
            Rule::NodeStillAlive,
            Action::Keep,
        ),
        (
            SubjectKind::Node,
            "web-qqqqq",
            Rule::NodeStillAlive,
            Action::Keep,
        ),
        (
            SubjectKind::Node,
            "aks-1",
            Rule::NodeNotManaged,
            Action::Keep,
        ),
        (
            SubjectKind::Node,
            "hand-made",
            Rule::NodeNotManaged,
            Action::Keep,
        ),
    ];
    for (kind, name, rule, action) in table {
        let decision = decision_of(&decisions, kind, name);
        assert_eq!(
            (decision.rule, decision.action),
            (rule, action),
            "{kind} {name}: {}",
            decision.detail
        );
    }
    let orphan_vm = decision_of(&decisions, SubjectKind::Vm, "web-ooooo");
    assert_eq!(orphan_vm.detail, "no Node, no workflow, created 2h ago");
    let young = decision_of(&decisions, SubjectKind::Vm, "web-yyyyy");
    assert_eq!(young.detail, "created 1m ago (grace 20m)");
    let running = decision_of(&decisions, SubjectKind::Vm, "web-ccccc");
    assert_eq!(running.detail, "create/prod/web-ccccc is running");
    let gone = decision_of(&decisions, SubjectKind::Node, "web-gggggg");
    assert_eq!(gone.uid.as_deref(), Some("uid-web-gggggg"));
    assert_eq!(
        gone.detail,
        "VM web-gggggg does not exist; last heartbeat 1h ago"
    );
}

#[test]
fn unhealthy_machines_are_replaced_only_when_remediating() {
    let decisions = classify(&scenario(), &policy(true));
    let unhealthy = decision_of(&decisions, SubjectKind::Vm, "web-uuuuu");
    assert_eq!(
        (unhealthy.rule, unhealthy.action),
        (Rule::Unhealthy, Action::Replace)
    );
    assert_eq!(unhealthy.pool.as_deref(), Some("web"));
    assert_eq!(
        unhealthy.detail,
        "Node web-uuuuu NotReady for 15m (health timeout 10m)"
    );
}

/// A machine's resources kept for debugging, and resources whose create may still be running or
/// has just ended: (resource, its Node if any, rule, action, detail).
#[test]
fn kept_machines_and_creates_that_may_still_run_are_kept() {
    let marker = "2027-01-15T08:00:00Z: create failed at step register-node";
    let kept = |mut resource: ArmResource| {
        resource.tags.insert(TAG_KEPT.to_owned(), marker.to_owned());
        resource
    };
    // Kept: would be an orphan VM, an unhealthy machine to replace, an orphan NIC.
    let kept_vm = kept(vm("web-kkkk1", 3 * HOUR));
    let kept_unhealthy = kept(vm("web-kkkk2", 3 * HOUR));
    let kept_nic = kept(resource(
        ResourceKind::Nic,
        "web-kkkk3-nic",
        ours("web-kkkk3"),
        3 * HOUR,
    ));
    let mut kept_busy = kept(vm("web-kkkk4", 3 * HOUR));
    kept_busy.provisioning_state = "Updating".to_owned();
    // Created 3h ago, its create ended (kept, then released) 5 minutes ago.
    let mut released = vm("web-rel01", 3 * HOUR);
    released.creation_ended = Some(NOW - 5 * 60);
    // Its create ended 30 minutes ago: the age counts from there.
    let mut ended = vm("web-end01", 3 * HOUR);
    ended.creation_ended = Some(NOW - 30 * 60);
    // Created 40 minutes ago by a create with a 2h timeout: may still be running.
    let mut long_create = vm("web-long1", 40 * 60);
    long_create.creation_deadline = Some(NOW - 40 * 60 + 2 * HOUR);
    // No deadline tag (made before nodewright wrote one): the longest creation timeout.
    let mut untagged_recent = vm("web-old01", HOUR);
    untagged_recent.creation_deadline = None;
    let mut untagged_old = vm("web-old02", 3 * HOUR);
    untagged_old.creation_deadline = None;
    // A deadline before the creation is unreadable: the longest creation timeout again.
    let mut garbled = vm("web-gbl01", HOUR);
    garbled.creation_deadline = Some(NOW - 2 * HOUR);
    // A Node whose VM is gone, silent for hours, of a machine whose NIC is kept.
    let kept_nic_node = node("web-kkkk3", "web-kkkk3", not_ready(5 * HOUR));
    // Not marked itself, but of a machine whose VM is: kept with it.
    let sibling_nic = resource(
        ResourceKind::Nic,
        "web-kkkk1-nic",
        ours("web-kkkk1"),
        3 * HOUR,
    );
    // Kept but another cluster's: not ours first.
    let mut foreign_kept = kept(vm("web-frgn1", 3 * HOUR));
    foreign_kept
        .tags
        .insert(TAG_CLUSTER.to_owned(), "staging".to_owned());
    let inventory = Inventory {
        resources: vec![
            kept_vm,
            kept_unhealthy,
            kept_nic,
            kept_busy,
            released,
            ended,
            long_create,
            untagged_recent,
            untagged_old,
            garbled,
            foreign_kept,
            sibling_nic,
        ],
        nodes: vec![
            node("web-kkkk2", "web-kkkk2", not_ready(5 * HOUR)),
            kept_nic_node,
        ],
        ..Inventory::default()
    };
    let kept_detail = format!("kept for debugging: {marker}");
    let table: [(SubjectKind, &str, Rule, Action, &str); 14] = [
        (
            SubjectKind::Nic,
            "web-kkkk1-nic",
            Rule::Kept,
            Action::Keep,
            "machine web-kkkk1 is kept for debugging (nodewright.io-kept on its resources)",
        ),
        (
            SubjectKind::Vm,
            "web-kkkk1",
            Rule::Kept,
            Action::Keep,
            &kept_detail,
        ),
        (
            SubjectKind::Vm,
            "web-kkkk2",
            Rule::Kept,
            Action::Keep,
            &kept_detail,
        ),
        (
            SubjectKind::Nic,
            "web-kkkk3-nic",
            Rule::Kept,
            Action::Keep,
            &kept_detail,
        ),
        (
            SubjectKind::Vm,
            "web-kkkk4",
            Rule::Kept,
            Action::Keep,
            &kept_detail,
        ),
        (
            SubjectKind::Vm,
            "web-rel01",
            Rule::InsideGrace,
            Action::Keep,
            "its create ended 5m ago (grace 20m)",
        ),
        (
            SubjectKind::Vm,
            "web-end01",
            Rule::OrphanVm,
            Action::Delete,
            "no Node, no workflow, its create ended 30m ago",
        ),
        (
            SubjectKind::Vm,
            "web-long1",
            Rule::CreateMayRun,
            Action::Keep,
            "its create may still be running: its deadline is 1h 20m from now",
        ),
        (
            SubjectKind::Vm,
            "web-old01",
            Rule::CreateMayRun,
            Action::Keep,
            "its create may still be running: without a creation-deadline tag, until the longest creation timeout (2h) after its creation, 1h from now",
        ),
        (
            SubjectKind::Vm,
            "web-old02",
            Rule::OrphanVm,
            Action::Delete,
            "no Node, no workflow, created 3h ago",
        ),
        (
            SubjectKind::Vm,
            "web-gbl01",
            Rule::CreateMayRun,
            Action::Keep,
            "its create may still be running: without a creation-deadline tag, until the longest creation timeout (2h) after its creation, 1h from now",
        ),
        (
            SubjectKind::Vm,
            "web-frgn1",
            Rule::NotOurs,
            Action::Keep,
            "staging",
        ),
        (
            SubjectKind::Node,
            "web-kkkk2",
            Rule::Kept,
            Action::Keep,
            "machine web-kkkk2 is kept for debugging (nodewright.io-kept on its resources)",
        ),
        (
            SubjectKind::Node,
            "web-kkkk3",
            Rule::Kept,
            Action::Keep,
            "machine web-kkkk3 is kept for debugging (nodewright.io-kept on its resources)",
        ),
    ];
    for remediate in [false, true] {
        let decisions = classify(&inventory, &policy(remediate));
        for (kind, name, rule, action, detail) in table {
            let decision = decision_of(&decisions, kind, name);
            assert_eq!(
                (decision.rule, decision.action, decision.detail.as_str()),
                (rule, action, detail),
                "{kind} {name}"
            );
        }
    }
}

/// Tags alone do not make a resource nodewright's: anyone with tag rights on a foreign VM, NIC
/// or disk can write them. Each case is an orphan by every other rule (old, unattached, no Node,
/// no workflow), kept only by its name.
#[test]
fn names_nodewright_never_gives_are_kept_whatever_the_tags_say() {
    let nic =
        |name: &str, machine: &str| resource(ResourceKind::Nic, name, ours(machine), 3 * HOUR);
    let disk =
        |name: &str, machine: &str| resource(ResourceKind::Disk, name, ours(machine), 3 * HOUR);
    let table = [
        // (resource, rule, detail contains)
        (vm("web-aaaaa", 3 * HOUR), Rule::OrphanVm, "no Node"),
        (
            nic("web-aaaaa-nic", "web-aaaaa"),
            Rule::OrphanNic,
            "attached to no VM",
        ),
        (
            nic("billing-db-nic", "web-aaaaa"),
            Rule::NameNotOurs,
            "named \"billing-db-nic\", not \"web-aaaaa-nic\"",
        ),
        (
            nic("web-aaaaa-nic-2", "web-aaaaa"),
            Rule::NameNotOurs,
            "not \"web-aaaaa-nic\"",
        ),
        (
            resource(ResourceKind::Vm, "Billing_VM", ours("Billing_VM"), 3 * HOUR),
            Rule::NameNotOurs,
            "is not a machine name nodewright gives",
        ),
        (
            nic("Billing_VM-nic", "Billing_VM"),
            Rule::NameNotOurs,
            "is not a machine name nodewright gives",
        ),
        (
            disk("Billing_VM-osdisk", "Billing_VM"),
            Rule::NameNotOurs,
            "is not a machine name nodewright gives",
        ),
        (
            disk("web-aaaaa-osdisk", "web-aaaaa"),
            Rule::OrphanDisk,
            "attached to no VM",
        ),
    ];
    for (subject, rule, detail) in table {
        let inventory = Inventory {
            resources: vec![subject.clone()],
            ..Inventory::default()
        };
        let decisions = classify(&inventory, &policy(false));
        assert_eq!(decisions[0].rule, rule, "{} {}", subject.kind, subject.name);
        assert!(
            decisions[0].detail.contains(detail),
            "{} {}: {}",
            subject.kind,
            subject.name,
            decisions[0].detail
        );
        assert_eq!(
            decisions[0].action.removes(),
            rule != Rule::NameNotOurs,
            "{}",
            subject.name
        );
    }
    // Nodes: nodewright registers a Node under its machine's name, which is its VM's.
    let gone = not_ready(3 * HOUR);
    let mut relabelled = node("web-bbbbb", "web-bbbbb", gone);
    relabelled.machine = Some("web-ccccc".to_owned());
    let nodes = [
        (node("web-bbbbb", "web-bbbbb", gone), Rule::OrphanNode),
        (relabelled, Rule::NameNotOurs),
        (node("web-bbbbb", "web-zzzzz", gone), Rule::NameNotOurs),
    ];
    for (subject, rule) in nodes {
        let inventory = Inventory {
            nodes: vec![subject.clone()],
            ..Inventory::default()
        };
        let decisions = classify(&inventory, &policy(false));
        assert_eq!(decisions[0].rule, rule, "{subject:?}");
    }
    // A sweep an older worker started decides as it did then.
    let inventory = Inventory {
        resources: vec![nic("billing-db-nic", "web-aaaaa")],
        ..Inventory::default()
    };
    let old = SweepPolicy {
        check_names: false,
        ..policy(false)
    };
    assert_eq!(classify(&inventory, &old)[0].rule, Rule::OrphanNic);
}

#[test]
fn provider_ids_match_the_resource_group_case_insensitively() {
    let mut inventory = Inventory {
        resources: vec![vm("web-hhhhh", 3 * HOUR)],
        nodes: vec![node("web-hhhhh", "web-hhhhh", NodeReadiness::Ready)],
        ..Inventory::default()
    };
    inventory.nodes[0].provider_id = Some(format!(
        "azure://{}web-hhhhh",
        PREFIX
            .replace("resourceGroups", "resourcegroups")
            .to_uppercase()
    ));
    let decisions = classify(&inventory, &policy(false));
    assert_eq!(decisions[0].rule, Rule::Healthy);
    assert_eq!(decisions[1].rule, Rule::VmExists);
}

#[test]
fn the_findings_count_what_the_sweep_acts_on_or_reports_by_kind_rule_and_action() {
    let decisions = classify(&scenario(), &policy(false));
    let audit = SweepAudit::of(
        prod(),
        "2027-01-15T08:00:00Z".to_owned(),
        SweepOutcome::DryRun,
        Seen::default(),
        decisions,
    );
    let findings = audit.findings();
    assert_eq!(findings.outcome, "dry-run");
    let total: u32 = findings.findings.iter().map(|f| f.count).sum();
    assert_eq!(Ok(total), u32::try_from(audit.entries.len()));
    let count = |kind: &str, action: &str| -> u32 {
        findings
            .findings
            .iter()
            .filter(|f| f.kind == kind && f.action == action)
            .map(|f| f.count)
            .sum()
    };
    // The four removals of the audit above: a VM, a NIC, a disk and a Node; two reported.
    assert_eq!(count("vm", "delete"), 1);
    assert_eq!(count("nic", "delete"), 1);
    assert_eq!(count("disk", "delete"), 1);
    assert_eq!(count("node", "delete"), 1);
    assert_eq!(count("vm", "report") + count("node", "report"), 2);
    assert!(findings.findings.iter().all(|f| f.action != "keep"));
    let mut sorted = findings.findings.clone();
    sorted.sort_by(|a, b| (&a.kind, &a.rule, &a.action).cmp(&(&b.kind, &b.rule, &b.action)));
    assert_eq!(sorted, findings.findings);
}

#[test]
fn the_audit_lists_ours_and_nodes_and_groups_the_rest_by_owner() {
    let decisions = classify(&scenario(), &policy(false));
    let audit = SweepAudit::of(
        prod(),
        "2027-01-15T08:00:00Z".to_owned(),
        SweepOutcome::DryRun,
        Seen::default(),
        decisions,
    );
    assert_eq!(
        audit.not_ours,
        vec![
            ForeignGroup {
                kind: ResourceKind::Vm,
                cluster_tag: None,
                names: vec!["untagged".to_owned()],
            },
            ForeignGroup {
                kind: ResourceKind::Vm,
                cluster_tag: Some("staging".to_owned()),
                names: vec!["other-vm".to_owned()],
            },
        ]
    );
    let removals: Vec<&str> = audit.removals().map(|e| e.decision.name.as_str()).collect();
    assert_eq!(
        removals,
        [
            "web-ooooo",
            "web-lllll-nic",
            "web-kkkkk-osdisk",
            "web-gggggg"
        ]
    );
    assert_eq!(audit.planned(), 4);
    let unhealthy: Vec<&str> = audit
        .entries
        .iter()
        .filter(|e| e.decision.action == Action::Report)
        .map(|e| e.decision.name.as_str())
        .collect();
    // ro-ppppp has no pool tag here, so no rollout protects it.
    assert_eq!(unhealthy, ["web-uuuuu", "ro-ppppp"]);
    let grace = audit
        .kept
        .iter()
        .find(|g| g.kind == SubjectKind::Vm && g.rule == Rule::InsideGrace)
        .map(|g| g.names.clone());
    assert_eq!(grace, Some(vec!["web-yyyyy".to_owned()]));
    let kept: usize = audit.kept.iter().map(|g| g.names.len()).sum();
    assert_eq!(kept + audit.entries.len() + audit.not_ours_count(), 26);
    assert!(
        audit.summary().starts_with("dry run: would remove 4; kept"),
        "{}",
        audit.summary()
    );
}

// ---- property -------------------------------------------------------------------------------

/// Machine names, and one nodewright never gives (tags may say anything).
const MACHINES: [&str; 5] = [
    "web-aaaaa",
    "web-bbbbb",
    "db-ccccc",
    "db-ddddd",
    "Web_EEEEE",
];

fn machine() -> impl Strategy<Value = String> {
    prop::sample::select(&MACHINES[..]).prop_map(str::to_owned)
}

/// Tags from nothing, through other clusters and near-misses, to exactly ours.
fn tags() -> impl Strategy<Value = BTreeMap<String, String>> {
    let cluster = prop_oneof![
        Just(None),
        Just(Some("prod".to_owned())),
        Just(Some("prod-weu".to_owned())),
        Just(Some("Prod".to_owned())),
        Just(Some("staging".to_owned())),
    ];
    let kept = prop_oneof![
        4 => Just(None),
        1 => Just(Some(TAG_KEPT)),
        1 => Just(Some("Nodewright.io-Kept")),
    ];
    (cluster, prop::option::of(machine()), any::<bool>(), kept).prop_map(
        |(cluster, machine, pool, kept)| {
            let mut tags = BTreeMap::new();
            if let Some(kept) = kept {
                tags.insert(
                    kept.to_owned(),
                    "2027-01-15T08:00:00Z: create failed".to_owned(),
                );
            }
            if let Some(cluster) = cluster {
                tags.insert(TAG_CLUSTER.to_owned(), cluster);
            }
            if let Some(machine) = machine {
                tags.insert(TAG_MACHINE.to_owned(), machine);
            }
            if pool {
                tags.insert(TAG_POOL.to_owned(), "web".to_owned());
                tags.insert(TAG_CREATED.to_owned(), "2027-01-15T08:00:00Z".to_owned());
            }
            tags
        },
    )
}

fn name_for(kind: ResourceKind) -> impl Strategy<Value = String> {
    machine().prop_flat_map(move |machine| {
        let own = match kind {
            ResourceKind::Vm => machine.clone(),
            ResourceKind::Nic => format!("{machine}-nic"),
            ResourceKind::Disk => os_disk_name(&machine),
        };
        prop_oneof![
            Just(own),
            Just(format!("pvc-{machine}")),
            Just("stray".to_owned())
        ]
    })
}

fn arm_resource() -> impl Strategy<Value = ArmResource> {
    prop::sample::select(&ResourceKind::ALL[..]).prop_flat_map(|kind| {
        (
            name_for(kind),
            tags(),
            prop::sample::select(&["Succeeded", "Failed", "Creating", "Deleting", ""][..]),
            prop::option::of(machine()),
            prop::option::of(0..10 * HOUR),
            // The deadline, from the creation: before it (unreadable), within the longest
            // creation timeout, or far beyond.
            prop::option::of(-HOUR..4 * HOUR),
            // The create's end, from now: in the past or (a clock off) in the future.
            prop::option::of(-10 * HOUR..HOUR),
        )
            .prop_map(move |(name, tags, state, attached, age, deadline, ended)| {
                ArmResource {
                    kind,
                    name,
                    tags,
                    provisioning_state: state.to_owned(),
                    attached_to: attached.filter(|_| kind != ResourceKind::Vm),
                    created_at: age.map(|age| NOW - age),
                    creation_deadline: deadline.map(|after| NOW - age.unwrap_or(0) + after),
                    creation_ended: ended.map(|from_now| NOW + from_now),
                }
            })
    })
}

fn node_record() -> impl Strategy<Value = NodeRecord> {
    (
        machine(),
        prop::option::of(machine()),
        prop_oneof![
            Just(PREFIX),
            Just(
                "/subscriptions/s/resourceGroups/other/providers/Microsoft.Compute/virtualMachines/"
            )
        ],
        any::<bool>(),
        0..10 * HOUR,
        0..10 * HOUR,
        any::<bool>(),
    )
        .prop_map(
            |(vm, label, prefix, ready, since, heartbeat, tainted_outdated)| NodeRecord {
                name: vm.clone(),
                uid: format!("uid-{vm}"),
                provider_id: Some(format!("azure://{prefix}{vm}")),
                machine: label,
                pool: Some("web".to_owned()),
                created_at: NOW - 10 * HOUR,
                readiness: if ready {
                    NodeReadiness::Ready
                } else {
                    NodeReadiness::NotReady {
                        since: NOW - since,
                        last_heartbeat: NOW - heartbeat,
                    }
                },
                tainted_outdated,
            },
        )
}

fn inventory() -> impl Strategy<Value = Inventory> {
    (
        prop::collection::vec(arm_resource(), 0..24),
        prop::collection::vec(node_record(), 0..6),
        prop::collection::btree_set(machine().prop_map(|m| os_disk_name(&m)), 0..2),
        prop::collection::vec(
            (
                prop::sample::select(&["create", "delete", "drain"][..]),
                machine(),
            ),
            0..3,
        ),
        any::<bool>(),
    )
        .prop_map(
            |(mut resources, mut nodes, volume_disks, running_work, web_rollout)| Inventory {
                // Names are unique per kind, in ARM as in Kubernetes.
                resources: {
                    let mut names = BTreeSet::new();
                    resources.retain(|r| names.insert((r.kind, r.name.clone())));
                    resources
                },
                nodes: {
                    let mut names = BTreeSet::new();
                    nodes.retain(|n| names.insert(n.name.clone()));
                    nodes
                },
                volume_disks,
                running: running_work
                    .into_iter()
                    .map(|(operation, machine)| running(operation, Some(&machine), None))
                    .chain(web_rollout.then(|| running("rollout", None, Some("web"))))
                    .collect(),
            },
        )
}

/// The latest instant the create that made `resource` may run to: its deadline tag when it is not
/// before its creation, else its creation plus the longest creation timeout.
fn latest_create_end(resource: &ArmResource, created: i64) -> i64 {
    resource
        .creation_deadline
        .filter(|deadline| *deadline >= created)
        .unwrap_or(created + MAX_CREATION_TIMEOUT.as_secs() as i64)
}

/// The machines kept for debugging: those of this cluster's resources carrying the marker.
fn kept_machines(inventory: &Inventory) -> BTreeSet<String> {
    let mut kept = BTreeSet::new();
    for resource in &inventory.resources {
        let ours = resource.tags.get(TAG_CLUSTER).map(String::as_str) == Some("prod");
        let marked = resource
            .tags
            .keys()
            .any(|name| name.eq_ignore_ascii_case(TAG_KEPT));
        if ours && marked {
            kept.extend(resource.tags.get(TAG_MACHINE).cloned());
            if resource.kind == ResourceKind::Vm {
                kept.insert(resource.name.clone());
            }
        }
    }
    kept
}

/// The machine a subject belongs to, by every link the classifier could follow.
fn machines_of(decision: &Decision, inventory: &Inventory) -> Vec<String> {
    let mut machines = Vec::new();
    match decision.kind {
        SubjectKind::Node => {
            for node in inventory.nodes.iter().filter(|n| n.name == decision.name) {
                machines.extend(node.machine.clone());
                if let Some(id) = &node.provider_id {
                    machines.push(name_from_id(id).to_owned());
                }
            }
        }
        kind => {
            if kind == SubjectKind::Vm {
                machines.push(decision.name.clone());
            }
            for resource in inventory
                .resources
                .iter()
                .filter(|r| SubjectKind::from(r.kind) == kind && r.name == decision.name)
            {
                machines.extend(resource.tags.get(TAG_MACHINE).cloned());
            }
        }
    }
    machines
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn nothing_that_is_not_ours_or_busy_with_a_workflow_or_young_is_ever_removed(
        inventory in inventory(),
        remediate in any::<bool>(),
    ) {
        let policy = policy(remediate);
        let decisions = classify(&inventory, &policy);
        prop_assert_eq!(decisions.len(), inventory.resources.len() + inventory.nodes.len());
        let (resource_decisions, node_decisions) = decisions.split_at(inventory.resources.len());
        let kept = kept_machines(&inventory);
        for (resource, decision) in inventory.resources.iter().zip(resource_decisions) {
            prop_assert_eq!(&resource.name, &decision.name);
            if !decision.action.removes() {
                continue;
            }
            // Only the exact cluster tag makes a resource ours.
            prop_assert_eq!(resource.tags.get(TAG_CLUSTER).map(String::as_str), Some("prod"));
            // Only nodewright's OS disks, never a volume's.
            if resource.kind == ResourceKind::Disk {
                let machine = resource.tags.get(TAG_MACHINE);
                prop_assert!(machine.is_some_and(|m| resource.name == os_disk_name(m)));
                prop_assert!(!inventory.volume_disks.contains(&resource.name));
                prop_assert!(resource.attached_to.is_none());
            }
            if resource.kind == ResourceKind::Nic {
                prop_assert!(resource.attached_to.is_none());
            }
            // Only names nodewright gives the machine its tag names, whatever the tags say.
            let machine = resource.tags.get(TAG_MACHINE).map(String::as_str).unwrap_or_default();
            prop_assert!(crate::MachineName::parse("machine", machine).is_ok());
            let expected = match resource.kind {
                ResourceKind::Vm => machine.to_owned(),
                ResourceKind::Nic => nic_name(machine),
                ResourceKind::Disk => os_disk_name(machine),
            };
            prop_assert_eq!(&resource.name, &expected);
            // Never what a failed create kept for debugging, nor another resource of its
            // machine, whatever else holds.
            prop_assert!(
                !resource.tags.keys().any(|name| name.eq_ignore_ascii_case(TAG_KEPT)),
                "{} {} is kept, yet {} ({})",
                decision.kind, decision.name, decision.action, decision.detail
            );
            let of_kept_machine = resource
                .tags
                .get(TAG_MACHINE)
                .is_some_and(|machine| kept.contains(machine));
            prop_assert!(!of_kept_machine, "{} {} of a kept machine removed", decision.kind, decision.name);
            // Never inside grace (from the create's end when recorded), never without a creation
            // time, never while its create may still run (an unhealthy machine is old by its
            // Node, not by its tag).
            if decision.action == Action::Delete {
                let created = resource.created_at;
                prop_assert!(created.is_some());
                let created = created.unwrap_or_default();
                let since = resource.creation_ended.filter(|e| *e >= created).unwrap_or(created);
                prop_assert!(NOW - since >= policy.grace.as_secs() as i64);
                prop_assert!(NOW >= latest_create_end(resource, created));
            }
        }
        for (node, decision) in inventory.nodes.iter().zip(node_decisions) {
            prop_assert_eq!(&node.name, &decision.name);
            prop_assert!(matches!(decision.action, Action::Keep | Action::Delete | Action::Untaint));
            // A taint is removed only from a tainted Node of a pool whose rollout is not running,
            // of a machine with its VM listed, no workflow on it, not kept for debugging.
            if decision.action == Action::Untaint {
                prop_assert!(node.tainted_outdated);
                let pool = node.pool.as_deref();
                prop_assert!(pool.is_some());
                prop_assert!(!inventory.running.iter().any(|w| w.operation == "rollout" && w.pool.as_deref() == pool));
                prop_assert!(!inventory.running.iter().any(|w| w.machine.is_some() && w.machine == node.machine));
                prop_assert!(!node.machine.as_ref().is_some_and(|m| kept.contains(m)));
                let vm = node.provider_id.as_deref().map(name_from_id).unwrap_or_default();
                prop_assert!(inventory.resources.iter().any(|r| r.kind == ResourceKind::Vm
                    && r.name == vm
                    && r.tags.get(TAG_CLUSTER).map(String::as_str) == Some("prod")));
            }
            if decision.action == Action::Delete {
                prop_assert_eq!(node.machine.as_deref(), Some(node.name.as_str()));
                prop_assert!(crate::MachineName::parse("node", &node.name).is_ok());
                // Never the Node of a machine kept for debugging.
                for machine in machines_of(decision, &inventory) {
                    prop_assert!(!kept.contains(&machine), "Node {} of kept machine {}", node.name, machine);
                }
                let not_ready = matches!(node.readiness, NodeReadiness::NotReady { .. });
                prop_assert!(not_ready);
                let vm = node.provider_id.as_deref().map(name_from_id).unwrap_or_default();
                prop_assert!(!inventory.resources.iter().any(|r| r.kind == ResourceKind::Vm && r.name == vm));
            }
        }
        // A machine with a running workflow: none of its resources, nor its Node, is removed.
        let busy: BTreeSet<&str> = inventory
            .running
            .iter()
            .filter_map(|w| w.machine.as_deref())
            .collect();
        for decision in decisions.iter().filter(|d| d.action.removes()) {
            for machine in machines_of(decision, &inventory) {
                prop_assert!(
                    !busy.contains(machine.as_str()),
                    "{} {} of machine {} removed while its workflow runs ({})",
                    decision.kind, decision.name, machine, decision.detail
                );
            }
        }
    }
}

proptest! {
    /// Whatever the clock and the durations say — a clock far off, a grace or health timeout
    /// of any size — classifying never panics, and never removes anything inside grace, kept, or
    /// whose create may still be running.
    #[test]
    fn any_clock_and_durations_classify_without_panicking(
        inventory in inventory(),
        now in prop_oneof![Just(NOW), any::<i64>()],
        grace in prop_oneof![0u64..=20 * 3600, any::<u64>()],
        health_timeout in prop_oneof![0u64..=20 * 3600, any::<u64>()],
        remediate in any::<bool>(),
    ) {
        let policy = SweepPolicy {
            grace: Duration::from_secs(grace),
            health_timeout: Duration::from_secs(health_timeout),
            now,
            ..policy(remediate)
        };
        let decisions = classify(&inventory, &policy);
        prop_assert_eq!(decisions.len(), inventory.resources.len() + inventory.nodes.len());
        for (resource, decision) in inventory.resources.iter().zip(&decisions) {
            if decision.action.removes() {
                prop_assert!(!resource.tags.keys().any(|name| name.eq_ignore_ascii_case(TAG_KEPT)));
            }
            if decision.action == Action::Delete {
                let created = resource.created_at;
                prop_assert!(created.is_some());
                let created = created.unwrap_or_default();
                let since = resource.creation_ended.filter(|e| *e >= created).unwrap_or(created);
                let age = now.saturating_sub(since);
                prop_assert!(age >= 0 && age.unsigned_abs() >= grace);
                prop_assert!(now >= latest_create_end(resource, created));
            }
        }
    }
}

#[test]
fn outcomes_serialise_in_camel_case_with_their_state() {
    let not_approved = SweepOutcome::NotApproved {
        planned: 15,
        max_deletions: 10,
    };
    assert_eq!(
        serde_json::to_value(&not_approved).must(),
        serde_json::json!({ "state": "not-approved", "planned": 15, "maxDeletions": 10 })
    );
    let failed = Outcome::Failed {
        error: "409 OperationNotAllowed".to_owned(),
    };
    assert_eq!(
        serde_json::to_value(&failed).must(),
        serde_json::json!({ "result": "failed", "error": "409 OperationNotAllowed" })
    );
}

/// The outdated taint of a pool's Node: `(rule, action)` for a Node of pool `web`, its VM
/// listed, with or without the taint, given the running workflows.
fn check_outdated_taint(tainted: bool, running: Vec<RunningWorkflow>, expected: (Rule, Action)) {
    let mut tainted_node = node("web-ttttt", "web-ttttt", NodeReadiness::Ready);
    tainted_node.tainted_outdated = tainted;
    let inventory = Inventory {
        resources: vec![vm("web-ttttt", 3 * HOUR)],
        nodes: vec![tainted_node],
        running,
        ..Inventory::default()
    };
    let decisions = classify(&inventory, &policy(false));
    let decision = decision_of(&decisions, SubjectKind::Node, "web-ttttt");
    assert_eq!(
        (decision.rule, decision.action),
        expected,
        "tainted {tainted}, {}",
        decision.detail
    );
}

#[test]
fn an_outdated_taint_with_no_rollout_of_its_pool_running_is_stale_and_removed() {
    let rollout = |pool: &str| running("rollout", None, Some(pool));
    let table = [
        (
            "tainted, the pool's rollout running: it owns the taint",
            true,
            vec![rollout("web")],
            (Rule::RolloutRunning, Action::Keep),
        ),
        (
            "tainted, no rollout running",
            true,
            vec![],
            (Rule::StaleOutdatedTaint, Action::Untaint),
        ),
        (
            "tainted, only another pool's rollout running",
            true,
            vec![rollout("db")],
            (Rule::StaleOutdatedTaint, Action::Untaint),
        ),
        (
            "tainted, another operation of the pool running",
            true,
            vec![running("inspect", None, Some("web"))],
            (Rule::StaleOutdatedTaint, Action::Untaint),
        ),
        (
            "untainted: nothing to do",
            false,
            vec![],
            (Rule::VmExists, Action::Keep),
        ),
        (
            "tainted, a workflow works on the machine: kept",
            true,
            vec![running("delete", Some("web-ttttt"), None)],
            (Rule::WorkflowRunning, Action::Keep),
        ),
    ];
    for (case, tainted, running, expected) in table {
        eprintln!("{case}");
        check_outdated_taint(tainted, running, expected);
    }
}

#[test]
fn a_stale_outdated_taint_is_not_a_removal_and_only_a_sweep_that_knows_the_rule_sees_it() {
    let mut tainted = node("web-ttttt", "web-ttttt", NodeReadiness::Ready);
    tainted.tainted_outdated = true;
    let mut unlabelled = node("web-uuuuu", "web-uuuuu", NodeReadiness::Ready);
    unlabelled.tainted_outdated = true;
    unlabelled.pool = None;
    let inventory = Inventory {
        resources: vec![vm("web-ttttt", 3 * HOUR), vm("web-uuuuu", 3 * HOUR)],
        nodes: vec![tainted, unlabelled],
        ..Inventory::default()
    };
    let decisions = classify(&inventory, &policy(false));
    assert_eq!(
        decision_of(&decisions, SubjectKind::Node, "web-uuuuu").rule,
        Rule::VmExists,
        "no pool label: not a pool's taint"
    );
    assert!(!Action::Untaint.removes());
    let audit = SweepAudit::of(
        prod(),
        "2026-11-27T10:00:00Z".to_owned(),
        SweepOutcome::DryRun,
        Seen::of(&inventory),
        decisions,
    );
    assert_eq!(audit.planned(), 0, "outside max_deletions and the brake");
    assert_eq!(audit.pending_untaints(), [0]);
    assert!(
        audit.summary().contains("1 stale outdated taint to remove"),
        "{}",
        audit.summary()
    );

    let mut foreign = inventory.clone();
    foreign.resources[0]
        .tags
        .insert(TAG_CLUSTER.to_owned(), "staging".to_owned());
    assert_eq!(
        decision_of(
            &classify(&foreign, &policy(false)),
            SubjectKind::Node,
            "web-ttttt"
        )
        .rule,
        Rule::VmExists,
        "another cluster's machine: its rollouts are not listed here"
    );

    let old = SweepPolicy {
        clear_stale_taints: false,
        ..policy(false)
    };
    assert_eq!(
        decision_of(&classify(&inventory, &old), SubjectKind::Node, "web-ttttt").rule,
        Rule::VmExists
    );
}
