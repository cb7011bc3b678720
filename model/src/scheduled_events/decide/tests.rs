//! Every row of the event decision, the acknowledgement's time and precondition, the pods'
//! grace, and properties (grace bounded, acknowledgement never after `NotBefore`, no panics).

use std::collections::BTreeSet;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::scheduled_events::condition::EventOrigin;
use crate::scheduled_events::document::ScheduledEvent;
use crate::scheduled_events::policy::EventRule;

/// 2026-11-30 01:00:00 UTC.
const NOW: i64 = 1_796_000_400;

const MANAGED_SPOT: MachineFacts = MachineFacts {
    spot: true,
    managed: true,
};
const MANAGED: MachineFacts = MachineFacts {
    spot: false,
    managed: true,
};

fn pending(
    event_type: EventType,
    status: EventStatus,
    not_before: Option<i64>,
    duration_seconds: Option<u64>,
) -> PendingEvent {
    PendingEvent {
        event: ScheduledEvent {
            id: "602d9444-d2cd-49c7-8624-8643e7171297".to_owned(),
            event_type,
            status,
            resource_type: "VirtualMachine".to_owned(),
            resources: vec!["web-ab12c".to_owned(), "web-cd34e".to_owned()],
            not_before,
            not_before_text: String::new(),
            description: String::new(),
            source: "Platform".to_owned(),
            duration_seconds,
        },
        origin: EventOrigin::Annotation,
        synthetic_id: false,
    }
}

fn scheduled(event_type: EventType, in_seconds: i64, duration: Option<u64>) -> PendingEvent {
    pending(
        event_type,
        EventStatus::Scheduled,
        Some(NOW + in_seconds),
        duration,
    )
}

fn started(event_type: EventType) -> PendingEvent {
    pending(event_type, EventStatus::Started, None, None)
}

fn drain_now(
    deadline: i64,
    grace_cap_seconds: i64,
    replace_at_once: bool,
    skip_volume_reattach_wait: bool,
) -> EventPlan {
    EventPlan::DrainNow(DrainNow {
        deadline,
        grace_cap_seconds,
        honour_pdbs_until: deadline,
        override_do_not_disrupt: true,
        replace_at_once,
        skip_volume_reattach_wait,
        reason: String::new(),
    })
}

fn drain_then_ack(drain_by: i64, not_before: i64, ack_when_all_ready: bool) -> EventPlan {
    EventPlan::DrainThenAck(DrainThenAck {
        drain_by,
        not_before,
        ack_when_all_ready,
        resources: vec!["web-ab12c".to_owned(), "web-cd34e".to_owned()],
        reason: String::new(),
    })
}

fn leave_alone() -> EventPlan {
    EventPlan::LeaveAlone {
        reason: String::new(),
    }
}

fn too_late() -> EventPlan {
    EventPlan::TooLate {
        reason: String::new(),
    }
}

fn pass_through() -> EventPlan {
    EventPlan::PassThrough {
        reason: String::new(),
    }
}

/// `plan` with its words left out, to compare the decision itself.
fn without_reason(plan: EventPlan) -> EventPlan {
    match plan {
        EventPlan::DrainNow(drain) => EventPlan::DrainNow(DrainNow {
            reason: String::new(),
            ..drain
        }),
        EventPlan::DrainThenAck(drain) => EventPlan::DrainThenAck(DrainThenAck {
            reason: String::new(),
            ..drain
        }),
        EventPlan::LeaveAlone { .. } => leave_alone(),
        EventPlan::TooLate { .. } => too_late(),
        EventPlan::PassThrough { .. } => pass_through(),
    }
}

fn the_reason(plan: &EventPlan) -> &str {
    match plan {
        EventPlan::DrainNow(drain) => &drain.reason,
        EventPlan::DrainThenAck(drain) => &drain.reason,
        EventPlan::LeaveAlone { reason }
        | EventPlan::TooLate { reason }
        | EventPlan::PassThrough { reason } => reason,
    }
}

/// The one check every decision row goes through.
fn check(
    name: &str,
    event: &PendingEvent,
    policy: &ScheduledEventsPolicy,
    facts: MachineFacts,
    expected: EventPlan,
) {
    let plan = decide(event, policy, facts, NOW);
    assert!(!the_reason(&plan).is_empty(), "{name}: no reason");
    assert_eq!(without_reason(plan), expected, "{name}");
}

#[test]
fn every_event_gets_its_plan() {
    let defaults = ScheduledEventsPolicy::default();
    let minute_margin = ScheduledEventsPolicy {
        drain_margin: Duration::from_secs(60),
        ..defaults
    };
    let ignore_reboots = ScheduledEventsPolicy {
        reboot: EventRule {
            action: EventAction::Ignore,
            ignore_below: None,
        },
        ..defaults
    };
    let mut from_condition = scheduled(EventType::Reboot, 900, None);
    from_condition.origin = EventOrigin::Condition {
        condition_type: "VMEventScheduled".to_owned(),
    };
    let other_status = pending(
        EventType::Redeploy,
        EventStatus::Other("Canceled".to_owned()),
        Some(NOW + 600),
        None,
    );
    let unmanaged = MachineFacts {
        spot: true,
        managed: false,
    };
    let table = [
        (
            "a Preempt with 25 s left drains until NotBefore and replaces at once",
            scheduled(EventType::Preempt, 25, None),
            &defaults,
            MANAGED_SPOT,
            drain_now(NOW + 25, 25, true, false),
        ),
        (
            "a Preempt with 10 s left still waits for volumes",
            scheduled(EventType::Preempt, 10, None),
            &defaults,
            MANAGED_SPOT,
            drain_now(NOW + 10, 10, true, false),
        ),
        (
            "a Preempt with 5 s left does not wait for volumes",
            scheduled(EventType::Preempt, 5, None),
            &defaults,
            MANAGED_SPOT,
            drain_now(NOW + 5, 5, true, true),
        ),
        (
            "a Preempt with 0 s left drains with no grace",
            scheduled(EventType::Preempt, 0, None),
            &defaults,
            MANAGED_SPOT,
            drain_now(NOW, 0, true, true),
        ),
        (
            "a Preempt whose NotBefore has passed drains with no grace",
            scheduled(EventType::Preempt, -10, None),
            &defaults,
            MANAGED_SPOT,
            drain_now(NOW, 0, true, true),
        ),
        (
            "a Preempt under way drains with no grace",
            started(EventType::Preempt),
            &defaults,
            MANAGED_SPOT,
            drain_now(NOW, 0, true, true),
        ),
        (
            "a Preempt with an unreadable NotBefore is acted on at once",
            pending(EventType::Preempt, EventStatus::Scheduled, None, None),
            &defaults,
            MANAGED_SPOT,
            drain_now(NOW, 0, true, true),
        ),
        (
            "a Preempt of a machine not known as Spot is acted on all the same",
            scheduled(EventType::Preempt, 25, None),
            &defaults,
            MANAGED,
            drain_now(NOW + 25, 25, true, false),
        ),
        (
            "a Redeploy drains by NotBefore less the margin, then acknowledges",
            scheduled(EventType::Redeploy, 600, None),
            &defaults,
            MANAGED,
            drain_then_ack(NOW + 570, NOW + 600, true),
        ),
        (
            "a Redeploy under a 60 s margin drains a minute ahead",
            scheduled(EventType::Redeploy, 600, None),
            &minute_margin,
            MANAGED,
            drain_then_ack(NOW + 540, NOW + 600, true),
        ),
        (
            "a Redeploy with less than the margin left drains until NotBefore",
            scheduled(EventType::Redeploy, 20, None),
            &defaults,
            MANAGED,
            drain_then_ack(NOW + 20, NOW + 20, true),
        ),
        (
            "a Redeploy under way is too late",
            started(EventType::Redeploy),
            &defaults,
            MANAGED,
            too_late(),
        ),
        (
            "a Terminate drains, then acknowledges",
            scheduled(EventType::Terminate, 300, None),
            &defaults,
            MANAGED,
            drain_then_ack(NOW + 270, NOW + 300, true),
        ),
        (
            "a Terminate under way drains with no grace and asks no replacement",
            started(EventType::Terminate),
            &defaults,
            MANAGED,
            drain_now(NOW, 0, false, true),
        ),
        (
            "a Freeze of 5 s is left alone under the default",
            scheduled(EventType::Freeze, 900, Some(5)),
            &defaults,
            MANAGED,
            leave_alone(),
        ),
        (
            "a Freeze of exactly 30 s is left alone under the default",
            scheduled(EventType::Freeze, 900, Some(30)),
            &defaults,
            MANAGED,
            leave_alone(),
        ),
        (
            "a Freeze of 60 s is drained for",
            scheduled(EventType::Freeze, 900, Some(60)),
            &defaults,
            MANAGED,
            drain_then_ack(NOW + 870, NOW + 900, true),
        ),
        (
            "a Freeze of unknown length is drained for",
            scheduled(EventType::Freeze, 900, None),
            &defaults,
            MANAGED,
            drain_then_ack(NOW + 870, NOW + 900, true),
        ),
        (
            "a short Freeze under way is left alone",
            pending(EventType::Freeze, EventStatus::Started, None, Some(5)),
            &defaults,
            MANAGED,
            leave_alone(),
        ),
        (
            "a long Freeze under way is too late",
            pending(EventType::Freeze, EventStatus::Started, None, Some(60)),
            &defaults,
            MANAGED,
            too_late(),
        ),
        (
            "a Reboot is drained for, then acknowledged, by default",
            scheduled(EventType::Reboot, 900, None),
            &defaults,
            MANAGED,
            drain_then_ack(NOW + 870, NOW + 900, true),
        ),
        (
            "a Reboot is left alone when the policy ignores reboots",
            scheduled(EventType::Reboot, 900, None),
            &ignore_reboots,
            MANAGED,
            leave_alone(),
        ),
        (
            "a Reboot under way is too late",
            started(EventType::Reboot),
            &defaults,
            MANAGED,
            too_late(),
        ),
        (
            "a Reboot read from a condition is drained for but not acknowledged",
            from_condition,
            &defaults,
            MANAGED,
            drain_then_ack(NOW + 870, NOW + 900, false),
        ),
        (
            "an unknown type passes through",
            scheduled(
                EventType::Other("SpotRebalanceRecommendation".to_owned()),
                60,
                None,
            ),
            &defaults,
            MANAGED_SPOT,
            pass_through(),
        ),
        (
            "an unknown type under way passes through",
            started(EventType::Other("Hibernate".to_owned())),
            &defaults,
            MANAGED,
            pass_through(),
        ),
        (
            "an unknown status passes through",
            other_status,
            &defaults,
            MANAGED,
            pass_through(),
        ),
        (
            "an event of a machine nodewright does not manage passes through",
            scheduled(EventType::Preempt, 25, None),
            &defaults,
            unmanaged,
            pass_through(),
        ),
    ];
    for (name, event, policy, facts, expected) in table {
        check(name, &event, policy, facts, expected);
    }
}

#[test]
fn reasons_say_what_was_decided_and_why() {
    let defaults = ScheduledEventsPolicy::default();
    let table = [
        (
            scheduled(EventType::Freeze, 900, Some(5)),
            "Freeze of 5s is at most spec.scheduledEvents.freeze.ignoreBelow (30s)",
        ),
        (
            scheduled(EventType::Preempt, 25, None),
            "Spot eviction (Preempt) at 2026-11-30 01:00:25 UTC, 25s left: drain now, each pod's grace cut to the time left, do-not-disrupt overridden, a replacement asked for at once",
        ),
        (
            scheduled(EventType::Preempt, 5, None),
            "Spot eviction (Preempt) at 2026-11-30 01:00:05 UTC, 5s left: drain now, each pod's grace cut to the time left, do-not-disrupt overridden, volumes not waited for, a replacement asked for at once",
        ),
        (
            scheduled(EventType::Redeploy, 600, None),
            "Redeploy 602d9444-d2cd-49c7-8624-8643e7171297 not before 2026-11-30 01:10 UTC: drain by 2026-11-30 01:09:30 UTC, then acknowledge once every VM it names is ready",
        ),
        (
            scheduled(EventType::Other("Hibernate".to_owned()), 60, None),
            "\"Hibernate\" is not an event type nodewright acts on (published only)",
        ),
        (
            started(EventType::Reboot),
            "Reboot is under way: the machine comes back by itself, and a drain now would only move pods that are stopped already",
        ),
    ];
    for (event, expected) in table {
        let plan = decide(&event, &defaults, MANAGED_SPOT, NOW);
        assert_eq!(the_reason(&plan), expected);
    }
}

fn ack_plan(not_before: i64) -> EventPlan {
    drain_then_ack(not_before - 30, not_before, true)
}

#[test]
fn acknowledgements_wait_for_a_window_but_never_past_not_before() {
    let closed = |opens_at| WindowView {
        open: false,
        opens_at,
    };
    let open = WindowView {
        open: true,
        opens_at: None,
    };
    let table = [
        (
            "an open window acknowledges at once",
            ack_plan(NOW + 900),
            NOW,
            open,
            AckTime::Now,
        ),
        (
            "no window acknowledges at once",
            ack_plan(NOW + 900),
            NOW,
            WindowView::UNGATED,
            AckTime::Now,
        ),
        (
            "a window opening before NotBefore acknowledges at its opening",
            ack_plan(NOW + 900),
            NOW,
            closed(Some(NOW + 600)),
            AckTime::At(NOW + 600),
        ),
        (
            "a window opening past NotBefore lets the event start at NotBefore",
            ack_plan(NOW + 900),
            NOW,
            closed(Some(NOW + 3600)),
            AckTime::LetItStart {
                at: NOW + 900,
                reason: String::new(),
            },
        ),
        (
            "a window opening at NotBefore lets the event start",
            ack_plan(NOW + 900),
            NOW,
            closed(Some(NOW + 900)),
            AckTime::LetItStart {
                at: NOW + 900,
                reason: String::new(),
            },
        ),
        (
            "a window that never opens lets the event start",
            ack_plan(NOW + 900),
            NOW,
            closed(None),
            AckTime::LetItStart {
                at: NOW + 900,
                reason: String::new(),
            },
        ),
        (
            "a Node ready at NotBefore lets the event start",
            ack_plan(NOW + 900),
            NOW + 900,
            open,
            AckTime::LetItStart {
                at: NOW + 900,
                reason: String::new(),
            },
        ),
        (
            "a drain against the clock asks no acknowledgement",
            drain_now(NOW + 25, 25, true, false),
            NOW,
            open,
            AckTime::NotAsked,
        ),
        (
            "an event read from a condition asks no acknowledgement",
            drain_then_ack(NOW + 870, NOW + 900, false),
            NOW,
            open,
            AckTime::NotAsked,
        ),
        (
            "an event left alone asks no acknowledgement",
            leave_alone(),
            NOW,
            open,
            AckTime::NotAsked,
        ),
    ];
    for (name, plan, ready_at, window, expected) in table {
        let at = match ack_at(&plan, ready_at, window) {
            AckTime::LetItStart { at, reason } => {
                assert!(
                    reason.ends_with("the event starts by itself"),
                    "{name}: {reason}"
                );
                AckTime::LetItStart {
                    at,
                    reason: String::new(),
                }
            }
            other => other,
        };
        assert_eq!(at, expected, "{name}");
    }
}

#[test]
fn a_window_view_comes_from_the_maintenance_gate() {
    use crate::maintenance::WindowState;
    assert_eq!(WindowView::from_gate(&Gate::Ungated), WindowView::UNGATED);
    assert_eq!(
        WindowView::from_gate(&Gate::Open(WindowState::Open { closes_at: None })),
        WindowView::UNGATED
    );
    assert_eq!(
        WindowView::from_gate(&Gate::Closed(WindowState::Closed {
            opens_at: Some(NOW + 60)
        })),
        WindowView {
            open: false,
            opens_at: Some(NOW + 60)
        }
    );
}

#[test]
fn an_acknowledgement_waits_for_every_vm_the_event_names() {
    let vms = |names: &[&str]| -> Vec<String> { names.iter().map(|n| (*n).to_owned()).collect() };
    let ready =
        |names: &[&str]| -> BTreeSet<String> { names.iter().map(|n| (*n).to_owned()).collect() };
    let table = [
        (vms(&["web-a"]), ready(&["web-a"]), Ok(())),
        (vms(&["web-a", "WEB-B"]), ready(&["web-b", "Web-A", "x"]), Ok(())),
        (
            vms(&["web-a", "web-b"]),
            ready(&["web-a"]),
            Err("1 of the 2 VMs the event names is not ready (web-b); an acknowledgement would start the event on all of them".to_owned()),
        ),
        (
            vms(&["a", "b", "c", "d", "e", "f", "g"]),
            ready(&[]),
            Err("7 of the 7 VMs the event names are not ready (a, b, c, d, e and 2 more); an acknowledgement would start the event on all of them".to_owned()),
        ),
        (
            vms(&[]),
            ready(&["web-a"]),
            Err("the event names no VM: nothing says whom an acknowledgement would start it on".to_owned()),
        ),
    ];
    for (resources, ready, expected) in table {
        assert_eq!(
            may_acknowledge(&resources, &ready),
            expected,
            "{resources:?}"
        );
    }
}

#[test]
fn each_pods_grace_is_cut_to_the_time_left() {
    let table = [
        (Some(30), NOW, NOW + 25, 25),
        (Some(10), NOW, NOW + 25, 10),
        (None, NOW, NOW + 600, DEFAULT_POD_GRACE_SECONDS),
        (None, NOW, NOW + 5, 5),
        (Some(3600), NOW, NOW, 0),
        (Some(30), NOW, NOW - 10, 0),
        (Some(-5), NOW, NOW + 25, 0),
        (Some(0), NOW, NOW + 25, 0),
        (Some(i64::MAX), i64::MIN, i64::MAX, i64::MAX),
    ];
    for (pod, now, not_before, expected) in table {
        assert_eq!(
            grace_for(pod, now, not_before),
            expected,
            "{pod:?} {now} {not_before}"
        );
    }
}

fn any_type() -> impl Strategy<Value = EventType> {
    prop_oneof![
        Just(EventType::Preempt),
        Just(EventType::Reboot),
        Just(EventType::Redeploy),
        Just(EventType::Freeze),
        Just(EventType::Terminate),
        ".{0,10}".prop_map(EventType::Other),
    ]
}

fn any_status() -> impl Strategy<Value = EventStatus> {
    prop_oneof![
        Just(EventStatus::Scheduled),
        Just(EventStatus::Started),
        ".{0,10}".prop_map(EventStatus::Other),
    ]
}

proptest! {
    #[test]
    fn grace_is_never_negative_nor_above_the_pods_own_nor_the_time_left(
        pod in prop::option::of(any::<i64>()),
        now in any::<i64>(),
        not_before in any::<i64>(),
    ) {
        let grace = grace_for(pod, now, not_before);
        prop_assert!(grace >= 0);
        prop_assert!(grace <= pod.unwrap_or(DEFAULT_POD_GRACE_SECONDS).max(0));
        prop_assert!(grace <= not_before.saturating_sub(now).max(0));
    }

    #[test]
    fn an_acknowledgement_is_never_later_than_not_before(
        not_before in -1_000_000i64..1_000_000,
        ready_at in -1_000_000i64..1_000_000,
        open in any::<bool>(),
        opens_at in prop::option::of(-1_000_000i64..2_000_000),
    ) {
        let plan = drain_then_ack(not_before - 30, not_before, true);
        match ack_at(&plan, ready_at, WindowView { open, opens_at }) {
            AckTime::Now => prop_assert!(ready_at < not_before),
            AckTime::At(at) => {
                prop_assert!(at < not_before);
                prop_assert!(at >= ready_at);
            }
            AckTime::LetItStart { at, .. } => prop_assert_eq!(at, not_before),
            AckTime::NotAsked => prop_assert!(false, "a plan with an acknowledgement asked none"),
        }
    }

    #[test]
    fn every_plan_keeps_its_times_sane(
        event_type in any_type(),
        status in any_status(),
        not_before in prop::option::of(any::<i64>()),
        duration in prop::option::of(any::<u64>()),
        margin in 0u64..=600,
        now in -1_000_000_000_000i64..1_000_000_000_000,
        spot in any::<bool>(),
        managed in any::<bool>(),
    ) {
        let event = pending(event_type, status, not_before, duration);
        let policy = ScheduledEventsPolicy {
            drain_margin: Duration::from_secs(margin),
            ..ScheduledEventsPolicy::default()
        };
        match decide(&event, &policy, MachineFacts { spot, managed }, now) {
            EventPlan::DrainNow(drain) => {
                prop_assert!(drain.grace_cap_seconds >= 0);
                prop_assert!(drain.deadline >= now);
                prop_assert_eq!(drain.deadline.saturating_sub(now), drain.grace_cap_seconds);
                prop_assert!(drain.override_do_not_disrupt);
            }
            EventPlan::DrainThenAck(drain) => {
                prop_assert!(drain.drain_by >= now);
                prop_assert!(drain.drain_by <= drain.not_before.max(now));
            }
            EventPlan::LeaveAlone { reason }
            | EventPlan::TooLate { reason }
            | EventPlan::PassThrough { reason } => prop_assert!(!reason.is_empty()),
        }
    }
}
