//! A pool's Nodes for a rolling update and a pool controller: list them by the pool label (with
//! their conditions, delete priority and, when asked, whether their Lease went stale), and taint
//! the Nodes of outdated machines `nodewright.io/outdated:PreferNoSchedule` (or clear that
//! taint), so that pods evicted from the machine drained now avoid the machines drained next.
//!
//! The taint goes into the atomic `spec.taints` list by read-modify-write (a merge patch carrying
//! the `resourceVersion` read, retried on 409, as the drain's taint), keeping every other taint,
//! and only on a Node that is the machine's.

use chrono::Utc;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::Api;
use kube::api::ListParams;
use nodewright_model::drain::{ANNOTATION_DRAIN_POLICY_STAMP, TAINT_DRAINING, stamp_digest};
use nodewright_model::ownership::{ANNOTATION_DELETE_PRIORITY, LABEL_POOL};
use nodewright_model::rollout::{NodeCondition, PoolNode, TAINT_OUTDATED};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::{Error, Result};
use super::node_lease;
use super::node_spec::{Found, provider_id, taints, update_spec};
use super::nodes::MachineNode;

/// The field manager of the rollout's writes to Nodes, so `managedFields` show who tainted.
pub const FIELD_MANAGER: &str = "nodewright-rollout";

/// The outdated taint's effect: a preference, so nothing is ever left unschedulable by it.
pub const OUTDATED_EFFECT: &str = "PreferNoSchedule";

/// List the Nodes of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPoolNodes {
    /// The pool: Nodes labelled `nodewright.io/pool=<pool>` are listed.
    pub pool: String,
    /// With a lease timeout (seconds), the Leases of `kube-node-lease` are listed too, and a
    /// Node whose Lease was last renewed longer ago than that carries `lease_stale_since`;
    /// none: Leases are not read (and no Node carries it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_timeout_secs: Option<u64>,
}

/// Taint the Nodes of machines `nodewright.io/outdated:PreferNoSchedule`, or clear the taint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarkOutdated {
    /// The machines' Nodes (name and the VM their providerID must name).
    pub nodes: Vec<MachineNode>,
    /// `true` adds the taint where missing; `false` removes it.
    pub outdated: bool,
}

/// What marking found, by Node name (a Node of the machine already as asked is in none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarkedOutdated {
    /// Nodes this call tainted or untainted.
    pub changed: Vec<String>,
    /// Names with no Node.
    pub absent: Vec<String>,
    /// Nodes that are not the machine's (another VM's providerID, or no
    /// `nodewright.io/machine=<name>` label): left alone.
    pub not_ours: Vec<String>,
}

/// Lists the Nodes labelled `nodewright.io/pool=<pool>`, sorted by name; with
/// `lease_timeout_secs`, also the Leases of `kube-node-lease` (one list), to mark the Nodes whose
/// Lease went stale.
pub async fn list_pool_nodes(
    client: &kube::Client,
    input: &ListPoolNodes,
) -> Result<Vec<PoolNode>> {
    let api: Api<Node> = Api::all(client.clone());
    let selector = ListParams::default().labels(&pool_selector(&input.pool));
    let listed = api
        .list(&selector)
        .await
        .map_err(|source| Error::ListPoolNodes {
            pool: input.pool.clone(),
            source,
        })?;
    let mut nodes: Vec<PoolNode> = listed.items.iter().map(pool_node).collect();
    if let Some(timeout_secs) = input.lease_timeout_secs {
        let renewals = node_lease::list_renewals(client).await?;
        let now = Utc::now().timestamp();
        for node in &mut nodes {
            node.lease_stale_since =
                node_lease::stale_since(renewals.get(&node.name).copied(), timeout_secs, now);
        }
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(nodes)
}

/// The label selector of a pool's Nodes: `nodewright.io/pool=<pool>`.
pub(crate) fn pool_selector(pool: &str) -> String {
    format!("{LABEL_POOL}={pool}")
}

/// Adds (`outdated`) or removes the outdated taint on each machine's Node, other taints kept;
/// a Node that is not the machine's is reported and never written.
pub async fn mark_outdated(client: &kube::Client, input: &MarkOutdated) -> Result<MarkedOutdated> {
    let api: Api<Node> = Api::all(client.clone());
    let mut marked = MarkedOutdated::default();
    for machine in &input.nodes {
        let found = update_spec(
            &api,
            &machine.node,
            &machine.vm_id,
            FIELD_MANAGER,
            |node| outdated_spec_patch(node, input.outdated),
            |name, source| Error::MarkOutdated { name, source },
        )
        .await?;
        let name = machine.node.clone();
        match found {
            Found::Ours { changed: true, .. } => marked.changed.push(name),
            Found::Ours { changed: false, .. } => {}
            Found::Absent => marked.absent.push(name),
            Found::NotOurs(provider_id) => {
                tracing::info!(
                    node = %name,
                    provider_id = provider_id.as_deref().unwrap_or(""),
                    "not the machine's Node: the outdated taint is left as it is"
                );
                marked.not_ours.push(name);
            }
        }
    }
    Ok(marked)
}

/// The pool's view of a Node: providerID, readiness and since when, draining, outdated, its
/// conditions and delete priority. Its Lease is not read here (`lease_stale_since` is none).
pub(crate) fn pool_node(node: &Node) -> PoolNode {
    let taints = taints(node);
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"));
    PoolNode {
        name: node.metadata.name.clone().unwrap_or_default(),
        provider_id: provider_id(node).unwrap_or_default().to_owned(),
        ready: ready.is_some_and(|c| c.status == "True"),
        ready_since: ready
            .and_then(|c| c.last_transition_time.as_ref())
            .map_or(0, |time| time.0.as_second()),
        draining: node.metadata.deletion_timestamp.is_some()
            || taints.iter().any(|t| t.key == TAINT_DRAINING),
        tainted_outdated: taints.iter().any(|t| t.key == TAINT_OUTDATED),
        drain_stamp: node
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(ANNOTATION_DRAIN_POLICY_STAMP))
            .map(|stamp| stamp_digest(stamp)),
        conditions: conditions(node),
        delete_priority: delete_priority(node),
        lease_stale_since: None,
    }
}

/// Every condition of the Node (type, status, `lastTransitionTime` as Unix seconds, 0 when
/// missing), sorted by type. Heartbeat times, reasons and messages are left out, so the entry
/// changes only when a condition does.
fn conditions(node: &Node) -> Vec<NodeCondition> {
    let mut read: Vec<NodeCondition> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| NodeCondition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            since: c
                .last_transition_time
                .as_ref()
                .map_or(0, |time| time.0.as_second()),
        })
        .collect();
    read.sort_by(|a, b| a.type_.cmp(&b.type_));
    read
}

/// The Node's `nodewright.io/delete-priority` annotation as a whole number (spaces around it
/// ignored); none when missing or not a number.
fn delete_priority(node: &Node) -> Option<i64> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(ANNOTATION_DELETE_PRIORITY))
        .and_then(|value| value.trim().parse().ok())
}

fn is_outdated_taint(taint: &Taint) -> bool {
    taint.key == TAINT_OUTDATED
}

/// The merge patch that adds the outdated taint (`outdated`: unless the Node has it with effect
/// `PreferNoSchedule`) or removes every taint with its key, other taints kept, carrying the
/// `resourceVersion` read; `None` when the Node is already as asked. The taint's value is
/// empty, so it is left out.
pub(crate) fn outdated_spec_patch(node: &Node, outdated: bool) -> Option<Value> {
    let mut taints = taints(node);
    if outdated {
        if taints
            .iter()
            .any(|t| is_outdated_taint(t) && t.effect == OUTDATED_EFFECT)
        {
            return None;
        }
        taints.push(Taint {
            key: TAINT_OUTDATED.to_owned(),
            effect: OUTDATED_EFFECT.to_owned(),
            ..Taint::default()
        });
    } else {
        if !taints.iter().any(is_outdated_taint) {
            return None;
        }
        taints.retain(|t| !is_outdated_taint(t));
    }
    Some(json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "spec": { "taints": taints },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(extra: Value) -> Node {
        let mut base = json!({
            "metadata": {
                "name": "web-abcde",
                "resourceVersion": "42",
                "labels": { "nodewright.io/pool": "web", "nodewright.io/machine": "web-abcde" },
            },
            "spec": { "providerID": "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web-abcde" },
            "status": { "conditions": [
                { "type": "MemoryPressure", "status": "False",
                  "lastTransitionTime": "2026-01-01T00:00:00Z" },
                { "type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z" },
            ] },
        });
        crate::kube::node_spec::merge_json(&mut base, extra);
        serde_json::from_value(base).unwrap_or_default()
    }

    fn taints(list: Value) -> Node {
        node(json!({ "spec": { "taints": list } }))
    }

    #[test]
    fn a_ready_node_reads_with_its_transition_time() {
        assert_eq!(
            pool_node(&node(json!({}))),
            PoolNode {
                name: "web-abcde".to_owned(),
                provider_id: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web-abcde".to_owned(),
                ready: true,
                ready_since: 1_767_323_045,
                draining: false,
                tainted_outdated: false,
                drain_stamp: None,
                conditions: vec![
                    condition("MemoryPressure", "False", 1_767_225_600),
                    condition("Ready", "True", 1_767_323_045),
                ],
                delete_priority: None,
                lease_stale_since: None,
            }
        );
    }

    fn condition(type_: &str, status: &str, since: i64) -> NodeCondition {
        NodeCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            since,
        }
    }

    #[test]
    fn conditions_are_read_sorted_by_type_without_heartbeats() {
        let table = [
            (
                "sorted by type, a missing transition time is 0",
                json!([
                    { "type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z" },
                    { "type": "KernelDeadlock", "status": "True", "reason": "KernelHasDeadlock" },
                    { "type": "DiskPressure", "status": "Unknown",
                      "lastTransitionTime": "2026-01-01T00:00:00Z" },
                ]),
                vec![
                    condition("DiskPressure", "Unknown", 1_767_225_600),
                    condition("KernelDeadlock", "True", 0),
                    condition("Ready", "True", 1_767_323_045),
                ],
            ),
            ("none", json!([]), vec![]),
        ];
        for (case, listed, expected) in table {
            let mut read = node(json!({}));
            if let Some(status) = read.status.as_mut() {
                status.conditions = serde_json::from_value(listed).unwrap_or_default();
            }
            assert_eq!(pool_node(&read).conditions, expected, "{case}");
        }
        assert_eq!(
            pool_node(&node(json!({ "status": null }))).conditions,
            vec![],
            "no status"
        );
    }

    #[test]
    fn a_heartbeat_alone_leaves_the_pool_node_as_it_was() {
        let beat = |at: &str, reason: &str| {
            node(json!({ "status": { "conditions": [
                { "type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z",
                  "lastHeartbeatTime": at, "reason": reason, "message": at },
            ] } }))
        };
        let before = pool_node(&beat("2026-01-03T00:00:00Z", "KubeletReady"));
        assert_eq!(
            pool_node(&beat("2026-01-03T00:00:40Z", "KubeletReady")),
            before
        );
        assert_eq!(
            pool_node(&beat("2026-01-03T00:01:20Z", "StillReady")),
            before,
            "reasons and messages are not carried either"
        );
    }

    #[test]
    fn the_delete_priority_is_a_whole_number_or_none() {
        let table = [
            ("valid", Some("10"), Some(10)),
            ("negative", Some("-3"), Some(-3)),
            ("spaces around", Some(" 7\n"), Some(7)),
            ("zero", Some("0"), Some(0)),
            ("garbage", Some("first"), None),
            ("a fraction", Some("1.5"), None),
            ("empty", Some(""), None),
            ("too large", Some("99999999999999999999"), None),
            ("missing", None, None),
        ];
        for (case, annotation, expected) in table {
            let annotations = match annotation {
                Some(value) => json!({ "nodewright.io/delete-priority": value }),
                None => json!({ "nodewright.io/other": "1" }),
            };
            let read = pool_node(&node(json!({ "metadata": { "annotations": annotations } })));
            assert_eq!(read.delete_priority, expected, "{case}");
        }
    }

    #[test]
    fn readiness_draining_and_outdated_are_read_from_conditions_taints_and_deletion() {
        let table = [
            (
                "not ready",
                json!({ "status": { "conditions": [
                { "type": "Ready", "status": "False", "lastTransitionTime": "2026-01-02T03:04:05Z" },
            ] } }),
                (false, 1_767_323_045, false, false),
            ),
            (
                "unknown",
                json!({ "status": { "conditions": [
                { "type": "Ready", "status": "Unknown" },
            ] } }),
                (false, 0, false, false),
            ),
            (
                "no status",
                json!({ "status": null }),
                (false, 0, false, false),
            ),
            (
                "draining taint",
                json!({ "spec": { "taints": [
                { "key": "nodewright.io/draining", "effect": "NoSchedule" },
            ] } }),
                (true, 1_767_323_045, true, false),
            ),
            (
                "being deleted",
                json!({ "metadata": {
                "deletionTimestamp": "2026-01-03T00:00:00Z", "finalizers": ["x"],
            } }),
                (true, 1_767_323_045, true, false),
            ),
            (
                "outdated",
                json!({ "spec": { "taints": [
                { "key": "nodewright.io/outdated", "effect": "PreferNoSchedule" },
            ] } }),
                (true, 1_767_323_045, false, true),
            ),
            (
                "another key",
                json!({ "spec": { "taints": [
                { "key": "nodewright.io/outdated-not", "effect": "NoSchedule" },
                { "key": "dedicated", "value": "nodewright.io/draining", "effect": "NoSchedule" },
            ] } }),
                (true, 1_767_323_045, false, false),
            ),
        ];
        for (case, extra, expected) in table {
            let read = pool_node(&node(extra));
            assert_eq!(
                (
                    read.ready,
                    read.ready_since,
                    read.draining,
                    read.tainted_outdated
                ),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn marking_appends_the_taint_and_keeps_the_others() {
        let tainted = taints(json!([
            { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
        ]));
        assert_eq!(
            outdated_spec_patch(&tainted, true),
            Some(json!({
                "metadata": { "resourceVersion": "42" },
                "spec": { "taints": [
                    { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
                    { "key": "nodewright.io/outdated", "effect": "PreferNoSchedule" },
                ] },
            }))
        );
        assert_eq!(
            outdated_spec_patch(&node(json!({})), true),
            Some(json!({
                "metadata": { "resourceVersion": "42" },
                "spec": { "taints": [
                    { "key": "nodewright.io/outdated", "effect": "PreferNoSchedule" },
                ] },
            }))
        );
    }

    #[test]
    fn marking_again_or_clearing_an_unmarked_node_changes_nothing() {
        let marked = taints(json!([
            { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
            { "key": "nodewright.io/outdated", "value": "", "effect": "PreferNoSchedule" },
        ]));
        assert_eq!(outdated_spec_patch(&marked, true), None);
        let unmarked = taints(json!([
            { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
        ]));
        assert_eq!(outdated_spec_patch(&unmarked, false), None);
        assert_eq!(outdated_spec_patch(&node(json!({})), false), None);
    }

    #[test]
    fn clearing_removes_every_taint_with_the_key_and_keeps_the_others() {
        let marked = taints(json!([
            { "key": "nodewright.io/outdated", "effect": "PreferNoSchedule" },
            { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
            { "key": "nodewright.io/outdated", "effect": "NoSchedule" },
        ]));
        assert_eq!(
            outdated_spec_patch(&marked, false),
            Some(json!({
                "metadata": { "resourceVersion": "42" },
                "spec": { "taints": [
                    { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
                ] },
            }))
        );
        let other_effect = taints(json!([
            { "key": "nodewright.io/outdated", "effect": "NoSchedule" },
        ]));
        assert_eq!(
            outdated_spec_patch(&other_effect, true),
            Some(json!({
                "metadata": { "resourceVersion": "42" },
                "spec": { "taints": [
                    { "key": "nodewright.io/outdated", "effect": "NoSchedule" },
                    { "key": "nodewright.io/outdated", "effect": "PreferNoSchedule" },
                ] },
            })),
            "marking adds PreferNoSchedule and keeps the key's taint of another effect"
        );
    }
}
