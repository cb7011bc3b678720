//! Which events the agent acknowledges: only those the controller asked for in the Node's
//! `nodewright.io/scheduled-event-ack` (read by `acks_requested`), only while they are pending as
//! `Scheduled` for this VM, and each once ([`Acknowledged`]). An acknowledgement starts the event
//! at once on every VM it names, so nothing else is ever acknowledged.

use std::collections::BTreeSet;

use nodewright_model::scheduled_events::{EventStatus, ScheduledEvent};

/// The events this agent acknowledged (and IMDS accepted).
#[derive(Debug, Default)]
pub struct Acknowledged {
    ids: BTreeSet<String>,
}

impl Acknowledged {
    /// The ids among `requested` to acknowledge now: each names an event of `events` (this VM's
    /// pending ones) that is `Scheduled` and was not acknowledged by this agent yet; in the
    /// order requested.
    pub fn to_acknowledge(&self, requested: &[String], events: &[ScheduledEvent]) -> Vec<String> {
        requested
            .iter()
            .filter_map(|id| {
                events.iter().find(|event| {
                    event.id.eq_ignore_ascii_case(id) && event.status == EventStatus::Scheduled
                })
            })
            .map(|event| event.id.clone())
            .filter(|id| !self.ids.contains(id))
            .fold(Vec::new(), |mut ids, id| {
                if !ids.contains(&id) {
                    ids.push(id);
                }
                ids
            })
    }

    /// Whether some event of `events` is `Scheduled` and not acknowledged by this agent: only
    /// then can a request in the Node's annotation lead anywhere, so only then is it read.
    pub fn awaits_request(&self, events: &[ScheduledEvent]) -> bool {
        events
            .iter()
            .any(|event| event.status == EventStatus::Scheduled && !self.ids.contains(&event.id))
    }

    /// Records that IMDS accepted the acknowledgement of `event_id`.
    pub fn record(&mut self, event_id: &str) {
        self.ids.insert(event_id.to_owned());
    }

    /// Forgets the events no longer pending.
    pub fn forget_all_but(&mut self, events: &[ScheduledEvent]) {
        self.ids
            .retain(|id| events.iter().any(|event| &event.id == id));
    }
}

#[cfg(test)]
mod tests {
    use nodewright_model::scheduled_events::{acks_requested, parse};

    use super::*;

    fn events(statuses: &[(&str, &str)]) -> Vec<ScheduledEvent> {
        let list: Vec<String> = statuses
            .iter()
            .map(|(id, status)| {
                format!(
                    r#"{{"EventId":"{id}","EventStatus":"{status}","EventType":"Redeploy","Resources":["vm-1"],"NotBefore":""}}"#
                )
            })
            .collect();
        let document = format!(
            r#"{{"DocumentIncarnation":1,"Events":[{}]}}"#,
            list.join(",")
        );
        parse(&document).unwrap_or_else(|e| panic!("{e}")).events
    }

    /// One case: the acknowledgement annotation, the VM's events, what this agent acknowledged
    /// before, and what it acknowledges now.
    fn check(
        annotation: Option<&str>,
        pending: &[(&str, &str)],
        before: &[&str],
        expected: &[&str],
    ) {
        let mut acknowledged = Acknowledged::default();
        for id in before {
            acknowledged.record(id);
        }
        let got = acknowledged.to_acknowledge(&acks_requested(annotation), &events(pending));
        assert_eq!(
            got, expected,
            "{annotation:?} with {pending:?} after {before:?}"
        );
    }

    #[test]
    fn only_requested_scheduled_events_are_acknowledged_once() {
        // Nothing asked for: nothing acknowledged, whatever is pending.
        check(None, &[("a", "Scheduled")], &[], &[]);
        check(Some(""), &[("a", "Scheduled")], &[], &[]);
        // Asked for and Scheduled.
        check(
            Some("a"),
            &[("a", "Scheduled"), ("b", "Scheduled")],
            &[],
            &["a"],
        );
        check(
            Some("b, a"),
            &[("a", "Scheduled"), ("b", "Scheduled")],
            &[],
            &["b", "a"],
        );
        // Already started, or not this VM's: not acknowledged.
        check(Some("a"), &[("a", "Started")], &[], &[]);
        check(Some("c"), &[("a", "Scheduled")], &[], &[]);
        // Acknowledged before: not again.
        check(
            Some("a,b"),
            &[("a", "Scheduled"), ("b", "Scheduled")],
            &["a"],
            &["b"],
        );
        // Ids are GUIDs: case does not matter, the document's spelling is sent.
        check(Some("ABC-1"), &[("abc-1", "Scheduled")], &[], &["abc-1"]);
        // Something that is not an id is skipped, the rest read.
        check(Some("x y,a"), &[("a", "Scheduled")], &[], &["a"]);
    }

    #[test]
    fn a_request_is_read_only_while_an_event_awaits_one() {
        let mut acknowledged = Acknowledged::default();
        assert!(!acknowledged.awaits_request(&[]));
        assert!(!acknowledged.awaits_request(&events(&[("a", "Started")])));
        assert!(acknowledged.awaits_request(&events(&[("a", "Scheduled")])));
        acknowledged.record("a");
        assert!(!acknowledged.awaits_request(&events(&[("a", "Scheduled")])));
        acknowledged.forget_all_but(&[]);
        assert!(acknowledged.awaits_request(&events(&[("a", "Scheduled")])));
    }
}
