//! The IMDS Scheduled Events document (`GET /metadata/scheduledevents?api-version=2020-07-01`):
//! its JSON as IMDS sends it ([`Document`], [`RawEvent`]), read tolerantly and bounded
//! ([`parse`]) into [`ScheduledEvent`]s, and the events that name one VM ([`for_vm`]).
//!
//! # Tolerance
//! - An event type nodewright does not know (Azure announced a rebalance recommendation and
//!   longer Spot notices) is kept as [`EventType::Other`], and a status as
//!   [`EventStatus::Other`] (the Event Grid path adds `Completed` and `Canceled`): published,
//!   never an error.
//! - Fields IMDS may add are ignored; fields it leaves out take their blank value
//!   (`DurationInSeconds`: -1, unknown).
//! - `NotBefore` is RFC 1123 in GMT (`Mon, 19 Sep 2016 18:29:47 GMT`), blank once the event
//!   has started. One that cannot be read is kept as text with no instant, and the event is acted
//!   on at once.
//!
//! # Bounds
//! Everything is bounded before it is used: the document's bytes ([`MAX_DOCUMENT_BYTES`]), the
//! events ([`MAX_EVENTS`]), each event's id ([`MAX_EVENT_ID_LEN`], and only the characters
//! [`is_event_id`] allows, since ids travel in a comma-separated annotation), its resources
//! ([`MAX_RESOURCES`] of at most [`MAX_RESOURCE_NAME_LEN`] bytes) and its short fields
//! ([`MAX_TOKEN_LEN`]). Anything longer is a [`DocumentError::TooLong`] naming the field. The
//! description only is cut to [`MAX_DESCRIPTION_CHARS`] instead: it is prose for people, and a
//! long one must not hide a Preempt.

use jiff::Timestamp;
use jiff::fmt::rfc2822::DateTimeParser;
use serde::{Deserialize, Serialize};

/// The longest document read, in bytes: 32 events naming 256 VMs each fit, with room.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// The most events one document may hold. IMDS lists the events of the VM's availability set or
/// placement group that are pending now: a handful at most.
pub const MAX_EVENTS: usize = 32;

/// The longest `EventId`, in bytes. Azure's are GUIDs (36 characters).
pub const MAX_EVENT_ID_LEN: usize = 64;

/// The most VMs one event may name in `Resources`: an availability set holds at most 200, a
/// scale set's placement group 100.
pub const MAX_RESOURCES: usize = 256;

/// The longest VM name in `Resources`, in bytes: a VM name has at most 64 characters, a scale
/// set instance is `{vmss}_{id}`.
pub const MAX_RESOURCE_NAME_LEN: usize = 128;

/// The longest short field (`EventType`, `EventStatus`, `ResourceType`, `EventSource`,
/// `NotBefore`), in bytes.
pub const MAX_TOKEN_LEN: usize = 64;

/// The longest `Description` kept, in characters; a longer one is cut (never an error).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// The Scheduled Events document as IMDS sends it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Document {
    /// Changes whenever the list of events changes.
    #[serde(default)]
    pub document_incarnation: i64,
    /// The pending events of the VM's availability set or placement group.
    #[serde(default)]
    pub events: Vec<RawEvent>,
}

/// One event as IMDS sends it (and as the agent's annotation carries it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawEvent {
    /// The event's id, a GUID.
    pub event_id: String,
    /// `Scheduled` or `Started`.
    pub event_status: EventStatus,
    /// `Preempt`, `Reboot`, `Redeploy`, `Freeze`, `Terminate` or one yet unknown.
    pub event_type: EventType,
    /// `VirtualMachine`.
    #[serde(default)]
    pub resource_type: String,
    /// The VMs the event affects (an acknowledgement starts it on all of them).
    #[serde(default)]
    pub resources: Vec<String>,
    /// RFC 1123 in GMT, blank once the event has started.
    #[serde(default)]
    pub not_before: String,
    /// What happens, for people.
    #[serde(default)]
    pub description: String,
    /// `Platform` or `User`.
    #[serde(default)]
    pub event_source: String,
    /// How long the VM is affected; -1 when unknown.
    #[serde(default = "unknown_duration")]
    pub duration_in_seconds: i64,
}

/// The kind of an event.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum EventType {
    /// A Spot VM is evicted (deallocated or deleted); at least 30 s notice, best effort.
    Preempt,
    /// The VM restarts, memory lost; at least 15 min notice.
    Reboot,
    /// The VM moves to another host, local disks lost; at least 10 min notice.
    Redeploy,
    /// The VM pauses for a few seconds (live migration, host update); at least 15 min notice.
    Freeze,
    /// The VM is deleted (opt-in notice of 5 to 15 min).
    Terminate,
    /// A type nodewright does not know, as sent.
    Other(String),
}

/// Where an event is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum EventStatus {
    /// It starts at `NotBefore`, or earlier once acknowledged.
    Scheduled,
    /// It is under way.
    Started,
    /// A status nodewright does not know, as sent.
    Other(String),
}

/// One event, read and bounded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledEvent {
    /// `EventId`.
    pub id: String,
    /// `EventType`.
    pub event_type: EventType,
    /// `EventStatus`.
    pub status: EventStatus,
    /// `ResourceType`.
    pub resource_type: String,
    /// `Resources`: the VMs it affects.
    pub resources: Vec<String>,
    /// `NotBefore` in Unix seconds; `None` when blank (started) or unreadable: act at once.
    pub not_before: Option<i64>,
    /// `NotBefore` as sent.
    pub not_before_text: String,
    /// `Description`, cut to [`MAX_DESCRIPTION_CHARS`].
    pub description: String,
    /// `EventSource`.
    pub source: String,
    /// `DurationInSeconds`; `None` when unknown (-1, or any other negative value).
    pub duration_seconds: Option<u64>,
}

/// A document read: its incarnation and its events.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledEvents {
    /// `DocumentIncarnation`.
    pub incarnation: i64,
    /// The events, in the document's order.
    pub events: Vec<ScheduledEvent>,
}

/// A document (or the agent's annotation) that cannot be read. None is retryable as it is: the
/// next poll brings a new document.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The text is not JSON of the expected shape.
    #[error("{what} is not Scheduled Events JSON")]
    NotJson {
        /// `the document` or `the annotation`.
        what: &'static str,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
    /// Something is longer than nodewright accepts.
    #[error("{field} has {len} {unit}, more than the {max} accepted")]
    TooLong {
        /// What was too long: `the document`, `Events`, `Events[2].Resources[7]`.
        field: String,
        /// Its length.
        len: usize,
        /// `bytes` or `entries`.
        unit: &'static str,
        /// The most accepted.
        max: usize,
    },
    /// An `EventId` that is empty or holds a character an id may not.
    #[error(
        "{field} {value} is not an event id: write 1 to 64 letters, digits and '-', '_', '.', '{{', '}}'"
    )]
    BadEventId {
        /// Where: `Events[0].EventId`.
        field: String,
        /// The value, quoted.
        value: String,
    },
}

/// Reads the Scheduled Events document `json`, bounded (see the module's Bounds).
///
/// # Errors
///
/// [`DocumentError`]: not JSON of the document's shape, something too long, or a bad event id.
pub fn parse(json: &str) -> Result<ScheduledEvents, DocumentError> {
    check_len("the document", json.len(), MAX_DOCUMENT_BYTES, "bytes")?;
    let document: Document =
        serde_json::from_str(json).map_err(|source| DocumentError::NotJson {
            what: "the document",
            source,
        })?;
    Ok(ScheduledEvents {
        incarnation: document.document_incarnation,
        events: checked_events("Events", &document.events)?,
    })
}

/// Reads a JSON list of events in IMDS's form (the agent's annotation), bounded as [`parse`]
/// bounds a document; fields are named `[2].EventId`.
///
/// # Errors
///
/// [`DocumentError`] as for [`parse`].
pub fn parse_list(json: &str) -> Result<Vec<ScheduledEvent>, DocumentError> {
    check_len("the annotation", json.len(), MAX_DOCUMENT_BYTES, "bytes")?;
    let raw: Vec<RawEvent> =
        serde_json::from_str(json).map_err(|source| DocumentError::NotJson {
            what: "the annotation",
            source,
        })?;
    checked_events("", &raw)
}

/// The events among `events` whose `Resources` name the VM `vm_name` (compared without regard
/// to case, as Azure's names are). IMDS lists every event of the VM's availability set or scale
/// set placement group, so the others are another VM's business.
///
/// A scale set instance is named `{vmss}_{id}` in `Resources`, and that is also the name the
/// instance's own IMDS reports: no special case is needed. nodewright's machines are standalone
/// VMs anyway, named as their Node.
pub fn for_vm(events: &[ScheduledEvent], vm_name: &str) -> Vec<ScheduledEvent> {
    let vm_name = vm_name.trim();
    events
        .iter()
        .filter(|event| {
            event
                .resources
                .iter()
                .any(|resource| resource.trim().eq_ignore_ascii_case(vm_name))
        })
        .cloned()
        .collect()
}

/// Whether `id` can be an event id: 1 to [`MAX_EVENT_ID_LEN`] ASCII letters, digits, `-`, `_`,
/// `.`, `{` or `}` (a GUID, with or without braces). No comma, space or quote: ids travel in
/// the comma-separated acknowledgement annotation and in messages.
pub fn is_event_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_EVENT_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '{' | '}'))
}

impl ScheduledEvent {
    /// The event as IMDS sent it (the fields nodewright reads), for the agent's annotation.
    pub fn to_raw(&self) -> RawEvent {
        RawEvent {
            event_id: self.id.clone(),
            event_status: self.status.clone(),
            event_type: self.event_type.clone(),
            resource_type: self.resource_type.clone(),
            resources: self.resources.clone(),
            not_before: self.not_before_text.clone(),
            description: self.description.clone(),
            event_source: self.source.clone(),
            duration_in_seconds: self
                .duration_seconds
                .and_then(|seconds| i64::try_from(seconds).ok())
                .unwrap_or(-1),
        }
    }

    /// Whether the event is under way.
    pub fn has_started(&self) -> bool {
        self.status == EventStatus::Started
    }
}

impl EventType {
    /// The type as IMDS writes it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Preempt => "Preempt",
            Self::Reboot => "Reboot",
            Self::Redeploy => "Redeploy",
            Self::Freeze => "Freeze",
            Self::Terminate => "Terminate",
            Self::Other(other) => other,
        }
    }
}

impl From<String> for EventType {
    fn from(value: String) -> Self {
        let known = [
            Self::Preempt,
            Self::Reboot,
            Self::Redeploy,
            Self::Freeze,
            Self::Terminate,
        ];
        let trimmed = value.trim();
        known
            .into_iter()
            .find(|kind| kind.as_str().eq_ignore_ascii_case(trimmed))
            .unwrap_or(Self::Other(value))
    }
}

impl From<EventType> for String {
    fn from(value: EventType) -> Self {
        value.as_str().to_owned()
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EventStatus {
    /// The status as IMDS writes it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Scheduled => "Scheduled",
            Self::Started => "Started",
            Self::Other(other) => other,
        }
    }
}

impl From<String> for EventStatus {
    fn from(value: String) -> Self {
        let trimmed = value.trim();
        if trimmed.eq_ignore_ascii_case("Scheduled") {
            Self::Scheduled
        } else if trimmed.eq_ignore_ascii_case("Started") {
            Self::Started
        } else {
            Self::Other(value)
        }
    }
}

impl From<EventStatus> for String {
    fn from(value: EventStatus) -> Self {
        value.as_str().to_owned()
    }
}

impl std::fmt::Display for EventStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `NotBefore` (RFC 1123 in GMT, or any RFC 2822 date) as Unix seconds; `None` when blank or
/// unreadable. A weekday that does not match the date is forgiven: the date is what counts.
pub(super) fn not_before_seconds(text: &str) -> Option<i64> {
    static PARSER: DateTimeParser = DateTimeParser::new();
    let text = text.trim();
    if text.is_empty() || text.len() > MAX_TOKEN_LEN {
        return None;
    }
    let parsed = PARSER.parse_timestamp(text).ok().or_else(|| {
        let (_, without_weekday) = text.split_once(',')?;
        PARSER.parse_timestamp(without_weekday.trim()).ok()
    })?;
    Some(parsed.as_second())
}

/// `seconds` as IMDS writes `NotBefore`: `Mon, 19 Sep 2016 18:29:47 GMT`; `None` outside the
/// instants jiff represents.
pub(super) fn not_before_text(seconds: i64) -> Option<String> {
    let timestamp = Timestamp::from_second(seconds).ok()?;
    jiff::fmt::rfc2822::DateTimePrinter::new()
        .timestamp_to_rfc9110_string(&timestamp)
        .ok()
}

/// The value of a missing `DurationInSeconds`: unknown.
fn unknown_duration() -> i64 {
    -1
}

/// Checks and reads each of `raw`, at `field` (`Events`, or `` for a bare list).
fn checked_events(field: &str, raw: &[RawEvent]) -> Result<Vec<ScheduledEvent>, DocumentError> {
    let list_name = if field.is_empty() { "the list" } else { field };
    check_len(list_name, raw.len(), MAX_EVENTS, "entries")?;
    raw.iter()
        .enumerate()
        .map(|(index, event)| checked_event(&format!("{field}[{index}]"), event))
        .collect()
}

/// Checks and reads one event, at `field` (`Events[2]`).
fn checked_event(field: &str, raw: &RawEvent) -> Result<ScheduledEvent, DocumentError> {
    let at = |name: &str| format!("{field}.{name}");
    check_len(
        &at("EventId"),
        raw.event_id.len(),
        MAX_EVENT_ID_LEN,
        "bytes",
    )?;
    if !is_event_id(raw.event_id.trim()) {
        return Err(DocumentError::BadEventId {
            field: at("EventId"),
            value: crate::text::quoted(&raw.event_id),
        });
    }
    let tokens = [
        ("EventType", raw.event_type.as_str()),
        ("EventStatus", raw.event_status.as_str()),
        ("ResourceType", raw.resource_type.as_str()),
        ("NotBefore", raw.not_before.as_str()),
        ("EventSource", raw.event_source.as_str()),
    ];
    for (name, value) in tokens {
        check_len(&at(name), value.len(), MAX_TOKEN_LEN, "bytes")?;
    }
    check_len(
        &at("Resources"),
        raw.resources.len(),
        MAX_RESOURCES,
        "entries",
    )?;
    for (index, resource) in raw.resources.iter().enumerate() {
        check_len(
            &format!("{field}.Resources[{index}]"),
            resource.len(),
            MAX_RESOURCE_NAME_LEN,
            "bytes",
        )?;
    }
    Ok(ScheduledEvent {
        id: raw.event_id.trim().to_owned(),
        event_type: raw.event_type.clone(),
        status: raw.event_status.clone(),
        resource_type: raw.resource_type.clone(),
        resources: raw.resources.iter().map(|r| r.trim().to_owned()).collect(),
        not_before: not_before_seconds(&raw.not_before),
        not_before_text: raw.not_before.trim().to_owned(),
        description: raw
            .description
            .chars()
            .take(MAX_DESCRIPTION_CHARS)
            .collect(),
        source: raw.event_source.clone(),
        duration_seconds: u64::try_from(raw.duration_in_seconds).ok(),
    })
}

/// `Err(TooLong)` when `len` is more than `max`.
fn check_len(field: &str, len: usize, max: usize, unit: &'static str) -> Result<(), DocumentError> {
    if len > max {
        return Err(DocumentError::TooLong {
            field: field.to_owned(),
            len,
            unit,
            max,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
