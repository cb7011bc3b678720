//! Table tests and a property of the drain-policy stamp: which fields are an operator's, and
//! restamps that never change what a drain does.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::drain::{DrainPurpose, LocalDataPolicy, bound_annotation};

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

fn policy(timeout: u64) -> DrainPolicy {
    DrainPolicy {
        timeout: secs(timeout),
        ..DrainPolicy::default()
    }
}

/// `text` with its `field` set to the JSON `value`.
fn edited(text: &str, field: &str, value: serde_json::Value) -> String {
    let mut fields = object(text).unwrap_or_default();
    fields.insert(field.to_owned(), value);
    Value::Object(fields).to_string()
}

#[test]
fn tells_the_operators_fields_from_the_stamps() {
    let stamp = policy_to_annotation(&policy(7200));
    let record = StampRecord::Stamp(&stamp);
    let unchanged = operator_wishes(&stamp, &record, true);
    assert_eq!(unchanged.text, None);
    assert!(unchanged.own.contains(&"timeout".to_owned()));

    let longer = edited(&stamp, "timeout", 14400.into());
    assert_eq!(
        operator_wishes(&longer, &record, true).text.as_deref(),
        Some(r#"{"timeout":14400}"#)
    );
    let added = edited(&stamp, "localData", "refuse".into());
    assert_eq!(
        operator_wishes(&added, &record, false).text.as_deref(),
        Some(r#"{"localData":"refuse"}"#)
    );
    // Text that is not a JSON object is returned whole, to be refused and reported.
    assert_eq!(
        operator_wishes("drain slowly", &record, true)
            .text
            .as_deref(),
        Some("drain slowly")
    );
    // Without a record every field is a wish.
    assert_eq!(
        operator_wishes(&stamp, &StampRecord::None, true).text,
        Some(stamp.clone())
    );
    // A stamp that does not read records nothing.
    assert_eq!(
        operator_wishes(&stamp, &StampRecord::Stamp("{"), true).text,
        Some(stamp.clone())
    );
}

#[test]
fn stamped_rules_give_way_to_a_request_and_reach_a_maintenance_drain() {
    let rules = serde_json::json!([{"name": "keep-db", "behavior": "Skip", "order": 0,
        "pods": {"matchLabels": {"app": "db"}}}]);
    let stamp = edited(&policy_to_annotation(&policy(7200)), "rules", rules.clone());
    let record = StampRecord::Stamp(&stamp);
    assert_eq!(operator_wishes(&stamp, &record, true).text, None);
    assert_eq!(
        operator_wishes(&stamp, &record, false).text,
        Some(serde_json::json!({ "rules": rules }).to_string())
    );
}

#[test]
fn without_a_stamp_the_vms_tag_tells_the_creates_fields_and_the_rules_are_its() {
    let old = policy(7200);
    let annotation = edited(
        &policy_to_annotation(&old),
        "forceAfterUnhealthy",
        900.into(),
    );
    let record = StampRecord::Tag(old);
    assert_eq!(
        operator_wishes(&annotation, &record, true).text.as_deref(),
        Some(r#"{"forceAfterUnhealthy":900}"#)
    );
    let with_rules = edited(
        &policy_to_annotation(&policy(7200)),
        "rules",
        serde_json::json!([]),
    );
    assert_eq!(operator_wishes(&with_rules, &record, true).text, None);
}

#[test]
fn a_restamp_writes_the_new_settings_and_keeps_the_operators_fields() {
    let old = policy(7200);
    let new = DrainPolicy {
        pdb_retry_interval: secs(5),
        ..policy(600)
    };
    let old_stamp = policy_to_annotation(&old);
    let unedited = restamp(Some(&old_stamp), &StampRecord::Stamp(&old_stamp), &new);
    assert_eq!(unedited.annotation, policy_to_annotation(&new));
    assert_eq!(unedited.stamp, policy_to_annotation(&new));
    assert!(unedited.kept.is_empty());

    let edit = edited(&old_stamp, "timeout", 14400.into());
    let restamped = restamp(Some(&edit), &StampRecord::Stamp(&old_stamp), &new);
    assert_eq!(restamped.kept, vec!["timeout".to_owned()]);
    assert_eq!(
        restamped.annotation,
        edited(&policy_to_annotation(&new), "timeout", 14400.into())
    );
    // Again: nothing changes.
    let again = restamp(
        Some(&restamped.annotation),
        &StampRecord::Stamp(&restamped.stamp),
        &new,
    );
    assert_eq!(again, restamped);
    // No annotation, or one that is not a JSON object: the new settings alone.
    assert_eq!(
        restamp(None, &StampRecord::None, &new).annotation,
        policy_to_annotation(&new)
    );
    assert_eq!(
        restamp(Some("slow"), &StampRecord::None, &new).annotation,
        policy_to_annotation(&new)
    );
}

#[test]
fn digests_are_short_and_tell_texts_apart() {
    let a = stamp_digest(&policy_to_annotation(&policy(600)));
    let b = stamp_digest(&policy_to_annotation(&policy(601)));
    assert_eq!(a.len(), 16);
    assert_ne!(a, b);
    assert_eq!(a, stamp_digest(&policy_to_annotation(&policy(600))));
}

fn any_policy() -> impl Strategy<Value = DrainPolicy> {
    (
        1u64..=86_400,
        1u64..=600,
        1u64..=86_400,
        proptest::option::of(prop_oneof![
            Just(LocalDataPolicy::Evict),
            Just(LocalDataPolicy::Refuse)
        ]),
        proptest::option::of(1u64..=604_800),
    )
        .prop_map(|(timeout, pdb, force, local_data, hard)| DrainPolicy {
            timeout: secs(timeout),
            pdb_retry_interval: secs(pdb),
            force_after_unhealthy: secs(force),
            local_data,
            termination_grace_period: hard.map(secs),
            ..DrainPolicy::default()
        })
}

fn any_edits() -> impl Strategy<Value = Vec<(&'static str, serde_json::Value)>> {
    proptest::collection::vec(
        prop_oneof![
            (1u64..=200_000).prop_map(|s| ("timeout", serde_json::Value::from(s))),
            (1u64..=1200).prop_map(|s| ("pdbRetryInterval", serde_json::Value::from(s))),
            (0u64..=200_000).prop_map(|s| ("forceAfterUnhealthy", serde_json::Value::from(s))),
            Just(("localData", serde_json::Value::from("refuse"))),
            Just(("localData", serde_json::Value::from("evict"))),
            (1u64..=700_000).prop_map(|s| ("terminationGracePeriod", serde_json::Value::from(s))),
            Just(("color", serde_json::Value::from("blue"))),
        ],
        0..4,
    )
}

proptest! {
    /// Restamping a Node never changes what a drain of it does: before the restamp the new
    /// settings come from the request (a rollout's delete), after it from the stamp itself.
    #[test]
    fn a_restamp_never_changes_what_a_drain_does(
        old in any_policy(),
        new in any_policy(),
        edits in any_edits(),
        maintenance in any::<bool>(),
    ) {
        let purpose = if maintenance { DrainPurpose::Maintenance } else { DrainPurpose::Deletion };
        let old_stamp = policy_to_annotation(&old);
        let mut annotation = old_stamp.clone();
        for (field, value) in edits {
            annotation = edited(&annotation, field, value);
        }
        let drained = |text: &str, stamp: &str| {
            let wishes = operator_wishes(text, &StampRecord::Stamp(stamp), true);
            match wishes.text {
                Some(wished) => bound_annotation(&new, purpose, &wished).policy,
                None => new.clone(),
            }
        };
        let before = drained(&annotation, &old_stamp);
        let restamped = restamp(Some(&annotation), &StampRecord::Stamp(&old_stamp), &new);
        prop_assert_eq!(&restamped.stamp, &policy_to_annotation(&new));
        let after = drained(&restamped.annotation, &restamped.stamp);
        prop_assert_eq!(before, after);
    }
}
