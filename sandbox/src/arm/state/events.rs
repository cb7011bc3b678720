//! Scheduled Events as the state stores them (persisted with the rest): each event with its
//! history, and each VM's document incarnation. `scheduled_events.rs` schedules, starts and ends
//! them; `imds.rs` renders a VM's document; `admin_events.rs` lists them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{key, name_of, timestamp};

/// Where an event is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventStatus {
    /// Announced, waiting for its NotBefore or an acknowledgement.
    Scheduled,
    /// Approved (or due): the platform carries it out.
    Started,
    /// Carried out: gone from the documents.
    Ended,
    /// Cancelled before it started: gone from the documents.
    Canceled,
}

impl EventStatus {
    /// Whether the event shows in the documents (Scheduled or Started).
    pub fn visible(self) -> bool {
        matches!(self, Self::Scheduled | Self::Started)
    }
}

/// Why an event started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StartedBy {
    /// A VM's agent approved it (`StartRequests`).
    Acknowledged,
    /// Its NotBefore came.
    NotBefore,
}

/// Why an event ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EndedBy {
    /// The platform's action ended (or there was none to take).
    Completed,
    /// `DELETE /sandbox/scheduled-events/{id}`.
    Canceled,
    /// Every VM it named was deleted meanwhile.
    VmDeleted,
}

/// One Scheduled Event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduledEvent {
    /// `EventId`, a GUID.
    pub id: String,
    /// `EventType`: `Reboot`, `Redeploy`, `Freeze`, `Preempt`, `Terminate` or any other.
    pub event_type: String,
    /// The ids of the VMs it concerns (`Resources` names them).
    pub resources: Vec<String>,
    /// Where it is.
    pub status: EventStatus,
    /// When it starts unless approved earlier.
    pub not_before: DateTime<Utc>,
    /// `DurationInSeconds` (-1: unknown).
    pub duration_seconds: i64,
    /// `Description`.
    pub description: String,
    /// `EventSource`: `Platform` or `User`.
    pub event_source: String,
    /// When it was scheduled.
    pub scheduled_at: DateTime<Utc>,
    /// When it started.
    pub started_at: Option<DateTime<Utc>>,
    /// Why it started.
    pub started_by: Option<StartedBy>,
    /// The VM whose metadata service approved it.
    pub acknowledged_by: Option<String>,
    /// When it ended (or was cancelled).
    pub ended_at: Option<DateTime<Utc>>,
    /// Why it ended.
    pub ended_by: Option<EndedBy>,
    /// The operations the platform started to carry it out.
    #[serde(default)]
    pub operations: Vec<String>,
    /// The VMs (ids) whose action waits for the VM to be idle.
    #[serde(default)]
    pub waiting: Vec<String>,
}

impl ScheduledEvent {
    /// Whether it names the VM `vm_id`.
    pub fn names(&self, vm_id: &str) -> bool {
        let wanted = key(vm_id);
        self.resources.iter().any(|r| key(r) == wanted)
    }

    /// The event as a VM's metadata service shows it.
    pub fn imds(&self) -> Value {
        let not_before = match self.status {
            EventStatus::Scheduled => rfc1123(self.not_before),
            _ => String::new(),
        };
        let status = match self.status {
            EventStatus::Scheduled => "Scheduled",
            _ => "Started",
        };
        json!({
            "EventId": self.id,
            "EventStatus": status,
            "EventType": self.event_type,
            "ResourceType": "VirtualMachine",
            "Resources": self.resources.iter().map(|r| name_of(r)).collect::<Vec<_>>(),
            "NotBefore": not_before,
            "Description": self.description,
            "EventSource": self.event_source,
            "DurationInSeconds": self.duration_seconds,
        })
    }

    /// The event with its history, as `GET /sandbox/scheduled-events` lists it.
    pub fn admin(&self) -> Value {
        let time = |t: Option<DateTime<Utc>>| t.map(timestamp);
        json!({
            "eventId": self.id,
            "eventType": self.event_type,
            "status": self.status,
            "resources": self.resources,
            "notBefore": timestamp(self.not_before),
            "durationInSeconds": self.duration_seconds,
            "description": self.description,
            "eventSource": self.event_source,
            "operations": self.operations,
            "history": {
                "scheduledAt": timestamp(self.scheduled_at),
                "notBefore": timestamp(self.not_before),
                "startedAt": time(self.started_at),
                "startedBy": self.started_by,
                "acknowledgedBy": self.acknowledged_by,
                "endedAt": time(self.ended_at),
                "endedBy": self.ended_by,
            },
        })
    }
}

/// Every event (ended ones for a while) and every VM's document incarnation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Events {
    /// By `EventId`.
    pub events: BTreeMap<String, ScheduledEvent>,
    /// `DocumentIncarnation` by VM key: bumped at every change of the VM's document.
    pub incarnations: BTreeMap<String, u64>,
}

impl Events {
    /// Bumps the document incarnation of every VM `event` names.
    pub fn bump(&mut self, resources: &[String]) {
        for vm in resources {
            *self.incarnations.entry(key(vm)).or_default() += 1;
        }
    }

    /// The VM `vm_id`'s document: `{"DocumentIncarnation", "Events"}`, its visible events in the
    /// order they were scheduled.
    pub fn document(&self, vm_id: &str) -> Value {
        let mut visible: Vec<&ScheduledEvent> = self
            .events
            .values()
            .filter(|e| e.status.visible() && e.names(vm_id))
            .collect();
        visible.sort_by_key(|e| e.scheduled_at);
        json!({
            "DocumentIncarnation": self.incarnations.get(&key(vm_id)).copied().unwrap_or(0),
            "Events": visible.iter().map(|e| e.imds()).collect::<Vec<_>>(),
        })
    }
}

/// `t` as IMDS writes `NotBefore` (RFC 1123, GMT): `Mon, 19 Sep 2016 18:29:47 GMT`.
pub fn rfc1123(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(status: EventStatus) -> ScheduledEvent {
        let at = DateTime::parse_from_rfc3339("2016-09-19T18:29:47Z")
            .unwrap()
            .with_timezone(&Utc);
        ScheduledEvent {
            id: "e-1".into(),
            event_type: "Preempt".into(),
            resources: vec!["/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-1".into()],
            status,
            not_before: at,
            duration_seconds: -1,
            description: "d".into(),
            event_source: "Platform".into(),
            scheduled_at: at,
            started_at: None,
            started_by: None,
            acknowledged_by: None,
            ended_at: None,
            ended_by: None,
            operations: Vec::new(),
            waiting: Vec::new(),
        }
    }

    #[test]
    fn not_before_is_rfc1123_while_scheduled_and_empty_once_started() {
        let scheduled = event(EventStatus::Scheduled).imds();
        assert_eq!(scheduled["NotBefore"], "Mon, 19 Sep 2016 18:29:47 GMT");
        assert_eq!(scheduled["Resources"], json!(["vm-1"]));
        assert_eq!(scheduled["ResourceType"], "VirtualMachine");
        let started = event(EventStatus::Started).imds();
        assert_eq!(started["NotBefore"], "");
        assert_eq!(started["EventStatus"], "Started");
    }

    #[test]
    fn a_document_shows_the_vms_visible_events_with_its_incarnation() {
        let mut events = Events::default();
        let e = event(EventStatus::Scheduled);
        let vm = e.resources[0].to_ascii_uppercase();
        events.bump(&e.resources);
        events.events.insert(e.id.clone(), e);
        let mut ended = event(EventStatus::Ended);
        ended.id = "e-2".into();
        events.events.insert(ended.id.clone(), ended);
        let document = events.document(&vm);
        assert_eq!(document["DocumentIncarnation"], 1);
        assert_eq!(document["Events"].as_array().map(Vec::len), Some(1));
        let other = events.document(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-2",
        );
        assert_eq!(other, json!({"DocumentIncarnation": 0, "Events": []}));
    }
}
