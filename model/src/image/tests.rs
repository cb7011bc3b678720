//! Tests of image versions: ordering, the pick of the newest eligible version, image references
//! with a version put in, the update decision and the history.

use proptest::prelude::*;

use super::*;
use crate::maintenance::WindowState;

/// `expect` for the fixtures, with the error in the panic (tidy keeps `expect` out of files
/// without a `#[cfg(test)]` line).
trait Must<T> {
    fn must(self, what: &str) -> T;
}

impl<T, E: std::fmt::Debug> Must<T> for Result<T, E> {
    fn must(self, what: &str) -> T {
        self.unwrap_or_else(|error| panic!("{what}: {error:?}"))
    }
}

impl<T> Must<T> for Option<T> {
    fn must(self, what: &str) -> T {
        self.unwrap_or_else(|| panic!("{what}"))
    }
}

fn v(text: &str) -> ImageVersion {
    ImageVersion::parse(text).must("valid test version")
}

#[test]
fn versions_order_by_numbers_not_text() {
    let ordered = [
        "1.0.9",
        "1.0.10",
        "1.0.12",
        "1.1.0",
        "2.0.0",
        "22.04.202411010",
        "22.04.202411030",
        "24.04.1",
    ];
    for pair in ordered.windows(2) {
        assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
    }
    assert!(v("1.0") < v("1.0.0"), "a prefix comes first");
    assert!(v("1.01") != v("1.1"));
    assert_eq!(v("1.0.12").to_string(), "1.0.12");
}

#[test]
fn malformed_versions_are_refused() {
    for text in [
        "",
        "latest",
        "1..2",
        ".1",
        "1.",
        "1.a",
        "-1.0",
        "1.0 ",
        "1.2.3.4.5.6.7.8.9",
        "1234567890123456789.0",
        "+1.0",
    ] {
        assert!(ImageVersion::parse(text).is_err(), "{text:?} is refused");
    }
    let long = "1.".repeat(40) + "1";
    assert!(ImageVersion::parse(&long).is_err());
}

fn listed(name: &str) -> ListedVersion {
    ListedVersion {
        name: name.to_owned(),
        ..ListedVersion::default()
    }
}

#[test]
fn the_pick_is_the_highest_eligible_version() {
    let now = 1_800_000_000;
    let cases: Vec<(&str, Vec<ListedVersion>, Option<&str>)> = vec![
        (
            "numbers, not text, decide",
            vec![listed("1.0.9"), listed("1.0.10"), listed("1.0.2")],
            Some("1.0.10"),
        ),
        (
            "a version excluded from latest is not picked",
            vec![
                listed("1.0.1"),
                ListedVersion {
                    exclude_from_latest: true,
                    ..listed("1.0.2")
                },
            ],
            Some("1.0.1"),
        ),
        (
            "a version past its end of life is not picked",
            vec![
                listed("1.0.1"),
                ListedVersion {
                    end_of_life: Some(now),
                    ..listed("1.0.2")
                },
            ],
            Some("1.0.1"),
        ),
        (
            "a version whose end of life is still ahead is picked",
            vec![
                listed("1.0.1"),
                ListedVersion {
                    end_of_life: Some(now + 1),
                    ..listed("1.0.2")
                },
            ],
            Some("1.0.2"),
        ),
        (
            "a version still provisioning is not picked",
            vec![
                listed("1.0.1"),
                ListedVersion {
                    provisioning_state: Some("Creating".into()),
                    ..listed("1.0.2")
                },
            ],
            Some("1.0.1"),
        ),
        (
            "a succeeded version is picked",
            vec![
                listed("1.0.1"),
                ListedVersion {
                    provisioning_state: Some("Succeeded".into()),
                    ..listed("1.0.2")
                },
            ],
            Some("1.0.2"),
        ),
        (
            "a deprecated marketplace version is not picked",
            vec![
                listed("1.0.1"),
                ListedVersion {
                    image_state: Some("Deprecated".into()),
                    ..listed("1.0.2")
                },
            ],
            Some("1.0.1"),
        ),
        (
            "one scheduled for deprecation still is",
            vec![
                listed("1.0.1"),
                ListedVersion {
                    image_state: Some("ScheduledForDeprecation".into()),
                    ..listed("1.0.2")
                },
            ],
            Some("1.0.2"),
        ),
        (
            "malformed names are skipped",
            vec![listed("1.0.1"), listed("latest"), listed("9.x")],
            Some("1.0.1"),
        ),
        (
            "nothing eligible, nothing picked",
            vec![ListedVersion {
                exclude_from_latest: true,
                ..listed("1.0.1")
            }],
            None,
        ),
        ("an empty listing picks nothing", vec![], None),
    ];
    for (what, versions, expected) in cases {
        assert_eq!(
            pick_newest(&versions, now).map(String::from).as_deref(),
            expected,
            "{what}"
        );
    }
}

const GALLERY: &str =
    "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/i";

fn marketplace(version: Option<&str>) -> ImageRef {
    ImageRef::Marketplace {
        publisher: "Canonical".into(),
        offer: "ubuntu-24_04-lts".into(),
        sku: "server".into(),
        version: version.map(str::to_owned),
    }
}

#[test]
fn images_ask_for_resolution_and_take_a_concrete_version() {
    let id = |text: &str| ImageRef::Id(text.to_owned());
    // (what, image, asks, image at 1.2.3)
    let cases: Vec<(&str, ImageRef, bool, Option<ImageRef>)> = vec![
        (
            "marketplace latest",
            marketplace(Some("latest")),
            true,
            Some(marketplace(Some("1.2.3"))),
        ),
        (
            "marketplace Latest in capitals",
            marketplace(Some("Latest")),
            true,
            Some(marketplace(Some("1.2.3"))),
        ),
        (
            "marketplace without a version",
            marketplace(None),
            true,
            Some(marketplace(Some("1.2.3"))),
        ),
        (
            "marketplace at a version",
            marketplace(Some("1.0.0")),
            false,
            Some(marketplace(Some("1.2.3"))),
        ),
        (
            "a gallery image without a version",
            id(GALLERY),
            true,
            Some(id(&format!("{GALLERY}/versions/1.2.3"))),
        ),
        (
            "a gallery image at latest",
            id(&format!("{GALLERY}/versions/latest")),
            true,
            Some(id(&format!("{GALLERY}/versions/1.2.3"))),
        ),
        (
            "a gallery image at a version",
            id(&format!("{GALLERY}/versions/1.0.0")),
            false,
            Some(id(&format!("{GALLERY}/versions/1.2.3"))),
        ),
        (
            "a shared gallery image without a version",
            id("/SharedGalleries/0b1f-nodes/Images/ubuntu"),
            true,
            Some(id(
                "/SharedGalleries/0b1f-nodes/Images/ubuntu/versions/1.2.3",
            )),
        ),
        (
            "a shared gallery image keeps how Versions is written",
            id("/SharedGalleries/0b1f-nodes/Images/ubuntu/Versions/1.0.0"),
            false,
            Some(id(
                "/SharedGalleries/0b1f-nodes/Images/ubuntu/Versions/1.2.3",
            )),
        ),
        (
            "a community gallery image at latest",
            id("/communitygalleries/flatcar-23/images/flatcar/versions/latest"),
            true,
            Some(id(
                "/communitygalleries/flatcar-23/images/flatcar/versions/1.2.3",
            )),
        ),
        (
            "a managed image has no versions",
            id("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/images/golden"),
            false,
            None,
        ),
        (
            "an id with more after the version is no gallery image",
            id(&format!("{GALLERY}/versions/1.0.0/extra")),
            false,
            None,
        ),
        (
            "an id with an empty name is no gallery image",
            id(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries//images/i",
            ),
            false,
            None,
        ),
    ];
    for (what, image, asks, at_version) in cases {
        assert_eq!(image.needs_resolution(), asks, "{what}");
        assert_eq!(image.version_lookup().is_some(), asks, "{what}");
        assert_eq!(image.with_version(&v("1.2.3")), at_version, "{what}");
        if let Some(at_version) = at_version {
            assert!(!at_version.needs_resolution(), "{what}: resolved");
            assert_eq!(at_version.version(), Some(v("1.2.3")), "{what}: reads back");
        }
    }
    assert_eq!(
        ImageRef::Id(format!("{GALLERY}/versions/latest")).version_lookup(),
        Some(VersionLookup::Gallery {
            image_id: GALLERY.to_owned()
        })
    );
    assert_eq!(
        marketplace(None).version_lookup(),
        Some(VersionLookup::Marketplace {
            publisher: "Canonical".into(),
            offer: "ubuntu-24_04-lts".into(),
            sku: "server".into()
        })
    );
}

/// `(what, newest, policy, pinned by operator, window, expected)`.
type DecisionCase<'a> = (
    &'static str,
    Option<&'a ImageVersion>,
    ImageUpdatePolicy,
    bool,
    Option<&'a WindowState>,
    ImageAction,
);

#[test]
fn the_update_decision_follows_policy_pin_and_window() {
    use ImageUpdatePolicy::{Auto, Notify, Pinned};
    let open = WindowState::Open {
        closes_at: Some(200),
    };
    let closed = WindowState::Closed {
        opens_at: Some(100),
    };
    let current = v("1.0.0");
    let newer = v("1.1.0");
    let older = v("0.9.0");
    // (what, newest, policy, pinned by operator, window, expected)
    let cases: Vec<DecisionCase> = vec![
        (
            "no newest found: nothing",
            None,
            Auto,
            false,
            None,
            ImageAction::Nothing,
        ),
        (
            "the newest is the current: nothing",
            Some(&current),
            Auto,
            false,
            None,
            ImageAction::Nothing,
        ),
        (
            "an older newest (a version withdrawn): nothing",
            Some(&older),
            Auto,
            false,
            None,
            ImageAction::Nothing,
        ),
        (
            "notify reports",
            Some(&newer),
            Notify,
            false,
            Some(&open),
            ImageAction::Notify {
                newer: newer.clone(),
            },
        ),
        (
            "pinned does nothing",
            Some(&newer),
            Pinned,
            false,
            Some(&open),
            ImageAction::Nothing,
        ),
        (
            "auto without windows rolls",
            Some(&newer),
            Auto,
            false,
            None,
            ImageAction::Roll { to: newer.clone() },
        ),
        (
            "auto in an open window rolls",
            Some(&newer),
            Auto,
            false,
            Some(&open),
            ImageAction::Roll { to: newer.clone() },
        ),
        (
            "auto with the window closed waits for it",
            Some(&newer),
            Auto,
            false,
            Some(&closed),
            ImageAction::WaitForWindow {
                to: newer.clone(),
                opens_at: Some(100),
            },
        ),
        (
            "an operator's pin holds auto",
            Some(&newer),
            Auto,
            true,
            Some(&open),
            ImageAction::Nothing,
        ),
        (
            "an operator's pin silences notify",
            Some(&newer),
            Notify,
            true,
            None,
            ImageAction::Nothing,
        ),
    ];
    for (what, newest, policy, pinned, window, expected) in cases {
        assert_eq!(
            image_update(&current, newest, policy, pinned, window),
            expected,
            "{what}"
        );
    }
}

#[test]
fn the_policy_reads_lowercase_and_defaults_to_notify() {
    assert_eq!(ImageUpdatePolicy::default(), ImageUpdatePolicy::Notify);
    assert_eq!(
        serde_json::from_str::<ImageUpdatePolicy>("\"auto\"").ok(),
        Some(ImageUpdatePolicy::Auto)
    );
    assert_eq!(
        serde_json::to_string(&ImageUpdatePolicy::Pinned)
            .ok()
            .as_deref(),
        Some("\"pinned\"")
    );
    assert!(serde_json::from_str::<ImageUpdatePolicy>("\"Auto\"").is_err());
}

#[test]
fn the_history_keeps_previous_versions_newest_first_and_rolls_back() {
    let mut history = ImageHistory::new(v("1.0.0"));
    assert_eq!(history.previous(), None);
    history.advance(v("1.0.0"));
    assert!(
        history.previous.is_empty(),
        "advancing to the current version changes nothing"
    );
    history.advance(v("1.1.0"));
    history.advance(v("1.2.0"));
    assert_eq!(history.current, v("1.2.0"));
    assert_eq!(history.previous, [v("1.1.0"), v("1.0.0")]);
    // A rollback is an advance to the previous version.
    let back = history.previous().cloned().must("a previous version");
    history.advance(back);
    assert_eq!(history.current, v("1.1.0"));
    assert_eq!(history.previous, [v("1.2.0"), v("1.0.0")]);
    let json = serde_json::to_value(&history).must("serializes");
    assert_eq!(
        json,
        serde_json::json!({ "current": "1.1.0", "previous": ["1.2.0", "1.0.0"] })
    );
    assert_eq!(
        serde_json::from_value::<ImageHistory>(json).ok(),
        Some(history)
    );
    assert!(
        serde_json::from_value::<ImageHistory>(serde_json::json!({ "current": "latest" })).is_err()
    );
}

fn any_version() -> impl Strategy<Value = ImageVersion> {
    proptest::collection::vec(
        prop_oneof![0u64..20, any::<u32>().prop_map(u64::from)],
        1..=4,
    )
    .prop_map(|parts| {
        let text: Vec<String> = parts.iter().map(u64::to_string).collect();
        v(&text.join("."))
    })
}

fn any_listed() -> impl Strategy<Value = ListedVersion> {
    (
        prop_oneof![any_version().prop_map(String::from), "[0-9a-z.]{0,8}"],
        any::<bool>(),
        proptest::option::of(0i64..200),
        proptest::option::of(proptest::sample::select(vec![
            "Succeeded",
            "Creating",
            "Failed",
        ])),
        proptest::option::of(proptest::sample::select(vec![
            "Active",
            "ScheduledForDeprecation",
            "Deprecated",
        ])),
    )
        .prop_map(
            |(name, exclude_from_latest, end_of_life, provisioning, image_state)| ListedVersion {
                name,
                exclude_from_latest,
                end_of_life,
                provisioning_state: provisioning.map(str::to_owned),
                image_state: image_state.map(str::to_owned),
            },
        )
}

proptest! {
    #[test]
    fn the_order_is_total_and_agrees_with_equality(a in any_version(), b in any_version(), c in any_version()) {
        prop_assert_eq!(a.cmp(&b), b.cmp(&a).reverse());
        prop_assert_eq!(a.cmp(&b) == std::cmp::Ordering::Equal, a == b);
        if a <= b && b <= c {
            prop_assert!(a <= c);
        }
    }

    #[test]
    fn the_pick_is_eligible_and_no_eligible_version_is_higher(
        versions in proptest::collection::vec(any_listed(), 0..12),
        now in 0i64..200,
    ) {
        let picked = pick_newest(&versions, now);
        let eligible: Vec<ImageVersion> = versions.iter().filter_map(|version| version.eligible_at(now)).collect();
        match &picked {
            None => prop_assert!(eligible.is_empty()),
            Some(picked) => {
                let listing = versions.iter().find(|version| version.name == picked.as_str());
                prop_assert!(listing.is_some());
                prop_assert!(eligible.contains(picked));
                prop_assert!(eligible.iter().all(|version| version <= picked));
            }
        }
        for version in &versions {
            if let Some(eligible) = version.eligible_at(now) {
                prop_assert!(!version.exclude_from_latest);
                prop_assert!(version.end_of_life.is_none_or(|end| end > now));
                prop_assert!(version.image_state.as_deref() != Some("Deprecated"));
                prop_assert!(version.provisioning_state.as_deref().is_none_or(|state| state == "Succeeded"));
                prop_assert_eq!(eligible.as_str(), version.name.as_str());
            }
        }
    }

    #[test]
    fn the_history_stays_bounded_and_never_repeats(steps in proptest::collection::vec(any_version(), 0..40)) {
        let mut history = ImageHistory::new(v("1.0.0"));
        for step in steps {
            let before = history.current.clone();
            history.advance(step.clone());
            prop_assert_eq!(&history.current, &step);
            prop_assert!(history.previous.len() <= crate::limits::MAX_IMAGE_HISTORY);
            prop_assert!(!history.previous.contains(&history.current));
            if before != step {
                prop_assert_eq!(history.previous(), Some(&before));
            }
            let mut unique = history.previous.clone();
            unique.sort();
            unique.dedup();
            prop_assert_eq!(unique.len(), history.previous.len());
        }
    }

    #[test]
    fn any_text_is_read_or_refused_without_panicking(text in "\\PC{0,80}") {
        if let Ok(version) = ImageVersion::parse(&text) {
            prop_assert_eq!(version.as_str(), text.as_str());
        }
        let _ = ImageRef::Id(text.clone()).with_version(&v("1.0.0"));
        let _ = ImageRef::Id(text).needs_resolution();
    }
}
