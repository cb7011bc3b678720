//! The drain's record of a cordon that was there before it: the Node annotation
//! [`ANNOTATION_CORDONED_BEFORE_DRAIN`], written by the drain's cordon step and read by
//! `machine uncordon` (`super::uncordon`). A leaf: both the drain and uncordon use it.

use k8s_openapi::api::core::v1::{Node, Taint};
use nodewright_model::drain::TAINT_DRAINING;
use nodewright_model::machine::uncordon::ANNOTATION_CORDONED_BEFORE_DRAIN;
use serde_json::{Value, json};

use super::node_spec::taints;

/// The draining taint's effect.
const NO_SCHEDULE: &str = "NoSchedule";

/// The drain's cordon step's record of a cordon that was there before it, to merge into its
/// patch: `"true"` when `node` is cordoned by someone else (unschedulable without the draining
/// taint), `null` (removed) when a stale record sits on a schedulable Node, else nothing (a
/// rerun finds its own cordon and leaves the record as the first run wrote it).
pub(crate) fn cordoned_before_drain_mark(node: &Node) -> Option<(&'static str, Value)> {
    let tainted = taints(node).iter().any(is_draining_taint);
    if is_unschedulable(node) && !tainted {
        return Some((ANNOTATION_CORDONED_BEFORE_DRAIN, json!("true")));
    }
    if !is_unschedulable(node) && annotation(node).is_some() {
        return Some((ANNOTATION_CORDONED_BEFORE_DRAIN, Value::Null));
    }
    None
}

/// The Node's [`ANNOTATION_CORDONED_BEFORE_DRAIN`], when set.
pub(crate) fn annotation(node: &Node) -> Option<&String> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(ANNOTATION_CORDONED_BEFORE_DRAIN))
}

/// Whether `taint` is nodewright's draining taint.
pub(crate) fn is_draining_taint(taint: &Taint) -> bool {
    taint.key == TAINT_DRAINING && taint.effect == NO_SCHEDULE
}

/// Whether the Node is cordoned.
pub(crate) fn is_unschedulable(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}
