//! A machine's Node: wait for it to register and become Ready, label and taint it, cordon it,
//! delete it. A Node is the machine's only when its providerID names the machine's VM.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use nodewright_model::ownership::{LABEL_MACHINE, provider_id_names_vm};
use serde::{Deserialize, Serialize};
use serde_json::json;
use temporalio_sdk::activities::ActivityContext;

use super::error::{Error, Result};

/// The field manager of nodewright's server-side applies.
pub const FIELD_MANAGER: &str = "nodewright";

/// How often a Node is read while waiting.
const NODE_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Wait for a machine's Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitNode {
    /// The Node's name (= machine name).
    pub node: String,
    /// The VM's ARM id; the Node's providerID must name it.
    pub vm_id: String,
    /// Give up at this instant (RFC 3339, from the workflow's clock).
    pub deadline: String,
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

/// Labels and taints for a Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetadata {
    /// The Node.
    pub node: String,
    /// Labels to own (nodewright's and the pool's).
    pub labels: BTreeMap<String, String>,
    /// Taints to own.
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
/// (`ready == true`), heartbeating, until the deadline.
pub async fn await_node(
    client: &kube::Client,
    ctx: &ActivityContext,
    input: &AwaitNode,
    ready: bool,
) -> Result<NodeWait> {
    let api: Api<Node> = Api::all(client.clone());
    let deadline = super::deadline_from_rfc3339(&input.deadline);
    loop {
        if let Err(error) = ctx.record_heartbeat(()).await {
            tracing::debug!(%error, "recording a heartbeat failed");
        }
        let last_seen = match get(&api, &input.node).await? {
            None => "no Node registered".to_owned(),
            Some(node) => match provider_id(&node) {
                Some(id) if provider_id_names_vm(id, &input.vm_id) => {
                    if !ready || is_ready(&node) {
                        return Ok(NodeWait::Reached {
                            provider_id: id.to_owned(),
                        });
                    }
                    "the Node is registered but not Ready".to_owned()
                }
                Some(other) if !other.is_empty() => {
                    return Err(Error::ForeignNode {
                        name: input.node.clone(),
                        found: Some(other.to_owned()),
                        expected: format!("azure://{}", input.vm_id),
                    });
                }
                _ => "the Node has no providerID yet".to_owned(),
            },
        };
        if Utc::now() >= deadline {
            return Ok(NodeWait::TimedOut { last_seen });
        }
        tokio::time::sleep(NODE_POLL_INTERVAL).await;
    }
}

/// Server-side applies the labels, annotations and taints as field manager `nodewright` (forced: nodewright
/// owns these fields).
pub async fn apply_metadata(client: &kube::Client, input: &NodeMetadata) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let taints: Vec<_> = input
        .taints
        .iter()
        .map(|t| json!({ "key": t.key, "value": t.value, "effect": t.effect }))
        .collect();
    let patch = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": input.node,
            "labels": input.labels,
            "annotations": input.annotations,
        },
        "spec": { "taints": taints },
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
    Ok(())
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
        return Ok(NodeChange::Done);
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
