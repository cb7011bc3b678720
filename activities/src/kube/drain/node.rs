//! The drained Node: cordon it, taint it `nodewright.io/draining:NoSchedule`, mark it
//! `Terminating`, read its health, and undo all of that.
//!
//! `spec.taints` is an atomic list (server-side apply would make one manager own all of it), so
//! the spec is changed by read-modify-write: a merge patch that carries the `resourceVersion`
//! read, retried on a conflict. Conditions are a list keyed by `type`, so the `Terminating`
//! condition is a strategic merge patch of the status that leaves every other condition alone.

use std::sync::atomic::Ordering;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::drain::{
    ANNOTATION_DRAIN_POLICY, ANNOTATION_DRAIN_POLICY_STAMP, CONDITION_READONLY_FILESYSTEM,
    CONDITION_TERMINATING, ConditionFacts, NodeHealth, TAINT_DRAINING,
};
use serde_json::{Value, json};

use super::{PrepareDrain, PreparedNode, RestoreNode};
use crate::kube::error::{Error, Result};
use crate::kube::node_spec::{Found, taints, update_spec};
use crate::kube::nodes::{MachineNode, NodeChange};

/// The field manager of the drain's writes to Nodes, so `managedFields` show who cordoned.
pub const FIELD_MANAGER: &str = "nodewright-drain";

/// The `Terminating` condition's reason (MCM's, for a scale-down).
pub const TERMINATING_REASON: &str = "ScaleDown";

/// The `Terminating` condition's message.
pub const TERMINATING_MESSAGE: &str = "nodewright is draining the node to delete its machine";

/// The draining taint's effect.
const NO_SCHEDULE: &str = "NoSchedule";

/// Cordons the machine's Node, taints it `nodewright.io/draining:NoSchedule` (other taints
/// kept) and, when `terminating`, sets its `Terminating` condition; only for a Node whose
/// providerID names the VM and that carries `nodewright.io/machine=<node>`.
pub async fn prepare_node(client: &kube::Client, input: &PrepareDrain) -> Result<PreparedNode> {
    let api: Api<Node> = Api::all(client.clone());
    // Read from the Node as found before the change: cordoned by someone else (no draining
    // taint), so a cancelled drain leaves it cordoned. A rerun finds its own earlier cordon
    // with the draining taint and does not mistake it for someone else's.
    let cordoned_before = std::sync::atomic::AtomicBool::new(false);
    let found = update_spec(
        &api,
        &input.node,
        &input.vm_id,
        FIELD_MANAGER,
        |node| {
            cordoned_before.store(was_cordoned_by_others(node), Ordering::Relaxed);
            prepare_spec_patch(node)
        },
        |name, source| Error::PrepareNode { name, source },
    )
    .await?;
    let node = match found {
        Found::Ours { node, .. } => node,
        Found::Absent => return Ok(PreparedNode::Absent),
        Found::NotOurs(provider_id) => return Ok(PreparedNode::NotOurs { provider_id }),
    };
    if input.terminating {
        let patch = terminating_condition_patch(&node, Utc::now());
        let patched = api
            .patch_status(&input.node, &params(), &Patch::Strategic(&patch))
            .await;
        match patched {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {
                return Ok(PreparedNode::Absent);
            }
            Err(source) => {
                return Err(Error::MarkNodeTerminating {
                    name: input.node.clone(),
                    source,
                });
            }
        }
    }
    Ok(PreparedNode::Prepared {
        policy_annotation: annotation(&node, ANNOTATION_DRAIN_POLICY),
        policy_stamp: annotation(&node, ANNOTATION_DRAIN_POLICY_STAMP),
        health: node_health(&node),
        cordoned_before: cordoned_before.load(Ordering::Relaxed),
    })
}

/// Makes the machine's Node schedulable again: clears `spec.unschedulable`, removes the
/// draining taint and the `Terminating` condition; only for a Node of the machine (as
/// [`prepare_node`]).
pub async fn uncordon_node(client: &kube::Client, input: &MachineNode) -> Result<NodeChange> {
    restore_node(
        client,
        &RestoreNode {
            node: input.node.clone(),
            vm_id: input.vm_id.clone(),
            keep_cordoned: false,
        },
    )
    .await
}

/// Undoes a drain's preparation: removes the draining taint and the `Terminating` condition,
/// and clears `spec.unschedulable` unless `keep_cordoned` (the Node was cordoned before the
/// drain); only for a Node of the machine (as [`prepare_node`]).
pub async fn restore_node(client: &kube::Client, input: &RestoreNode) -> Result<NodeChange> {
    let api: Api<Node> = Api::all(client.clone());
    let keep_cordoned = input.keep_cordoned;
    let found = update_spec(
        &api,
        &input.node,
        &input.vm_id,
        FIELD_MANAGER,
        |node| restore_spec_patch(node, keep_cordoned),
        |name, source| Error::UncordonNode { name, source },
    )
    .await?;
    let node = match found {
        Found::Ours { node, .. } => node,
        Found::Absent => return Ok(NodeChange::Absent),
        Found::NotOurs(_) => return Ok(NodeChange::NotOurs),
    };
    if condition(&node, CONDITION_TERMINATING).is_none() {
        return Ok(NodeChange::Done);
    }
    let patch = json!({
        "status": { "conditions": [{ "type": CONDITION_TERMINATING, "$patch": "delete" }] },
    });
    match api
        .patch_status(&input.node, &params(), &Patch::Strategic(&patch))
        .await
    {
        Ok(_) => Ok(NodeChange::Done),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(NodeChange::Absent),
        Err(source) => Err(Error::ClearNodeTerminating {
            name: input.node.clone(),
            source,
        }),
    }
}

/// The health a drain decides force mode on: the `Ready` and `ReadonlyFilesystem` conditions.
pub fn node_health(node: &Node) -> NodeHealth {
    NodeHealth {
        ready: condition(node, "Ready").map(condition_facts),
        readonly_filesystem: condition(node, CONDITION_READONLY_FILESYSTEM).map(condition_facts),
    }
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

fn is_draining_taint(taint: &Taint) -> bool {
    taint.key == TAINT_DRAINING && taint.effect == NO_SCHEDULE
}

fn is_unschedulable(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}

/// `unschedulable: true` and the draining taint appended to the taints there are; `None` when
/// the Node has both.
pub(super) fn prepare_spec_patch(node: &Node) -> Option<Value> {
    let mut taints = taints(node);
    let tainted = taints.iter().any(is_draining_taint);
    if tainted && is_unschedulable(node) {
        return None;
    }
    if !tainted {
        taints.push(Taint {
            key: TAINT_DRAINING.to_owned(),
            effect: NO_SCHEDULE.to_owned(),
            ..Taint::default()
        });
    }
    let mut patch = json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "spec": { "unschedulable": true, "taints": taints },
    });
    // A cordon someone else set before this drain is recorded on the Node, so that
    // `machine uncordon` keeps it.
    if let Some((name, value)) = crate::kube::cordon_mark::cordoned_before_drain_mark(node) {
        patch["metadata"]["annotations"] = json!({ name: value });
    }
    Some(patch)
}

/// Whether the Node is cordoned by someone else than a drain: unschedulable without the
/// draining taint.
fn was_cordoned_by_others(node: &Node) -> bool {
    is_unschedulable(node) && !taints(node).iter().any(is_draining_taint)
}

/// The draining taint removed (other taints kept) and, unless `keep_cordoned`,
/// `unschedulable` cleared; `None` when there is nothing to change.
pub(super) fn restore_spec_patch(node: &Node, keep_cordoned: bool) -> Option<Value> {
    let (ours, others): (Vec<Taint>, Vec<Taint>) =
        taints(node).into_iter().partition(is_draining_taint);
    let uncordon = !keep_cordoned && is_unschedulable(node);
    if ours.is_empty() && !uncordon {
        return None;
    }
    let mut spec = json!({ "taints": others });
    if uncordon {
        spec["unschedulable"] = Value::Null;
    }
    Some(json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "spec": spec,
    }))
}

/// The `Terminating` condition, keyed by type so a strategic merge leaves the others; its
/// `lastTransitionTime` is kept when the Node already is `Terminating` (MCM §3.9).
pub(super) fn terminating_condition_patch(node: &Node, now: DateTime<Utc>) -> Value {
    let now = json!(now.to_rfc3339_opts(SecondsFormat::Secs, true));
    let since = condition(node, CONDITION_TERMINATING)
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map_or_else(|| now.clone(), |time| json!(time));
    json!({
        "status": { "conditions": [{
            "type": CONDITION_TERMINATING,
            "status": "True",
            "reason": TERMINATING_REASON,
            "message": TERMINATING_MESSAGE,
            "lastHeartbeatTime": now,
            "lastTransitionTime": since,
        }] },
    })
}

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == type_))
}

fn condition_facts(condition: &NodeCondition) -> ConditionFacts {
    ConditionFacts {
        status: condition.status.clone(),
        since: condition
            .last_transition_time
            .as_ref()
            .map(|time| time.0.as_second()),
    }
}

fn annotation(node: &Node, key: &str) -> Option<String> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(key))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::node_spec::is_machine_node;

    const VM: &str =
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web-abcde";

    fn node(extra: Value) -> Node {
        let mut base = json!({
            "metadata": {
                "name": "web-abcde",
                "resourceVersion": "42",
                "labels": { "nodewright.io/machine": "web-abcde" },
                "annotations": { "nodewright.io/drain-policy": "{\"timeout\":60}" },
            },
            "spec": { "providerID": format!("azure://{VM}") },
            "status": { "conditions": [
                { "type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z" },
                { "type": "ReadonlyFilesystem", "status": "False",
                  "lastTransitionTime": "2026-01-01T00:00:00Z" },
            ] },
        });
        crate::kube::node_spec::merge_json(&mut base, extra);
        serde_json::from_value(base).unwrap_or_default()
    }

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap_or_default()
    }

    #[test]
    fn a_node_is_the_machines_only_with_its_provider_id_and_machine_label() {
        let table = [
            ("ours", json!({}), true),
            (
                "another VM's providerID",
                json!({ "spec": { "providerID": "azure:///subscriptions/s/x/other" } }),
                false,
            ),
            (
                "no providerID",
                json!({ "spec": { "providerID": null } }),
                false,
            ),
            (
                "labelled for another machine",
                json!({ "metadata": { "labels": { "nodewright.io/machine": "web-zzzzz" } } }),
                false,
            ),
            (
                "not labelled",
                json!({ "metadata": { "labels": null } }),
                false,
            ),
        ];
        for (case, extra, expected) in table {
            assert_eq!(
                is_machine_node(&node(extra), "web-abcde", VM),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn health_reads_ready_and_readonly_filesystem_with_their_transition_times() {
        let health = node_health(&node(json!({})));
        assert_eq!(
            health,
            NodeHealth {
                ready: Some(ConditionFacts {
                    status: "True".into(),
                    since: Some(at("2026-01-02T03:04:05Z").timestamp()),
                }),
                readonly_filesystem: Some(ConditionFacts {
                    status: "False".into(),
                    since: Some(at("2026-01-01T00:00:00Z").timestamp()),
                }),
            }
        );
        let bare = node(json!({ "status": null }));
        assert_eq!(node_health(&bare), NodeHealth::default());
        assert_eq!(
            annotation(&node(json!({})), ANNOTATION_DRAIN_POLICY).as_deref(),
            Some("{\"timeout\":60}")
        );
    }

    #[test]
    fn prepare_appends_the_draining_taint_and_keeps_the_others() {
        let tainted = node(json!({ "spec": { "taints": [
            { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
        ] } }));
        let patch = prepare_spec_patch(&tainted);
        assert_eq!(
            patch,
            Some(json!({
                "metadata": { "resourceVersion": "42" },
                "spec": { "unschedulable": true, "taints": [
                    { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
                    { "key": "nodewright.io/draining", "effect": "NoSchedule" },
                ] },
            }))
        );
        let prepared = node(json!({ "spec": { "unschedulable": true, "taints": [
            { "key": "nodewright.io/draining", "effect": "NoSchedule" },
        ] } }));
        assert_eq!(prepare_spec_patch(&prepared), None);
        let cordoned_only = node(json!({ "spec": { "unschedulable": true } }));
        assert!(prepare_spec_patch(&cordoned_only).is_some());
    }

    #[test]
    fn uncordon_removes_only_the_draining_taint() {
        let prepared = node(json!({ "spec": { "unschedulable": true, "taints": [
            { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
            { "key": "nodewright.io/draining", "effect": "NoSchedule" },
            { "key": "nodewright.io/draining", "effect": "NoExecute" },
        ] } }));
        assert_eq!(
            restore_spec_patch(&prepared, false),
            Some(json!({
                "metadata": { "resourceVersion": "42" },
                "spec": { "unschedulable": null, "taints": [
                    { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
                    { "key": "nodewright.io/draining", "effect": "NoExecute" },
                ] },
            }))
        );
        assert_eq!(restore_spec_patch(&node(json!({})), false), None);
    }

    #[test]
    fn a_cancelled_drain_keeps_a_cordon_that_was_there_before_it() {
        let prepared = node(json!({ "spec": { "unschedulable": true, "taints": [
            { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
            { "key": "nodewright.io/draining", "effect": "NoSchedule" },
        ] } }));
        assert_eq!(
            restore_spec_patch(&prepared, true),
            Some(json!({
                "metadata": { "resourceVersion": "42" },
                "spec": { "taints": [
                    { "key": "dedicated", "value": "db", "effect": "NoSchedule" },
                ] },
            }))
        );
        let cordoned_by_someone = node(json!({ "spec": { "unschedulable": true } }));
        assert_eq!(restore_spec_patch(&cordoned_by_someone, true), None);
        assert!(restore_spec_patch(&cordoned_by_someone, false).is_some());
    }

    #[test]
    fn a_cordon_without_the_draining_taint_is_someone_elses() {
        let table = [
            (
                "schedulable",
                json!({ "spec": { "unschedulable": null } }),
                false,
            ),
            (
                "cordoned by someone",
                json!({ "spec": { "unschedulable": true } }),
                true,
            ),
            (
                "cordoned by an earlier attempt of the drain",
                json!({ "spec": { "unschedulable": true, "taints": [
                    { "key": "nodewright.io/draining", "effect": "NoSchedule" },
                ] } }),
                false,
            ),
        ];
        for (case, extra, expected) in table {
            assert_eq!(was_cordoned_by_others(&node(extra)), expected, "{case}");
        }
    }

    #[test]
    fn the_terminating_condition_keeps_its_transition_time() {
        let now = at("2026-03-04T05:06:07.890Z");
        let fresh = terminating_condition_patch(&node(json!({})), now);
        let condition = &fresh["status"]["conditions"][0];
        assert_eq!(condition["type"], "Terminating");
        assert_eq!(condition["status"], "True");
        assert_eq!(condition["reason"], "ScaleDown");
        assert_eq!(condition["message"], TERMINATING_MESSAGE);
        assert_eq!(condition["lastTransitionTime"], "2026-03-04T05:06:07Z");
        assert_eq!(condition["lastHeartbeatTime"], "2026-03-04T05:06:07Z");

        let terminating = node(json!({ "status": { "conditions": [
            { "type": "Terminating", "status": "True", "lastTransitionTime": "2026-03-01T00:00:00Z" },
        ] } }));
        let again = terminating_condition_patch(&terminating, now);
        assert_eq!(
            again["status"]["conditions"][0]["lastTransitionTime"],
            "2026-03-01T00:00:00Z"
        );
    }
}
