//! Restamping a machine's Node with the pool's drain settings: a rollout that changed only them
//! writes the new `nodewright.io/drain-policy` annotation, keeping an operator's edits, and its
//! stamp `nodewright.io/drain-policy-stamp` (`model::drain::restamp` decides both texts).
//!
//! One merge patch of both annotations carrying the `resourceVersion` read (a conflict reads
//! again), only on the machine's Node. Not through the create's server-side apply: a forced
//! apply would take the field back from the operator's field manager.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodewright_model::drain::{
    ANNOTATION_DRAIN_POLICY, ANNOTATION_DRAIN_POLICY_STAMP, StampRecord, restamp,
};
use nodewright_model::pool::DrainPolicy;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::{Error, Result};
use super::node_spec::{Found, update_spec};
use super::nodes::MachineNode;
use super::pool::FIELD_MANAGER;

/// Restamp machines' Nodes with the pool's drain settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestampDrain {
    /// The machines' Nodes (name and the VM their providerID must name).
    pub nodes: Vec<MachineNode>,
    /// The VM's `nodewright.io-drain` tag by Node, for Nodes whose VM has one: the record of a
    /// Node without a stamp.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The pool's drain settings.
    pub policy: DrainPolicy,
}

/// What restamping found, by Node name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainRestamped {
    /// Nodes that carry the pool's settings and stamp now (written by this call or already so).
    pub stamped: Vec<String>,
    /// The operator's edits kept, field names by Node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kept: BTreeMap<String, Vec<String>>,
    /// Names with no Node.
    pub absent: Vec<String>,
    /// Nodes that are not the machine's: left alone.
    pub not_ours: Vec<String>,
}

/// Writes the pool's drain settings and their stamp on each machine's Node, an operator's edits
/// of the annotation kept; a Node already so is not written.
pub async fn restamp_drain(client: &kube::Client, input: &RestampDrain) -> Result<DrainRestamped> {
    let api: Api<Node> = Api::all(client.clone());
    let mut done = DrainRestamped::default();
    for machine in &input.nodes {
        let tag = input.tags.get(&machine.node).map(String::as_str);
        let found = update_spec(
            &api,
            &machine.node,
            &machine.vm_id,
            FIELD_MANAGER,
            |node| restamp_patch(node, tag, &input.policy).0,
            |name, source| Error::RestampDrain { name, source },
        )
        .await?;
        let name = machine.node.clone();
        match found {
            Found::Ours { node, .. } => {
                // The Node as it is now: restamped, so the fields kept are what differs from its
                // new stamp.
                let (_, fields) = restamp_patch(&node, tag, &input.policy);
                if !fields.is_empty() {
                    done.kept.insert(name.clone(), fields);
                }
                done.stamped.push(name);
            }
            Found::Absent => done.absent.push(name),
            Found::NotOurs(_) => done.not_ours.push(name),
        }
    }
    Ok(done)
}

/// The merge patch that restamps `node`, with the fields of an operator kept (named in the
/// second value); `None` when the Node carries these annotations already.
pub(crate) fn restamp_patch(
    node: &Node,
    tag: Option<&str>,
    policy: &DrainPolicy,
) -> (Option<Value>, Vec<String>) {
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    let annotation = annotations.get(ANNOTATION_DRAIN_POLICY).map(String::as_str);
    let stamp = annotations
        .get(ANNOTATION_DRAIN_POLICY_STAMP)
        .map(String::as_str);
    let restamped = restamp(annotation, &StampRecord::of(stamp, tag), policy);
    if annotation == Some(restamped.annotation.as_str()) && stamp == Some(restamped.stamp.as_str())
    {
        return (None, restamped.kept);
    }
    let patch = json!({
        "metadata": {
            "resourceVersion": node.metadata.resource_version,
            "annotations": {
                ANNOTATION_DRAIN_POLICY: restamped.annotation,
                ANNOTATION_DRAIN_POLICY_STAMP: restamped.stamp,
            },
        },
    });
    (Some(patch), restamped.kept)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nodewright_model::drain::{policy_to_annotation, policy_to_tag};

    use super::*;

    fn node(annotations: Value) -> Node {
        serde_json::from_value(json!({
            "metadata": { "name": "web-abcde", "resourceVersion": "7", "annotations": annotations },
        }))
        .unwrap_or_default()
    }

    fn policy(timeout: u64) -> DrainPolicy {
        DrainPolicy {
            timeout: Duration::from_secs(timeout),
            ..DrainPolicy::default()
        }
    }

    #[test]
    fn writes_both_annotations_with_the_resource_version_and_keeps_an_operators_edit() {
        let old = policy_to_annotation(&policy(7200));
        let edited = old.replace("\"timeout\":7200", "\"timeout\":14400");
        let found = node(json!({
            ANNOTATION_DRAIN_POLICY: edited,
            ANNOTATION_DRAIN_POLICY_STAMP: old,
        }));
        let (patch, kept) = restamp_patch(&found, None, &policy(600));
        let Some(patch) = patch else {
            panic!("a Node with old settings is written");
        };
        assert_eq!(kept, vec!["timeout".to_owned()]);
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        let annotations = &patch["metadata"]["annotations"];
        assert_eq!(
            annotations[ANNOTATION_DRAIN_POLICY_STAMP],
            policy_to_annotation(&policy(600))
        );
        assert!(
            annotations[ANNOTATION_DRAIN_POLICY]
                .as_str()
                .is_some_and(|text| text.contains("\"timeout\":14400"))
        );
    }

    #[test]
    fn a_node_already_restamped_is_not_written_and_one_without_a_stamp_is_told_by_its_tag() {
        let new = policy_to_annotation(&policy(600));
        let done = node(json!({
            ANNOTATION_DRAIN_POLICY: new,
            ANNOTATION_DRAIN_POLICY_STAMP: new,
        }));
        assert_eq!(restamp_patch(&done, None, &policy(600)).0, None);
        let legacy = node(json!({ ANNOTATION_DRAIN_POLICY: policy_to_annotation(&policy(7200)) }));
        let tag = policy_to_tag(&policy(7200));
        let (patch, kept) = restamp_patch(&legacy, Some(&tag), &policy(600));
        assert!(kept.is_empty(), "{kept:?}");
        let patch = patch.unwrap_or_default();
        assert_eq!(
            patch["metadata"]["annotations"][ANNOTATION_DRAIN_POLICY],
            new.as_str()
        );
    }
}
