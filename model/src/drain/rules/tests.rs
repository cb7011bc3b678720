//! Tests of the drain rules: selector matching, the precedence of labels and rules, the tiers.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::drain::{SkipReason, VolumeFacts};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn requirement(key: &str, operator: &str, values: &[&str]) -> LabelRequirement {
    LabelRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values: values.iter().map(|v| (*v).to_owned()).collect(),
    }
}

fn pod(namespace: &str, name: &str, pod_labels: &[(&str, &str)]) -> PodFacts {
    PodFacts {
        namespace: namespace.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller_kind: Some("ReplicaSet".into()),
        mirror: false,
        phase: "Running".into(),
        terminating: false,
        priority: 0,
        grace_period_seconds: Some(10),
        volumes: vec![],
        empty_dirs: vec![],
        labels: labels(pod_labels),
        namespace_labels: labels(&[("kubernetes.io/metadata.name", namespace)]),
        do_not_disrupt: None,
    }
}

fn rule(pods: Option<LabelSelector>, behavior: DrainBehavior, order: i32) -> DrainRule {
    DrainRule {
        selector: RuleSelector {
            pod_selector: pods,
            namespace_selector: None,
        },
        behavior,
        order,
    }
}

fn app(name: &str) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: labels(&[("app", name)]),
        match_expressions: vec![],
    })
}

#[test]
fn selectors_match_as_kubernetes_label_selectors_do() {
    let web = labels(&[("app", "web"), ("tier", "front")]);
    let none = BTreeMap::new();
    let table: Vec<(&str, LabelSelector, &BTreeMap<String, String>, bool)> = vec![
        ("empty matches all", LabelSelector::default(), &web, true),
        (
            "empty matches no labels",
            LabelSelector::default(),
            &none,
            true,
        ),
        (
            "matchLabels equal",
            LabelSelector {
                match_labels: labels(&[("app", "web")]),
                match_expressions: vec![],
            },
            &web,
            true,
        ),
        (
            "matchLabels other value",
            LabelSelector {
                match_labels: labels(&[("app", "db")]),
                match_expressions: vec![],
            },
            &web,
            false,
        ),
        (
            "matchLabels all pairs",
            LabelSelector {
                match_labels: labels(&[("app", "web"), ("tier", "back")]),
                match_expressions: vec![],
            },
            &web,
            false,
        ),
        (
            "In holds",
            LabelSelector {
                match_labels: BTreeMap::new(),
                match_expressions: vec![requirement("app", "In", &["db", "web"])],
            },
            &web,
            true,
        ),
        (
            "In without the key",
            LabelSelector {
                match_labels: BTreeMap::new(),
                match_expressions: vec![requirement("app", "In", &["web"])],
            },
            &none,
            false,
        ),
        (
            "NotIn with another value",
            LabelSelector {
                match_labels: BTreeMap::new(),
                match_expressions: vec![requirement("app", "NotIn", &["db"])],
            },
            &web,
            true,
        ),
        (
            "NotIn with the value",
            LabelSelector {
                match_labels: BTreeMap::new(),
                match_expressions: vec![requirement("app", "NotIn", &["web"])],
            },
            &web,
            false,
        ),
        (
            "NotIn without the key holds",
            LabelSelector {
                match_labels: BTreeMap::new(),
                match_expressions: vec![requirement("app", "NotIn", &["web"])],
            },
            &none,
            true,
        ),
        (
            "Exists",
            LabelSelector {
                match_labels: BTreeMap::new(),
                match_expressions: vec![requirement("tier", "Exists", &[])],
            },
            &web,
            true,
        ),
        (
            "Exists without the key",
            LabelSelector {
                match_labels: BTreeMap::new(),
                match_expressions: vec![requirement("tier", "Exists", &[])],
            },
            &none,
            false,
        ),
        (
            "DoesNotExist",
            LabelSelector {
                match_labels: BTreeMap::new(),
                match_expressions: vec![requirement("tier", "DoesNotExist", &[])],
            },
            &web,
            false,
        ),
        (
            "DoesNotExist without the key",
            LabelSelector {
                match_labels: BTreeMap::new(),
                match_expressions: vec![requirement("tier", "DoesNotExist", &[])],
            },
            &none,
            true,
        ),
        (
            "an unknown operator matches nothing",
            LabelSelector {
                match_labels: BTreeMap::new(),
                match_expressions: vec![requirement("app", "Gt", &["1"])],
            },
            &web,
            false,
        ),
        (
            "labels and expressions together",
            LabelSelector {
                match_labels: labels(&[("tier", "front")]),
                match_expressions: vec![requirement("app", "In", &["web"])],
            },
            &web,
            true,
        ),
    ];
    for (case, selector, object, expected) in table {
        assert_eq!(selector.matches(object), expected, "{case}");
    }
}

#[test]
fn a_rule_needs_both_its_pod_and_its_namespace_selector() {
    let mut selector = RuleSelector {
        pod_selector: app("web"),
        namespace_selector: Some(LabelSelector {
            match_labels: labels(&[("kubernetes.io/metadata.name", "shop")]),
            match_expressions: vec![],
        }),
    };
    assert!(selector.matches(&pod("shop", "w", &[("app", "web")])));
    assert!(!selector.matches(&pod("other", "w", &[("app", "web")])));
    assert!(!selector.matches(&pod("shop", "w", &[("app", "db")])));
    selector.pod_selector = None;
    assert!(selector.matches(&pod("shop", "w", &[])));
}

#[test]
fn labels_override_rules_and_the_first_matching_rule_wins() {
    let rules = vec![
        rule(app("web"), DrainBehavior::Skip, 0),
        rule(app("web"), DrainBehavior::Drain, 5),
        rule(app("db"), DrainBehavior::Drain, 5),
        rule(app("batch"), DrainBehavior::WaitCompleted, 0),
    ];
    let table: Vec<(&str, PodFacts, DrainBehavior, i32, DecidedBy)> = vec![
        (
            "no rule matches",
            pod("a", "x", &[("app", "other")]),
            DrainBehavior::Drain,
            0,
            DecidedBy::Default,
        ),
        (
            "the first of two matching rules",
            pod("a", "x", &[("app", "web")]),
            DrainBehavior::Skip,
            0,
            DecidedBy::Rule { index: 0 },
        ),
        (
            "a Drain rule gives its order",
            pod("a", "x", &[("app", "db")]),
            DrainBehavior::Drain,
            5,
            DecidedBy::Rule { index: 2 },
        ),
        (
            "WaitCompleted",
            pod("a", "x", &[("app", "batch")]),
            DrainBehavior::WaitCompleted,
            0,
            DecidedBy::Rule { index: 3 },
        ),
        (
            "nodewright's label over a rule",
            pod("a", "x", &[("app", "db"), (LABEL_DRAIN, "skip")]),
            DrainBehavior::Skip,
            0,
            DecidedBy::Label {
                key: LABEL_DRAIN.to_owned(),
            },
        ),
        (
            "Cluster API's label over a rule",
            pod(
                "a",
                "x",
                &[("app", "web"), (LABEL_CAPI_DRAIN, "wait-completed")],
            ),
            DrainBehavior::WaitCompleted,
            0,
            DecidedBy::Label {
                key: LABEL_CAPI_DRAIN.to_owned(),
            },
        ),
        (
            "nodewright's label before Cluster API's",
            pod(
                "a",
                "x",
                &[(LABEL_DRAIN, "wait-completed"), (LABEL_CAPI_DRAIN, "skip")],
            ),
            DrainBehavior::WaitCompleted,
            0,
            DecidedBy::Label {
                key: LABEL_DRAIN.to_owned(),
            },
        ),
        (
            "an unknown label value is ignored",
            pod("a", "x", &[("app", "db"), (LABEL_DRAIN, "never")]),
            DrainBehavior::Drain,
            5,
            DecidedBy::Rule { index: 2 },
        ),
    ];
    for (case, facts, behavior, order, by) in table {
        let decision = decide_pod(&facts, &rules);
        assert_eq!(
            decision,
            PodDecision {
                behavior,
                order,
                by
            },
            "{case}"
        );
    }
}

#[test]
fn without_rules_the_plan_is_plan_drain_s_in_one_tier() {
    let pods = vec![pod("a", "x", &[]), pod("a", "y", &[])];
    let ruled = plan_with_rules(&pods, &[], LocalDataPolicy::Evict, false);
    assert_eq!(ruled.whole, plan_drain(&pods, LocalDataPolicy::Evict));
    assert_eq!(ruled.tiers.len(), 1);
    assert_eq!(ruled.tiers[0].plan, ruled.whole);
    assert!(!ruled.is_tiered());
    assert_eq!(ruled, RuledPlan::untiered(ruled.whole.clone()));
}

#[test]
fn rules_skip_wait_and_split_the_pods_into_tiers() {
    let rules = vec![
        rule(app("agent"), DrainBehavior::Skip, 0),
        rule(app("job"), DrainBehavior::WaitCompleted, 0),
        rule(app("first"), DrainBehavior::Drain, -10),
        rule(app("last"), DrainBehavior::Drain, 20),
    ];
    let mut daemon = pod("a", "ds", &[("app", "last")]);
    daemon.controller_kind = Some("DaemonSet".into());
    let mut db = pod("a", "db", &[("app", "last")]);
    db.volumes.push(VolumeFacts {
        claim: "data".into(),
        persistent_volume: Some("pv-1".into()),
        driver: None,
        volume_handle: None,
        attach_required: true,
        attached_here: false,
        access_modes: vec!["ReadWriteOnce".into()],
    });
    let pods = vec![
        pod("a", "agent", &[("app", "agent")]),
        pod("a", "job-1", &[("app", "job")]),
        pod("a", "f1", &[("app", "first")]),
        pod("a", "f2", &[("app", "first")]),
        pod("a", "mid", &[]),
        pod("a", "held", &[("app", "first"), (LABEL_DRAIN, "skip")]),
        db,
        daemon,
    ];
    let ruled = plan_with_rules(&pods, &rules, LocalDataPolicy::Evict, false);
    assert!(ruled.is_tiered());
    let skipped: Vec<(&str, SkipReason, Option<&str>)> = ruled
        .whole
        .skipped
        .iter()
        .map(|s| (s.pod.as_str(), s.reason, s.rule.as_deref()))
        .collect();
    assert_eq!(
        skipped,
        vec![
            ("a/agent", SkipReason::Rule, Some("spec.drain.rules[0]")),
            ("a/ds", SkipReason::DaemonSet, None),
            (
                "a/held",
                SkipReason::Rule,
                Some("label nodewright.io/drain")
            ),
        ]
    );
    let waited: Vec<(String, &str)> = ruled
        .wait_completed
        .iter()
        .map(|w| (w.pod.key(), w.by.as_str()))
        .collect();
    assert_eq!(waited, vec![("a/job-1".to_owned(), "spec.drain.rules[1]")]);
    let tiers: Vec<(i32, Vec<String>)> = ruled
        .tiers
        .iter()
        .map(|t| (t.order, t.plan.moving().map(PodRef::key).collect()))
        .collect();
    assert_eq!(
        tiers,
        vec![
            (-10, vec!["a/f1".to_owned(), "a/f2".to_owned()]),
            (0, vec!["a/mid".to_owned()]),
            (20, vec!["a/db".to_owned()]),
        ]
    );
    assert_eq!(ruled.tiers[2].plan.with_volumes.len(), 1);
    let victims: Vec<String> = ruled.force_victims(false).iter().map(PodRef::key).collect();
    assert_eq!(
        victims,
        vec!["a/f1", "a/f2", "a/mid", "a/db", "a/job-1"]
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_skipped_or_waited_pod_with_local_data_is_not_refused() {
    let mut bare = pod("a", "bare", &[(LABEL_DRAIN, "skip")]);
    bare.controller_kind = None;
    let mut job = pod("a", "job", &[(LABEL_DRAIN, "wait-completed")]);
    job.empty_dirs.push("scratch".into());
    let mut evicted = pod("a", "cache", &[]);
    evicted.empty_dirs.push("cache".into());
    let ruled = plan_with_rules(&[bare, job, evicted], &[], LocalDataPolicy::Refuse, false);
    let refused: Vec<&str> = ruled.whole.refused.iter().map(|p| p.pod.as_str()).collect();
    assert_eq!(refused, vec!["a/cache"]);
}

fn any_labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(
        prop_oneof![Just("app"), Just("tier"), Just(LABEL_DRAIN)].prop_map(str::to_owned),
        prop_oneof![
            Just("web"),
            Just("db"),
            Just("skip"),
            Just("wait-completed")
        ]
        .prop_map(str::to_owned),
        0..3,
    )
}

fn any_rule() -> impl Strategy<Value = DrainRule> {
    (
        prop_oneof![Just("web"), Just("db")],
        prop_oneof![
            Just(DrainBehavior::Drain),
            Just(DrainBehavior::Skip),
            Just(DrainBehavior::WaitCompleted)
        ],
        -3i32..3,
    )
        .prop_map(|(name, behavior, order)| {
            let order = if behavior == DrainBehavior::Drain {
                order
            } else {
                0
            };
            rule(app(name), behavior, order)
        })
}

#[test]
fn marked_pods_are_held_in_a_drain_that_honours_marks_and_named_in_one_that_does_not() {
    let marked = |name: &str, pod_labels: &[(&str, &str)], annotation: &str| {
        let mut p = pod("a", name, pod_labels);
        p.do_not_disrupt = Some(annotation.to_owned());
        p
    };
    let mut daemon = marked("ds", &[], "karpenter.sh/do-not-disrupt");
    daemon.controller_kind = Some("DaemonSet".into());
    let pods = vec![
        marked("db", &[], "nodewright.io/do-not-disrupt"),
        marked(
            "job",
            &[(LABEL_DRAIN, "wait-completed")],
            "karpenter.sh/do-not-disrupt",
        ),
        marked(
            "agent",
            &[(LABEL_DRAIN, "skip")],
            "nodewright.io/do-not-disrupt",
        ),
        pod("a", "web", &[]),
        daemon,
    ];
    let keys = |list: &[RuledPod]| -> Vec<(String, String)> {
        list.iter().map(|p| (p.pod.key(), p.by.clone())).collect()
    };
    let expected_marked = vec![
        ("a/db".to_owned(), "nodewright.io/do-not-disrupt".to_owned()),
        ("a/job".to_owned(), "karpenter.sh/do-not-disrupt".to_owned()),
    ];
    // Honoured: db and job are held, neither evicted nor waited for by a rule; web alone moves.
    let honoured = plan_with_rules(&pods, &[], LocalDataPolicy::Evict, true);
    assert_eq!(keys(&honoured.held), expected_marked);
    assert!(honoured.overriding.is_empty());
    assert!(honoured.wait_completed.is_empty());
    let moving: Vec<String> = honoured.whole.moving().map(PodRef::key).collect();
    assert_eq!(moving, vec!["a/web"]);
    let victims = |plan: &RuledPlan, overriding| -> Vec<String> {
        plan.force_victims(overriding)
            .iter()
            .map(PodRef::key)
            .collect()
    };
    assert_eq!(victims(&honoured, false), vec!["a/web"]);
    assert_eq!(victims(&honoured, true), vec!["a/web", "a/db", "a/job"]);
    // Not honoured (an operator's drain): the same pods drain as without marks, and are named.
    let operators = plan_with_rules(&pods, &[], LocalDataPolicy::Evict, false);
    assert_eq!(keys(&operators.overriding), expected_marked);
    assert!(operators.held.is_empty());
    let mut unmarked = pods.clone();
    for p in &mut unmarked {
        p.do_not_disrupt = None;
    }
    let plain = plan_with_rules(&unmarked, &[], LocalDataPolicy::Evict, false);
    assert_eq!(operators.whole, plain.whole);
    assert_eq!(operators.wait_completed, plain.wait_completed);
}

proptest! {
    /// Every pod of the Node ends in exactly one place: skipped, waited for, held by its mark,
    /// or one tier; the tiers rise; a tier's pods have its order. Marks change nothing in a
    /// drain that does not honour them.
    #[test]
    fn every_pod_is_in_exactly_one_place(
        pod_labels in proptest::collection::vec((any_labels(), any::<bool>()), 0..8),
        rules in proptest::collection::vec(any_rule(), 0..4),
        marks_hold in any::<bool>(),
    ) {
        let pods: Vec<PodFacts> = pod_labels
            .into_iter()
            .enumerate()
            .map(|(n, (l, marked))| {
                let mut p = pod("ns", &format!("p{n}"), &[]);
                p.labels = l;
                p.do_not_disrupt = marked.then(|| "nodewright.io/do-not-disrupt".to_owned());
                p
            })
            .collect();
        let ruled = plan_with_rules(&pods, &rules, LocalDataPolicy::Evict, marks_hold);
        for p in &pods {
            let key = p.key();
            let skipped = ruled.whole.skipped.iter().filter(|s| s.pod == key).count();
            let waited = ruled.wait_completed.iter().filter(|w| w.pod.key() == key).count();
            let held = ruled.held.iter().filter(|w| w.pod.key() == key).count();
            let tiers: Vec<i32> = ruled
                .tiers
                .iter()
                .filter(|t| t.plan.moving().any(|m| m.key() == key))
                .map(|t| t.order)
                .collect();
            prop_assert_eq!(skipped + waited + held + tiers.len(), 1, "{}", key);
            let decision = decide_pod(p, &rules);
            let marked = p.do_not_disrupt.is_some();
            match decision.behavior {
                DrainBehavior::Skip => prop_assert_eq!(skipped, 1),
                _ if marked && marks_hold => prop_assert_eq!(held, 1),
                DrainBehavior::WaitCompleted => prop_assert_eq!(waited, 1),
                DrainBehavior::Drain => prop_assert_eq!(tiers, vec![decision.order]),
            }
        }
        prop_assert!(ruled.tiers.windows(2).all(|w| w[0].order < w[1].order));
        if !marks_hold {
            let mut unmarked = pods.clone();
            for p in &mut unmarked {
                p.do_not_disrupt = None;
            }
            let plain = plan_with_rules(&unmarked, &rules, LocalDataPolicy::Evict, false);
            prop_assert_eq!(&ruled.whole, &plain.whole);
            prop_assert_eq!(&ruled.tiers, &plain.tiers);
        }
    }
}

#[test]
fn rules_travel_in_the_annotation_and_old_annotations_still_read() {
    use crate::drain::{
        DrainPurpose, bound_annotation, policy_from_annotation, policy_to_annotation,
    };
    use crate::pool::DrainPolicy;
    let old = r#"{"timeout":7200,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300}"#;
    assert_eq!(policy_from_annotation(old), Ok(DrainPolicy::default()));
    let with_rules = DrainPolicy {
        rules: vec![
            rule(app("agent"), DrainBehavior::Skip, 0),
            rule(app("db"), DrainBehavior::Drain, 10),
        ],
        ..DrainPolicy::default()
    };
    let text = policy_to_annotation(&with_rules);
    assert_eq!(policy_from_annotation(&text), Ok(with_rules.clone()));
    // Taken over a baseline without rules, never over one with its own.
    let taken = bound_annotation(&DrainPolicy::default(), DrainPurpose::Maintenance, &text);
    assert_eq!(taken.policy.rules, with_rules.rules);
    assert!(!taken.has_refusals());
    let own = DrainPolicy {
        rules: vec![rule(app("web"), DrainBehavior::Skip, 0)],
        ..DrainPolicy::default()
    };
    let kept = bound_annotation(&own, DrainPurpose::Maintenance, &text);
    assert_eq!(kept.policy.rules, own.rules);
    assert!(kept.has_refusals());
    // Too long or too many: not read.
    let long = format!("{}{}", &text[..text.len() - 1], &" ".repeat(20_000));
    assert!(policy_from_annotation(&format!("{long}}}")).is_err());
    let many = DrainPolicy {
        rules: vec![rule(app("a"), DrainBehavior::Skip, 0); 33],
        ..DrainPolicy::default()
    };
    assert!(policy_from_annotation(&policy_to_annotation(&many)).is_err());
}
