//! The pool's taints on a machine's Node, merged into the taints others put there.
//!
//! `spec.taints` is one atomic list shared by the kubelet (startup taints such as
//! `node.cloudprovider.kubernetes.io/uninitialized`), the cloud provider, CNIs
//! (`node.cilium.io/agent-not-ready`), Kubernetes' controllers, users and nodewright itself. A
//! taint is identified by its key and effect (Kubernetes allows one taint per pair). nodewright
//! records the pairs it put there from the pool's template in the Node annotation
//! [`ANNOTATION_MANAGED_TAINTS`] and, when it applies the template again, removes only those.
//!
//! # Rules
//! - A taint whose pair is not recorded is kept as it is, unless the template names its pair:
//!   then its value becomes the template's and it is recorded from then on.
//! - A recorded pair the template no longer names is removed.
//! - Template taints the Node lacks are appended; the order of the others is kept.
//! - Keys under `nodewright.io/` (the drain's `nodewright.io/draining`, the rollout's
//!   `nodewright.io/outdated`) belong to the writers that add and remove them: this merge never
//!   records, adds or removes them (pool validation refuses such keys in a template).
//! - An annotation that does not read as a comma list of `key:effect` records nothing: no taint
//!   is removed on its word, and the write replaces it with the template's pairs. Leaving a stale
//!   template taint behind is the lesser harm; removing a taint nobody can prove is ours could
//!   schedule pods onto a Node whose network or cloud provider is not initialised.

use std::collections::BTreeSet;

/// The Node annotation listing the taints (`key:effect`, comma-separated, sorted) that nodewright
/// put on the Node from the pool's template, e.g. `dedicated:NoSchedule,gpu:NoExecute`.
pub const ANNOTATION_MANAGED_TAINTS: &str = "nodewright.io/managed-taints";

/// The key prefix of the taints nodewright's drain and rollout manage on their own.
const RESERVED_PREFIX: &str = "nodewright.io/";

/// A Node taint as this merge sees it (`timeAdded` is the activity's to keep).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Taint {
    /// Key, e.g. `dedicated`.
    pub key: String,
    /// Value; empty when the taint has none.
    pub value: String,
    /// Effect: `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// A taint's identity on a Node: its key and effect.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaintId {
    /// Key.
    pub key: String,
    /// Effect.
    pub effect: String,
}

/// The pairs recorded in [`ANNOTATION_MANAGED_TAINTS`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedTaints(BTreeSet<TaintId>);

/// Why an annotation's text is not a list of managed taints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "annotation {ANNOTATION_MANAGED_TAINTS} is not a comma list of key:effect (entry {})",
    crate::text::quoted(entry)
)]
pub struct UnreadableAnnotation {
    /// The first entry that does not read.
    pub entry: String,
}

/// What to do with a Node's taints and its [`ANNOTATION_MANAGED_TAINTS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaintUpdate {
    /// The Node already carries the template's taints and the record of them.
    Unchanged,
    /// Write these taints and this annotation (`None`: remove it) together.
    Write {
        /// The whole new `spec.taints`.
        taints: Vec<Taint>,
        /// The new annotation text.
        annotation: Option<String>,
    },
}

impl Taint {
    /// Its key and effect.
    pub fn id(&self) -> TaintId {
        TaintId {
            key: self.key.clone(),
            effect: self.effect.clone(),
        }
    }
}

impl ManagedTaints {
    /// Reads the annotation's text. The empty text records nothing.
    ///
    /// # Errors
    /// [`UnreadableAnnotation`] when an entry is not `key:effect` (both non-empty, no spaces, no
    /// second `:`).
    pub fn parse(text: &str) -> Result<Self, UnreadableAnnotation> {
        let mut pairs = BTreeSet::new();
        for entry in text.split(',').filter(|entry| !entry.is_empty()) {
            let readable = entry
                .split_once(':')
                .filter(|(key, effect)| {
                    !key.is_empty()
                        && !effect.is_empty()
                        && !effect.contains(':')
                        && !entry.contains(char::is_whitespace)
                })
                .map(|(key, effect)| TaintId {
                    key: key.to_owned(),
                    effect: effect.to_owned(),
                });
            match readable {
                Some(id) => pairs.insert(id),
                None => {
                    return Err(UnreadableAnnotation {
                        entry: entry.to_owned(),
                    });
                }
            };
        }
        Ok(Self(pairs))
    }

    /// Whether `id` is recorded.
    pub fn contains(&self, id: &TaintId) -> bool {
        self.0.contains(id)
    }

    /// The annotation's text, sorted; `None` when nothing is recorded.
    pub fn to_annotation(&self) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        let entries: Vec<String> = self
            .0
            .iter()
            .map(|id| format!("{}:{}", id.key, id.effect))
            .collect();
        Some(entries.join(","))
    }
}

/// Whether `key` is one of the keys nodewright's drain and rollout manage on their own.
fn is_reserved(key: &str) -> bool {
    key.starts_with(RESERVED_PREFIX)
}

/// Merges the template's taints into the Node's (`current`, with `annotation` as read) by the
/// [module's rules](self). A template naming a pair twice counts its first taint.
pub fn decide_taints(
    current: &[Taint],
    annotation: Option<&str>,
    template: &[Taint],
) -> TaintUpdate {
    let recorded = annotation
        .map(ManagedTaints::parse)
        .and_then(Result::ok)
        .unwrap_or_default();
    let mut wanted: Vec<&Taint> = Vec::new();
    for taint in template.iter().filter(|t| !is_reserved(&t.key)) {
        if !wanted.iter().any(|w| w.id() == taint.id()) {
            wanted.push(taint);
        }
    }
    let mut placed = BTreeSet::new();
    let mut taints = Vec::with_capacity(current.len() + wanted.len());
    for taint in current {
        let id = taint.id();
        if let Some(template_taint) = wanted.iter().find(|w| w.id() == id) {
            if placed.insert(id) {
                taints.push((*template_taint).clone());
            }
        } else if !recorded.contains(&id) || is_reserved(&taint.key) {
            taints.push(taint.clone());
        }
    }
    for taint in wanted.iter().filter(|t| !placed.contains(&t.id())) {
        taints.push((*taint).clone());
    }
    let managed = ManagedTaints(wanted.iter().map(|t| t.id()).collect()).to_annotation();
    if taints == current && managed.as_deref() == annotation {
        TaintUpdate::Unchanged
    } else {
        TaintUpdate::Write {
            taints,
            annotation: managed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule";
    const CILIUM: &str = "node.cilium.io/agent-not-ready=true:NoSchedule";

    /// `key=value:effect` → a taint.
    fn taint(text: &str) -> Taint {
        let (key_value, effect) = text.rsplit_once(':').unwrap_or((text, ""));
        let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
        Taint {
            key: key.to_owned(),
            value: value.to_owned(),
            effect: effect.to_owned(),
        }
    }

    fn taints(texts: &[&str]) -> Vec<Taint> {
        texts.iter().copied().map(taint).collect()
    }

    /// One case: the Node's taints and annotation, the template, and the expected taints and
    /// annotation (`None` for both: unchanged).
    struct Case<'a> {
        name: &'a str,
        current: &'a [&'a str],
        annotation: Option<&'a str>,
        template: &'a [&'a str],
        expected: Option<(&'a [&'a str], Option<&'a str>)>,
    }

    fn check(case: &Case<'_>) {
        let expected = match case.expected {
            None => TaintUpdate::Unchanged,
            Some((expected, annotation)) => TaintUpdate::Write {
                taints: taints(expected),
                annotation: annotation.map(str::to_owned),
            },
        };
        assert_eq!(
            decide_taints(
                &taints(case.current),
                case.annotation,
                &taints(case.template)
            ),
            expected,
            "{}",
            case.name
        );
    }

    #[test]
    fn template_taints_are_merged_and_only_recorded_ones_removed() {
        let table = [
            Case {
                name: "startup taints are kept when the template's are added",
                current: &[UNINITIALIZED, CILIUM],
                annotation: None,
                template: &["dedicated=gpu:NoSchedule"],
                expected: Some((
                    &[UNINITIALIZED, CILIUM, "dedicated=gpu:NoSchedule"],
                    Some("dedicated:NoSchedule"),
                )),
            },
            Case {
                name: "a Node with the template's taints recorded is unchanged",
                current: &[UNINITIALIZED, "dedicated=gpu:NoSchedule"],
                annotation: Some("dedicated:NoSchedule"),
                template: &["dedicated=gpu:NoSchedule"],
                expected: None,
            },
            Case {
                name: "a template taint added later is appended and recorded",
                current: &[CILIUM, "dedicated=gpu:NoSchedule"],
                annotation: Some("dedicated:NoSchedule"),
                template: &["dedicated=gpu:NoSchedule", "gpu=:NoExecute"],
                expected: Some((
                    &[CILIUM, "dedicated=gpu:NoSchedule", "gpu=:NoExecute"],
                    Some("dedicated:NoSchedule,gpu:NoExecute"),
                )),
            },
            Case {
                name: "a recorded taint the template dropped is removed",
                current: &[UNINITIALIZED, "dedicated=gpu:NoSchedule", "gpu=:NoExecute"],
                annotation: Some("dedicated:NoSchedule,gpu:NoExecute"),
                template: &["dedicated=gpu:NoSchedule"],
                expected: Some((
                    &[UNINITIALIZED, "dedicated=gpu:NoSchedule"],
                    Some("dedicated:NoSchedule"),
                )),
            },
            Case {
                name: "the last recorded taint removed takes the annotation with it",
                current: &["dedicated=gpu:NoSchedule", CILIUM],
                annotation: Some("dedicated:NoSchedule"),
                template: &[],
                expected: Some((&[CILIUM], None)),
            },
            Case {
                name: "a foreign taint with the template's key and another effect is kept",
                current: &["dedicated=db:NoExecute", "dedicated=gpu:NoSchedule"],
                annotation: Some("dedicated:NoSchedule"),
                template: &[],
                expected: Some((&["dedicated=db:NoExecute"], None)),
            },
            Case {
                name: "a recorded taint whose value changed in the template is updated in place",
                current: &["dedicated=gpu:NoSchedule", CILIUM],
                annotation: Some("dedicated:NoSchedule"),
                template: &["dedicated=tpu:NoSchedule"],
                expected: Some((
                    &["dedicated=tpu:NoSchedule", CILIUM],
                    Some("dedicated:NoSchedule"),
                )),
            },
            Case {
                name: "an unrecorded taint of the template's pair takes the template's value and is recorded",
                current: &["dedicated=db:NoSchedule"],
                annotation: None,
                template: &["dedicated=gpu:NoSchedule"],
                expected: Some((&["dedicated=gpu:NoSchedule"], Some("dedicated:NoSchedule"))),
            },
            Case {
                name: "an unreadable annotation records nothing, so nothing is removed, and is rewritten",
                current: &["gpu=:NoExecute", "dedicated=gpu:NoSchedule"],
                annotation: Some("gpu NoExecute"),
                template: &["dedicated=gpu:NoSchedule"],
                expected: Some((
                    &["gpu=:NoExecute", "dedicated=gpu:NoSchedule"],
                    Some("dedicated:NoSchedule"),
                )),
            },
            Case {
                name: "the drain's and rollout's taints are never removed, even when recorded",
                current: &[
                    "nodewright.io/draining=:NoSchedule",
                    "nodewright.io/outdated=:PreferNoSchedule",
                ],
                annotation: Some(
                    "nodewright.io/draining:NoSchedule,nodewright.io/outdated:PreferNoSchedule",
                ),
                template: &[],
                expected: Some((
                    &[
                        "nodewright.io/draining=:NoSchedule",
                        "nodewright.io/outdated=:PreferNoSchedule",
                    ],
                    None,
                )),
            },
            Case {
                name: "a template naming a nodewright.io key adds nothing",
                current: &[],
                annotation: None,
                template: &["nodewright.io/draining=:NoSchedule"],
                expected: None,
            },
            Case {
                name: "a template naming a pair twice counts its first taint",
                current: &[],
                annotation: None,
                template: &["gpu=a:NoSchedule", "gpu=b:NoSchedule"],
                expected: Some((&["gpu=a:NoSchedule"], Some("gpu:NoSchedule"))),
            },
            Case {
                name: "no template taints and nothing recorded leaves the Node alone",
                current: &[UNINITIALIZED],
                annotation: None,
                template: &[],
                expected: None,
            },
        ];
        for case in &table {
            check(case);
        }
    }

    #[test]
    fn the_annotation_reads_back_what_it_wrote() {
        let managed = ManagedTaints::parse("gpu:NoExecute,dedicated:NoSchedule,gpu:NoExecute");
        assert_eq!(
            managed.map(|m| m.to_annotation()),
            Ok(Some("dedicated:NoSchedule,gpu:NoExecute".to_owned()))
        );
        assert_eq!(
            ManagedTaints::parse("").map(|m| m.to_annotation()),
            Ok(None)
        );
        for unreadable in [
            "gpu",
            ":NoSchedule",
            "gpu:",
            "gpu:No:Schedule",
            "a b:NoSchedule",
        ] {
            assert!(ManagedTaints::parse(unreadable).is_err(), "{unreadable:?}");
        }
    }

    fn any_taint() -> impl Strategy<Value = Taint> {
        (
            "(dedicated|gpu|example.com/x|node.cilium.io/agent-not-ready|nodewright.io/draining)",
            "(|a|b)",
            "(NoSchedule|PreferNoSchedule|NoExecute)",
        )
            .prop_map(|(key, value, effect)| Taint { key, value, effect })
    }

    /// Taints with one taint per pair, as Kubernetes keeps them.
    fn unique(list: Vec<Taint>) -> Vec<Taint> {
        let mut seen = BTreeSet::new();
        list.into_iter().filter(|t| seen.insert(t.id())).collect()
    }

    fn any_annotation() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some("not a list".to_owned())),
            proptest::collection::vec(any_taint(), 0..4).prop_map(|list| {
                ManagedTaints(list.iter().map(Taint::id).collect()).to_annotation()
            }),
        ]
    }

    proptest! {
        #[test]
        fn no_taint_that_is_not_recorded_is_ever_removed(
            current in proptest::collection::vec(any_taint(), 0..6).prop_map(unique),
            annotation in any_annotation(),
            template in proptest::collection::vec(any_taint(), 0..4),
        ) {
            let (merged, written) = match decide_taints(&current, annotation.as_deref(), &template) {
                TaintUpdate::Unchanged => (current.clone(), annotation.clone()),
                TaintUpdate::Write { taints, annotation } => (taints, annotation),
            };
            let recorded = annotation
                .as_deref()
                .map(ManagedTaints::parse)
                .and_then(Result::ok)
                .unwrap_or_default();
            let from_template = |id: &TaintId| {
                !is_reserved(&id.key) && template.iter().any(|t| &t.id() == id)
            };
            for taint in &current {
                let id = taint.id();
                if recorded.contains(&id) && !is_reserved(&taint.key) {
                    continue;
                }
                let kept = merged.iter().find(|t| t.id() == id);
                prop_assert!(kept.is_some(), "{taint:?} was removed");
                if !from_template(&id) {
                    prop_assert_eq!(kept, Some(taint), "an unmanaged taint is kept as it was");
                }
            }
            prop_assert_eq!(unique(merged.clone()), merged.clone(), "one taint per pair");
            for taint in template.iter().filter(|t| !is_reserved(&t.key)) {
                prop_assert!(merged.iter().any(|t| t.id() == taint.id()), "{taint:?} missing");
            }
            let again = decide_taints(&merged, written.as_deref(), &template);
            prop_assert_eq!(again, TaintUpdate::Unchanged, "a second merge changes nothing");
        }
    }
}
