//! The Node's condition and annotations: what the agent writes, what the controller reads back
//! (from the agent or from node-problem-detector's messages), the acknowledgement list, and
//! properties (no input panics, `with_ack` idempotent and bounded).

use proptest::prelude::*;

use super::*;

/// `Mon, 19 Sep 2016 18:29:47 GMT`.
const SEP_19_2016: i64 = 1_474_309_787;
const GUID: &str = "602d9444-d2cd-49c7-8624-8643e7171297";
const NODE: &str = "spot-xy98z";

fn event(id: &str, event_type: EventType, not_before: Option<i64>) -> ScheduledEvent {
    ScheduledEvent {
        id: id.to_owned(),
        event_type,
        status: EventStatus::Scheduled,
        resource_type: "VirtualMachine".to_owned(),
        resources: vec![NODE.to_owned()],
        not_before,
        not_before_text: not_before.and_then(not_before_text).unwrap_or_default(),
        description: String::new(),
        source: "Platform".to_owned(),
        duration_seconds: None,
    }
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> NodeConditionView {
    NodeConditionView {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
    }
}

/// (id, type, not_before, synthetic, origin's condition type) of what was read.
fn summary(read: &[PendingEvent]) -> Vec<(String, EventType, Option<i64>, bool, String)> {
    read.iter()
        .map(|p| {
            let origin = match &p.origin {
                EventOrigin::Annotation => "annotation".to_owned(),
                EventOrigin::Condition { condition_type } => condition_type.clone(),
            };
            (
                p.event.id.clone(),
                p.event.event_type.clone(),
                p.event.not_before,
                p.synthetic_id,
                origin,
            )
        })
        .collect()
}

#[test]
fn no_event_is_false_with_npds_reason() {
    assert_eq!(
        condition_for(&[]),
        condition(
            CONDITION_TYPE,
            "False",
            NO_EVENT_REASON,
            "No VM event is scheduled."
        )
    );
    assert_eq!(annotation_for(&[]), "[]");
}

#[test]
fn a_pending_event_is_true_with_its_type_and_npds_message() {
    let mut preempt = event(GUID, EventType::Preempt, Some(SEP_19_2016));
    preempt.duration_seconds = None;
    assert_eq!(
        condition_for(&[preempt]),
        condition(
            CONDITION_TYPE,
            "True",
            "Preempt",
            "Preempt Scheduled: Mon, 19 Sep 2016 18:29:47 GMT. DurationInSeconds: -1. EventId: 602d9444-d2cd-49c7-8624-8643e7171297."
        )
    );
    let mut started = event("r-1", EventType::Reboot, None);
    started.status = EventStatus::Started;
    started.duration_seconds = Some(120);
    assert_eq!(
        condition_for(&[started]).message,
        "Reboot Started. DurationInSeconds: 120. EventId: r-1."
    );
    let odd = event("o-1", EventType::Other("9 lives!".to_owned()), None);
    let view = condition_for(&[odd]);
    assert_eq!(view.reason, "Event9lives");
    assert_eq!(
        view.message,
        "9 lives! Scheduled: now. DurationInSeconds: -1. EventId: o-1."
    );
}

#[test]
fn the_most_urgent_event_comes_first_and_the_message_is_bounded() {
    let freeze = event("f-1", EventType::Freeze, Some(SEP_19_2016 + 900));
    let preempt = event("p-1", EventType::Preempt, Some(SEP_19_2016 + 30));
    let view = condition_for(&[freeze.clone(), preempt.clone()]);
    assert_eq!(view.reason, "Preempt");
    assert!(
        view.message
            .starts_with("Preempt Scheduled: Mon, 19 Sep 2016 18:30:17 GMT."),
        "{}",
        view.message
    );
    assert!(view.message.contains("EventId: f-1."), "{}", view.message);
    let many: Vec<ScheduledEvent> = (0..32)
        .map(|i| {
            event(
                &format!("{i:0>64}"),
                EventType::Freeze,
                Some(SEP_19_2016 + i),
            )
        })
        .collect();
    let view = condition_for(&many);
    assert!(view.message.len() <= MAX_CONDITION_MESSAGE_BYTES);
    assert!(view.message.ends_with(" more."), "{}", view.message);
}

#[test]
fn the_annotation_carries_every_event_as_imds_sent_it() {
    let mut freeze = event("f-1", EventType::Freeze, Some(SEP_19_2016 + 900));
    freeze.duration_seconds = Some(5);
    freeze.resources = vec![NODE.to_owned(), "spot-other".to_owned()];
    let preempt = event("p-1", EventType::Preempt, Some(SEP_19_2016 + 30));
    let annotation = annotation_for(&[freeze.clone(), preempt.clone()]);
    assert!(
        annotation
            .starts_with(r#"[{"EventId":"p-1","EventStatus":"Scheduled","EventType":"Preempt","#),
        "{annotation}"
    );
    let read = read_from_node(NODE, Some(&annotation), &[]);
    assert_eq!(
        read,
        vec![
            PendingEvent {
                event: preempt,
                origin: EventOrigin::Annotation,
                synthetic_id: false,
            },
            PendingEvent {
                event: freeze,
                origin: EventOrigin::Annotation,
                synthetic_id: false,
            },
        ]
    );
    assert!(read.iter().all(PendingEvent::can_acknowledge));
}

#[test]
fn the_annotation_keeps_what_fits() {
    let big: Vec<ScheduledEvent> = (0..32)
        .map(|i| {
            let mut e = event(&format!("e-{i}"), EventType::Freeze, Some(SEP_19_2016 + i));
            e.resources = (0..256).map(|vm| format!("{vm:0>128}")).collect();
            e
        })
        .collect();
    let annotation = annotation_for(&big);
    assert!(annotation.len() <= MAX_ANNOTATION_BYTES);
    let read = read_from_node(NODE, Some(&annotation), &[]);
    assert!(!read.is_empty());
    assert_eq!(read[0].event.id, "e-0", "the most urgent is kept");
}

#[test]
fn an_empty_annotation_means_nothing_is_pending_whatever_the_conditions_say() {
    let stale = condition(
        NPD_PREEMPTION_CONDITION,
        "True",
        "SpotEvictionIncoming",
        "Preempt Scheduled: Mon, 19 Sep 2016 18:29:47 GMT. DurationInSeconds: -1.",
    );
    assert!(read_from_node(NODE, Some("[]"), &[stale]).is_empty());
}

#[test]
fn node_problem_detector_messages_are_read() {
    let synthetic = |kind: &EventType, text: &str| synthetic_event_id(NODE, kind, text);
    let date = "Mon, 19 Sep 2016 18:29:47 GMT";
    let table = [
        (
            "the PreemptionScheduled condition without an EventId",
            condition(
                NPD_PREEMPTION_CONDITION,
                "True",
                "SpotEvictionIncoming",
                "Preempt Scheduled: Mon, 19 Sep 2016 18:29:47 GMT. DurationInSeconds: -1. For more information, see https://aka.ms/aks/scheduledevents.",
            ),
            vec![(
                synthetic(&EventType::Preempt, date),
                EventType::Preempt,
                Some(SEP_19_2016),
                true,
                NPD_PREEMPTION_CONDITION.to_owned(),
            )],
        ),
        (
            "the VMEventScheduled condition with an EventId",
            condition(
                NPD_VM_EVENT_CONDITION,
                "True",
                "PreemptScheduled",
                "Preempt Scheduled: Mon, 19 Sep 2016 18:29:47 GMT. DurationInSeconds: -1. EventId: 602D9444-D2CD-49C7-8624-8643E7171297. For more information, see https://aka.ms/aks/scheduledevents.",
            ),
            vec![(
                "602D9444-D2CD-49C7-8624-8643E7171297".to_owned(),
                EventType::Preempt,
                Some(SEP_19_2016),
                false,
                NPD_VM_EVENT_CONDITION.to_owned(),
            )],
        ),
        (
            "a Freeze with its duration, the EventId last",
            condition(
                NPD_VM_EVENT_CONDITION,
                "True",
                "FreezeScheduled",
                "Freeze Scheduled: Mon, 19 Sep 2016 18:29:47 GMT. DurationInSeconds: 5. EventId: f-1.",
            ),
            vec![(
                "f-1".to_owned(),
                EventType::Freeze,
                Some(SEP_19_2016),
                false,
                NPD_VM_EVENT_CONDITION.to_owned(),
            )],
        ),
        (
            "an unreadable NotBefore, acted on at once",
            condition(
                NPD_PREEMPTION_CONDITION,
                "True",
                "SpotEvictionIncoming",
                "Preempt Scheduled: sometime soon. DurationInSeconds: -1.",
            ),
            vec![(
                synthetic(&EventType::Preempt, "sometime soon"),
                EventType::Preempt,
                None,
                true,
                NPD_PREEMPTION_CONDITION.to_owned(),
            )],
        ),
        (
            "a message of another shape, the type from the condition",
            condition(
                NPD_PREEMPTION_CONDITION,
                "True",
                "SpotEvictionIncoming",
                "evicted soon",
            ),
            vec![(
                synthetic(&EventType::Preempt, ""),
                EventType::Preempt,
                None,
                true,
                NPD_PREEMPTION_CONDITION.to_owned(),
            )],
        ),
        (
            "a message naming no type, the type from the reason",
            condition(NPD_VM_EVENT_CONDITION, "True", "RedeployScheduled", ""),
            vec![(
                synthetic(&EventType::Redeploy, ""),
                EventType::Redeploy,
                None,
                true,
                NPD_VM_EVENT_CONDITION.to_owned(),
            )],
        ),
        (
            "a False condition",
            condition(
                NPD_VM_EVENT_CONDITION,
                "False",
                NO_EVENT_REASON,
                "VM has no scheduled event",
            ),
            vec![],
        ),
        (
            "another condition",
            condition(
                "KernelDeadlock",
                "True",
                "PreemptScheduled",
                "Preempt Scheduled: Mon, 19 Sep 2016 18:29:47 GMT.",
            ),
            vec![],
        ),
    ];
    for (name, condition, expected) in table {
        let read = read_from_node(NODE, None, &[condition]);
        assert_eq!(summary(&read), expected, "{name}");
        assert!(!read.iter().any(PendingEvent::can_acknowledge), "{name}");
    }
}

#[test]
fn the_same_event_in_two_conditions_is_read_once_with_its_real_id() {
    let old = condition(
        NPD_PREEMPTION_CONDITION,
        "True",
        "SpotEvictionIncoming",
        "Preempt Scheduled: Mon, 19 Sep 2016 18:29:47 GMT. DurationInSeconds: -1. For more information, see https://aka.ms/aks/scheduledevents.",
    );
    let new = condition(
        NPD_VM_EVENT_CONDITION,
        "True",
        "PreemptScheduled",
        &format!(
            "Preempt Scheduled: Mon, 19 Sep 2016 18:29:47 GMT. DurationInSeconds: -1. EventId: {GUID}."
        ),
    );
    for conditions in [[old.clone(), new.clone()], [new, old]] {
        let read = read_from_node(NODE, None, &conditions);
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].event.id, GUID);
    }
}

#[test]
fn our_own_condition_is_read_when_the_annotation_is_missing_or_unreadable() {
    let written = condition_for(&[event(GUID, EventType::Redeploy, Some(SEP_19_2016))]);
    for annotation in [None, Some("not json"), Some(r#"[{"EventId": "a,b"}]"#)] {
        let read = read_from_node(NODE, annotation, std::slice::from_ref(&written));
        assert_eq!(
            summary(&read),
            vec![(
                GUID.to_owned(),
                EventType::Redeploy,
                Some(SEP_19_2016),
                false,
                CONDITION_TYPE.to_owned()
            )],
            "{annotation:?}"
        );
        assert_eq!(read[0].event.resources, vec![NODE.to_owned()]);
        assert!(!read[0].can_acknowledge());
    }
}

#[test]
fn synthetic_ids_are_stable_and_tell_events_apart() {
    let date = "Mon, 19 Sep 2016 18:29:47 GMT";
    let id = synthetic_event_id(NODE, &EventType::Preempt, date);
    assert!(id.starts_with("synthetic-") && id.len() == 26, "{id}");
    assert!(is_event_id(&id));
    assert_eq!(
        id,
        synthetic_event_id(
            " SPOT-XY98Z ",
            &EventType::Preempt,
            " Mon, 19 Sep 2016 18:29:47 +0000"
        )
    );
    for other in [
        synthetic_event_id("spot-other", &EventType::Preempt, date),
        synthetic_event_id(NODE, &EventType::Reboot, date),
        synthetic_event_id(NODE, &EventType::Preempt, "Mon, 19 Sep 2016 18:29:48 GMT"),
    ] {
        assert_ne!(id, other);
    }
}

#[test]
fn acks_are_read_oldest_first_once_each_and_bounded() {
    let table: [(Option<&str>, Vec<&str>); 6] = [
        (None, vec![]),
        (Some(""), vec![]),
        (Some("a"), vec!["a"]),
        (Some(" a , b,,a, "), vec!["a", "b"]),
        (Some("a,b c,d\"e,f"), vec!["a", "f"]),
        (Some("x,é,y"), vec!["x", "y"]),
    ];
    for (annotation, expected) in table {
        assert_eq!(acks_requested(annotation), expected, "{annotation:?}");
    }
    let many: Vec<String> = (0..40).map(|i| format!("id-{i}")).collect();
    let read = acks_requested(Some(&many.join(",")));
    assert_eq!(read.len(), MAX_ACKS);
    assert_eq!(read.first().map(String::as_str), Some("id-24"));
    assert_eq!(read.last().map(String::as_str), Some("id-39"));
    let huge = format!("{},{GUID}", "z".repeat(100_000));
    assert_eq!(acks_requested(Some(&huge)), vec![GUID.to_owned()]);
}

#[test]
fn an_ack_is_added_once_and_the_oldest_go() {
    assert_eq!(with_ack(None, GUID), GUID);
    assert_eq!(with_ack(Some("a"), "b"), "a,b");
    assert_eq!(with_ack(Some("a,b"), "a"), "a,b");
    assert_eq!(with_ack(Some("a, b"), " c "), "a,b,c");
    assert_eq!(with_ack(Some("a"), "not,an id"), "a");
    let full: Vec<String> = (0..MAX_ACKS).map(|i| format!("id-{i}")).collect();
    let added = with_ack(Some(&full.join(",")), "new");
    assert!(added.starts_with("id-1,"), "{added}");
    assert!(added.ends_with(",new"), "{added}");
    assert_eq!(acks_requested(Some(&added)).len(), MAX_ACKS);
}

proptest! {
    #[test]
    fn reading_a_node_never_panics(
        annotation in prop::option::of(".{0,300}"),
        messages in prop::collection::vec((".{0,20}", ".{0,20}", ".{0,300}"), 0..5),
        node in ".{0,30}",
    ) {
        let conditions: Vec<NodeConditionView> = messages
            .iter()
            .enumerate()
            .map(|(i, (status, reason, message))| {
                let type_ = [CONDITION_TYPE, NPD_VM_EVENT_CONDITION, NPD_PREEMPTION_CONDITION][i % 3];
                let status = if i % 2 == 0 { "True" } else { status.as_str() };
                condition(type_, status, reason, message)
            })
            .collect();
        let read = read_from_node(&node, annotation.as_deref(), &conditions);
        prop_assert!(read.len() <= MAX_EVENTS);
        for pending in &read {
            prop_assert!(is_event_id(&pending.event.id));
        }
    }

    #[test]
    fn npd_shaped_messages_never_panic(
        kind in "[A-Za-z]{0,12}",
        when in ".{0,40}",
        duration in ".{0,8}",
        id in ".{0,70}",
    ) {
        let message = format!("{kind} Scheduled: {when}. DurationInSeconds: {duration}. EventId: {id}. For more information, see https://aka.ms/aks/scheduledevents.");
        let read = read_from_node(NODE, None, &[condition(NPD_VM_EVENT_CONDITION, "True", "", &message)]);
        prop_assert_eq!(read.len(), 1);
    }

    #[test]
    fn with_ack_is_idempotent_and_bounded(annotation in prop::option::of(".{0,400}"), id in "[a-z0-9-]{1,64}|.{0,10}") {
        let once = with_ack(annotation.as_deref(), &id);
        let twice = with_ack(Some(&once), &id);
        prop_assert_eq!(&once, &twice);
        let read = acks_requested(Some(&once));
        prop_assert!(read.len() <= MAX_ACKS);
        prop_assert!(once.len() <= MAX_ACKS * (MAX_EVENT_ID_LEN + 1));
        if is_event_id(id.trim()) {
            prop_assert!(read.iter().any(|seen| seen == id.trim()));
        }
    }

    #[test]
    fn the_annotation_always_reads_back(count in 0usize..40, resources in 0usize..=256) {
        let events: Vec<ScheduledEvent> = (0..count)
            .map(|i| {
                let mut e = event(&format!("e-{i}"), EventType::Reboot, Some(SEP_19_2016 + i64::try_from(i).unwrap_or(0)));
                e.resources = (0..resources).map(|vm| format!("vm-{vm:0>100}")).collect();
                e
            })
            .collect();
        let annotation = annotation_for(&events);
        prop_assert!(annotation.len() <= MAX_ANNOTATION_BYTES);
        let read = read_from_node(NODE, Some(&annotation), &[]);
        prop_assert_eq!(read.is_empty(), count == 0);
    }
}
