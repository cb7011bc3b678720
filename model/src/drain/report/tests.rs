//! Table tests of what a drain says to people.

use super::*;
use crate::drain::{DrainPlan, PodRef, UnwaitedVolume, VolumeWait};
use crate::pool::DrainPolicy;

fn drained(node_found: bool, forced: Option<&str>) -> DrainedNode {
    DrainedNode {
        node: "web-abcde".to_owned(),
        node_found,
        forced: forced.map(ToOwned::to_owned),
        ..DrainedNode::default()
    }
}

#[test]
fn the_summary_says_whether_there_was_a_node_and_whether_it_was_forced() {
    let table = [
        (drained(false, None), "no Node web-abcde: nothing to drain"),
        (
            drained(false, Some("x")),
            "no Node web-abcde: nothing to drain",
        ),
        (drained(true, None), "web-abcde drained"),
        (
            drained(true, Some("force was requested")),
            "web-abcde drained in force mode (force was requested)",
        ),
    ];
    for (result, expected) in table {
        assert_eq!(drained_summary("web-abcde", &result), expected);
    }
}

#[test]
fn a_node_not_of_this_machine_is_named_with_its_provider_id() {
    let table = [
        (
            Some("azure:///other"),
            "Node web-abcde has providerID azure:///other or lacks the label nodewright.io/machine=web-abcde: it is not this machine's, so nothing on it was touched",
        ),
        (
            None,
            "Node web-abcde has no providerID or lacks the label nodewright.io/machine=web-abcde: it is not this machine's, so nothing on it was touched",
        ),
    ];
    for (provider_id, expected) in table {
        assert_eq!(not_this_machine("web-abcde", provider_id), expected);
    }
}

#[test]
fn purpose_decides_the_cordon_line_and_the_fact() {
    let table = [
        (
            DrainPurpose::Maintenance,
            "cordoned, tainted nodewright.io/draining:NoSchedule",
            "maintenance",
        ),
        (
            DrainPurpose::Deletion,
            "cordoned, tainted nodewright.io/draining:NoSchedule, condition Terminating",
            "deletion",
        ),
    ];
    for (purpose, line, word) in table {
        assert_eq!((cordoned(purpose), purpose_word(purpose)), (line, word));
    }
}

#[test]
fn the_plan_names_only_the_groups_it_has() {
    let pod = PodRef {
        namespace: "shop".to_owned(),
        name: "web".to_owned(),
        uid: "u".to_owned(),
        grace_period_seconds: 30,
    };
    let table = [
        (DrainPlan::default(), "0 without volumes, 0 with volumes"),
        (
            DrainPlan {
                without_volumes: vec![pod.clone()],
                terminating: vec![pod],
                ..DrainPlan::default()
            },
            "1 without volumes, 0 with volumes, 1 already terminating",
        ),
        (
            DrainPlan {
                not_waited_on: vec![UnwaitedVolume {
                    persistent_volume: "pv-share".to_owned(),
                    pod: "shop/files".to_owned(),
                    why: VolumeWait::NeedsNoAttach,
                }],
                ..DrainPlan::default()
            },
            "0 without volumes, 0 with volumes, 1 volumes not waited on (no attach, or used from other nodes)",
        ),
    ];
    for (plan, expected) in table {
        assert_eq!(describe_plan(&plan), expected);
    }
}

#[test]
fn the_volume_step_counts_only_pods_whose_volumes_moved() {
    let table = [
        ((0, 0, 0), "0 pods moved with their volumes"),
        ((2, 0, 0), "2 pods moved with their volumes"),
        (
            (1, 1, 0),
            "1 pods moved with their volumes, 1 whose volumes did not attach elsewhere in time",
        ),
        (
            (0, 1, 2),
            "0 pods moved with their volumes, 1 whose volumes did not attach elsewhere in time, 2 with a detach pending",
        ),
    ];
    for ((moved, unconfirmed, pending), expected) in table {
        assert_eq!(
            volumes_moved_detail(moved, unconfirmed, pending),
            expected,
            "{moved} {unconfirmed} {pending}"
        );
    }
}

#[test]
fn continuations_count_from_one() {
    let resume = |continuation| DrainResume {
        started_at: String::new(),
        deadline: String::new(),
        force_requested: false,
        policy: DrainPolicy::default(),
        done_so_far: DrainedNode::default(),
        continuation,
        stuck_volumes: Vec::new(),
        pods: Vec::new(),
        volumes: Vec::new(),
    };
    assert_eq!(next_continuation(None), 1);
    assert_eq!(next_continuation(Some(&resume(1))), 2);
    assert_eq!(next_continuation(Some(&resume(u32::MAX))), u32::MAX);
}

#[test]
fn a_cancelled_drain_says_what_it_kept_and_gave_back() {
    let table = [
        (
            InFlightEnd::Moved,
            "pod shop/db was moving with its volumes when the request came: the move finished",
        ),
        (
            InFlightEnd::ReattachUnconfirmed("timeout".to_owned()),
            "pod shop/db was moving with its volumes: its reattach was not confirmed (timeout)",
        ),
        (
            InFlightEnd::StillAttached {
                pending: vec!["pv-1".to_owned(), "pv-2".to_owned()],
                waited: Duration::from_secs(150),
            },
            "pod shop/db was moving with its volumes: pv-1, pv-2 still attached here after 150s, so attached to this node only",
        ),
        (
            InFlightEnd::DetachUnconfirmed("503".to_owned()),
            "pod shop/db was moving with its volumes: its detach was not confirmed (503)",
        ),
    ];
    for (end, expected) in table {
        assert_eq!(in_flight_kept("shop/db", &end), expected);
    }
    let done = DrainedNode {
        evicted: vec!["shop/web".to_owned()],
        volumes_moved: vec![("pv-1".to_owned(), "web-fghij".to_owned())],
        ..DrainedNode::default()
    };
    assert_eq!(
        kept_after_cancel(&done),
        [
            "1 pods already evicted stay where they were rescheduled",
            "volume pv-1 stays attached to web-fghij",
        ]
    );
    assert!(kept_after_cancel(&DrainedNode::default()).is_empty());
    let given = [
        (
            false,
            DrainPurpose::Maintenance,
            "uncordoned n and removed the draining taint",
        ),
        (
            true,
            DrainPurpose::Maintenance,
            "removed the draining taint from n (it stays cordoned: it was before the drain)",
        ),
        (
            false,
            DrainPurpose::Deletion,
            "uncordoned n and removed the draining taint and the Terminating condition",
        ),
    ];
    for (keep_cordoned, purpose, expected) in given {
        assert_eq!(given_back("n", keep_cordoned, purpose), expected);
    }
}
