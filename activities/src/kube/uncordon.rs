//! `machine uncordon` on the Node: nodewright's draining taint always removed, taints of others
//! kept, and a cordon an administrator set before nodewright's drain (recorded by the drain's
//! cordon step as [`ANNOTATION_CORDONED_BEFORE_DRAIN`]) kept unless forced
//! (`model::machine::uncordon::plan_uncordon`).

use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::Api;
use nodewright_model::machine::uncordon::{
    ANNOTATION_CORDONED_BEFORE_DRAIN, NodeMarks, UncordonOutcome, plan_uncordon,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::cordon_mark::{annotation, is_draining_taint, is_unschedulable};
use super::drain::{FIELD_MANAGER, RestoreNode, restore_node};
use super::error::{Error, Result};
use super::node_spec::{Found, taints, update_spec};
use super::nodes::NodeChange;

/// Uncordon a machine's Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UncordonNode {
    /// The Node's name.
    pub node: String,
    /// The VM's ARM id; the Node's providerID must name it.
    pub vm_id: String,
    /// Clear also a cordon that was there before nodewright's drain.
    pub force: bool,
}

/// Uncordons the machine's Node as [`plan_uncordon`] decides, then removes the `Terminating`
/// condition a drain set; only for a Node whose providerID names the VM and that carries
/// `nodewright.io/machine=<node>`.
pub async fn uncordon(client: &kube::Client, input: &UncordonNode) -> Result<UncordonOutcome> {
    let api: Api<Node> = Api::all(client.clone());
    let kept = AtomicBool::new(false);
    let force = input.force;
    let found = update_spec(
        &api,
        &input.node,
        &input.vm_id,
        FIELD_MANAGER,
        |node| {
            let (patch, keep) = uncordon_patch(node, force);
            kept.store(keep, Ordering::Relaxed);
            patch
        },
        |name, source| Error::UncordonNode { name, source },
    )
    .await?;
    match found {
        Found::Absent => return Ok(UncordonOutcome::Absent),
        Found::NotOurs(_) => return Ok(UncordonOutcome::NotOurs),
        Found::Ours { .. } => {}
    }
    // The spec is as planned: this only clears the `Terminating` condition (the cordon is
    // left as it now is).
    let restored = restore_node(
        client,
        &RestoreNode {
            node: input.node.clone(),
            vm_id: input.vm_id.clone(),
            keep_cordoned: true,
        },
    )
    .await?;
    Ok(match restored {
        NodeChange::Absent => UncordonOutcome::Absent,
        NodeChange::NotOurs => UncordonOutcome::NotOurs,
        NodeChange::Done | NodeChange::Already if kept.load(Ordering::Relaxed) => {
            UncordonOutcome::KeptCordon
        }
        NodeChange::Done | NodeChange::Already => UncordonOutcome::Uncordoned,
    })
}

/// The merge patch that carries out [`plan_uncordon`] on `node` (`None`: nothing to change),
/// and whether the cordon is kept.
fn uncordon_patch(node: &Node, force: bool) -> (Option<Value>, bool) {
    let (ours, others): (Vec<Taint>, Vec<Taint>) =
        taints(node).into_iter().partition(is_draining_taint);
    let plan = plan_uncordon(marks(node, !ours.is_empty()), force);
    if !plan.clear_cordon && !plan.remove_draining_taint && !plan.remove_mark {
        return (None, plan.keep_cordon);
    }
    let mut patch = json!({ "metadata": { "resourceVersion": node.metadata.resource_version } });
    if plan.remove_mark {
        patch["metadata"]["annotations"] = json!({ ANNOTATION_CORDONED_BEFORE_DRAIN: null });
    }
    if plan.remove_draining_taint {
        patch["spec"]["taints"] = json!(others);
    }
    if plan.clear_cordon {
        patch["spec"]["unschedulable"] = Value::Null;
    }
    (Some(patch), plan.keep_cordon)
}

/// The marks uncordon decides on.
fn marks(node: &Node, draining_taint: bool) -> NodeMarks {
    NodeMarks {
        unschedulable: is_unschedulable(node),
        draining_taint,
        cordoned_before_drain: annotation(node).is_some_and(|value| value == "true"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::cordon_mark::cordoned_before_drain_mark;
    use nodewright_model::drain::TAINT_DRAINING;

    fn node(unschedulable: bool, tainted: bool, marked: bool) -> Node {
        let mut taints = vec![json!({ "key": "team", "value": "a", "effect": "NoExecute" })];
        if tainted {
            taints.push(json!({ "key": TAINT_DRAINING, "effect": "NoSchedule" }));
        }
        let annotations = if marked {
            json!({ ANNOTATION_CORDONED_BEFORE_DRAIN: "true" })
        } else {
            json!({})
        };
        serde_json::from_value(json!({
            "metadata": { "name": "web-a1", "resourceVersion": "7", "annotations": annotations },
            "spec": { "unschedulable": unschedulable, "taints": taints },
        }))
        .unwrap()
    }

    #[test]
    fn an_administrators_cordon_stays_and_only_the_draining_taint_goes() {
        let (patch, kept) = uncordon_patch(&node(true, true, true), false);
        assert!(kept);
        assert_eq!(
            patch,
            Some(json!({
                "metadata": { "resourceVersion": "7" },
                "spec": { "taints": [{ "key": "team", "value": "a", "effect": "NoExecute" }] },
            }))
        );
    }

    #[test]
    fn force_clears_the_cordon_and_its_record_and_keeps_foreign_taints() {
        let (patch, kept) = uncordon_patch(&node(true, true, true), true);
        assert!(!kept);
        assert_eq!(
            patch,
            Some(json!({
                "metadata": {
                    "resourceVersion": "7",
                    "annotations": { ANNOTATION_CORDONED_BEFORE_DRAIN: null },
                },
                "spec": {
                    "taints": [{ "key": "team", "value": "a", "effect": "NoExecute" }],
                    "unschedulable": null,
                },
            }))
        );
    }

    #[test]
    fn nothing_to_change_on_a_schedulable_unmarked_node() {
        assert_eq!(
            uncordon_patch(&node(false, false, false), false),
            (None, false)
        );
    }

    #[test]
    fn the_drain_records_only_a_cordon_it_did_not_set() {
        assert_eq!(
            cordoned_before_drain_mark(&node(true, false, false)),
            Some((ANNOTATION_CORDONED_BEFORE_DRAIN, json!("true")))
        );
        assert_eq!(cordoned_before_drain_mark(&node(true, true, true)), None);
        assert_eq!(cordoned_before_drain_mark(&node(false, false, false)), None);
        assert_eq!(
            cordoned_before_drain_mark(&node(false, false, true)),
            Some((ANNOTATION_CORDONED_BEFORE_DRAIN, Value::Null))
        );
    }
}
