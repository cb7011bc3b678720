//! What a sweep found, counted for metrics: its outcome, and how many subjects each rule
//! decided to act on (or report) by kind and action. Kept and foreign resources are grouped in
//! the audit and not counted here: a finding is something the sweep did or would have done.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::audit::SweepAudit;

/// A sweep's findings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepFindings {
    /// The outcome's word (`completed`, `dry-run`, `frozen`...).
    pub outcome: String,
    /// The subjects acted on or reported, by kind, rule and action.
    pub findings: Vec<Finding>,
}

/// How many subjects of one kind one rule decided one action for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// `vm`, `nic`, `disk` or `node`.
    pub kind: String,
    /// The rule, as the audit writes it.
    pub rule: String,
    /// `delete`, `replace`, `report`, `untaint`.
    pub action: String,
    /// How many.
    pub count: u32,
}

impl SweepAudit {
    /// Its findings (see the module's documentation), sorted by kind, rule and action.
    pub fn findings(&self) -> SweepFindings {
        let mut counted: BTreeMap<(&str, &str, &str), u32> = BTreeMap::new();
        for entry in &self.entries {
            let decision = &entry.decision;
            let key = (
                decision.kind.as_str(),
                decision.rule.as_str(),
                decision.action.as_str(),
            );
            let count = counted.entry(key).or_default();
            *count = count.saturating_add(1);
        }
        SweepFindings {
            outcome: self.outcome.word().to_owned(),
            findings: counted
                .into_iter()
                .map(|((kind, rule, action), count)| Finding {
                    kind: kind.to_owned(),
                    rule: rule.to_owned(),
                    action: action.to_owned(),
                    count,
                })
                .collect(),
        }
    }
}
