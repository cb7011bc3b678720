//! PodDisruptionBudgets: when one that blocks an eviction is misconfigured.

use serde::{Deserialize, Serialize};

/// What the drain needs to know about a PodDisruptionBudget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PdbFacts {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.generation`.
    #[serde(default)]
    pub generation: Option<i64>,
    /// `status.observedGeneration`.
    #[serde(default)]
    pub observed_generation: Option<i64>,
    /// `status.expectedPods`.
    pub expected_pods: i32,
    /// `status.currentHealthy`.
    pub current_healthy: i32,
    /// `status.desiredHealthy`.
    pub desired_healthy: i32,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
}

impl PdbFacts {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Whether `pdb` allows no disruption although every pod it selects is healthy — e.g.
/// `minAvailable` equal to the replicas or `maxUnavailable: 0` — so that waiting cannot help
/// (MCM's `isMisconfiguredPdb`). A status not yet observed for the current generation is not
/// judged.
pub fn is_misconfigured(pdb: &PdbFacts) -> bool {
    if pdb.generation != pdb.observed_generation {
        return false;
    }
    pdb.expected_pods > 0
        && pdb.current_healthy >= pdb.expected_pods
        && pdb.disruptions_allowed == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdb(expected: i32, healthy: i32, allowed: i32) -> PdbFacts {
        PdbFacts {
            namespace: "shop".into(),
            name: "web".into(),
            generation: Some(2),
            observed_generation: Some(2),
            expected_pods: expected,
            current_healthy: healthy,
            desired_healthy: expected,
            disruptions_allowed: allowed,
        }
    }

    #[test]
    fn misconfigured_only_when_all_healthy_and_nothing_allowed() {
        let table = [
            // (expected, healthy, allowed, misconfigured)
            (3, 3, 0, true),  // minAvailable = replicas
            (3, 2, 0, false), // one pod down: waiting helps
            (3, 3, 1, false), // allows one: not blocking at all
            (0, 0, 0, false), // selects nothing
            (3, 4, 0, true),  // surge pod counted healthy
        ];
        for (expected, healthy, allowed, misconfigured) in table {
            assert_eq!(
                is_misconfigured(&pdb(expected, healthy, allowed)),
                misconfigured,
                "expected {expected} healthy {healthy} allowed {allowed}"
            );
        }
    }

    #[test]
    fn a_status_of_an_older_generation_is_not_judged() {
        let mut stale = pdb(3, 3, 0);
        stale.observed_generation = Some(1);
        assert!(!is_misconfigured(&stale));
        assert_eq!(stale.key(), "shop/web");
    }
}
