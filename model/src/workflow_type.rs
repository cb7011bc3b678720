//! The workflow type names nodewright registers with Temporal, written once: the workflows'
//! `#[run(name = ..)]`, the input checks' messages, visibility queries and the tests use these.
//! A type name is part of every recorded history and of every running workflow's identity on the
//! server: renaming one strands the runs in flight, so these never change.

/// Checks a cluster's configuration, credentials and headroom before any job (`nodewright preflight`).
pub const PREFLIGHT: &str = "PreflightWorkflow";
/// Creates a machine: NIC, VM, join, Ready, labels and taints.
pub const CREATE_MACHINE: &str = "CreateMachine";
/// Deletes a machine: drain (as a DrainNode child), VM, NIC, disk, Node.
pub const DELETE_MACHINE: &str = "DeleteMachine";
/// Drains a Node: cordon, evictions under PodDisruptionBudgets, volumes moved.
pub const DRAIN_NODE: &str = "DrainNode";
/// Returns a drained Node to service.
pub const UNCORDON_NODE: &str = "UncordonNode";
/// Replaces a pool's outdated machines, a few at a time.
pub const ROLLING_UPDATE: &str = "RollingUpdate";
/// Reports a pool's machines against its Pool file.
pub const INSPECT_POOL: &str = "InspectPool";
/// Finds and removes what nodewright created and nothing owns any more.
pub const ORPHAN_SWEEP: &str = "OrphanSweep";

/// Keeps a pool at its declared state: replicas, template, machine health.
pub const POOL_CONTROLLER: &str = "PoolController";

/// Every workflow type a worker registers, in registration order.
pub const ALL: [&str; 9] = [
    PREFLIGHT,
    CREATE_MACHINE,
    DELETE_MACHINE,
    DRAIN_NODE,
    UNCORDON_NODE,
    ROLLING_UPDATE,
    INSPECT_POOL,
    ORPHAN_SWEEP,
    POOL_CONTROLLER,
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_type_name_is_distinct_and_a_plain_identifier() {
        let distinct: BTreeSet<&str> = ALL.into_iter().collect();
        assert_eq!(
            distinct.len(),
            ALL.len(),
            "a type name is listed twice: {ALL:?}"
        );
        for name in ALL {
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric())
                    && name.starts_with(|c: char| c.is_ascii_uppercase()),
                "{name} is not a PascalCase identifier"
            );
        }
    }
}
