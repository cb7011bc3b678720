//! Reading IMDS Scheduled Events documents: real-looking answers, tolerance of what nodewright
//! does not know, every bound, the filter on the VM, and properties (no input panics).

use proptest::prelude::*;

use super::*;

/// `Mon, 19 Sep 2016 18:29:47 GMT`.
const SEP_19_2016: i64 = 1_474_309_787;
/// `Mon, 11 Apr 2022 22:26:58 GMT`.
const APR_11_2022: i64 = 1_649_716_018;

/// A document with the three kinds of answer IMDS gives: a Freeze of the availability set, a
/// started Reboot, a Preempt of a Spot VM.
const DOCUMENT: &str = r#"{
    "DocumentIncarnation": 7,
    "Events": [
        {
            "EventId": "f020ba2e-3bc0-4c40-a10b-86575a9eabd5",
            "EventType": "Freeze",
            "ResourceType": "VirtualMachine",
            "Resources": ["web-ab12c", "web-cd34e"],
            "EventStatus": "Scheduled",
            "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT",
            "Description": "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
            "EventSource": "Platform",
            "DurationInSeconds": 5
        },
        {
            "EventId": "5A2F0D9B-0E1C-4C5E-9D4B-6C1F2A3B4C5D",
            "EventType": "Reboot",
            "ResourceType": "VirtualMachine",
            "Resources": ["web-cd34e"],
            "EventStatus": "Started",
            "NotBefore": "",
            "Description": "Virtual machine is going to be restarted as requested by authorized user.",
            "EventSource": "User",
            "DurationInSeconds": -1
        },
        {
            "EventId": "602d9444-d2cd-49c7-8624-8643e7171297",
            "EventType": "Preempt",
            "ResourceType": "VirtualMachine",
            "Resources": ["spot-xy98z"],
            "EventStatus": "Scheduled",
            "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
            "Description": "",
            "EventSource": "Platform",
            "DurationInSeconds": -1
        }
    ]
}"#;

fn parsed(json: &str) -> ScheduledEvents {
    parse(json).unwrap_or_else(|e| panic!("{}", crate::text::error_chain(&e)))
}

fn event(id: &str, resources: &[&str]) -> ScheduledEvent {
    ScheduledEvent {
        id: id.to_owned(),
        event_type: EventType::Freeze,
        status: EventStatus::Scheduled,
        resource_type: "VirtualMachine".to_owned(),
        resources: resources.iter().map(|r| (*r).to_owned()).collect(),
        not_before: Some(APR_11_2022),
        not_before_text: "Mon, 11 Apr 2022 22:26:58 GMT".to_owned(),
        description: String::new(),
        source: "Platform".to_owned(),
        duration_seconds: Some(5),
    }
}

#[test]
fn a_real_looking_document_is_read_field_by_field() {
    let document = parsed(DOCUMENT);
    assert_eq!(document.incarnation, 7);
    assert_eq!(document.events.len(), 3);
    assert_eq!(
        document.events[0],
        ScheduledEvent {
            id: "f020ba2e-3bc0-4c40-a10b-86575a9eabd5".to_owned(),
            event_type: EventType::Freeze,
            status: EventStatus::Scheduled,
            resource_type: "VirtualMachine".to_owned(),
            resources: vec!["web-ab12c".to_owned(), "web-cd34e".to_owned()],
            not_before: Some(APR_11_2022),
            not_before_text: "Mon, 11 Apr 2022 22:26:58 GMT".to_owned(),
            description: "Virtual machine is being paused because of a memory-preserving Live Migration operation.".to_owned(),
            source: "Platform".to_owned(),
            duration_seconds: Some(5),
        }
    );
    let reboot = &document.events[1];
    assert_eq!(reboot.event_type, EventType::Reboot);
    assert_eq!(reboot.status, EventStatus::Started);
    assert_eq!(reboot.not_before, None, "blank once started");
    assert_eq!(reboot.duration_seconds, None, "-1 is unknown");
    let preempt = &document.events[2];
    assert_eq!(preempt.event_type, EventType::Preempt);
    assert_eq!(preempt.not_before, Some(SEP_19_2016));
}

#[test]
fn an_empty_document_has_no_events() {
    for json in [
        r#"{"DocumentIncarnation": 0, "Events": []}"#,
        r#"{"DocumentIncarnation": 3}"#,
        "{}",
    ] {
        assert!(parsed(json).events.is_empty(), "{json}");
    }
}

#[test]
fn unknown_types_statuses_and_fields_are_kept_or_ignored() {
    let json = r#"{"DocumentIncarnation": 2, "Events": [{
        "EventId": "b1e2c3d4-0000-4000-8000-000000000001",
        "EventType": "SpotRebalanceRecommendation",
        "EventStatus": "Canceled",
        "Resources": ["spot-xy98z"],
        "NotBefore": "Tue, 01 Dec 2026 10:00:00 GMT",
        "SomethingNew": {"nested": [1, 2, 3]}
    }], "AlsoNew": true}"#;
    let document = parsed(json);
    let only = &document.events[0];
    assert_eq!(
        only.event_type,
        EventType::Other("SpotRebalanceRecommendation".to_owned())
    );
    assert_eq!(only.status, EventStatus::Other("Canceled".to_owned()));
    assert_eq!(only.duration_seconds, None, "missing is unknown");
    assert_eq!(only.resource_type, "");
}

#[test]
fn known_names_are_read_in_any_case() {
    let table = [
        ("Preempt", EventType::Preempt),
        ("preempt", EventType::Preempt),
        ("REBOOT", EventType::Reboot),
        ("Redeploy", EventType::Redeploy),
        ("Freeze", EventType::Freeze),
        ("Terminate", EventType::Terminate),
        ("Hibernate", EventType::Other("Hibernate".to_owned())),
        ("", EventType::Other(String::new())),
    ];
    for (written, expected) in table {
        assert_eq!(EventType::from(written.to_owned()), expected, "{written}");
    }
    assert_eq!(
        EventStatus::from("started".to_owned()),
        EventStatus::Started
    );
}

#[test]
fn not_before_is_read_as_rfc_1123_and_otherwise_left_unknown() {
    let table = [
        ("Mon, 19 Sep 2016 18:29:47 GMT", Some(SEP_19_2016)),
        ("  Mon, 19 Sep 2016 18:29:47 GMT ", Some(SEP_19_2016)),
        ("19 Sep 2016 18:29:47 GMT", Some(SEP_19_2016)),
        ("Mon, 19 Sep 2016 18:29:47 +0000", Some(SEP_19_2016)),
        // A weekday that does not match the date is forgiven.
        ("Fri, 19 Sep 2016 18:29:47 GMT", Some(SEP_19_2016)),
        ("", None),
        ("soon", None),
        ("2016-09-19T18:29:47Z", None),
        ("Mon, 32 Sep 2016 18:29:47 GMT", None),
    ];
    for (text, expected) in table {
        assert_eq!(not_before_seconds(text), expected, "{text:?}");
    }
    assert_eq!(
        not_before_text(SEP_19_2016).as_deref(),
        Some("Mon, 19 Sep 2016 18:29:47 GMT")
    );
}

#[test]
fn what_is_too_long_is_named() {
    let many_events = format!(
        r#"{{"Events": [{}]}}"#,
        vec![r#"{"EventId": "a", "EventType": "Freeze", "EventStatus": "Scheduled"}"#; 33]
            .join(",")
    );
    let many_resources = format!(
        r#"{{"Events": [{{"EventId": "a", "EventType": "Freeze", "EventStatus": "Scheduled", "Resources": [{}]}}]}}"#,
        vec![r#""vm""#; 257].join(",")
    );
    let long_resource = format!(
        r#"{{"Events": [{{"EventId": "a", "EventType": "Freeze", "EventStatus": "Scheduled", "Resources": ["vm", "{}"]}}]}}"#,
        "v".repeat(129)
    );
    let long_id = format!(
        r#"{{"Events": [{{"EventId": "{}", "EventType": "Freeze", "EventStatus": "Scheduled"}}]}}"#,
        "a".repeat(65)
    );
    let long_type = format!(
        r#"{{"Events": [{{"EventId": "a", "EventType": "{}", "EventStatus": "Scheduled"}}]}}"#,
        "T".repeat(65)
    );
    let huge = format!(
        r#"{{"Events": [], "Pad": "{}"}}"#,
        " ".repeat(MAX_DOCUMENT_BYTES)
    );
    let table = [
        (
            many_events,
            "Events has 33 entries, more than the 32 accepted",
        ),
        (
            many_resources,
            "Events[0].Resources has 257 entries, more than the 256 accepted",
        ),
        (
            long_resource,
            "Events[0].Resources[1] has 129 bytes, more than the 128 accepted",
        ),
        (
            long_id,
            "Events[0].EventId has 65 bytes, more than the 64 accepted",
        ),
        (
            long_type,
            "Events[0].EventType has 65 bytes, more than the 64 accepted",
        ),
        (
            huge,
            "the document has 1048601 bytes, more than the 1048576 accepted",
        ),
    ];
    for (json, expected) in table {
        match parse(&json) {
            Err(error @ DocumentError::TooLong { .. }) => {
                assert_eq!(error.to_string(), expected);
            }
            other => panic!("{expected}: got {other:?}"),
        }
    }
}

#[test]
fn a_long_description_is_cut_not_refused() {
    let json = format!(
        r#"{{"Events": [{{"EventId": "a", "EventType": "Preempt", "EventStatus": "Scheduled", "Description": "{}"}}]}}"#,
        "é".repeat(5000)
    );
    let document = parsed(&json);
    assert_eq!(
        document.events[0].description.chars().count(),
        MAX_DESCRIPTION_CHARS
    );
}

#[test]
fn bad_ids_and_bad_json_are_errors() {
    let table = [
        (
            r#"{"Events": [{"EventId": "a,b", "EventType": "Freeze", "EventStatus": "Scheduled"}]}"#,
            "Events[0].EventId \"a,b\" is not an event id: write 1 to 64 letters, digits and '-', '_', '.', '{', '}'",
        ),
        (
            r#"{"Events": [{"EventId": "", "EventType": "Freeze", "EventStatus": "Scheduled"}]}"#,
            "Events[0].EventId \"\" is not an event id: write 1 to 64 letters, digits and '-', '_', '.', '{', '}'",
        ),
        (
            r#"{"Events": [{"EventType": "Freeze", "EventStatus": "Scheduled"}]}"#,
            "the document is not Scheduled Events JSON",
        ),
        (
            r#"{"Events": [{"EventId": "a", "EventType": "Freeze", "EventStatus": "Scheduled", "DurationInSeconds": "5"}]}"#,
            "the document is not Scheduled Events JSON",
        ),
        ("", "the document is not Scheduled Events JSON"),
        ("null", "the document is not Scheduled Events JSON"),
        (
            "{\"Events\": {}}",
            "the document is not Scheduled Events JSON",
        ),
    ];
    for (json, expected) in table {
        match parse(json) {
            Ok(document) => panic!("{json} was read: {document:?}"),
            Err(error) => assert_eq!(error.to_string(), expected, "{json}"),
        }
    }
}

#[test]
fn events_round_trip_through_their_raw_form() {
    let document = parsed(DOCUMENT);
    let raw: Vec<RawEvent> = document.events.iter().map(ScheduledEvent::to_raw).collect();
    let json = serde_json::to_string(&raw).unwrap_or_else(|e| panic!("{e}"));
    let back = parse_list(&json).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, document.events);
    assert!(json.contains(r#""DurationInSeconds":-1"#), "{json}");
    assert!(json.contains(r#""EventId":"f020ba2e"#), "{json}");
}

#[test]
fn only_the_events_naming_the_vm_are_kept() {
    let events = vec![
        event("a", &["web-ab12c", "web-cd34e"]),
        event("b", &["WEB-AB12C"]),
        event("c", &["web-cd34e"]),
        event("d", &[]),
        event("e", &["web-ab12c-2"]),
        event("f", &["myscaleset_3"]),
    ];
    let table = [
        ("web-ab12c", vec!["a", "b"]),
        ("Web-AB12c", vec!["a", "b"]),
        ("web-cd34e", vec!["a", "c"]),
        ("myscaleset_3", vec!["f"]),
        ("other", vec![]),
    ];
    for (vm, expected) in table {
        let kept: Vec<String> = for_vm(&events, vm).into_iter().map(|e| e.id).collect();
        assert_eq!(kept, expected, "{vm}");
    }
}

#[test]
fn event_ids_are_plain_tokens() {
    let table = [
        ("602d9444-d2cd-49c7-8624-8643e7171297", true),
        ("{602D9444-D2CD-49C7-8624-8643E7171297}", true),
        ("synthetic-0123456789abcdef", true),
        ("", false),
        ("a b", false),
        ("a,b", false),
        ("a\"b", false),
        ("é", false),
    ];
    for (id, expected) in table {
        assert_eq!(is_event_id(id), expected, "{id:?}");
    }
    assert!(is_event_id(&"a".repeat(64)));
    assert!(!is_event_id(&"a".repeat(65)));
}

/// Any string in IMDS's event shape, fields arbitrary.
fn arbitrary_event_json() -> impl Strategy<Value = String> {
    (
        ".{0,80}",
        ".{0,20}",
        ".{0,20}",
        prop::collection::vec(".{0,20}", 0..4),
        ".{0,40}",
        any::<i64>(),
    )
        .prop_map(|(id, kind, status, resources, not_before, duration)| {
            serde_json::json!({
                "EventId": id,
                "EventType": kind,
                "EventStatus": status,
                "Resources": resources,
                "NotBefore": not_before,
                "DurationInSeconds": duration,
            })
            .to_string()
        })
}

proptest! {
    #[test]
    fn parse_never_panics_on_any_text(text in ".{0,400}") {
        let _ = parse(&text);
        let _ = parse_list(&text);
    }

    #[test]
    fn parse_never_panics_on_any_event(events in prop::collection::vec(arbitrary_event_json(), 0..40)) {
        let json = format!(r#"{{"DocumentIncarnation": 1, "Events": [{}]}}"#, events.join(","));
        if let Ok(document) = parse(&json) {
            prop_assert!(document.events.len() <= MAX_EVENTS);
            for event in &document.events {
                prop_assert!(is_event_id(&event.id));
                prop_assert!(event.resources.len() <= MAX_RESOURCES);
            }
        }
    }

    #[test]
    fn not_before_never_panics(text in ".{0,80}", seconds in any::<i64>()) {
        let _ = not_before_seconds(&text);
        if let Some(written) = not_before_text(seconds) {
            prop_assert_eq!(not_before_seconds(&written), Some(seconds));
        }
    }
}
