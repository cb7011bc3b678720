//! Names that Temporal, the UI and the CLI share: operations, workflow IDs and search attributes.
//!
//! Workflow IDs are deterministic and readable (`create/<cluster>/<machine>`), so a run can be
//! found by machine or pool, and a second start of the same job is refused by Temporal itself.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ClusterName;

/// The prefix of the task queue a cluster's workers poll unless configured otherwise.
pub const DEFAULT_TASK_QUEUE_PREFIX: &str = "nodewright";

/// The task queue of `cluster` unless `temporal.task_queue` says otherwise: `nodewright-<cluster>`.
/// Each cluster polls its own queue, so two clusters on one Temporal namespace never run each
/// other's activities (a worker refuses them anyway: see [`crate::isolation`]).
pub fn default_task_queue(cluster: &ClusterName) -> String {
    format!("{DEFAULT_TASK_QUEUE_PREFIX}-{cluster}")
}

/// The task queue of ARM write activities (PUT, PATCH, DELETE, POST) for workers polling
/// `task_queue`. Its server-enforced rate limit keeps every worker of a deployment together
/// under the subscription's ARM write budget (architecture §5).
pub fn arm_write_task_queue(task_queue: &str) -> String {
    format!("{task_queue}-arm-writes")
}

/// The kind of job a workflow run performs; the value of the `NodewrightOperation` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// Checks that the worker reaches everything it needs.
    Preflight,
    /// CreateMachine.
    Create,
    /// DeleteMachine.
    Delete,
    /// DrainNode.
    Drain,
    /// UncordonNode: undoes a maintenance drain.
    Uncordon,
    /// RollingUpdate of a pool.
    Rollout,
    /// InspectPool: a look at a pool's machines for `pool status`.
    Inspect,
    /// OrphanSweep.
    Sweep,
    /// PoolController: keeps a pool at its declared state.
    Pool,
}

impl Operation {
    /// The operation's name as it appears in workflow IDs and search attributes.
    pub const fn as_str(self) -> &'static str {
        match self {
            Operation::Preflight => "preflight",
            Operation::Create => "create",
            Operation::Delete => "delete",
            Operation::Drain => "drain",
            Operation::Uncordon => "uncordon",
            Operation::Rollout => "rollout",
            Operation::Inspect => "inspect",
            Operation::Sweep => "sweep",
            Operation::Pool => "pool",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A workflow ID: `<operation>/<cluster>` or `<operation>/<cluster>/<subject>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WorkflowId(String);

impl WorkflowId {
    /// The ID of a cluster-wide job such as `sweep/<cluster>` or `preflight/<cluster>`.
    pub fn for_cluster(operation: Operation, cluster: &ClusterName) -> Self {
        Self(format!("{operation}/{cluster}"))
    }

    /// The ID of a job about one subject (a machine, node or pool) of the cluster.
    pub fn for_subject(operation: Operation, cluster: &ClusterName, subject: &str) -> Self {
        Self(format!("{operation}/{cluster}/{subject}"))
    }

    /// The ID as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkflowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The custom search attributes every nodewright workflow sets. All are `Keyword`s; they must
/// be registered on the Temporal namespace before a workflow sets them (`dev/stack up` does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SearchAttribute {
    /// The cluster name.
    Cluster,
    /// The pool, when the job concerns one.
    Pool,
    /// The machine, when the job concerns one.
    Machine,
    /// The [`Operation`].
    Operation,
    /// Where the run is: a short word that changes as it goes (`creating-vm`, `draining`...).
    Phase,
}

impl SearchAttribute {
    /// Every attribute, in the order they are documented and registered.
    pub const ALL: [SearchAttribute; 5] = [
        SearchAttribute::Cluster,
        SearchAttribute::Pool,
        SearchAttribute::Machine,
        SearchAttribute::Operation,
        SearchAttribute::Phase,
    ];

    /// The attribute's name on the Temporal namespace.
    pub const fn name(self) -> &'static str {
        match self {
            SearchAttribute::Cluster => "NodewrightCluster",
            SearchAttribute::Pool => "NodewrightPool",
            SearchAttribute::Machine => "NodewrightMachine",
            SearchAttribute::Operation => "NodewrightOperation",
            SearchAttribute::Phase => "NodewrightPhase",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str) -> ClusterName {
        ClusterName::parse("cluster", name).expect("valid cluster name")
    }

    #[test]
    fn workflow_ids_read_operation_cluster_subject() {
        let dev = cluster("dev");
        let table = [
            (WorkflowId::for_cluster(Operation::Sweep, &dev), "sweep/dev"),
            (
                WorkflowId::for_cluster(Operation::Preflight, &dev),
                "preflight/dev",
            ),
            (
                WorkflowId::for_subject(Operation::Create, &dev, "web-ab12c"),
                "create/dev/web-ab12c",
            ),
            (
                WorkflowId::for_subject(Operation::Rollout, &dev, "web"),
                "rollout/dev/web",
            ),
        ];
        for (id, expected) in table {
            assert_eq!(id.as_str(), expected);
        }
    }

    #[test]
    fn default_task_queues_are_derived_from_the_cluster() {
        assert_eq!(default_task_queue(&cluster("dev")), "nodewright-dev");
        assert_eq!(
            arm_write_task_queue(&default_task_queue(&cluster("prod-weu"))),
            "nodewright-prod-weu-arm-writes"
        );
    }

    #[test]
    fn operations_serialize_as_their_names() {
        for operation in [
            Operation::Preflight,
            Operation::Create,
            Operation::Delete,
            Operation::Drain,
            Operation::Rollout,
            Operation::Inspect,
            Operation::Sweep,
            Operation::Pool,
        ] {
            let json = serde_json::to_string(&operation).expect("serializes");
            assert_eq!(json, format!("\"{}\"", operation.as_str()));
        }
    }

    #[test]
    fn search_attribute_names_are_distinct_and_prefixed() {
        let names: std::collections::HashSet<_> =
            SearchAttribute::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(names.len(), SearchAttribute::ALL.len());
        assert!(names.iter().all(|n| n.starts_with("Nodewright")));
    }
}
