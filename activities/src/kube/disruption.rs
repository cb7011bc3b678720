//! The do-not-disrupt marks on a machine's Node and the pods bound to it
//! (`model::disruption::marks` decides what counts).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodewright_model::disruption::{AnnotatedPod, DoNotDisrupt, marks};
use serde::{Deserialize, Serialize};

use super::drain::pods_on_node;
use crate::kube::error::{Error, Result};

/// Input of `kube.disruption_marks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionMarksOf {
    /// The Node (= the machine's name).
    pub node: String,
}

/// What `kube.disruption_marks` found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMarks {
    /// Whether the Node exists (a machine whose Node is gone has no marks).
    pub node_found: bool,
    /// The marks, Node first, then pods by `namespace/name`.
    pub marks: Vec<DoNotDisrupt>,
}

/// Reads the Node's annotations and lists the pods bound to it (all namespaces).
pub async fn disruption_marks(
    client: &kube::Client,
    input: &DisruptionMarksOf,
) -> Result<NodeMarks> {
    let nodes: Api<Node> = Api::all(client.clone());
    let Some(node) = nodes
        .get_opt(&input.node)
        .await
        .map_err(|source| Error::GetNode {
            name: input.node.clone(),
            source,
        })?
    else {
        return Ok(NodeMarks::default());
    };
    let no_annotations = BTreeMap::new();
    let node_annotations = node
        .metadata
        .annotations
        .as_ref()
        .unwrap_or(&no_annotations);
    let pods = pods_on_node(client, &input.node).await?;
    let annotated: Vec<AnnotatedPod<'_>> = pods
        .iter()
        .map(|pod| AnnotatedPod {
            namespace: pod.metadata.namespace.as_deref().unwrap_or_default(),
            name: pod.metadata.name.as_deref().unwrap_or_default(),
            phase: pod
                .status
                .as_ref()
                .and_then(|status| status.phase.as_deref())
                .unwrap_or_default(),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            annotations: pod.metadata.annotations.as_ref().unwrap_or(&no_annotations),
        })
        .collect();
    Ok(NodeMarks {
        node_found: true,
        marks: marks(node_annotations, &annotated),
    })
}
