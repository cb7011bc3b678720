//! Pods whose data dies with their eviction: pods with `emptyDir` volumes and pods that declare
//! no controller, and the pool's policy for them (`spec.drain.localData: evict | refuse`).
//!
//! # What others do
//!
//! - `kubectl drain` (`k8s.io/kubectl/pkg/drain/filters.go`) refuses a node by default when a pod
//!   has an `emptyDir` volume (`localStorageFilter`: "Pods with local storage (use
//!   --delete-emptydir-data to override)") or declares no controller (`unreplicatedFilter`:
//!   "cannot delete Pods that declare no controller (use --force to override)"). It refuses
//!   before it evicts anything: `RunNodeDrain` (`default.go`) returns the errors every filter
//!   gave `GetPodsForDeletion` before it calls `DeleteOrEvictPods`. Finished
//!   pods (`Succeeded`/`Failed`) pass both filters; mirror pods are always skipped, and DaemonSet
//!   pods are never deleted (without `--ignore-daemonsets` kubectl even refuses the node).
//! - machine-controller-manager's `drainNode` (`mcm-behaviour.md` §3.6) passes
//!   `ignorePodsWithoutControllers=true, deleteLocalData=true, ignoreDaemonsets=true`: it evicts
//!   every pod but DaemonSet and mirror pods without asking, with a warning. Its drain only ever
//!   runs for a machine that is being deleted.
//!
//! # The default, and why it depends on the purpose
//!
//! A **deletion** drain (DeleteMachine) precedes the VM's deletion: the `emptyDir` data and a
//! bare pod are lost with the VM whatever the drain does. Refusing would save nothing; it would
//! only stop the delete (and a rollout behind it) and take away the pod's graceful termination.
//! So a deletion drain **evicts**, as machine-controller-manager does.
//!
//! A **maintenance** drain (`machine drain`) keeps the VM: a pod left on the node keeps its
//! `emptyDir` data, and a bare pod keeps running, while an eviction loses both for good. That is
//! the case `kubectl drain` was made for, so a maintenance drain **refuses**, as kubectl does:
//! before the first eviction, naming every such pod and the fix.
//!
//! Either setting can be written in the pool file, and `machine drain --local-data` chooses for
//! one drain. Whatever the policy, every pod evicted or force-deleted with local data is named
//! in the drain's status and result (`localDataLost`); under `refuse` no such pod is ever
//! evicted or deleted, not even in force mode (force mode is about time and budgets, not data).

use serde::{Deserialize, Serialize};

use super::purpose::DrainPurpose;

/// What a drain does with a pod whose data its eviction loses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LocalDataPolicy {
    /// Evict it like any other pod, and name it in `localDataLost`.
    Evict,
    /// Do not evict it: the drain fails before its first eviction, naming the pods and the fix.
    Refuse,
}

impl LocalDataPolicy {
    /// The policy a drain follows: `chosen` when the pool file, the annotation or the request
    /// names one, else the default for `purpose` — [`LocalDataPolicy::Refuse`] for maintenance
    /// (the VM and its data stay; kubectl's default) and [`LocalDataPolicy::Evict`] for a
    /// deletion (the data goes with the VM anyway; machine-controller-manager's behaviour).
    pub const fn or_default_for(chosen: Option<Self>, purpose: DrainPurpose) -> Self {
        match (chosen, purpose) {
            (Some(policy), _) => policy,
            (None, DrainPurpose::Maintenance) => LocalDataPolicy::Refuse,
            (None, DrainPurpose::Deletion) => LocalDataPolicy::Evict,
        }
    }

    /// As written in the pool file and on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            LocalDataPolicy::Evict => "evict",
            LocalDataPolicy::Refuse => "refuse",
        }
    }

    /// Reads `evict` or `refuse`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "evict" => Some(LocalDataPolicy::Evict),
            "refuse" => Some(LocalDataPolicy::Refuse),
            _ => None,
        }
    }
}

/// A pod whose data its eviction loses, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalDataPod {
    /// `namespace/name`.
    pub pod: String,
    /// Its `emptyDir` volumes, by name (memory-backed ones too, as kubectl counts them).
    #[serde(default)]
    pub empty_dirs: Vec<String>,
    /// It declares no controller: nothing recreates it anywhere.
    #[serde(default)]
    pub no_controller: bool,
}

impl LocalDataPod {
    /// What is lost, in words: `emptyDir cache, scratch; no controller`.
    pub fn what(&self) -> String {
        let mut parts = Vec::new();
        if !self.empty_dirs.is_empty() {
            parts.push(format!("emptyDir {}", self.empty_dirs.join(", ")));
        }
        if self.no_controller {
            parts.push("no controller".to_owned());
        }
        parts.join("; ")
    }
}

impl std::fmt::Display for LocalDataPod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.pod, self.what())
    }
}

/// Why a drain under [`LocalDataPolicy::Refuse`] stopped before its first eviction: the pods,
/// what each would lose, and the fixes. `chosen` is whether the policy was written (pool file,
/// annotation, request) rather than the maintenance default.
pub fn refusal(node: &str, refused: &[LocalDataPod], chosen: bool) -> String {
    let pods: Vec<String> = refused.iter().map(ToString::to_string).collect();
    let why = if chosen {
        "the drain's localData policy is refuse"
    } else {
        "localData refuse is the default of a maintenance drain"
    };
    format!(
        "{count} pods on {node} would lose their data if evicted ({why}): {pods}; nothing was evicted and {node} stays cordoned. Fix: save their data and delete them yourself, then drain again; or drain with `nodewright machine drain {node} --local-data evict` to evict them and lose the data; or `nodewright machine uncordon {node}` to give the node back",
        count = refused.len(),
        pods = pods.join(", "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_refuses_for_maintenance_and_evicts_for_a_deletion() {
        use DrainPurpose::{Deletion, Maintenance};
        use LocalDataPolicy::{Evict, Refuse};
        let table = [
            (None, Maintenance, Refuse),
            (None, Deletion, Evict),
            (Some(Evict), Maintenance, Evict),
            (Some(Evict), Deletion, Evict),
            (Some(Refuse), Maintenance, Refuse),
            (Some(Refuse), Deletion, Refuse),
        ];
        for (chosen, purpose, expected) in table {
            assert_eq!(
                LocalDataPolicy::or_default_for(chosen, purpose),
                expected,
                "{chosen:?} {purpose:?}"
            );
        }
    }

    #[test]
    fn reads_what_it_writes_and_nothing_else() {
        for policy in [LocalDataPolicy::Evict, LocalDataPolicy::Refuse] {
            assert_eq!(LocalDataPolicy::parse(policy.as_str()), Some(policy));
            assert_eq!(
                serde_json::to_string(&policy).ok(),
                Some(format!("\"{}\"", policy.as_str()))
            );
        }
        for bad in ["", "Evict", "keep", "delete", " refuse"] {
            assert_eq!(LocalDataPolicy::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_refusal_names_every_pod_what_it_loses_and_the_fixes() {
        let refused = [
            LocalDataPod {
                pod: "shop/cache-0".into(),
                empty_dirs: vec!["scratch".into(), "tmp".into()],
                no_controller: false,
            },
            LocalDataPod {
                pod: "shop/debug".into(),
                empty_dirs: vec![],
                no_controller: true,
            },
        ];
        let text = refusal("web-abcde", &refused, false);
        assert!(
            text.starts_with(
                "2 pods on web-abcde would lose their data if evicted (localData refuse is the default of a maintenance drain): shop/cache-0 (emptyDir scratch, tmp), shop/debug (no controller); nothing was evicted"
            ),
            "{text}"
        );
        assert!(
            text.contains("`nodewright machine drain web-abcde --local-data evict`"),
            "{text}"
        );
        assert!(
            refusal("n", &refused, true).contains("the drain's localData policy is refuse"),
            "{text}"
        );
    }
}
