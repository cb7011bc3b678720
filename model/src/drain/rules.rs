//! Drain rules: per pod, whether the drain evicts it (`Drain`), leaves it on the Node (`Skip`)
//! or waits until it completes without evicting it (`WaitCompleted`), and in which `order`.
//!
//! # Cluster API's MachineDrainRule, as a pool file writes it
//!
//! The pool file's `spec.drain.rules` follows Cluster API's `MachineDrainRule`
//! (`cluster.x-k8s.io/v1beta1`, proposal `20240930-machine-drain-rules.md`), one rule per list
//! item instead of one object per rule. A pod's behaviour is decided in this order, the first
//! that applies winning (Cluster API's order):
//!
//! 1. A mirror (static) pod, a DaemonSet's pod or a finished pod is left alone, whatever a rule
//!    or label says ([`super::plan_drain`]'s skipped; Cluster API's non-goal: their drain is
//!    never changed).
//! 2. The Pod label [`LABEL_DRAIN`] (`nodewright.io/drain`), then Cluster API's
//!    [`LABEL_CAPI_DRAIN`] (`cluster.x-k8s.io/drain`, for users moving over): `skip` or
//!    `wait-completed`. The pod's owner knows best; another value is ignored.
//! 3. The **first** rule of the list whose selector matches the pod. Cluster API applies the
//!    first matching `MachineDrainRule` in alphabetical order of their names; a pool file's
//!    rules have no names but an order the person wrote, so the list's order plays that part:
//!    put the specific rules first.
//! 4. Otherwise `Drain` with order 0.
//!
//! A rule's selector matches a pod when its `podSelector` matches the pod's labels and its
//! `namespaceSelector` the labels of the pod's namespace (a selector left out matches every
//! pod; `{}` too), with Kubernetes' `LabelSelector` meaning: every `matchLabels` pair and every
//! `matchExpressions` requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`) must hold; `NotIn`
//! holds for a pod without the key.
//!
//! # Orders: tiers
//!
//! `order` is only for `Drain` (as in Cluster API). The pods to evict are drained in tiers, the
//! lowest order first: one tier's pods together (PodDisruptionBudgets honoured, the lanes of
//! [`super::plan_drain`]), the next tier only when every pod of the previous one is gone and its
//! volumes moved. `WaitCompleted` pods are waited for once the tiers are done, within the
//! drain's deadline (then force mode deletes them as it deletes every pod still to move);
//! `Skip` pods stay, named with what skipped them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::local_data::LocalDataPolicy;
use super::pods::{DrainPlan, PodFacts, PodRef, SkipReason, SkippedPod, plan_drain};
use crate::limits;

/// The Pod label that overrides the rules: `skip` or `wait-completed`.
pub const LABEL_DRAIN: &str = "nodewright.io/drain";

/// Cluster API's Pod label with the same meaning as [`LABEL_DRAIN`], read after it.
pub const LABEL_CAPI_DRAIN: &str = "cluster.x-k8s.io/drain";

/// The lowest `order` a rule may have.
pub const MIN_RULE_ORDER: i32 = -1000;

/// The highest `order` a rule may have.
pub const MAX_RULE_ORDER: i32 = 1000;

/// What the drain does with a pod.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DrainBehavior {
    /// Evicted (the default).
    #[default]
    Drain,
    /// Left on the Node.
    Skip,
    /// Not evicted; the drain waits until it completes (Succeeded, Failed or gone).
    WaitCompleted,
}

impl DrainBehavior {
    /// The behaviour as the pool file writes it (`Drain`, `Skip`, `WaitCompleted`).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "Drain" => Some(Self::Drain),
            "Skip" => Some(Self::Skip),
            "WaitCompleted" => Some(Self::WaitCompleted),
            _ => None,
        }
    }

    /// As the pool file writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Drain => "Drain",
            Self::Skip => "Skip",
            Self::WaitCompleted => "WaitCompleted",
        }
    }

    /// The behaviour a Pod label value asks for (`skip`, `wait-completed`).
    pub fn from_label(value: &str) -> Option<Self> {
        match value {
            "skip" => Some(Self::Skip),
            "wait-completed" => Some(Self::WaitCompleted),
            _ => None,
        }
    }
}

/// One requirement of a `matchExpressions` list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist` (another operator matches nothing; the pool
    /// file's validation refuses it).
    pub operator: String,
    /// The values of `In` and `NotIn`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// The operators a requirement may use.
pub const SELECTOR_OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

impl LabelRequirement {
    /// Whether `labels` meet the requirement (Kubernetes' meaning: `NotIn` holds without the
    /// key).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator.as_str() {
            "In" => value.is_some_and(|v| self.values.contains(v)),
            "NotIn" => value.is_none_or(|v| !self.values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    }
}

/// Kubernetes' `LabelSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels the object must carry with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements the object's labels must meet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// Whether `labels` match: every pair and every requirement (an empty selector matches
    /// everything).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

/// Which pods a rule is about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleSelector {
    /// The pod's labels (left out: every pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// The labels of the pod's namespace (left out: every namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
}

impl RuleSelector {
    /// Whether the pod's labels and its namespace's labels match both selectors.
    pub fn matches(&self, pod: &PodFacts) -> bool {
        self.pod_selector
            .as_ref()
            .is_none_or(|s| s.matches(&pod.labels))
            && self
                .namespace_selector
                .as_ref()
                .is_none_or(|s| s.matches(&pod.namespace_labels))
    }
}

/// One rule as the pool file writes it (`spec.drain.rules[i]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DrainRuleSpec {
    /// Which pods.
    #[serde(default)]
    pub selector: RuleSelector,
    /// `Drain`, `Skip` or `WaitCompleted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<String>,
    /// Lower first (default 0); only with `Drain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<i64>,
}

/// A checked rule, as the drain settings (and the Node annotation) carry it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DrainRule {
    /// Which pods.
    #[serde(default)]
    pub selector: RuleSelector,
    /// What the drain does with them.
    pub behavior: DrainBehavior,
    /// Their tier (only for `Drain`; 0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub order: i32,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
const fn is_zero(order: &i32) -> bool {
    *order == 0
}

/// What decided a pod's behaviour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "by")]
pub enum DecidedBy {
    /// The pod's label (`nodewright.io/drain` or `cluster.x-k8s.io/drain`).
    Label {
        /// The label key.
        key: String,
    },
    /// `spec.drain.rules[index]`.
    Rule {
        /// Its index in the list.
        index: usize,
    },
    /// No label, no rule: `Drain`, order 0.
    Default,
}

impl DecidedBy {
    /// In words: `label nodewright.io/drain`, `spec.drain.rules[2]`, `default`.
    pub fn describe(&self) -> String {
        match self {
            Self::Label { key } => format!("label {key}"),
            Self::Rule { index } => format!("spec.drain.rules[{index}]"),
            Self::Default => "default".to_owned(),
        }
    }
}

/// A pod's behaviour and tier, and what decided them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDecision {
    /// What the drain does with it.
    pub behavior: DrainBehavior,
    /// Its tier (0 unless a `Drain` rule says otherwise).
    pub order: i32,
    /// What decided.
    pub by: DecidedBy,
}

/// The behaviour and tier of `pod` under `rules` (see the module documentation for the order
/// of precedence). Mirror, DaemonSet and finished pods are sorted out before, by
/// [`plan_drain`].
pub fn decide_pod(pod: &PodFacts, rules: &[DrainRule]) -> PodDecision {
    for key in [LABEL_DRAIN, LABEL_CAPI_DRAIN] {
        if let Some(behavior) = pod
            .labels
            .get(key)
            .and_then(|v| DrainBehavior::from_label(v))
        {
            return PodDecision {
                behavior,
                order: 0,
                by: DecidedBy::Label {
                    key: key.to_owned(),
                },
            };
        }
    }
    match rules.iter().position(|rule| rule.selector.matches(pod)) {
        Some(index) => {
            let rule = &rules[index];
            let order = if rule.behavior == DrainBehavior::Drain {
                rule.order
            } else {
                0
            };
            PodDecision {
                behavior: rule.behavior,
                order,
                by: DecidedBy::Rule { index },
            }
        }
        None => PodDecision {
            behavior: DrainBehavior::Drain,
            order: 0,
            by: DecidedBy::Default,
        },
    }
}

/// A pod a rule or label decided about, and which.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuledPod {
    /// The pod.
    pub pod: PodRef,
    /// What decided (`spec.drain.rules[1]`, `label nodewright.io/drain`).
    pub by: String,
}

/// The pods of one order, drained together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainTier {
    /// The order.
    pub order: i32,
    /// Its pods in the lanes of [`plan_drain`] (the Node's other pods left out).
    pub plan: DrainPlan,
}

/// The whole drain of a Node under its rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuledPlan {
    /// Every pod to evict or wait for, in one plan (what force mode deletes, with
    /// `wait_completed`); `Skip` pods are in its `skipped`, with the rule that skipped them.
    pub whole: DrainPlan,
    /// The pods to evict by order, lowest first; none when nothing is to evict.
    pub tiers: Vec<DrainTier>,
    /// Pods not evicted, waited for until they complete.
    pub wait_completed: Vec<RuledPod>,
    /// Pods marked do-not-disrupt in a drain that honours the marks (a voluntary one): not
    /// evicted, waited for until they complete or go, deleted only by force mode that overrides
    /// the marks ([`super::overrides_marks`]); `by` is the annotation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<RuledPod>,
    /// Pods marked do-not-disrupt that a drain which does not honour the marks (an operator's)
    /// evicts or waits for like any other; `by` is the annotation. The drain names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overriding: Vec<RuledPod>,
    /// The tier of each pod whose order is not 0 (`namespace/name` → order), for the status.
    pub orders: BTreeMap<String, i32>,
}

impl RuledPlan {
    /// The plan of a drain without rules: one tier of every pod.
    pub fn untiered(whole: DrainPlan) -> Self {
        Self {
            tiers: vec![DrainTier {
                order: 0,
                plan: whole.clone(),
            }],
            whole,
            wait_completed: Vec::new(),
            held: Vec::new(),
            overriding: Vec::new(),
            orders: BTreeMap::new(),
        }
    }

    /// Whether the rules change how the drain runs: more than one tier, or pods to wait for.
    /// A drain whose plan is not tiered runs exactly as before rules existed.
    pub fn is_tiered(&self) -> bool {
        self.tiers.len() > 1 || !self.wait_completed.is_empty()
    }

    /// Every pod force mode deletes: those to move and those waited for, and the pods held by
    /// do-not-disrupt marks when it overrides them (`overriding_marks`).
    pub fn force_victims(&self, overriding_marks: bool) -> Vec<PodRef> {
        let held = self.held.iter().filter(|_| overriding_marks);
        self.whole
            .moving()
            .cloned()
            .chain(self.wait_completed.iter().map(|p| p.pod.clone()))
            .chain(held.map(|p| p.pod.clone()))
            .collect()
    }
}

/// Sorts the pods of a node by `rules`: [`plan_drain`]'s plan of the whole Node (so a volume
/// shared across tiers is judged with every pod in view), its `Skip` pods moved to `skipped`
/// (reason [`SkipReason::Rule`], with what skipped them), its `WaitCompleted` pods to
/// `wait_completed`, and the pods left split into tiers by order. A pod the local-data policy
/// refuses is refused only when it would be evicted. A pod marked do-not-disrupt that no `Skip`
/// leaves on the Node goes to `held` when `marks_hold` (a voluntary drain), else to
/// `overriding` besides its lane.
pub fn plan_with_rules(
    pods: &[PodFacts],
    rules: &[DrainRule],
    local_data: LocalDataPolicy,
    marks_hold: bool,
) -> RuledPlan {
    let mut whole = plan_drain(pods, local_data);
    let left_alone: BTreeSet<String> = whole.skipped.iter().map(|s| s.pod.clone()).collect();
    let mut decisions: BTreeMap<String, (PodDecision, &PodFacts)> = BTreeMap::new();
    for pod in pods {
        let key = pod.key();
        if !left_alone.contains(&key) {
            decisions.insert(key, (decide_pod(pod, rules), pod));
        }
    }
    let marked: BTreeMap<String, (&str, &PodFacts)> = decisions
        .iter()
        .filter(|(_, (decision, _))| decision.behavior != DrainBehavior::Skip)
        .filter_map(|(key, (_, pod))| {
            let annotation = pod.do_not_disrupt.as_deref()?;
            Some((key.clone(), (annotation, *pod)))
        })
        .collect();
    let marked_pods = marked.iter().map(|(_, (annotation, pod))| RuledPod {
        pod: pod_ref(pod),
        by: (*annotation).to_owned(),
    });
    let (held, overriding): (Vec<RuledPod>, Vec<RuledPod>) = if marks_hold {
        (marked_pods.collect(), Vec::new())
    } else {
        (Vec::new(), marked_pods.collect())
    };
    let behavior_of = |key: &str| {
        decisions
            .get(key)
            .map_or(DrainBehavior::Drain, |(d, _)| d.behavior)
    };
    let is_held = |key: &str| marks_hold && marked.contains_key(key);
    let evicted = |key: &str| behavior_of(key) == DrainBehavior::Drain && !is_held(key);
    let mut wait_completed = Vec::new();
    for (key, (decision, pod)) in &decisions {
        match decision.behavior {
            DrainBehavior::Drain => {}
            DrainBehavior::WaitCompleted if is_held(key) => {}
            DrainBehavior::Skip => whole.skipped.push(SkippedPod {
                pod: key.clone(),
                reason: SkipReason::Rule,
                rule: Some(decision.by.describe()),
            }),
            DrainBehavior::WaitCompleted => wait_completed.push(RuledPod {
                pod: pod_ref(pod),
                by: decision.by.describe(),
            }),
        }
    }
    whole.skipped.sort_by(|a, b| a.pod.cmp(&b.pod));
    whole = keep(&whole, evicted);
    let orders: BTreeMap<String, i32> = decisions
        .iter()
        .filter(|(key, (d, _))| evicted(key) && d.order != 0)
        .map(|(key, (d, _))| (key.clone(), d.order))
        .collect();
    let order_of = |key: &str| orders.get(key).copied().unwrap_or(0);
    let mut tier_orders: BTreeSet<i32> = whole.moving().map(|p| order_of(&p.key())).collect();
    tier_orders.extend(whole.refused.iter().map(|p| order_of(&p.pod)));
    let tiers = if tier_orders.len() <= 1 {
        let order = tier_orders.first().copied().unwrap_or(0);
        vec![DrainTier {
            order,
            plan: whole.clone(),
        }]
    } else {
        tier_orders
            .into_iter()
            .map(|order| DrainTier {
                order,
                plan: keep(&whole, |key| order_of(key) == order),
            })
            .collect()
    };
    RuledPlan {
        whole,
        tiers,
        wait_completed,
        held,
        overriding,
        orders,
    }
}

/// The reference an eviction or deletion of `pod` names.
fn pod_ref(pod: &PodFacts) -> PodRef {
    PodRef {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
        grace_period_seconds: pod.grace_period().as_secs(),
    }
}

/// The drain rules an annotation carries (as [`DrainRule`]s serialize), at most
/// [`limits::MAX_DRAIN_RULES`].
///
/// # Errors
///
/// What is wrong: not rules as nodewright writes them, or too many.
pub fn read_rules(value: &serde_json::Value) -> Result<Vec<DrainRule>, String> {
    let rules: Vec<DrainRule> = serde_json::from_value(value.clone()).map_err(|error| {
        format!("rules are not drain rules as nodewright writes them ({error})")
    })?;
    if rules.len() > limits::MAX_DRAIN_RULES {
        return Err(format!(
            "{} rules, more than the maximum {}",
            rules.len(),
            limits::MAX_DRAIN_RULES
        ));
    }
    Ok(rules)
}

/// `plan` with only the pods `keep` says, in its lanes (skipped pods all kept).
fn keep(plan: &DrainPlan, keep: impl Fn(&str) -> bool) -> DrainPlan {
    DrainPlan {
        skipped: plan.skipped.clone(),
        terminating: plan
            .terminating
            .iter()
            .filter(|p| keep(&p.key()))
            .cloned()
            .collect(),
        without_volumes: plan
            .without_volumes
            .iter()
            .filter(|p| keep(&p.key()))
            .cloned()
            .collect(),
        with_volumes: plan
            .with_volumes
            .iter()
            .filter(|p| keep(&p.pod.key()))
            .cloned()
            .collect(),
        not_waited_on: plan
            .not_waited_on
            .iter()
            .filter(|v| keep(&v.pod))
            .cloned()
            .collect(),
        local_data: plan
            .local_data
            .iter()
            .filter(|p| keep(&p.pod))
            .cloned()
            .collect(),
        refused: plan
            .refused
            .iter()
            .filter(|p| keep(&p.pod))
            .cloned()
            .collect(),
    }
}

#[cfg(test)]
mod tests;
