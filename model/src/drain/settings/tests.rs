//! Table and property tests of the drain settings' precedence: each source present and absent.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::drain::{policy_to_annotation, policy_to_tag};

fn timeout(seconds: u64) -> DrainPolicy {
    DrainPolicy {
        timeout: Duration::from_secs(seconds),
        ..DrainPolicy::default()
    }
}

fn tagged(seconds: u64) -> Option<TagRead> {
    Some(TagRead::Tagged(policy_to_tag(&timeout(seconds))))
}

/// One row: the sources, then what the drain must use.
struct Case {
    name: &'static str,
    resumed: Option<DrainPolicy>,
    request: Option<DrainPolicy>,
    local_data: Option<LocalDataPolicy>,
    annotation: Option<String>,
    trust: AnnotationTrust,
    timeout: u64,
    local: Option<LocalDataPolicy>,
    source: &'static str,
    warnings: usize,
    refused: bool,
}

fn check(case: &Case) {
    let settings = drain_settings(&SettingsSources {
        node: "web-abcde",
        purpose: DrainPurpose::Maintenance,
        resumed: case.resumed.as_ref(),
        request: case.request.as_ref(),
        request_local_data: case.local_data,
        annotation: case.annotation.as_deref(),
        trust: case.trust.clone(),
        stamp: None,
        own_fields: false,
    });
    let name = case.name;
    assert_eq!(settings.policy.timeout.as_secs(), case.timeout, "{name}");
    assert_eq!(settings.policy.local_data, case.local, "{name}");
    assert_eq!(settings.source, case.source, "{name}");
    assert_eq!(
        settings.warnings.len(),
        case.warnings,
        "{name}: {:?}",
        settings.warnings
    );
    assert_eq!(settings.refused_note.is_some(), case.refused, "{name}");
    assert!(
        settings.fact.ends_with(&format!("(from {})", case.source)),
        "{name}"
    );
}

fn row(name: &'static str, trust: AnnotationTrust) -> Case {
    Case {
        name,
        resumed: None,
        request: None,
        local_data: None,
        annotation: None,
        trust,
        timeout: 7200,
        local: None,
        source: "defaults",
        warnings: 0,
        refused: false,
    }
}

#[test]
fn each_source_present_or_absent_takes_its_place_in_the_precedence() {
    let longer = Some(policy_to_annotation(&timeout(9000)));
    let shorter = Some(policy_to_annotation(&timeout(600)));
    let keep_data = Some(r#"{"localData":"refuse"}"#.to_owned());
    let evicting = DrainPolicy {
        local_data: Some(LocalDataPolicy::Evict),
        ..DrainPolicy::default()
    };
    let evict_tag = || AnnotationTrust::Bounded(Some(TagRead::Tagged(policy_to_tag(&evicting))));
    let table = [
        Case {
            source: "defaults: the VM has no tag nodewright.io-drain, it was created before it",
            ..row(
                "nothing but the defaults",
                AnnotationTrust::Bounded(Some(TagRead::Untagged)),
            )
        },
        Case {
            source: "defaults: no VM of this cluster's machine to read the tag nodewright.io-drain of",
            ..row(
                "no VM to read the tag of",
                AnnotationTrust::Bounded(Some(TagRead::NoVm)),
            )
        },
        Case {
            request: Some(timeout(3600)),
            timeout: 3600,
            source: "the request",
            ..row(
                "the request's settings, the tag not read",
                AnnotationTrust::Bounded(None),
            )
        },
        Case {
            timeout: 5000,
            source: "the pool, VM tag nodewright.io-drain",
            ..row("the tag's settings", AnnotationTrust::Bounded(tagged(5000)))
        },
        Case {
            warnings: 1,
            ..row(
                "a tag that does not read gives the defaults with a warning",
                AnnotationTrust::Bounded(Some(TagRead::Tagged("timeout=x".to_owned()))),
            )
        },
        Case {
            warnings: 1,
            ..row(
                "a failed read of the tag gives the defaults with a warning",
                AnnotationTrust::Bounded(Some(TagRead::Failed("503".to_owned()))),
            )
        },
        Case {
            request: Some(timeout(3600)),
            annotation: longer.clone(),
            timeout: 9000,
            source: "the request, made more patient by the Node's annotation: timeout",
            ..row(
                "the annotation lengthens the request's timeout",
                AnnotationTrust::Bounded(None),
            )
        },
        Case {
            annotation: shorter.clone(),
            timeout: 5000,
            source: "the pool, VM tag nodewright.io-drain",
            warnings: 1,
            refused: true,
            ..row(
                "the annotation cannot shorten the tag's timeout",
                AnnotationTrust::Bounded(tagged(5000)),
            )
        },
        Case {
            annotation: Some("garbage".to_owned()),
            timeout: 5000,
            source: "the pool, VM tag nodewright.io-drain",
            warnings: 1,
            refused: true,
            ..row(
                "an annotation that is no object is refused",
                AnnotationTrust::Bounded(tagged(5000)),
            )
        },
        Case {
            annotation: keep_data.clone(),
            local: Some(LocalDataPolicy::Refuse),
            source: "the pool, VM tag nodewright.io-drain, made more patient by the Node's annotation: localData",
            ..row("the annotation may keep data", evict_tag())
        },
        Case {
            annotation: keep_data.clone(),
            local_data: Some(LocalDataPolicy::Evict),
            local: Some(LocalDataPolicy::Evict),
            source: "the pool, VM tag nodewright.io-drain, made more patient by the Node's annotation: localData",
            ..row(
                "the request's localData wins over the annotation's",
                evict_tag(),
            )
        },
        Case {
            resumed: Some(timeout(100)),
            annotation: shorter.clone(),
            local_data: Some(LocalDataPolicy::Evict),
            timeout: 100,
            source: "the Node's pool",
            ..row(
                "a resumed run keeps its settings and says nothing again",
                AnnotationTrust::Whole,
            )
        },
        Case {
            annotation: shorter.clone(),
            timeout: 600,
            source: "the Node's pool",
            ..row(
                "before the bounds a readable annotation is trusted",
                AnnotationTrust::Whole,
            )
        },
        Case {
            request: Some(timeout(3600)),
            annotation: shorter.clone(),
            timeout: 3600,
            source: "request",
            ..row(
                "before the bounds the request wins over the annotation",
                AnnotationTrust::Whole,
            )
        },
        Case {
            annotation: Some(r#"{"timeout":9000}"#.to_owned()),
            warnings: 1,
            ..row(
                "before the markers an unreadable annotation gives the defaults",
                AnnotationTrust::Whole,
            )
        },
        Case {
            annotation: Some(r#"{"timeout":9000}"#.to_owned()),
            timeout: 9000,
            source: "the Node's pool, partly defaults",
            warnings: 1,
            ..row(
                "per field an unreadable annotation keeps its readable fields",
                AnnotationTrust::PerField,
            )
        },
        Case {
            local_data: Some(LocalDataPolicy::Refuse),
            local: Some(LocalDataPolicy::Refuse),
            ..row(
                "before the bounds the request's localData still wins",
                AnnotationTrust::Whole,
            )
        },
    ];
    for case in &table {
        check(case);
    }
}

#[test]
fn a_run_before_the_bounds_asks_about_salvage_only_when_the_answer_matters() {
    let request = timeout(3600);
    let good = policy_to_annotation(&timeout(600));
    let table = [
        (None, None, false),
        (None, Some(good.as_str()), false),
        (None, Some("garbage"), true),
        (Some(&request), Some("garbage"), false),
        (Some(&request), None, false),
    ];
    for (request, annotation, asks) in table {
        assert_eq!(
            asks_salvage(request, annotation),
            asks,
            "{request:?} {annotation:?}"
        );
    }
}

#[test]
fn describes_the_settings_and_whether_local_data_is_the_purposes_default() {
    let table = [
        (
            DrainPolicy::default(),
            DrainPurpose::Maintenance,
            "timeout 7200s, PDB retry 20s, detach 120s, reattach 90s, force after 300s unhealthy, local data refuse (the purpose's default)",
        ),
        (
            DrainPolicy::default(),
            DrainPurpose::Deletion,
            "timeout 7200s, PDB retry 20s, detach 120s, reattach 90s, force after 300s unhealthy, local data evict (the purpose's default)",
        ),
        (
            DrainPolicy {
                local_data: Some(LocalDataPolicy::Evict),
                ..timeout(60)
            },
            DrainPurpose::Maintenance,
            "timeout 60s, PDB retry 20s, detach 120s, reattach 90s, force after 300s unhealthy, local data evict",
        ),
    ];
    for (policy, purpose, expected) in table {
        assert_eq!(describe_policy(&policy, purpose), expected);
    }
}

fn any_trust() -> impl Strategy<Value = AnnotationTrust> {
    prop_oneof![
        Just(AnnotationTrust::Whole),
        Just(AnnotationTrust::PerField),
        Just(AnnotationTrust::Bounded(None)),
        Just(AnnotationTrust::Bounded(Some(TagRead::Untagged))),
        (1u64..100_000).prop_map(|s| AnnotationTrust::Bounded(tagged(s))),
        ".{0,40}".prop_map(|t| AnnotationTrust::Bounded(Some(TagRead::Tagged(t)))),
    ]
}

fn any_annotation() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        ".{0,60}".prop_map(Some),
        (0u64..200_000).prop_map(|s| Some(format!(r#"{{"timeout":{s}}}"#))),
        (1u64..90_000).prop_map(|s| Some(policy_to_annotation(&timeout(s)))),
    ]
}

fn any_local_data() -> impl Strategy<Value = Option<LocalDataPolicy>> {
    prop_oneof![
        Just(None),
        Just(Some(LocalDataPolicy::Evict)),
        Just(Some(LocalDataPolicy::Refuse)),
    ]
}

proptest! {
    #[test]
    fn the_precedence_holds_whatever_the_sources(
        trust in any_trust(),
        annotation in any_annotation(),
        request in proptest::option::of(1u64..90_000),
        resumed in proptest::option::of(1u64..90_000),
        local_data in any_local_data(),
        deletion in any::<bool>(),
        stamp in any_annotation(),
        own_fields in any::<bool>(),
    ) {
        let request = request.map(timeout);
        let resumed = resumed.map(timeout);
        let purpose = if deletion { DrainPurpose::Deletion } else { DrainPurpose::Maintenance };
        let settings = drain_settings(&SettingsSources {
            node: "web-abcde",
            purpose,
            resumed: resumed.as_ref(),
            request: request.as_ref(),
            request_local_data: local_data,
            annotation: annotation.as_deref(),
            trust: trust.clone(),
            stamp: stamp.as_deref(),
            own_fields,
        });
        if let Some(resumed) = &resumed {
            // A resumed run keeps its settings and reports nothing again.
            prop_assert_eq!(&settings.policy, resumed);
            prop_assert!(settings.warnings.is_empty() && settings.refused_note.is_none());
            return Ok(());
        }
        if local_data.is_some() {
            prop_assert_eq!(settings.policy.local_data, local_data);
        }
        if let AnnotationTrust::Bounded(_) = trust {
            // The annotation never shortens the trusted settings.
            let trusted = drain_settings(&SettingsSources {
                node: "web-abcde",
                purpose,
                resumed: None,
                request: request.as_ref(),
                request_local_data: None,
                annotation: None,
                trust: trust.clone(),
                stamp: None,
                own_fields,
            });
            prop_assert!(settings.policy.timeout >= trusted.policy.timeout);
            prop_assert!(settings.policy.force_after_unhealthy >= trusted.policy.force_after_unhealthy);
            prop_assert!(settings.policy.timeout <= crate::limits::MAX_DRAIN_TIMEOUT.max(trusted.policy.timeout));
            prop_assert_eq!(settings.refused_note.is_some(), settings.warnings.iter().any(|w| w.starts_with("annotation ")));
        } else if request.is_some() {
            prop_assert_eq!(settings.policy.timeout, request.as_ref().map_or(Duration::ZERO, |r| r.timeout));
        }
    }
}

/// A rollout's delete of a Node created with other drain settings: the Node's annotation and
/// stamp hold the old pool's, the request the new pool's.
fn rolled(
    annotation: &str,
    stamp: Option<&str>,
    request: &DrainPolicy,
    tag: Option<TagRead>,
) -> DrainSettings {
    drain_settings(&SettingsSources {
        node: "web-abcde",
        purpose: DrainPurpose::Deletion,
        resumed: None,
        request: Some(request),
        request_local_data: None,
        annotation: Some(annotation),
        trust: AnnotationTrust::Bounded(tag),
        stamp,
        own_fields: true,
    })
}

#[test]
fn a_rollout_drains_with_the_new_settings_over_the_pools_old_stamp() {
    let old = DrainPolicy {
        termination_grace_period: Some(Duration::from_secs(7200)),
        ..timeout(7200)
    };
    let new = timeout(600);
    let stamped = policy_to_annotation(&old);
    let settings = rolled(&stamped, Some(&stamped), &new, None);
    assert_eq!(settings.policy, new);
    assert!(settings.warnings.is_empty(), "{:?}", settings.warnings);
    assert_eq!(settings.refused_note, None);
    assert_eq!(
        settings.source,
        "the request; the Node's annotation is the pool's stamp"
    );
}

#[test]
fn an_operators_edit_of_the_stamped_annotation_stays_a_wish() {
    let old = timeout(7200);
    let new = timeout(600);
    let stamped = policy_to_annotation(&old);
    let edited = stamped.replace("\"timeout\":7200", "\"timeout\":14400");
    assert_ne!(edited, stamped);
    let settings = rolled(&edited, Some(&stamped), &new, None);
    assert_eq!(settings.policy.timeout, Duration::from_secs(14400));
    assert_eq!(
        settings.source,
        "the request; the Node's annotation is the pool's stamp, made more patient by the Node's annotation: timeout"
    );
    // A shortening edit is refused and reported, as before the stamp.
    let shorter = stamped.replace("\"timeout\":7200", "\"timeout\":60");
    let settings = rolled(&shorter, Some(&stamped), &new, None);
    assert_eq!(settings.policy.timeout, Duration::from_secs(600));
    assert!(settings.refused_note.is_some());
}

#[test]
fn a_node_without_a_stamp_is_told_by_its_vms_tag_or_not_at_all() {
    let old = timeout(7200);
    let new = timeout(600);
    let annotation = policy_to_annotation(&old);
    let tag = Some(TagRead::Tagged(policy_to_tag(&old)));
    let settings = rolled(&annotation, None, &new, tag);
    assert_eq!(settings.policy.timeout, Duration::from_secs(600));
    // Neither stamp nor readable tag: every field is a wish, as before the stamp.
    let settings = rolled(&annotation, None, &new, Some(TagRead::Untagged));
    assert_eq!(settings.policy.timeout, Duration::from_secs(7200));
    // A run recorded before the marker: the whole annotation is a wish.
    let mut before = SettingsSources {
        node: "web-abcde",
        purpose: DrainPurpose::Deletion,
        resumed: None,
        request: Some(&new),
        request_local_data: None,
        annotation: Some(&annotation),
        trust: AnnotationTrust::Bounded(None),
        stamp: Some(&annotation),
        own_fields: false,
    };
    assert_eq!(
        drain_settings(&before).policy.timeout,
        Duration::from_secs(7200)
    );
    before.own_fields = true;
    assert_eq!(
        drain_settings(&before).policy.timeout,
        Duration::from_secs(600)
    );
}
