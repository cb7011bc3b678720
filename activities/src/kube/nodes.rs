//! A machine's Node: wait for it to register and become Ready, label and taint it (the pool's
//! taints merged into the ones others put there), cordon it, delete it. A Node is the machine's
//! only when its providerID names the machine's VM.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint as KubeTaint};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use nodewright_model::hooks::{NodeHooks, hooks_on_node};
use nodewright_model::ownership::{LABEL_MACHINE, provider_id_names_vm};
use nodewright_model::taints::{
    ANNOTATION_MANAGED_TAINTS, ManagedTaints, Taint, TaintUpdate, decide_taints,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use temporalio_sdk::activities::ActivityContext;

use super::error::{Error, Result};
use super::follow::{Followed, follow_object};
use super::node_spec::{Found, is_labelled_machine, taints, update_node};

/// The field manager of nodewright's server-side applies.
pub const FIELD_MANAGER: &str = "nodewright";

/// Wait for a machine's Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitNode {
    /// The Node's name (= machine name).
    pub node: String,
    /// The VM's ARM id; the Node's providerID must name it.
    pub vm_id: String,
    /// Give up at this instant (RFC 3339, from the workflow's clock).
    pub deadline: chrono::DateTime<chrono::Utc>,
}

/// How a wait for a Node ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum NodeWait {
    /// The Node is there (registered, or Ready, as asked).
    Reached {
        /// Its providerID.
        provider_id: String,
    },
    /// The deadline passed first.
    TimedOut {
        /// What was seen last, for the failure message.
        last_seen: String,
    },
}

/// Labels, annotations and taints for a Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetadata {
    /// The Node.
    pub node: String,
    /// Labels to own (nodewright's and the pool's).
    pub labels: BTreeMap<String, String>,
    /// The pool's taints: merged into the Node's, which keep every taint nodewright did not
    /// put there (see [`apply_metadata`]).
    pub taints: Vec<NodeTaint>,
    /// Annotations to own (the pool's drain settings).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A taint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeTaint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// Effect.
    pub effect: String,
}

impl NodeTaint {
    /// The taint as [`decide_taints`] sees it.
    pub fn to_model(&self) -> Taint {
        Taint {
            key: self.key.clone(),
            value: self.value.clone(),
            effect: self.effect.clone(),
        }
    }
}

/// A machine's Node, identified by name and by the VM its providerID must name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineNode {
    /// The Node's name.
    pub node: String,
    /// The VM's ARM id.
    pub vm_id: String,
}

/// What a change to a machine's Node found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeChange {
    /// Done.
    Done,
    /// There is no such Node.
    Absent,
    /// A Node of that name belongs to another VM: left alone.
    NotOurs,
    /// It already was so: nothing written (a cordon of a Node that was cordoned before).
    Already,
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}

async fn get(api: &Api<Node>, name: &str) -> Result<Option<Node>> {
    api.get_opt(name).await.map_err(|source| Error::GetNode {
        name: name.to_owned(),
        source,
    })
}

/// Waits until the Node registers with the VM's providerID (`ready == false`) or is also Ready
/// (`ready == true`), heartbeating, until the deadline: the Node followed through a watch
/// (`follow::follow_object`), not read every few seconds.
pub async fn await_node(
    client: &kube::Client,
    ctx: &ActivityContext,
    input: &AwaitNode,
    ready: bool,
) -> Result<NodeWait> {
    let api: Api<Node> = Api::all(client.clone());
    let followed = follow_object(
        &api,
        &input.node,
        ctx,
        input.deadline,
        |node| judge_node(node, input, ready),
        || get(&api, &input.node),
    )
    .await?;
    Ok(match followed {
        Followed::Done(reached) => reached,
        Followed::TimedOut(node) => NodeWait::TimedOut {
            last_seen: describe(node.values().next()),
        },
    })
}

/// Whether the wait is over for the Node as seen: reached (registered with the VM's
/// providerID, and Ready when asked), or a foreign Node of the name (an error); none: wait on.
fn judge_node(node: Option<&Node>, input: &AwaitNode, ready: bool) -> Result<Option<NodeWait>> {
    let Some(node) = node else {
        return Ok(None);
    };
    match provider_id(node) {
        Some(id) if provider_id_names_vm(id, &input.vm_id) => {
            Ok((!ready || is_ready(node)).then(|| NodeWait::Reached {
                provider_id: id.to_owned(),
            }))
        }
        Some(other) if !other.is_empty() => Err(Error::ForeignNode {
            name: input.node.clone(),
            found: Some(other.to_owned()),
            expected: format!("azure://{}", input.vm_id),
        }),
        _ => Ok(None),
    }
}

/// What a wait that timed out saw last, for the failure message.
fn describe(node: Option<&Node>) -> String {
    match node {
        None => "no Node registered".to_owned(),
        Some(node) if provider_id(node).is_some_and(|id| !id.is_empty()) => {
            "the Node is registered but not Ready".to_owned()
        }
        Some(_) => "the Node has no providerID yet".to_owned(),
    }
}

/// Puts the pool's and nodewright's labels, annotations and taints on the Node.
///
/// Labels and annotations: a server-side apply as field manager `nodewright`, forced (nodewright
/// owns these keys). Map fields merge key by key: keys other managers set are kept, and a key this
/// manager applied before and no longer sends is removed.
///
/// Taints: not in the apply, because `spec.taints` is an atomic list and the apply would replace
/// the taints of every other writer (the kubelet's startup taints, the cloud provider's, a
/// CNI's). The Node is read, [`decide_taints`] merges the template's taints into it, and the list
/// is written with the annotation `nodewright.io/managed-taints` that records which taints are
/// nodewright's, in one merge patch carrying the `resourceVersion` read; a conflict re-reads and
/// merges again (a few times, then a retryable `TaintNode`). Only a Node labelled
/// `nodewright.io/machine=<node>` (the apply's own label) is tainted.
///
/// A Node whose taints a nodewright from before this merge applied (field manager `nodewright`
/// owning `spec.taints`) loses its taints to the apply, as the old apply itself replaced them;
/// the merge then puts the template's back.
pub async fn apply_metadata(client: &kube::Client, input: &NodeMetadata) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let patch = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": input.node,
            "labels": input.labels,
            "annotations": input.annotations,
        },
    });
    api.patch(
        &input.node,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|source| Error::ApplyNode {
        name: input.node.clone(),
        source,
    })?;
    let template: Vec<Taint> = input.taints.iter().map(NodeTaint::to_model).collect();
    let found = update_node(
        &api,
        &input.node,
        |node| is_labelled_machine(node, &input.node),
        FIELD_MANAGER,
        |node| taints_patch(node, &template),
        |name, source| Error::TaintNode { name, source },
    )
    .await?;
    match found {
        Found::Ours { .. } => Ok(()),
        Found::Absent | Found::NotOurs(_) => Err(Error::TaintNodeLost {
            name: input.node.clone(),
        }),
    }
}

/// The merge patch that writes the template's taints merged into the Node's, with the record of
/// them and the `resourceVersion` read; `None` when the Node already is as asked. A taint kept
/// is written exactly as read (its `timeAdded` too).
pub(crate) fn taints_patch(node: &Node, template: &[Taint]) -> Option<Value> {
    let current = taints(node);
    let observed: Vec<Taint> = current.iter().map(model_taint).collect();
    let annotation = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(ANNOTATION_MANAGED_TAINTS))
        .map(String::as_str);
    if let Some(Err(unreadable)) = annotation.map(ManagedTaints::parse) {
        tracing::warn!(
            node = node.metadata.name.as_deref().unwrap_or(""),
            %unreadable,
            "no taint is removed on its word; it is rewritten with the template's taints"
        );
    }
    let TaintUpdate::Write {
        taints: merged,
        annotation,
    } = decide_taints(&observed, annotation, template)
    else {
        return None;
    };
    let written: Vec<KubeTaint> = merged
        .iter()
        .map(|taint| {
            current
                .iter()
                .find(|kept| model_taint(kept) == *taint)
                .cloned()
                .unwrap_or_else(|| KubeTaint {
                    key: taint.key.clone(),
                    value: Some(taint.value.clone()).filter(|value| !value.is_empty()),
                    effect: taint.effect.clone(),
                    time_added: None,
                })
        })
        .collect();
    Some(json!({
        "metadata": {
            "resourceVersion": node.metadata.resource_version,
            "annotations": { ANNOTATION_MANAGED_TAINTS: annotation },
        },
        "spec": { "taints": written },
    }))
}

fn model_taint(taint: &KubeTaint) -> Taint {
    Taint {
        key: taint.key.clone(),
        value: taint.value.clone().unwrap_or_default(),
        effect: taint.effect.clone(),
    }
}

/// Reads the machine's Node: absent, not ours (another VM), or ours.
async fn machine_node(api: &Api<Node>, input: &MachineNode) -> Result<Result<Node, NodeChange>> {
    match get(api, &input.node).await? {
        None => Ok(Err(NodeChange::Absent)),
        Some(node) => match provider_id(&node) {
            Some(id) if provider_id_names_vm(id, &input.vm_id) => Ok(Ok(node)),
            _ => Ok(Err(NodeChange::NotOurs)),
        },
    }
}

/// Marks the Node unschedulable, only when nodewright labelled it as this machine's (a Node of
/// a same-named VM that is not ours is never touched, even before the VM's tags are read).
pub async fn cordon(client: &kube::Client, input: &MachineNode) -> Result<NodeChange> {
    let api: Api<Node> = Api::all(client.clone());
    let node = match machine_node(&api, input).await? {
        Ok(node) => node,
        Err(found) => return Ok(found),
    };
    let labelled = node
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(LABEL_MACHINE))
        .is_some_and(|machine| machine == &input.node);
    if !labelled {
        return Ok(NodeChange::NotOurs);
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Ok(NodeChange::Already);
    }
    let patch = json!({ "spec": { "unschedulable": true } });
    api.patch(&input.node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::CordonNode {
            name: input.node.clone(),
            source,
        })?;
    Ok(NodeChange::Done)
}

/// The delete hooks on the machine's Node (`model::hooks::hooks_on_node`); none when there is
/// no Node of that name (it never registered, or is gone) or it belongs to another VM (that
/// Node is not the machine's, and the delete leaves it alone).
pub async fn delete_hooks(client: &kube::Client, input: &MachineNode) -> Result<NodeHooks> {
    let api: Api<Node> = Api::all(client.clone());
    Ok(match machine_node(&api, input).await? {
        Ok(node) => hooks_on_node(&node.metadata.annotations.unwrap_or_default()),
        Err(_) => NodeHooks::default(),
    })
}

/// Deletes the Node object.
pub async fn delete(client: &kube::Client, input: &MachineNode) -> Result<NodeChange> {
    let api: Api<Node> = Api::all(client.clone());
    if let Err(found) = machine_node(&api, input).await? {
        return Ok(found);
    }
    match api.delete(&input.node, &DeleteParams::default()).await {
        Ok(_) => Ok(NodeChange::Done),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(NodeChange::Absent),
        Err(source) => Err(Error::DeleteNode {
            name: input.node.clone(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(extra: Value) -> Node {
        let mut base = json!({
            "metadata": {
                "name": "web-abcde",
                "resourceVersion": "42",
                "labels": { "nodewright.io/machine": "web-abcde" },
            },
            "spec": { "taints": [
                { "key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                  "timeAdded": "2026-01-02T03:04:05Z" },
                { "key": "dedicated", "value": "gpu", "effect": "NoSchedule" },
            ] },
        });
        crate::kube::node_spec::merge_json(&mut base, extra);
        serde_json::from_value(base).unwrap_or_default()
    }

    fn template(list: &[(&str, &str, &str)]) -> Vec<Taint> {
        list.iter()
            .map(|(key, value, effect)| Taint {
                key: (*key).to_owned(),
                value: (*value).to_owned(),
                effect: (*effect).to_owned(),
            })
            .collect()
    }

    #[test]
    fn the_taint_patch_keeps_taints_as_read_and_carries_the_resource_version() {
        let patch = taints_patch(&node(json!({})), &template(&[("gpu", "", "NoExecute")]));
        assert_eq!(
            patch,
            Some(json!({
                "metadata": {
                    "resourceVersion": "42",
                    "annotations": { ANNOTATION_MANAGED_TAINTS: "gpu:NoExecute" },
                },
                "spec": { "taints": [
                    { "key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                      "timeAdded": "2026-01-02T03:04:05Z" },
                    { "key": "dedicated", "value": "gpu", "effect": "NoSchedule" },
                    { "key": "gpu", "effect": "NoExecute" },
                ] },
            }))
        );
    }

    #[test]
    fn the_taint_patch_removes_the_record_with_the_last_recorded_taint() {
        let recorded = node(json!({
            "metadata": { "annotations": { ANNOTATION_MANAGED_TAINTS: "dedicated:NoSchedule" } },
        }));
        assert_eq!(
            taints_patch(&recorded, &[]),
            Some(json!({
                "metadata": {
                    "resourceVersion": "42",
                    "annotations": { ANNOTATION_MANAGED_TAINTS: null },
                },
                "spec": { "taints": [
                    { "key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                      "timeAdded": "2026-01-02T03:04:05Z" },
                ] },
            }))
        );
    }

    #[test]
    fn no_patch_when_the_node_carries_the_template_and_its_record() {
        let recorded = node(json!({
            "metadata": { "annotations": { ANNOTATION_MANAGED_TAINTS: "dedicated:NoSchedule" } },
        }));
        let wanted = template(&[("dedicated", "gpu", "NoSchedule")]);
        assert_eq!(taints_patch(&recorded, &wanted), None);
        assert_eq!(taints_patch(&node(json!({})), &[]), None);
    }
}
