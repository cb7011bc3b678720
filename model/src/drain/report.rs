//! What a drain says to people: the summary of its result, the plan, a Node that is not the
//! machine's, and what a cancelled drain gave back and kept.

use std::time::Duration;

use super::pods::DrainPlan;
use super::purpose::DrainPurpose;
use super::request::{DrainResume, DrainedNode};
use super::rules::RuledPlan;

/// The run's closing line, e.g. `web-abcde drained in force mode (force was requested)`.
pub fn drained_summary(node: &str, drained: &DrainedNode) -> String {
    if !drained.node_found {
        format!("no Node {node}: nothing to drain")
    } else if let Some(reason) = &drained.forced {
        format!("{node} drained in force mode ({reason})")
    } else {
        format!("{node} drained")
    }
}

/// Why a Node of the machine's name is left alone: its providerID does not name the machine's VM
/// or it lacks the machine label.
pub fn not_this_machine(node: &str, provider_id: Option<&str>) -> String {
    let provider = match provider_id {
        Some(id) => format!("has providerID {id}"),
        None => "has no providerID".to_owned(),
    };
    format!(
        "Node {node} {provider} or lacks the label nodewright.io/machine={node}: it is not this machine's, so nothing on it was touched"
    )
}

/// What `cordon` did to the Node for a drain of `purpose`.
pub fn cordoned(purpose: DrainPurpose) -> &'static str {
    match purpose {
        DrainPurpose::Deletion => {
            "cordoned, tainted nodewright.io/draining:NoSchedule, condition Terminating"
        }
        DrainPurpose::Maintenance => "cordoned, tainted nodewright.io/draining:NoSchedule",
    }
}

/// The purpose as the `purpose` fact says it.
pub fn purpose_word(purpose: DrainPurpose) -> &'static str {
    match purpose {
        DrainPurpose::Maintenance => "maintenance",
        DrainPurpose::Deletion => "deletion",
    }
}

/// The plan in a few words, e.g. `3 without volumes, 1 with volumes, 2 left in place`.
pub fn describe_plan(plan: &DrainPlan) -> String {
    let mut parts = vec![
        format!("{} without volumes", plan.without_volumes.len()),
        format!("{} with volumes", plan.with_volumes.len()),
    ];
    if !plan.terminating.is_empty() {
        parts.push(format!("{} already terminating", plan.terminating.len()));
    }
    if !plan.skipped.is_empty() {
        parts.push(format!("{} left in place", plan.skipped.len()));
    }
    if !plan.local_data.is_empty() {
        parts.push(format!(
            "{} evicted with their local data (localData evict)",
            plan.local_data.len()
        ));
    }
    if !plan.not_waited_on.is_empty() {
        parts.push(format!(
            "{} volumes not waited on (no attach, or used from other nodes)",
            plan.not_waited_on.len()
        ));
    }
    parts.join(", ")
}

/// The move-volumes step's detail: `moved` pods whose every waited-on volume attached on another
/// node, `unconfirmed` pods whose volumes detached here but were not seen attached elsewhere in
/// time, `detach_pending` pods whose volumes had not detached. Pods whose volumes were not
/// waited on are in none of them.
pub fn volumes_moved_detail(moved: usize, unconfirmed: usize, detach_pending: usize) -> String {
    let mut detail = format!("{moved} pods moved with their volumes");
    if unconfirmed > 0 {
        detail.push_str(&format!(
            ", {unconfirmed} whose volumes did not attach elsewhere in time"
        ));
    }
    if detach_pending > 0 {
        detail.push_str(&format!(", {detach_pending} with a detach pending"));
    }
    detail
}

/// The plan of a drain with rules in a few words: [`describe_plan`]'s, and the tiers and the
/// pods waited for when there are (`..., 3 tiers (orders -10, 0, 20), 1 waited for until they
/// complete`).
pub fn describe_ruled_plan(plan: &RuledPlan) -> String {
    let mut text = describe_plan(&plan.whole);
    if plan.tiers.len() > 1 {
        let orders: Vec<String> = plan.tiers.iter().map(|t| t.order.to_string()).collect();
        text.push_str(&format!(
            ", {} tiers (orders {})",
            plan.tiers.len(),
            orders.join(", ")
        ));
    }
    if !plan.wait_completed.is_empty() {
        text.push_str(&format!(
            ", {} waited for until they complete",
            plan.wait_completed.len()
        ));
    }
    text
}

/// Which continuation the next run of a drain is: 1 after the first run.
pub fn next_continuation(resume: Option<&DrainResume>) -> u32 {
    resume.map_or(1, |r| r.continuation.saturating_add(1))
}

/// How the move of the pod whose volumes were moving ended on the cancellation path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InFlightEnd {
    /// Detached here and attached elsewhere: the move finished.
    Moved,
    /// Detached here; the reattach was not confirmed, for this reason.
    ReattachUnconfirmed(String),
    /// These volumes were still attached here after `waited`.
    StillAttached {
        /// The PersistentVolumes.
        pending: Vec<String>,
        /// How long the detach was waited for.
        waited: Duration,
    },
    /// The detach was not confirmed, for this reason.
    DetachUnconfirmed(String),
}

/// The `kept` line of a cancelled drain for `pod`, whose volumes were moving.
pub fn in_flight_kept(pod: &str, end: &InFlightEnd) -> String {
    match end {
        InFlightEnd::Moved => format!(
            "pod {pod} was moving with its volumes when the request came: the move finished"
        ),
        InFlightEnd::ReattachUnconfirmed(reason) => format!(
            "pod {pod} was moving with its volumes: its reattach was not confirmed ({reason})"
        ),
        InFlightEnd::StillAttached { pending, waited } => format!(
            "pod {pod} was moving with its volumes: {} still attached here after {}s, so attached to this node only",
            pending.join(", "),
            waited.as_secs()
        ),
        InFlightEnd::DetachUnconfirmed(reason) => format!(
            "pod {pod} was moving with its volumes: its detach was not confirmed ({reason})"
        ),
    }
}

/// The `kept` lines of a cancelled drain for what it had done: pods evicted, volumes moved.
pub fn kept_after_cancel(done: &DrainedNode) -> Vec<String> {
    let mut kept = Vec::new();
    let evicted = done.evicted.len();
    if evicted > 0 {
        kept.push(format!(
            "{evicted} pods already evicted stay where they were rescheduled"
        ));
    }
    for (pv, node) in &done.volumes_moved {
        kept.push(format!("volume {pv} stays attached to {node}"));
    }
    kept
}

/// The `undone` line of a cancelled drain that gave the Node back.
pub fn given_back(node: &str, keep_cordoned: bool, purpose: DrainPurpose) -> String {
    let what = if keep_cordoned {
        format!(
            "removed the draining taint from {node} (it stays cordoned: it was before the drain)"
        )
    } else {
        format!("uncordoned {node} and removed the draining taint")
    };
    match purpose {
        DrainPurpose::Deletion => format!("{what} and the Terminating condition"),
        DrainPurpose::Maintenance => what,
    }
}

#[cfg(test)]
mod tests;
