//! Do not disrupt: which Nodes and pods ask not to be disrupted, and whether a given way of taking
//! a machine down honours them.
//!
//! A Pod or Node annotated `nodewright.io/do-not-disrupt: "true"` (or Karpenter's
//! `karpenter.sh/do-not-disrupt: "true"`, for users moving over) blocks *voluntary* disruption:
//! nodewright choosing on its own to take the machine down — a rollout replacing an outdated
//! machine, a pool getting smaller, a sweep remediating a machine. Such a run holds that machine
//! and says why. Other ways are not blocked, and the run names what it overrode:
//!
//! - an operator's explicit `machine drain` / `machine delete` (they asked for this machine);
//! - force mode after the drain's hard deadline (`drain.terminationGracePeriod`), as Karpenter's
//!   NodePool field: past it, nothing holds a Node any longer;
//! - a machine that is gone or failed (its VM missing or failed to provision): there is nothing
//!   left to protect.
//!
//! # Rules
//! - Only the value `"true"` counts (as Karpenter reads it); any other value is ignored.
//! - A pod counts while it is active: not terminating, and not `Succeeded` or `Failed` (a finished
//!   pod has nothing left to disrupt).
//! - Marks are reported Node first, then pods by `namespace/name`, each with the annotation that
//!   made it; a description names at most [`NAMED_AT_MOST`] of them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// nodewright's own annotation.
pub const ANNOTATION_DO_NOT_DISRUPT: &str = "nodewright.io/do-not-disrupt";

/// Karpenter's annotation, honoured the same way.
pub const ANNOTATION_KARPENTER_DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// The annotations that ask not to be disrupted, in the order they are looked at.
pub const DO_NOT_DISRUPT_ANNOTATIONS: [&str; 2] = [
    ANNOTATION_DO_NOT_DISRUPT,
    ANNOTATION_KARPENTER_DO_NOT_DISRUPT,
];

/// How many marks a description names before it counts the rest.
pub const NAMED_AT_MOST: usize = 5;

/// Why a machine is being taken down. A request that does not say is an operator's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Disruption {
    /// A rollout replaces a machine built from an older template.
    RolloutReplacement,
    /// The pool gets smaller.
    ScaleDown,
    /// A sweep remediates a machine it judged broken.
    SweepRemediation,
    /// A pool controller replaces a machine its health policy judged unhealthy (the last rung
    /// of the remediation ladder).
    HealthRemediation,
    /// An operator asked for this machine (`machine drain`, `machine delete`).
    #[default]
    Operator,
    /// The drain's hard deadline (`drain.terminationGracePeriod`) has passed.
    PastHardDeadline,
    /// The machine's VM is gone or failed to provision.
    MachineGone,
}

impl Disruption {
    /// Whether nodewright chose this on its own, so do-not-disrupt marks hold it.
    pub fn is_voluntary(self) -> bool {
        matches!(
            self,
            Self::RolloutReplacement
                | Self::ScaleDown
                | Self::SweepRemediation
                | Self::HealthRemediation
        )
    }

    /// Whether it is [`Disruption::Operator`], the default (left out of a request's JSON).
    #[allow(clippy::trivially_copy_pass_by_ref)]
    pub fn is_operator(&self) -> bool {
        *self == Self::Operator
    }
}

/// What carries a do-not-disrupt mark.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Marked {
    /// The Node itself.
    Node,
    /// A pod on the Node.
    Pod {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
}

/// One do-not-disrupt mark and the annotation that made it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DoNotDisrupt {
    /// What carries it.
    pub marked: Marked,
    /// The annotation's key.
    pub annotation: String,
}

/// What the marks need to know about a pod on the Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotatedPod<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// `status.phase`.
    pub phase: &'a str,
    /// Whether it has a deletion timestamp.
    pub terminating: bool,
    /// Its annotations.
    pub annotations: &'a BTreeMap<String, String>,
}

/// What a run does with a machine given its marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DisruptionDecision {
    /// Take it down; `overridden` lists the marks it goes past (empty when there were none).
    Proceed {
        /// Marks the run overrides; it names them in its status.
        overridden: Vec<DoNotDisrupt>,
    },
    /// Leave it as it is.
    Hold {
        /// The marks that hold it.
        marks: Vec<DoNotDisrupt>,
    },
}

/// The do-not-disrupt marks on a Node and its active pods.
pub fn marks(
    node_annotations: &BTreeMap<String, String>,
    pods: &[AnnotatedPod<'_>],
) -> Vec<DoNotDisrupt> {
    let mut found: Vec<DoNotDisrupt> = marking_annotation(node_annotations)
        .map(|annotation| DoNotDisrupt {
            marked: Marked::Node,
            annotation: annotation.to_owned(),
        })
        .into_iter()
        .collect();
    let mut pod_marks: Vec<DoNotDisrupt> = pods
        .iter()
        .filter(|pod| is_active(pod))
        .filter_map(|pod| {
            marking_annotation(pod.annotations).map(|annotation| DoNotDisrupt {
                marked: Marked::Pod {
                    namespace: pod.namespace.to_owned(),
                    name: pod.name.to_owned(),
                },
                annotation: annotation.to_owned(),
            })
        })
        .collect();
    pod_marks.sort();
    pod_marks.dedup();
    found.extend(pod_marks);
    found
}

/// Whether `disruption` goes ahead past `marks`.
pub fn decide(disruption: Disruption, marks: Vec<DoNotDisrupt>) -> DisruptionDecision {
    if disruption.is_voluntary() && !marks.is_empty() {
        DisruptionDecision::Hold { marks }
    } else {
        DisruptionDecision::Proceed { overridden: marks }
    }
}

/// Whether `disruption` goes ahead past `marks` when the drain that follows keeps marked pods
/// itself until its hard deadline (`drain_keeps_pods`: the pool sets
/// `drain.terminationGracePeriod`, as Karpenter lets drift go ahead then). A voluntary
/// disruption is then held by a Node mark only; its pod marks are left to the drain, which
/// evicts the other pods, waits for the marked ones and deletes them only past the hard
/// deadline. Otherwise as [`decide`].
pub fn decide_before_drain(
    disruption: Disruption,
    marks: Vec<DoNotDisrupt>,
    drain_keeps_pods: bool,
) -> DisruptionDecision {
    if !(drain_keeps_pods && disruption.is_voluntary()) {
        return decide(disruption, marks);
    }
    let node: Vec<DoNotDisrupt> = marks
        .into_iter()
        .filter(|mark| mark.marked == Marked::Node)
        .collect();
    if node.is_empty() {
        DisruptionDecision::Proceed {
            overridden: Vec::new(),
        }
    } else {
        DisruptionDecision::Hold { marks: node }
    }
}

/// The marks for people: `Node (nodewright.io/do-not-disrupt), pod shop/db-0
/// (karpenter.sh/do-not-disrupt) and 3 more`.
pub fn describe(marks: &[DoNotDisrupt]) -> String {
    let named: Vec<String> = marks
        .iter()
        .take(NAMED_AT_MOST)
        .map(|mark| match &mark.marked {
            Marked::Node => format!("Node ({})", mark.annotation),
            Marked::Pod { namespace, name } => {
                format!("pod {namespace}/{name} ({})", mark.annotation)
            }
        })
        .collect();
    let rest = marks.len().saturating_sub(NAMED_AT_MOST);
    match (named.is_empty(), rest) {
        (true, _) => "nothing".to_owned(),
        (false, 0) => named.join(", "),
        (false, rest) => format!("{} and {rest} more", named.join(", ")),
    }
}

/// The do-not-disrupt annotation among `annotations` whose value is `"true"`, ours first.
pub fn marking_annotation(annotations: &BTreeMap<String, String>) -> Option<&'static str> {
    DO_NOT_DISRUPT_ANNOTATIONS
        .into_iter()
        .find(|key| annotations.get(*key).is_some_and(|value| value == "true"))
}

fn is_active(pod: &AnnotatedPod<'_>) -> bool {
    !pod.terminating && pod.phase != "Succeeded" && pod.phase != "Failed"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect()
    }

    fn pod_mark(namespace: &str, name: &str, annotation: &str) -> DoNotDisrupt {
        DoNotDisrupt {
            marked: Marked::Pod {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            },
            annotation: annotation.to_owned(),
        }
    }

    fn node_mark(annotation: &str) -> DoNotDisrupt {
        DoNotDisrupt {
            marked: Marked::Node,
            annotation: annotation.to_owned(),
        }
    }

    #[test]
    fn marks_table() {
        let none = annotations(&[]);
        let ours = annotations(&[(ANNOTATION_DO_NOT_DISRUPT, "true")]);
        let karpenter = annotations(&[(ANNOTATION_KARPENTER_DO_NOT_DISRUPT, "true")]);
        let both = annotations(&[
            (ANNOTATION_DO_NOT_DISRUPT, "true"),
            (ANNOTATION_KARPENTER_DO_NOT_DISRUPT, "true"),
        ]);
        let not_true = annotations(&[
            (ANNOTATION_DO_NOT_DISRUPT, "True"),
            (ANNOTATION_KARPENTER_DO_NOT_DISRUPT, "yes"),
        ]);
        let other = annotations(&[("example.com/do-not-disrupt", "true")]);
        let pod = |name, phase, terminating, annotations| AnnotatedPod {
            namespace: "shop",
            name,
            phase,
            terminating,
            annotations,
        };
        // (node annotations, pods, expected marks)
        type Case<'a> = (
            &'a BTreeMap<String, String>,
            Vec<AnnotatedPod<'a>>,
            Vec<DoNotDisrupt>,
        );
        let cases: Vec<Case<'_>> = vec![
            (&none, vec![], vec![]),
            (&ours, vec![], vec![node_mark(ANNOTATION_DO_NOT_DISRUPT)]),
            (
                &karpenter,
                vec![],
                vec![node_mark(ANNOTATION_KARPENTER_DO_NOT_DISRUPT)],
            ),
            (&both, vec![], vec![node_mark(ANNOTATION_DO_NOT_DISRUPT)]),
            (
                &not_true,
                vec![pod("a", "Running", false, &not_true)],
                vec![],
            ),
            (&other, vec![pod("a", "Running", false, &other)], vec![]),
            (
                &none,
                vec![
                    pod("b", "Running", false, &karpenter),
                    pod("a", "Pending", false, &ours),
                    pod("done", "Succeeded", false, &ours),
                    pod("failed", "Failed", false, &ours),
                    pod("leaving", "Running", true, &ours),
                    pod("plain", "Running", false, &none),
                ],
                vec![
                    pod_mark("shop", "a", ANNOTATION_DO_NOT_DISRUPT),
                    pod_mark("shop", "b", ANNOTATION_KARPENTER_DO_NOT_DISRUPT),
                ],
            ),
            (
                &ours,
                vec![pod("a", "Running", false, &ours)],
                vec![
                    node_mark(ANNOTATION_DO_NOT_DISRUPT),
                    pod_mark("shop", "a", ANNOTATION_DO_NOT_DISRUPT),
                ],
            ),
        ];
        for (row, (node, pods, expected)) in cases.into_iter().enumerate() {
            assert_eq!(marks(node, &pods), expected, "row {row}");
        }
    }

    #[test]
    fn decide_table() {
        let some = vec![node_mark(ANNOTATION_DO_NOT_DISRUPT)];
        // (disruption, held when marked)
        let cases = [
            (Disruption::RolloutReplacement, true),
            (Disruption::ScaleDown, true),
            (Disruption::SweepRemediation, true),
            (Disruption::HealthRemediation, true),
            (Disruption::Operator, false),
            (Disruption::PastHardDeadline, false),
            (Disruption::MachineGone, false),
        ];
        for (disruption, held) in cases {
            let expected = if held {
                DisruptionDecision::Hold {
                    marks: some.clone(),
                }
            } else {
                DisruptionDecision::Proceed {
                    overridden: some.clone(),
                }
            };
            assert_eq!(decide(disruption, some.clone()), expected, "{disruption:?}");
            assert_eq!(
                decide(disruption, vec![]),
                DisruptionDecision::Proceed { overridden: vec![] },
                "{disruption:?} without marks"
            );
        }
    }

    #[test]
    fn with_a_hard_deadline_only_a_node_mark_holds_a_voluntary_disruption() {
        let pod = pod_mark("shop", "db-0", ANNOTATION_KARPENTER_DO_NOT_DISRUPT);
        let node = node_mark(ANNOTATION_DO_NOT_DISRUPT);
        let proceed = |overridden: Vec<DoNotDisrupt>| DisruptionDecision::Proceed { overridden };
        let hold = |marks: Vec<DoNotDisrupt>| DisruptionDecision::Hold { marks };
        // (disruption, marks, the drain keeps marked pods, expected)
        let cases = vec![
            (
                Disruption::RolloutReplacement,
                vec![pod.clone()],
                true,
                proceed(vec![]),
            ),
            (
                Disruption::RolloutReplacement,
                vec![pod.clone()],
                false,
                hold(vec![pod.clone()]),
            ),
            (
                Disruption::ScaleDown,
                vec![node.clone(), pod.clone()],
                true,
                hold(vec![node.clone()]),
            ),
            (Disruption::SweepRemediation, vec![], true, proceed(vec![])),
            (
                Disruption::Operator,
                vec![node.clone(), pod.clone()],
                true,
                proceed(vec![node.clone(), pod.clone()]),
            ),
            (
                Disruption::MachineGone,
                vec![pod.clone()],
                true,
                proceed(vec![pod.clone()]),
            ),
        ];
        for (disruption, marks, keeps, expected) in cases {
            assert_eq!(
                decide_before_drain(disruption, marks.clone(), keeps),
                expected,
                "{disruption:?} {marks:?} {keeps}"
            );
        }
        assert_eq!(Disruption::default(), Disruption::Operator);
        assert_eq!(
            serde_json::to_string(&Disruption::RolloutReplacement).ok(),
            Some("\"rollout-replacement\"".to_owned())
        );
    }

    #[test]
    fn describe_names_a_few_and_counts_the_rest() {
        assert_eq!(describe(&[]), "nothing");
        let one = [
            node_mark(ANNOTATION_DO_NOT_DISRUPT),
            pod_mark("shop", "db-0", ANNOTATION_KARPENTER_DO_NOT_DISRUPT),
        ];
        assert_eq!(
            describe(&one),
            "Node (nodewright.io/do-not-disrupt), pod shop/db-0 (karpenter.sh/do-not-disrupt)"
        );
        let many: Vec<DoNotDisrupt> = (0..8)
            .map(|index| pod_mark("shop", &format!("web-{index}"), ANNOTATION_DO_NOT_DISRUPT))
            .collect();
        let text = describe(&many);
        assert!(
            text.ends_with("pod shop/web-4 (nodewright.io/do-not-disrupt) and 3 more"),
            "{text}"
        );
        assert!(!text.contains("web-5"), "{text}");
    }
}
