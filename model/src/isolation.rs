//! Cluster isolation: which cluster a run belongs to (read from its workflow ID), and whether a
//! worker may run an activity of it.
//!
//! Every nodewright workflow ID names its cluster ([`crate::WorkflowId`]): `create/<cluster>/<machine>`,
//! `delete/…`, `drain/…`, `uncordon/…`, `rollout/<cluster>/<pool>`, `inspect/<cluster>/<pool>`, `pool/<cluster>/<pool>`,
//! `preflight/<cluster>`, `sweep/<cluster>`, and the runs a sweep schedule starts,
//! `sweep/<cluster>-<time>` (Temporal appends the RFC 3339 time of the scheduled action). A worker
//! acts with one cluster's Kubernetes client and Azure resource group, so it refuses every
//! activity of a run of another cluster, or of a run whose ID is not a nodewright one
//! ([`admit_activity`]). Workflows do no I/O themselves: refusing their activities suffices.

use crate::ClusterName;
use crate::names::Operation;
use crate::text::quoted;

/// The failure type of an activity refused because its run belongs to another cluster (or to no
/// cluster nodewright knows of). Non-retryable: another attempt would reach the same workers.
pub const WRONG_CLUSTER: &str = "WrongCluster";

/// Whether a worker of one cluster may run an activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// The run belongs to the worker's cluster.
    Admitted,
    /// Refused; the message names the run's cluster, the worker's cluster and the fix.
    Refused {
        /// One line for people.
        message: String,
    },
}

/// The cluster a nodewright workflow ID names, or `None` when `workflow_id` is not one that
/// [`crate::WorkflowId`] (or a sweep schedule) builds. Never panics.
pub fn cluster_of_workflow_id(workflow_id: &str) -> Option<ClusterName> {
    let (operation, rest) = workflow_id.split_once('/')?;
    let operation = operation_named(operation)?;
    match operation {
        Operation::Preflight => ClusterName::parse("cluster", rest).ok(),
        Operation::Sweep => ClusterName::parse("cluster", rest)
            .ok()
            .or_else(|| scheduled_sweep_cluster(rest)),
        Operation::Create
        | Operation::Delete
        | Operation::Drain
        | Operation::Uncordon
        | Operation::Rollout
        | Operation::Inspect
        | Operation::Pool => {
            let (cluster, subject) = rest.split_once('/')?;
            if subject.is_empty() || subject.contains('/') {
                return None;
            }
            ClusterName::parse("cluster", cluster).ok()
        }
    }
}

/// Whether the worker of `worker_cluster` may run an activity of the run `workflow_id` (`None`:
/// the activity belongs to no workflow). `activity_type` names the activity in the message.
pub fn admit_activity(
    workflow_id: Option<&str>,
    activity_type: &str,
    worker_cluster: &ClusterName,
) -> Admission {
    const FIX: &str = "give each cluster its own task queue (leave temporal.task_queue / NODEWRIGHT_TASK_QUEUE unset for the default nodewright-<cluster>, or set a different one per cluster)";
    let Some(workflow_id) = workflow_id else {
        return Admission::Refused {
            message: format!(
                "activity {activity_type} belongs to no nodewright run, and this worker runs only the activities of cluster {}'s runs: {FIX}",
                quoted(worker_cluster.as_str())
            ),
        };
    };
    match cluster_of_workflow_id(workflow_id) {
        Some(cluster) if &cluster == worker_cluster => Admission::Admitted,
        Some(cluster) => Admission::Refused {
            message: format!(
                "activity {activity_type} of run {workflow_id} belongs to cluster {}, but this worker manages cluster {} (its Kubernetes API and Azure resource group): {FIX}",
                quoted(cluster.as_str()),
                quoted(worker_cluster.as_str())
            ),
        },
        None => Admission::Refused {
            message: format!(
                "activity {activity_type} of run {workflow_id} is not of a nodewright run (its workflow ID names no cluster), and this worker manages cluster {}: {FIX}",
                quoted(worker_cluster.as_str())
            ),
        },
    }
}

const OPERATIONS: [Operation; 9] = [
    Operation::Preflight,
    Operation::Create,
    Operation::Delete,
    Operation::Drain,
    Operation::Uncordon,
    Operation::Rollout,
    Operation::Inspect,
    Operation::Sweep,
    Operation::Pool,
];

fn operation_named(name: &str) -> Option<Operation> {
    OPERATIONS
        .into_iter()
        .find(|operation| operation.as_str() == name)
}

/// `<cluster>-<RFC 3339 time>`: the ID of a run a sweep schedule started. A cluster name holds
/// no `T` or `:`, so only one split can leave a time behind.
fn scheduled_sweep_cluster(rest: &str) -> Option<ClusterName> {
    rest.match_indices('-').find_map(|(index, _)| {
        let cluster = rest.get(..index)?;
        let time = rest.get(index + 1..)?;
        if is_rfc3339(time) {
            ClusterName::parse("cluster", cluster).ok()
        } else {
            None
        }
    })
}

/// Whether `text` is shaped like an RFC 3339 time: `YYYY-MM-DDTHH:MM:SS`, an optional fraction,
/// then `Z` or `±HH:MM`.
fn is_rfc3339(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|part| part.iter().all(u8::is_ascii_digit))
    };
    let at = |index: usize, expected: u8| bytes.get(index) == Some(&expected);
    let date_time = digits(0..4)
        && at(4, b'-')
        && digits(5..7)
        && at(7, b'-')
        && digits(8..10)
        && at(10, b'T')
        && digits(11..13)
        && at(13, b':')
        && digits(14..16)
        && at(16, b':')
        && digits(17..19);
    if !date_time {
        return false;
    }
    let mut index = 19;
    if at(index, b'.') {
        index += 1;
        let start = index;
        while bytes.get(index).is_some_and(u8::is_ascii_digit) {
            index += 1;
        }
        if index == start {
            return false;
        }
    }
    match bytes.get(index) {
        Some(b'Z') => index + 1 == bytes.len(),
        Some(b'+' | b'-') => {
            digits(index + 1..index + 3)
                && at(index + 3, b':')
                && digits(index + 4..index + 6)
                && index + 6 == bytes.len()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkflowId;
    use proptest::prelude::*;

    fn cluster(name: &str) -> ClusterName {
        ClusterName::parse("cluster", name).expect("valid cluster name")
    }

    fn check(workflow_id: &str, expected: Option<&str>) {
        assert_eq!(
            cluster_of_workflow_id(workflow_id)
                .as_ref()
                .map(ClusterName::as_str),
            expected,
            "{workflow_id}"
        );
    }

    #[test]
    fn every_kind_of_nodewright_workflow_id_names_its_cluster() {
        let table = [
            ("create/local/web-ab12c", Some("local")),
            ("delete/prod-weu/web-ab12c", Some("prod-weu")),
            ("drain/prod-weu/web-ab12c", Some("prod-weu")),
            ("uncordon/prod-weu/web-ab12c", Some("prod-weu")),
            ("rollout/a1/web", Some("a1")),
            ("inspect/a1/web", Some("a1")),
            ("preflight/other-x7", Some("other-x7")),
            ("sweep/other-x7", Some("other-x7")),
            ("sweep/local-2026-11-25T14:30:00Z", Some("local")),
            ("sweep/local-2026-11-25", Some("local-2026-11-25")),
            ("sweep/a-2026-2026-11-25T14:30:00Z", Some("a-2026")),
            (
                "sweep/prod-weu-2026-11-25T14:30:00.123+01:00",
                Some("prod-weu"),
            ),
        ];
        for (workflow_id, expected) in table {
            check(workflow_id, expected);
        }
    }

    #[test]
    fn ids_nodewright_does_not_build_name_no_cluster() {
        let table = [
            "",
            "/",
            "create",
            "create/local",
            "create/local/",
            "create//web-ab12c",
            "create/local/web/extra",
            "create/Local/web-ab12c",
            "smoke/local",
            "preflight/local/extra",
            "preflight/",
            "sweep/local-",
            "sweep/local-2026-11-25T14:30:00",
            "sweep/local-2026-11-25T14:30:00Zjunk",
            "sweep/local-2026-11-25T14:30:00.Z",
            "sweep/-2026-11-25T14:30:00Z",
            "CREATE/local/web",
            "rollout/local",
        ];
        for workflow_id in table {
            check(workflow_id, None);
        }
    }

    #[test]
    fn a_worker_admits_only_its_own_clusters_runs() {
        let local = cluster("local");
        assert_eq!(
            admit_activity(Some("create/local/web-ab12c"), "arm.ensure_nic", &local),
            Admission::Admitted
        );
        let refusals = [
            (
                Some("create/other/web-ab12c"),
                vec![
                    "\"other\"",
                    "\"local\"",
                    "create/other/web-ab12c",
                    "own task queue",
                ],
            ),
            (
                Some("smoke/x"),
                vec!["smoke/x", "\"local\"", "names no cluster", "own task queue"],
            ),
            (
                None,
                vec!["no nodewright run", "\"local\"", "own task queue"],
            ),
        ];
        for (workflow_id, fragments) in refusals {
            match admit_activity(workflow_id, "arm.ensure_nic", &local) {
                Admission::Refused { message } => {
                    for fragment in fragments {
                        assert!(message.contains(fragment), "{fragment} missing: {message}");
                    }
                    assert!(message.contains("arm.ensure_nic"), "{message}");
                }
                Admission::Admitted => panic!("{workflow_id:?} was admitted"),
            }
        }
    }

    fn cluster_names() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9-]{0,38}[a-z0-9]".prop_filter("a valid cluster name", |name| {
            ClusterName::parse("cluster", name).is_ok()
        })
    }

    proptest! {
        #[test]
        fn any_text_is_parsed_without_panicking(text in ".*") {
            let _ = cluster_of_workflow_id(&text);
            let _ = admit_activity(Some(&text), "a", &cluster("local"));
        }

        #[test]
        fn the_ids_workflow_id_builds_name_their_cluster(
            name in cluster_names(),
            subject in "[a-z][a-z0-9-]{0,20}",
            index in 0usize..OPERATIONS.len(),
        ) {
            let cluster = cluster(&name);
            let operation = OPERATIONS[index];
            let per_cluster = WorkflowId::for_cluster(operation, &cluster);
            let per_subject = WorkflowId::for_subject(operation, &cluster, &subject);
            let parsed = [cluster_of_workflow_id(per_cluster.as_str()), cluster_of_workflow_id(per_subject.as_str())];
            match operation {
                Operation::Preflight | Operation::Sweep => prop_assert_eq!(&parsed[0], &Some(cluster.clone())),
                _ => prop_assert_eq!(&parsed[1], &Some(cluster.clone())),
            }
        }

        #[test]
        fn scheduled_sweep_runs_name_their_cluster(
            name in cluster_names(),
            (y, mo, d, h, mi, s) in (1970u32..3000, 1u32..13, 1u32..29, 0u32..24, 0u32..60, 0u32..60),
        ) {
            let id = format!("sweep/{name}-{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z");
            prop_assert_eq!(cluster_of_workflow_id(&id), Some(cluster(&name)));
        }
    }
}
