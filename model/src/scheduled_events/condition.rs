//! How a Node carries its VM's Scheduled Events: what nodewright's agent writes
//! ([`condition_for`], [`annotation_for`]), how the controller reads it back
//! ([`read_from_node`], also from AKS node-problem-detector's conditions), and the
//! acknowledgements the controller asks the agent for ([`with_ack`], [`acks_requested`]).
//!
//! # On the Node
//! - Condition [`CONDITION_TYPE`]: `True` while an event is pending, reason = its `EventType`,
//!   message in node-problem-detector's words (`Preempt Scheduled: Mon, 19 Sep 2016 18:29:47
//!   GMT. DurationInSeconds: -1. EventId: <id>.`), the most urgent event first; `False` with
//!   reason [`NO_EVENT_REASON`] when none is.
//! - Annotation [`ANNOTATION_EVENTS`]: every pending event of the Node's VM as IMDS sent it, one
//!   JSON list (`[]` when none: the agent is there and nothing is pending), most urgent first,
//!   at most [`MAX_ANNOTATION_BYTES`]. One annotation for all, so that a reader sees them all at
//!   one instant, and `Resources` (which the condition lacks) travels with each event.
//! - Annotation [`ANNOTATION_ACK`], written by the controller: the event ids the agent may
//!   acknowledge, comma-separated, oldest first, at most [`MAX_ACKS`].
//!
//! # Reading back
//! The agent's annotation wins when it can be read: the agent polls IMDS every second and is
//! the only source with `Resources`. Without it (no agent, or an annotation that cannot be
//! read), the `True` conditions [`CONDITION_TYPE`], [`NPD_VM_EVENT_CONDITION`] and
//! [`NPD_PREEMPTION_CONDITION`] are read, the first event of each message. Such an event can
//! be drained for but never acknowledged (nobody reads the acknowledgement, and its
//! `Resources` are unknown). node-problem-detector's older messages carry no `EventId`: the
//! event gets [`synthetic_event_id`], stable for the Node, type and `NotBefore`.

use serde::{Deserialize, Serialize};

use super::document::{
    EventStatus, EventType, MAX_EVENT_ID_LEN, MAX_EVENTS, ScheduledEvent, is_event_id,
    not_before_seconds, not_before_text, parse_list,
};
use super::ids::fnv1a_hex;

/// The condition nodewright's agent sets on its Node.
pub const CONDITION_TYPE: &str = "nodewright.io/VMEventScheduled";

/// The reason of [`CONDITION_TYPE`] when no event is pending (node-problem-detector's).
pub const NO_EVENT_REASON: &str = "NoVMEventScheduled";

/// The annotation holding the Node's pending events as IMDS sent them (a JSON list).
pub const ANNOTATION_EVENTS: &str = "nodewright.io/scheduled-event";

/// The annotation holding the event ids the controller asks the agent to acknowledge.
pub const ANNOTATION_ACK: &str = "nodewright.io/scheduled-event-ack";

/// AKS node-problem-detector's condition for every Scheduled Event.
pub const NPD_VM_EVENT_CONDITION: &str = "VMEventScheduled";

/// AKS node-problem-detector's newer condition for a Spot eviction (reason
/// `SpotEvictionIncoming`).
pub const NPD_PREEMPTION_CONDITION: &str = "PreemptionScheduled";

/// The longest [`ANNOTATION_EVENTS`], in bytes (a Node's annotations together may hold
/// 256 KiB). An event naming the most VMs takes about 35 KiB, so the most urgent one always fits.
pub const MAX_ANNOTATION_BYTES: usize = 64 * 1024;

/// The longest condition message written or read, in bytes.
pub const MAX_CONDITION_MESSAGE_BYTES: usize = 1024;

/// The most event ids [`ANNOTATION_ACK`] holds; the oldest go first. Events of one VM come a few
/// at a time, and an id the agent no longer sees pending is ignored by it.
pub const MAX_ACKS: usize = 16;

/// A Node condition as plain strings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeConditionView {
    /// `type`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase word.
    pub reason: String,
    /// For people.
    pub message: String,
}

/// Where the controller read an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "from")]
pub enum EventOrigin {
    /// nodewright's agent's annotation: the event as IMDS sent it.
    Annotation,
    /// A Node condition, when there was no readable annotation.
    Condition {
        /// The condition's type.
        condition_type: String,
    },
}

/// One event pending on a Node, as the controller reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingEvent {
    /// The event. Read from a condition, its `Resources` are the Node alone.
    pub event: ScheduledEvent,
    /// Where it was read.
    pub origin: EventOrigin,
    /// Whether its id is [`synthetic_event_id`]'s (the condition named none).
    pub synthetic_id: bool,
}

impl PendingEvent {
    /// Whether nodewright can acknowledge the event: only when its agent published it (it
    /// reads [`ANNOTATION_ACK`], and the event's `Resources` are known).
    pub fn can_acknowledge(&self) -> bool {
        self.origin == EventOrigin::Annotation && !self.synthetic_id
    }
}

/// The condition [`CONDITION_TYPE`] for the Node's pending `events` (already only its VM's).
pub fn condition_for(events: &[ScheduledEvent]) -> NodeConditionView {
    let ordered = by_urgency(events);
    let Some(first) = ordered.first() else {
        return NodeConditionView {
            type_: CONDITION_TYPE.to_owned(),
            status: "False".to_owned(),
            reason: NO_EVENT_REASON.to_owned(),
            message: "No VM event is scheduled.".to_owned(),
        };
    };
    let mut message = String::new();
    for (index, event) in ordered.iter().enumerate() {
        let line = event_message(event);
        // Room for " And 32 more." after this line, when others follow.
        let tail_room = if index + 1 < ordered.len() { 16 } else { 0 };
        let separator = usize::from(!message.is_empty());
        if index > 0
            && message.len() + separator + line.len() + tail_room > MAX_CONDITION_MESSAGE_BYTES
        {
            message.push_str(&format!(" And {} more.", ordered.len() - index));
            break;
        }
        if separator == 1 {
            message.push(' ');
        }
        message.push_str(&line);
    }
    NodeConditionView {
        type_: CONDITION_TYPE.to_owned(),
        status: "True".to_owned(),
        reason: reason_for(&first.event_type),
        message: cut(&message, MAX_CONDITION_MESSAGE_BYTES).to_owned(),
    }
}

/// The annotation [`ANNOTATION_EVENTS`] for the Node's pending `events`: a JSON list of them as
/// IMDS sent them, most urgent first, as many as fit in [`MAX_ANNOTATION_BYTES`] (`[]` when
/// there are none).
pub fn annotation_for(events: &[ScheduledEvent]) -> String {
    let mut kept = Vec::new();
    let mut bytes = 2;
    for event in by_urgency(events).into_iter().take(MAX_EVENTS) {
        let raw = event.to_raw();
        // An event that cannot be written as JSON (none can: strings and numbers) is left out.
        let Ok(json) = serde_json::to_string(&raw) else {
            continue;
        };
        if bytes + json.len() + 1 > MAX_ANNOTATION_BYTES {
            break;
        }
        bytes += json.len() + 1;
        kept.push(raw);
    }
    serde_json::to_string(&kept).unwrap_or_else(|_| "[]".to_owned())
}

/// The events pending on the Node `node` (its name, for synthetic ids), most urgent first: from
/// the agent's `annotation` ([`ANNOTATION_EVENTS`]) when it can be read, else from the Node's
/// `conditions` (see the module's Reading back). At most [`MAX_EVENTS`]; never panics.
pub fn read_from_node(
    node: &str,
    annotation: Option<&str>,
    conditions: &[NodeConditionView],
) -> Vec<PendingEvent> {
    if let Some(events) = annotation
        .filter(|text| text.len() <= MAX_ANNOTATION_BYTES)
        .and_then(|text| parse_list(text).ok())
    {
        return by_urgency(&events)
            .into_iter()
            .map(|event| PendingEvent {
                event,
                origin: EventOrigin::Annotation,
                synthetic_id: false,
            })
            .collect();
    }
    let mut found: Vec<PendingEvent> = Vec::new();
    let read = [
        CONDITION_TYPE,
        NPD_VM_EVENT_CONDITION,
        NPD_PREEMPTION_CONDITION,
    ];
    for condition in conditions
        .iter()
        .filter(|c| read.contains(&c.type_.as_str()) && c.status.trim() == "True")
        .take(MAX_EVENTS)
    {
        let pending = from_condition(node, condition);
        let duplicate = found.iter_mut().find(|seen| {
            seen.event.id == pending.event.id
                || (seen.event.event_type == pending.event.event_type
                    && seen.event.not_before == pending.event.not_before
                    && (seen.synthetic_id || pending.synthetic_id))
        });
        match duplicate {
            Some(seen) if seen.synthetic_id && !pending.synthetic_id => *seen = pending,
            Some(_) => {}
            None => found.push(pending),
        }
    }
    found.sort_by_key(|pending| urgency(&pending.event));
    found
}

/// The id of an event read from a condition that names none: `synthetic-` and 16 hex digits of
/// FNV-1a over the Node's name (lowercase), the event type and `NotBefore` (its instant when it
/// can be read, else its text), so every look at the same condition gives the same id and one
/// workflow handles it.
pub fn synthetic_event_id(node: &str, event_type: &EventType, not_before: &str) -> String {
    let when = not_before_seconds(not_before)
        .map_or_else(|| not_before.trim().to_owned(), |s| s.to_string());
    let key = format!(
        "{}\n{}\n{when}",
        node.trim().to_ascii_lowercase(),
        event_type.as_str()
    );
    format!("synthetic-{}", fnv1a_hex(key.as_bytes()))
}

/// The event ids the controller asks the agent to acknowledge, read from [`ANNOTATION_ACK`]:
/// oldest first, each once, the newest [`MAX_ACKS`]. Blanks and anything that is not an event
/// id ([`is_event_id`]) are skipped; an over-long annotation is read from its end.
pub fn acks_requested(annotation: Option<&str>) -> Vec<String> {
    let Some(text) = annotation else {
        return Vec::new();
    };
    let max_bytes = MAX_ACKS * (MAX_EVENT_ID_LEN + 1);
    let text = if text.len() > max_bytes {
        // Read the end, and drop the id the cut went through.
        let tail = cut_front(text, max_bytes);
        tail.split_once(',').map_or("", |(_, rest)| rest)
    } else {
        text
    };
    let mut ids: Vec<String> = Vec::new();
    for id in text.split(',').map(str::trim).filter(|id| is_event_id(id)) {
        if !ids.iter().any(|seen| seen == id) {
            ids.push(id.to_owned());
        }
    }
    let extra = ids.len().saturating_sub(MAX_ACKS);
    ids.drain(..extra);
    ids
}

/// [`ANNOTATION_ACK`] with `event_id` asked for: unchanged (but tidied as [`acks_requested`]
/// reads it) when it is there already or is not an event id, else appended, the oldest dropped
/// beyond [`MAX_ACKS`].
pub fn with_ack(annotation: Option<&str>, event_id: &str) -> String {
    let mut ids = acks_requested(annotation);
    let event_id = event_id.trim();
    if is_event_id(event_id) && !ids.iter().any(|seen| seen == event_id) {
        ids.push(event_id.to_owned());
        let extra = ids.len().saturating_sub(MAX_ACKS);
        ids.drain(..extra);
    }
    ids.join(",")
}

/// One event in node-problem-detector's words, with its id.
fn event_message(event: &ScheduledEvent) -> String {
    let duration = event
        .duration_seconds
        .and_then(|seconds| i64::try_from(seconds).ok())
        .unwrap_or(-1);
    let kind = event.event_type.as_str();
    let id = &event.id;
    if event.has_started() {
        return format!("{kind} Started. DurationInSeconds: {duration}. EventId: {id}.");
    }
    let when = event
        .not_before
        .and_then(not_before_text)
        .or_else(|| (!event.not_before_text.is_empty()).then(|| event.not_before_text.clone()))
        .unwrap_or_else(|| "now".to_owned());
    format!("{kind} Scheduled: {when}. DurationInSeconds: {duration}. EventId: {id}.")
}

/// A condition reason for `event_type`: its ASCII letters and digits (at most 64), starting
/// with a letter, as Kubernetes requires.
fn reason_for(event_type: &EventType) -> String {
    let word: String = event_type
        .as_str()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(64)
        .collect();
    match word.chars().next() {
        Some(first) if first.is_ascii_alphabetic() => word,
        Some(_) => format!("Event{}", word.chars().take(59).collect::<String>()),
        None => "UnknownEvent".to_owned(),
    }
}

/// The event a condition describes (the first of its message).
fn from_condition(node: &str, condition: &NodeConditionView) -> PendingEvent {
    let message = cut(&condition.message, MAX_CONDITION_MESSAGE_BYTES);
    let parts = MessageParts::read(message);
    let event_type = parts
        .event_type
        .or_else(|| type_from_reason(&condition.type_, condition.reason.trim()))
        .unwrap_or_else(|| {
            EventType::Other(reason_for(&EventType::Other(condition.reason.clone())))
        });
    let not_before_text = parts.not_before.unwrap_or_default();
    let (id, synthetic_id) = match parts.event_id {
        Some(id) => (id, false),
        None => (
            synthetic_event_id(node, &event_type, &not_before_text),
            true,
        ),
    };
    let status = if parts.started {
        EventStatus::Started
    } else {
        EventStatus::Scheduled
    };
    PendingEvent {
        event: ScheduledEvent {
            id,
            event_type,
            status,
            resource_type: "VirtualMachine".to_owned(),
            resources: vec![node.trim().to_owned()],
            not_before: not_before_seconds(&not_before_text),
            not_before_text,
            description: message.to_owned(),
            source: String::new(),
            duration_seconds: parts.duration_seconds,
        },
        origin: EventOrigin::Condition {
            condition_type: condition.type_.clone(),
        },
        synthetic_id,
    }
}

/// The event type a condition's reason names: `PreemptScheduled` and `SpotEvictionIncoming`
/// are a Preempt, `<Type>Scheduled` is that type; a `PreemptionScheduled` condition is a
/// Preempt whatever its reason.
fn type_from_reason(condition_type: &str, reason: &str) -> Option<EventType> {
    if condition_type == NPD_PREEMPTION_CONDITION
        || reason.eq_ignore_ascii_case("SpotEvictionIncoming")
    {
        return Some(EventType::Preempt);
    }
    let named = reason.strip_suffix("Scheduled").filter(|kind| {
        !kind.is_empty() && !kind.eq_ignore_ascii_case("VMEvent") && !kind.starts_with("No")
    });
    named.map(|kind| EventType::from(kind.to_owned()))
}

/// What a message in node-problem-detector's words says.
#[derive(Debug, Default)]
struct MessageParts {
    event_type: Option<EventType>,
    started: bool,
    not_before: Option<String>,
    duration_seconds: Option<u64>,
    event_id: Option<String>,
}

impl MessageParts {
    /// Reads `<Type> Scheduled: <NotBefore>. DurationInSeconds: <n>. [EventId: <id>.] …` or
    /// `<Type> Started. …` (nodewright's own, for an event under way); what is missing stays
    /// `None`.
    fn read(message: &str) -> Self {
        let mut parts = Self::default();
        let scheduled = message.find(" Scheduled:");
        let started = message.find(" Started.");
        let (head, rest) = match (scheduled, started) {
            (Some(at), _) => (
                message.get(..at).unwrap_or_default(),
                message.get(at + " Scheduled:".len()..).unwrap_or_default(),
            ),
            (None, Some(at)) => {
                parts.started = true;
                (message.get(..at).unwrap_or_default(), "")
            }
            (None, None) => ("", ""),
        };
        parts.event_type = head
            .split_whitespace()
            .last()
            .filter(|word| word.chars().all(|c| c.is_ascii_alphanumeric()))
            .map(|word| EventType::from(word.to_owned()));
        if scheduled.is_some() {
            let ends = [". DurationInSeconds", ". EventId", ". For more", ". "];
            let end = ends
                .iter()
                .filter_map(|marker| rest.find(marker))
                .min()
                .unwrap_or(rest.len());
            let text = rest
                .get(..end)
                .unwrap_or_default()
                .trim()
                .trim_end_matches('.');
            parts.not_before = Some(text.to_owned());
        }
        parts.duration_seconds = value_after(message, "DurationInSeconds:")
            .and_then(|value| value.parse::<i64>().ok())
            .and_then(|value| u64::try_from(value).ok());
        parts.event_id = value_after(message, "EventId:")
            .map(|value| value.trim_end_matches('.').to_owned())
            .filter(|id| is_event_id(id));
        parts
    }
}

/// The word after `label` in `text` (leading blanks skipped; letters, digits and `-_.{}`).
fn value_after<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let at = text.find(label)?;
    let rest = text.get(at + label.len()..)?.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '{' | '}')))
        .unwrap_or(rest.len());
    rest.get(..end).filter(|value| !value.is_empty())
}

/// The order in which events matter: under way first, then by `NotBefore` (unreadable ones
/// first: they are acted on at once), then by type (those that take the VM away first), then
/// by id.
fn urgency(event: &ScheduledEvent) -> (bool, Option<i64>, u8, String) {
    let rank = match event.event_type {
        EventType::Preempt => 0,
        EventType::Terminate => 1,
        EventType::Redeploy => 2,
        EventType::Reboot => 3,
        EventType::Freeze => 4,
        EventType::Other(_) => 5,
    };
    (
        !event.has_started(),
        event.not_before,
        rank,
        event.id.clone(),
    )
}

/// `events` most urgent first.
fn by_urgency(events: &[ScheduledEvent]) -> Vec<ScheduledEvent> {
    let mut ordered = events.to_vec();
    ordered.sort_by_key(urgency);
    ordered
}

/// The longest start of `text` of at most `max_bytes` bytes that ends on a character.
fn cut(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let end = (0..=max_bytes)
        .rev()
        .find(|at| text.is_char_boundary(*at))
        .unwrap_or(0);
    text.get(..end).unwrap_or_default()
}

/// The longest end of `text` of at most `max_bytes` bytes that starts on a character.
fn cut_front(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let from = text.len() - max_bytes;
    let start = (from..=text.len())
        .find(|at| text.is_char_boundary(*at))
        .unwrap_or(text.len());
    text.get(start..).unwrap_or_default()
}

#[cfg(test)]
mod tests;
