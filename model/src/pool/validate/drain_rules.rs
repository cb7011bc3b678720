//! Rules for `spec.drain.rules` (Cluster API's MachineDrainRule, see `model::drain::rules`):
//! a known behaviour, `order` only with `Drain` and within its range, selectors in Kubernetes'
//! syntax, a bounded list; and the drain-policy annotation that carries them within its size.

use super::kube::{KEY_FIX, VALUE_FIX, is_label_key, is_label_value};
use super::{Problems, entry, quoted};
use crate::drain::{
    DrainBehavior, DrainRule, DrainRuleSpec, LabelSelector, MAX_RULE_ORDER, MIN_RULE_ORDER,
    RuleSelector, SELECTOR_OPERATORS,
};
use crate::limits::{MAX_DRAIN_RULES, MAX_SELECTOR_TERMS};

const BEHAVIOR_FIX: &str = "write Drain (evicted, the default), Skip (left on the Node) or \
     WaitCompleted (not evicted; the drain waits until the pod completes)";

/// Checks the rules at `field` (`spec.drain.rules`) and returns those that hold.
pub(super) fn rules(
    problems: &mut Problems,
    field: &str,
    specs: &[DrainRuleSpec],
) -> Vec<DrainRule> {
    if specs.len() > MAX_DRAIN_RULES {
        problems.push(
            field,
            format!("{} rules", specs.len()),
            format!("holds more than {MAX_DRAIN_RULES} rules"),
            "merge rules with the same behaviour and order (a selector's matchExpressions In \
             takes several values), or label the pods nodewright.io/drain: skip|wait-completed",
        );
        return Vec::new();
    }
    specs
        .iter()
        .enumerate()
        .filter_map(|(index, spec)| rule(problems, &format!("{field}[{index}]"), spec))
        .collect()
}

fn rule(problems: &mut Problems, field: &str, spec: &DrainRuleSpec) -> Option<DrainRule> {
    let before = problems.0.len();
    let behavior = match spec.behavior.as_deref() {
        None => {
            problems.push(
                format!("{field}.behavior"),
                "nothing",
                "is missing",
                BEHAVIOR_FIX,
            );
            DrainBehavior::Drain
        }
        Some(text) => DrainBehavior::parse(text).unwrap_or_else(|| {
            problems.push(
                format!("{field}.behavior"),
                quoted(text),
                "is not a drain behavior",
                BEHAVIOR_FIX,
            );
            DrainBehavior::Drain
        }),
    };
    let order = match spec.order {
        None => 0,
        Some(order) if behavior != DrainBehavior::Drain && order != 0 => {
            problems.push(
                format!("{field}.order"),
                order.to_string(),
                format!("is set on a rule whose behavior is {}", behavior.as_str()),
                "leave order out: only Drain rules have an order (Skip pods stay, WaitCompleted \
                 pods are waited for once the tiers are drained), as in Cluster API",
            );
            0
        }
        Some(order) => match i32::try_from(order) {
            Ok(order) if (MIN_RULE_ORDER..=MAX_RULE_ORDER).contains(&order) => order,
            _ => {
                problems.push(
                    format!("{field}.order"),
                    order.to_string(),
                    format!("is outside {MIN_RULE_ORDER}..{MAX_RULE_ORDER}"),
                    format!(
                        "use an order from {MIN_RULE_ORDER} to {MAX_RULE_ORDER} (lower drains first; \
                         pods without a rule have 0)"
                    ),
                );
                0
            }
        },
    };
    selector(problems, &format!("{field}.selector"), &spec.selector);
    (problems.0.len() == before).then(|| DrainRule {
        selector: spec.selector.clone(),
        behavior,
        order,
    })
}

fn selector(problems: &mut Problems, field: &str, selector: &RuleSelector) {
    if selector.pod_selector.is_none() && selector.namespace_selector.is_none() {
        problems.push(
            field,
            "nothing",
            "has neither podSelector nor namespaceSelector",
            "name the pods: podSelector (the pod's labels), namespaceSelector (its namespace's \
             labels) or both; podSelector: {} matches every pod",
        );
    }
    if let Some(pods) = &selector.pod_selector {
        label_selector(problems, &format!("{field}.podSelector"), pods);
    }
    if let Some(namespaces) = &selector.namespace_selector {
        label_selector(problems, &format!("{field}.namespaceSelector"), namespaces);
    }
}

fn label_selector(problems: &mut Problems, field: &str, selector: &LabelSelector) {
    let too_many = |count: usize| count > MAX_SELECTOR_TERMS;
    let fix = format!(
        "keep at most {MAX_SELECTOR_TERMS}; split the rule in two with the same behavior and order"
    );
    if too_many(selector.match_labels.len()) {
        problems.push(
            format!("{field}.matchLabels"),
            format!("{} labels", selector.match_labels.len()),
            format!("holds more than {MAX_SELECTOR_TERMS} labels"),
            fix.clone(),
        );
    }
    for (key, value) in selector.match_labels.iter().take(MAX_SELECTOR_TERMS) {
        let item = entry(&format!("{field}.matchLabels"), key);
        if !is_label_key(key) {
            problems.push(&item, quoted(key), "key is not a label key", KEY_FIX);
        }
        if !is_label_value(value) {
            problems.push(
                &item,
                quoted(value),
                "value is not a label value",
                VALUE_FIX,
            );
        }
    }
    if too_many(selector.match_expressions.len()) {
        problems.push(
            format!("{field}.matchExpressions"),
            format!("{} requirements", selector.match_expressions.len()),
            format!("holds more than {MAX_SELECTOR_TERMS} requirements"),
            fix.clone(),
        );
    }
    let requirements = selector.match_expressions.iter().take(MAX_SELECTOR_TERMS);
    for (index, requirement) in requirements.enumerate() {
        let item = format!("{field}.matchExpressions[{index}]");
        if !is_label_key(&requirement.key) {
            problems.push(
                format!("{item}.key"),
                quoted(&requirement.key),
                "is not a label key",
                KEY_FIX,
            );
        }
        let operator = requirement.operator.as_str();
        if !SELECTOR_OPERATORS.contains(&operator) {
            problems.push(
                format!("{item}.operator"),
                quoted(operator),
                "is not a selector operator",
                format!("use one of {}", SELECTOR_OPERATORS.join(", ")),
            );
            continue;
        }
        let with_values = matches!(operator, "In" | "NotIn");
        let count = requirement.values.len();
        if with_values && count == 0 {
            problems.push(
                format!("{item}.values"),
                "nothing",
                format!("is empty for {operator}"),
                format!("list the values {operator} compares the label with"),
            );
        } else if !with_values && count > 0 {
            problems.push(
                format!("{item}.values"),
                format!("{count} values"),
                format!("is set for {operator}"),
                format!("leave values out: {operator} looks at the key only"),
            );
        } else if too_many(count) {
            problems.push(
                format!("{item}.values"),
                format!("{count} values"),
                format!("holds more than {MAX_SELECTOR_TERMS} values"),
                fix.clone(),
            );
        }
        for (at, value) in requirement
            .values
            .iter()
            .take(MAX_SELECTOR_TERMS)
            .enumerate()
        {
            if !is_label_value(value) {
                problems.push(
                    format!("{item}.values[{at}]"),
                    quoted(value),
                    "is not a label value",
                    VALUE_FIX,
                );
            }
        }
    }
}

/// Refuses rules whose drain-policy annotation (which carries them to the Node) would be longer
/// than [`crate::limits::MAX_DRAIN_ANNOTATION_BYTES`].
pub(super) fn annotation_size(
    problems: &mut Problems,
    field: &str,
    policy: &crate::pool::DrainPolicy,
) {
    let bytes = crate::drain::policy_to_annotation(policy).len();
    let max = crate::limits::MAX_DRAIN_ANNOTATION_BYTES;
    if bytes > max {
        problems.push(
            field,
            format!("{} rules", policy.rules.len()),
            format!("take {bytes} bytes in the Node's drain-policy annotation, more than {max}"),
            "use fewer or shorter selectors (one matchExpressions In with several values \
             instead of several rules)",
        );
    }
}

/// Checks drain rules a workflow received (at `field`, e.g. `drain.rules`): their number and
/// orders, by the bounds of `spec.drain.rules`.
pub(super) fn received(problems: &mut Problems, field: &str, rules: &[DrainRule]) {
    if rules.len() > MAX_DRAIN_RULES {
        problems.push(
            field,
            format!("{} rules", rules.len()),
            format!("holds more than {MAX_DRAIN_RULES} rules"),
            "send at most 32 rules, as the pool file allows",
        );
    }
    for (index, rule) in rules.iter().enumerate() {
        if !(MIN_RULE_ORDER..=MAX_RULE_ORDER).contains(&rule.order) {
            problems.push(
                format!("{field}[{index}].order"),
                rule.order.to_string(),
                format!("is outside {MIN_RULE_ORDER}..{MAX_RULE_ORDER}"),
                format!("use an order from {MIN_RULE_ORDER} to {MAX_RULE_ORDER}"),
            );
        }
    }
}
