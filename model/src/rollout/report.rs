//! What `pool status` shows: the pool's machines as InspectPool observed them (and the
//! pool's revisions, for `pool history` and `pool rollback`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::observed::{Health, ObservedMachine};
use super::revisions::PoolRevisions;
use crate::ClusterName;

/// The input of InspectPool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InspectPoolRequest {
    /// The cluster.
    pub cluster: ClusterName,
    /// The pool.
    pub pool: String,
}

/// A pool's machines, their templates and health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolReport {
    /// The pool.
    pub pool: String,
    /// Every machine (VM tagged with the cluster and the pool), by name.
    pub machines: Vec<ObservedMachine>,
    /// When it was observed, Unix seconds.
    pub observed_at: i64,
    /// The pool's revisions ConfigMap as read (none from a run recorded before it was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisions: Option<PoolRevisions>,
}

impl PoolReport {
    /// How many machines run each template hash.
    pub fn by_template(&self) -> BTreeMap<&str, u32> {
        let mut counts = BTreeMap::new();
        for machine in &self.machines {
            *counts.entry(machine.template_hash.as_str()).or_insert(0) += 1;
        }
        counts
    }

    /// How many machines are Ready.
    pub fn ready(&self) -> usize {
        self.machines
            .iter()
            .filter(|m| m.health == Health::Ready)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::Activity;

    #[test]
    fn counts_templates_and_ready_machines() {
        let machine = |name: &str, template: &str, health| ObservedMachine {
            name: name.to_owned(),
            template_hash: template.to_owned(),
            health,
            created_at: 0,
            activity: Activity::Idle,
            tainted_outdated: false,
            zone: None,
            ready_since: 0,
        };
        let report = PoolReport {
            pool: "p".to_owned(),
            machines: vec![
                machine("p-a", "aaa", Health::Ready),
                machine("p-b", "bbb", Health::Failed),
                machine("p-c", "aaa", Health::NotReady { since: 1 }),
            ],
            observed_at: 5,
            revisions: None,
        };
        assert_eq!(
            report.by_template().into_iter().collect::<Vec<_>>(),
            [("aaa", 2), ("bbb", 1)]
        );
        assert_eq!(report.ready(), 1);
    }
}
