//! What the agent writes, and when it writes it again.

use nodewright_model::scheduled_events::{annotation_for, for_vm, parse};

use super::*;

fn document(incarnation: i64, events: &[(&str, &str, &str)]) -> (i64, Vec<ScheduledEvent>) {
    let list: Vec<String> = events
        .iter()
        .map(|(id, kind, vm)| {
            format!(
                r#"{{"EventId":"{id}","EventStatus":"Scheduled","EventType":"{kind}","Resources":["{vm}"],"NotBefore":"Mon, 19 Sep 2016 18:29:47 GMT","DurationInSeconds":-1}}"#
            )
        })
        .collect();
    let text = format!(
        r#"{{"DocumentIncarnation":{incarnation},"Events":[{}]}}"#,
        list.join(",")
    );
    let read = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    (read.incarnation, for_vm(&read.events, "vm-1"))
}

#[test]
fn the_node_is_written_when_the_incarnation_or_the_events_change_and_at_each_resync() {
    let start = Instant::now();
    let mut memory = Memory::default();
    let (incarnation, events) = document(1, &[]);
    let empty = annotation_for(&events);
    assert_eq!(empty, "[]");
    assert!(memory.is_due(incarnation, &empty, start), "never written");
    memory.published(incarnation, &empty, start);
    assert!(!memory.is_due(1, &empty, start + Duration::from_secs(1)));

    // Another VM's event raises the incarnation: written again (cheap, and the heartbeat moves).
    let (incarnation, events) = document(2, &[("e1", "Redeploy", "vm-2")]);
    assert!(events.is_empty());
    let annotation = annotation_for(&events);
    assert!(memory.is_due(incarnation, &annotation, start + Duration::from_secs(2)));
    memory.published(incarnation, &annotation, start + Duration::from_secs(2));

    // An event of this VM: its annotation changes.
    let (_, events) = document(2, &[("e2", "Preempt", "vm-1")]);
    let annotation = annotation_for(&events);
    assert!(memory.is_due(2, &annotation, start + Duration::from_secs(3)));
    memory.published(2, &annotation, start + Duration::from_secs(3));
    let resync = start + Duration::from_secs(3) + RESYNC_EVERY;
    assert!(!memory.is_due(2, &annotation, resync - Duration::from_secs(1)));
    assert!(memory.is_due(2, &annotation, resync), "resync");
}

#[test]
fn each_event_is_announced_once_while_it_is_pending() {
    let mut memory = Memory::default();
    let (_, events) = document(1, &[("e1", "Redeploy", "vm-1"), ("e2", "Freeze", "vm-1")]);
    let ids = |list: Vec<&ScheduledEvent>| list.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(memory.to_announce(&events)), ["e1", "e2"]);
    memory.announced("e1");
    assert_eq!(ids(memory.to_announce(&events)), ["e2"]);
    memory.announced("e2");
    assert!(memory.to_announce(&events).is_empty());
    let (_, later) = document(2, &[("e2", "Freeze", "vm-1")]);
    memory.forget_all_but(&later);
    assert!(memory.to_announce(&later).is_empty());
    assert_eq!(ids(memory.to_announce(&events)), ["e1"]);
}

#[test]
fn the_transition_time_moves_only_when_the_status_changes() {
    let (_, events) = document(1, &[("e1", "Redeploy", "vm-1")]);
    let view = condition_for(&events);
    let existing = |status: &str| -> NodeCondition {
        serde_json::from_value(json!({
            "type": "nodewright.io/VMEventScheduled", "status": status,
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let now = "2026-02-02T10:00:00Z";
    let patch = condition_patch(&view, Some(&existing("True")), now);
    let condition = &patch["status"]["conditions"][0];
    assert_eq!(condition["type"], "nodewright.io/VMEventScheduled");
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "Redeploy");
    assert_eq!(condition["lastHeartbeatTime"], now);
    assert_eq!(condition["lastTransitionTime"], "2026-01-01T00:00:00Z");
    assert!(
        condition["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Redeploy Scheduled: ") && m.contains("EventId: e1.")),
        "{condition}"
    );
    let patch = condition_patch(&view, Some(&existing("False")), now);
    assert_eq!(patch["status"]["conditions"][0]["lastTransitionTime"], now);
    let patch = condition_patch(&view, None, now);
    assert_eq!(patch["status"]["conditions"][0]["lastTransitionTime"], now);

    let none = condition_for(&[]);
    let patch = condition_patch(&none, Some(&existing("True")), now);
    assert_eq!(patch["status"]["conditions"][0]["status"], "False");
    assert_eq!(
        patch["status"]["conditions"][0]["reason"],
        "NoVMEventScheduled"
    );
    assert_eq!(patch["status"]["conditions"][0]["lastTransitionTime"], now);
}

#[test]
fn the_annotation_patch_sets_only_the_events_annotation() {
    assert_eq!(
        annotation_patch("[]"),
        json!({ "metadata": { "annotations": { "nodewright.io/scheduled-event": "[]" } } })
    );
}

#[test]
fn an_event_is_announced_as_a_warning_with_the_type_in_its_reason() {
    let (_, events) = document(
        1,
        &[
            ("602D9444-d2cd-49c7-8624-8643e7171297", "Preempt", "vm-1"),
            ("e2", "SpotRebalanceRecommendation", "vm-1"),
        ],
    );
    let object = event_object(
        "vm-1",
        Some("uid-1"),
        &events[0],
        "2026-02-02T10:00:00.000000Z",
    );
    assert_eq!(object["reason"], "PreemptScheduled");
    assert_eq!(object["type"], "Warning");
    assert_eq!(object["reportingController"], "nodewright.io/node-agent");
    assert_eq!(object["reportingInstance"], "vm-1");
    assert_eq!(
        object["regarding"],
        json!({ "apiVersion": "v1", "kind": "Node", "name": "vm-1", "uid": "uid-1" })
    );
    assert_eq!(
        object["metadata"]["name"],
        "vm-1.scheduled-event-602d9444-d2cd-49c7-8624-8643e7171297"
    );
    assert_eq!(object["note"], condition_for(&events[..1]).message);
    let unknown = event_object("vm-1", None, &events[1], "2026-02-02T10:00:00.000000Z");
    assert_eq!(unknown["reason"], "SpotRebalanceRecommendationScheduled");
}

#[test]
fn event_names_are_valid_names_whatever_the_id() {
    for (node, id) in [
        ("vm-1", "{ABC_def.1}"),
        (
            &"n".repeat(253) as &str,
            "602d9444-d2cd-49c7-8624-8643e7171297",
        ),
    ] {
        let name = event_name(node, id);
        assert!(name.len() <= 253, "{name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'),
            "{name}"
        );
        assert!(
            name.ends_with(|c: char| c.is_ascii_alphanumeric()),
            "{name}"
        );
    }
    assert_eq!(
        event_name("vm-1", "{ABC_def.1}"),
        "vm-1.scheduled-event-abc-def-1"
    );
}
