//! What the agent writes on its Node, and when: the condition `nodewright.io/VMEventScheduled`
//! ([`condition_patch`], a strategic-merge patch of `nodes/status`, so that the other conditions
//! stay as they are), the annotation `nodewright.io/scheduled-event` ([`annotation_patch`]), and
//! one Kubernetes Event per Scheduled Event ([`event_object`]). The texts come from
//! `nodewright_model::scheduled_events` ([`condition_for`], [`annotation_for`]); this module only
//! wraps them for the apiserver and remembers what it published ([`Memory`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::NodeCondition;
use nodewright_model::scheduled_events::{
    ANNOTATION_EVENTS, NodeConditionView, ScheduledEvent, condition_for,
};
use serde_json::{Value, json};

/// How often the Node is written even when nothing changed, so that a condition or annotation
/// someone else overwrote comes back and `lastHeartbeatTime` says the agent is alive: every 10
/// minutes, a GET and two PATCHes per Node, which at 1,000 Nodes is 5 requests a second, about
/// what the kubelets' own status reports (every 5 minutes) cost; every minute would be 50.
pub const RESYNC_EVERY: Duration = Duration::from_secs(600);

/// The controller named in the Events the agent sends.
pub const REPORTING_CONTROLLER: &str = "nodewright.io/node-agent";

/// The namespace of Node Events (as the kubelet's).
pub const EVENT_NAMESPACE: &str = "default";

/// The longest `reportingInstance` an Event may carry.
const MAX_INSTANCE_LEN: usize = 128;

/// The longest object name Kubernetes accepts.
const MAX_NAME_LEN: usize = 253;

/// What the agent last published on its Node, to tell when to publish again.
#[derive(Debug, Default)]
pub struct Memory {
    last: Option<Published>,
    announced: BTreeSet<String>,
}

#[derive(Debug)]
struct Published {
    incarnation: i64,
    annotation: String,
    at: Instant,
}

impl Memory {
    /// Whether the Node must be written now: never written, the document's incarnation or the
    /// VM's events (`annotation`, which holds them all) changed, or [`RESYNC_EVERY`] passed.
    pub fn is_due(&self, incarnation: i64, annotation: &str, now: Instant) -> bool {
        match &self.last {
            None => true,
            Some(last) => {
                last.incarnation != incarnation
                    || last.annotation != annotation
                    || now.saturating_duration_since(last.at) >= RESYNC_EVERY
            }
        }
    }

    /// Records that the Node now carries `annotation` of document `incarnation`.
    pub fn published(&mut self, incarnation: i64, annotation: &str, now: Instant) {
        self.last = Some(Published {
            incarnation,
            annotation: annotation.to_owned(),
            at: now,
        });
    }

    /// The events of `events` not announced by an Event yet, in their order.
    pub fn to_announce<'a>(&self, events: &'a [ScheduledEvent]) -> Vec<&'a ScheduledEvent> {
        events
            .iter()
            .filter(|event| !self.announced.contains(&event.id))
            .collect()
    }

    /// Records that an Event announced `event_id`.
    pub fn announced(&mut self, event_id: &str) {
        self.announced.insert(event_id.to_owned());
    }

    /// Forgets the announcements of events no longer pending (the memory stays as small as the
    /// document; an id IMDS dropped does not come back).
    pub fn forget_all_but(&mut self, events: &[ScheduledEvent]) {
        self.announced
            .retain(|id| events.iter().any(|event| &event.id == id));
    }
}

/// The strategic-merge patch of `nodes/status` that sets the condition `view` at `now` (RFC
/// 3339): `lastHeartbeatTime` is now, `lastTransitionTime` is the `existing` condition's while the
/// status stays the same, else now. `status.conditions` merges by `type`, so no other condition
/// is touched.
pub fn condition_patch(
    view: &NodeConditionView,
    existing: Option<&NodeCondition>,
    now: &str,
) -> Value {
    let transition = existing
        .filter(|condition| condition.status == view.status)
        .and_then(|condition| condition.last_transition_time.as_ref())
        .and_then(|time| serde_json::to_value(time).ok())
        .unwrap_or_else(|| json!(now));
    json!({ "status": { "conditions": [{
        "type": view.type_,
        "status": view.status,
        "reason": view.reason,
        "message": view.message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": transition,
    }]}})
}

/// The JSON merge patch that sets the annotation `nodewright.io/scheduled-event` to `annotation`
/// and leaves every other annotation alone.
pub fn annotation_patch(annotation: &str) -> Value {
    json!({ "metadata": { "annotations": { ANNOTATION_EVENTS: annotation } } })
}

/// The reason of the Event announcing `event`: `<EventType>Scheduled` (`PreemptScheduled`), the
/// type's letters and digits only, as a reason is a CamelCase word.
pub fn event_reason(event: &ScheduledEvent) -> String {
    let word: String = event
        .event_type
        .as_str()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(100)
        .collect();
    match word.chars().next() {
        Some(first) if first.is_ascii_alphabetic() => format!("{word}Scheduled"),
        _ => format!("Event{word}Scheduled"),
    }
}

/// The name of the Event announcing `event_id` on Node `node`: the same at every try and after
/// a restart, so that the apiserver refuses a second one (409) and each event is announced once.
pub fn event_name(node: &str, event_id: &str) -> String {
    let id: String = event_id
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let id = id.trim_matches('-');
    let suffix = format!(".scheduled-event-{id}");
    let room = MAX_NAME_LEN.saturating_sub(suffix.len());
    let node: String = node.chars().take(room).collect();
    format!("{}{suffix}", node.trim_end_matches(['-', '.']))
        .chars()
        .take(MAX_NAME_LEN)
        .collect()
}

/// The Event (events.k8s.io/v1) announcing `event` on Node `node` (uid `node_uid`), at `now`
/// (RFC 3339 with microseconds): type Warning, reason [`event_reason`], note the condition's
/// message for this event alone.
pub fn event_object(
    node: &str,
    node_uid: Option<&str>,
    event: &ScheduledEvent,
    now: &str,
) -> Value {
    let note = condition_for(std::slice::from_ref(event)).message;
    let mut regarding = json!({ "apiVersion": "v1", "kind": "Node", "name": node });
    if let Some(uid) = node_uid {
        regarding["uid"] = json!(uid);
    }
    json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": { "name": event_name(node, &event.id), "namespace": EVENT_NAMESPACE },
        "eventTime": now,
        "type": "Warning",
        "reason": event_reason(event),
        "action": "Announce",
        "note": note,
        "regarding": regarding,
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": node.chars().take(MAX_INSTANCE_LEN).collect::<String>(),
    })
}

#[cfg(test)]
mod tests;
