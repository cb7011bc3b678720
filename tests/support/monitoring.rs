//! nodewright's dashboard and alert rules as data: every PromQL expression of
//! `deploy/monitoring/dashboard.json` and `deploy/monitoring/prometheusrule.yaml` (the chart's
//! `files/` hold the same two files), and the series each one reads. `promtool` checks that the
//! expressions parse (`tests/tidy/monitoring.rs`); the series read here are checked against
//! what the worker serves.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::deploy_objects::documents;
use crate::stack::repo_root;

/// The Temporal SDK's series the dashboard reads, all served on the worker's `/metrics` (the
/// SDK names counters without `_total`). Checked on 2026-11-29 against scrapes of a debug
/// `nodewright-worker` (temporalio-sdk-core 0.10.1): the task slots and
/// `temporal_workflow_completed` after a preflight run, `temporal_workflow_failed` and
/// `temporal_activity_execution_failed` after a create that failed with `AllocationFailed` (the
/// SDK serves a counter from its first increment). `tests/e2e/monitoring.rs` scrapes a running
/// worker for every one of them.
pub const TEMPORAL_SERIES: [&str; 5] = [
    "temporal_worker_task_slots_available",
    "temporal_worker_task_slots_used",
    "temporal_workflow_completed",
    "temporal_workflow_failed",
    "temporal_activity_execution_failed",
];

/// One PromQL expression and where it is (`dashboard.json: <panel>`, `prometheusrule.yaml:
/// <alert>`).
#[derive(Debug, Clone)]
pub struct Expression {
    /// Where the expression is.
    pub place: String,
    /// The expression as written (Grafana's `$variables` included).
    pub text: String,
}

/// A series an expression selects: its metric name and the label names its matchers use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// The metric name.
    pub name: String,
    /// The label names of its matchers (`{pool=~"$pool"}` gives `pool`).
    pub labels: Vec<String>,
}

/// Every expression of the dashboard's panels and template variables.
pub fn dashboard_expressions() -> Result<Vec<Expression>> {
    let dashboard = dashboard()?;
    let mut found = Vec::new();
    for panel in all_panels(&dashboard) {
        let title = panel["title"].as_str().unwrap_or("(untitled)");
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                found.push(Expression {
                    place: format!("dashboard.json: panel {title:?}"),
                    text: expr.to_owned(),
                });
            }
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = variable["query"]["query"]
            .as_str()
            .or_else(|| variable["query"].as_str());
        if let Some(inner) = query.and_then(label_values_series) {
            found.push(Expression {
                place: format!("dashboard.json: variable {}", variable["name"]),
                text: inner.to_owned(),
            });
        }
    }
    Ok(found)
}

/// Every alert's and recording rule's expression of the PrometheusRule.
pub fn rule_expressions() -> Result<Vec<Expression>> {
    let mut found = Vec::new();
    for group in rule_groups()?.as_array().into_iter().flatten() {
        for rule in group["rules"].as_array().into_iter().flatten() {
            let name = rule["alert"].as_str().or(rule["record"].as_str());
            found.push(Expression {
                place: format!("prometheusrule.yaml: {}", name.unwrap_or("(unnamed rule)")),
                text: rule["expr"].as_str().unwrap_or_default().to_owned(),
            });
        }
    }
    Ok(found)
}

/// The dashboard, `deploy/monitoring/dashboard.json`.
pub fn dashboard() -> Result<Value> {
    let path = repo_root().join("deploy/monitoring/dashboard.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    serde_json::from_str(&text).context("deploy/monitoring/dashboard.json is not JSON")
}

/// The PrometheusRule, `deploy/monitoring/prometheusrule.yaml`.
pub fn prometheus_rule() -> Result<Value> {
    let path = repo_root().join("deploy/monitoring/prometheusrule.yaml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    documents(&text, "deploy/monitoring/prometheusrule.yaml")?
        .into_iter()
        .next()
        .context("deploy/monitoring/prometheusrule.yaml holds no object")
}

/// The PrometheusRule's `spec.groups`: a Prometheus rules file's `groups`.
pub fn rule_groups() -> Result<Value> {
    Ok(prometheus_rule()?["spec"]["groups"].clone())
}

/// Every panel of the dashboard, those inside collapsed rows included.
pub fn all_panels(dashboard: &Value) -> Vec<&Value> {
    let mut found = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        found.push(panel);
        found.extend(panel["panels"].as_array().into_iter().flatten());
    }
    found
}

/// The expression with Grafana's variables replaced by values Prometheus accepts
/// (`$__rate_interval` → `5m`, `$pool` → `x`), as Grafana sends it.
pub fn as_sent_by_grafana(expr: &str) -> String {
    let mut text = expr.to_owned();
    for interval in ["$__rate_interval", "$__interval", "$__range"] {
        text = text.replace(interval, "5m");
    }
    let mut sent = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            sent.push(c);
            continue;
        }
        let braced = chars.peek() == Some(&'{');
        if braced {
            chars.next();
        }
        while chars
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            chars.next();
        }
        if braced && chars.peek() == Some(&'}') {
            chars.next();
        }
        sent.push('x');
    }
    sent
}

/// The series expression of a Grafana `label_values(<series>, <label>)` query.
fn label_values_series(query: &str) -> Option<&str> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")?
        .strip_suffix(')')?;
    let (series, _label) = inner.rsplit_once(',')?;
    Some(series.trim())
}

/// PromQL's aggregation operators and keywords: names in an expression that are not series.
const KEYWORDS: [&str; 28] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "atan2",
    "inf",
    "nan",
];

/// Keywords followed by a list of label names in parentheses.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The series `expr` selects, in order (a name followed by `(` is a function, not a series).
/// `expr` is what Prometheus receives ([`as_sent_by_grafana`]); it is assumed to parse
/// (`promtool` checks that), so this reads names, strings, matchers, ranges and label lists,
/// not the grammar.
pub fn selectors(expr: &str) -> Vec<Selector> {
    let chars: Vec<char> = expr.chars().collect();
    let mut found = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        if c == '"' || c == '\'' || c == '`' {
            at = after_string(&chars, at);
        } else if c == '#' {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
        } else if c == '{' {
            // A selector without a name ({__name__=...}) is not used here.
            at = after_matchers(&chars, at, &mut Vec::new());
        } else if c == '[' {
            while at < chars.len() && chars[at] != ']' {
                at += 1;
            }
        } else if c.is_ascii_digit() || c == '.' {
            while at < chars.len() && (chars[at].is_ascii_alphanumeric() || chars[at] == '.') {
                at += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = at;
            while at < chars.len()
                && (chars[at].is_ascii_alphanumeric() || chars[at] == '_' || chars[at] == ':')
            {
                at += 1;
            }
            let name: String = chars[start..at].iter().collect();
            let next = skip_space(&chars, at);
            let next_char = chars.get(next).copied();
            if LABEL_LISTS.contains(&name.as_str()) && next_char == Some('(') {
                at = after_parenthesis(&chars, next);
            } else if KEYWORDS.contains(&name.as_str()) || next_char == Some('(') {
                // An operator, or a function's name.
            } else {
                let mut labels = Vec::new();
                if next_char == Some('{') {
                    at = after_matchers(&chars, next, &mut labels);
                }
                found.push(Selector { name, labels });
            }
        } else {
            at += 1;
        }
    }
    found
}

fn skip_space(chars: &[char], mut at: usize) -> usize {
    while at < chars.len() && chars[at].is_whitespace() {
        at += 1;
    }
    at
}

/// The index after the string literal opened at `at`.
fn after_string(chars: &[char], at: usize) -> usize {
    let quote = chars[at];
    let mut at = at + 1;
    while at < chars.len() && chars[at] != quote {
        if chars[at] == '\\' && quote != '`' {
            at += 1;
        }
        at += 1;
    }
    at + 1
}

/// The index after the `(...)` opened at `at`.
fn after_parenthesis(chars: &[char], at: usize) -> usize {
    let mut at = at;
    while at < chars.len() && chars[at] != ')' {
        at += 1;
    }
    at + 1
}

/// The index after the matchers `{...}` opened at `at`; their label names go to `labels`.
fn after_matchers(chars: &[char], at: usize, labels: &mut Vec<String>) -> usize {
    let mut at = at + 1;
    while at < chars.len() && chars[at] != '}' {
        let c = chars[at];
        if c == '"' || c == '\'' || c == '`' {
            at = after_string(chars, at);
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = at;
            while at < chars.len() && (chars[at].is_ascii_alphanumeric() || chars[at] == '_') {
                at += 1;
            }
            labels.push(chars[start..at].iter().collect());
        } else {
            at += 1;
        }
    }
    at + 1
}

/// The series names of `selectors`, deduplicated.
pub fn names(selectors: &[Selector]) -> BTreeSet<String> {
    selectors.iter().map(|s| s.name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(expr: &str, expected: &[(&str, &[&str])]) {
        let found = selectors(&as_sent_by_grafana(expr));
        let expected: Vec<Selector> = expected
            .iter()
            .map(|(name, labels)| Selector {
                name: (*name).to_owned(),
                labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            })
            .collect();
        assert_eq!(found, expected, "{expr}");
    }

    #[test]
    fn selectors_are_the_series_not_functions_keywords_labels_or_strings() {
        check(
            r#"histogram_quantile(0.95, sum by (le, pool) (rate(nodewright_drain_duration_seconds_bucket{pool=~"$pool"}[$__rate_interval])))"#,
            &[("nodewright_drain_duration_seconds_bucket", &["pool"])],
        );
        check(
            r#"max by (pool) (a{state="remaining", x="b{c}"}) > 0 unless on (pool) max by (pool) (b offset 25m) == 1 and c"#,
            &[("a", &["state", "x"]), ("b", &[]), ("c", &[])],
        );
        check(
            r#"up{job="nodewright-worker"} == 0 or absent(up{job="nodewright-worker"})"#,
            &[("up", &["job"]), ("up", &["job"])],
        );
        check(
            r#"sum(rate(m_total{operation!~".+\\.(get|list)"}[5m])) > bool (max(t{result="ok"}) or vector(0)) * 1e3"#,
            &[("m_total", &["operation"]), ("t", &["result"])],
        );
    }

    #[test]
    fn grafana_variables_become_values_prometheus_accepts() {
        assert_eq!(
            as_sent_by_grafana(r#"rate(a{pool=~"$pool", b="${pool}"}[$__rate_interval])"#),
            r#"rate(a{pool=~"x", b="x"}[5m])"#
        );
        assert_eq!(
            label_values_series("label_values(nodewright_pool_replicas, pool)"),
            Some("nodewright_pool_replicas")
        );
    }
}
