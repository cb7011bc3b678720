//! One sweep at a time per cluster, whatever started it: a scheduled run
//! (`sweep/<cluster>-<time>`) that finds another sweep of the cluster running ends at once.
//!
//! The schedule's overlap policy keeps its own runs apart, and `nodewright sweep run` refuses
//! while any sweep of the cluster runs; this closes the last gap, a scheduled run starting
//! while an on-demand one (`sweep/<cluster>`) runs. An on-demand run never yields to a
//! scheduled one, so two runs that start together cannot both give way.

use super::inventory::RunningWorkflow;
use crate::ClusterName;
use crate::names::{Operation, WorkflowId};

/// Whether the run `own_workflow_id` of a sweep of `cluster` gives way to another sweep in
/// `running` (visibility's running nodewright workflows of the cluster): the reason when it
/// does.
pub fn yield_to_running_sweep(
    cluster: &ClusterName,
    own_workflow_id: &str,
    running: &[RunningWorkflow],
) -> Option<String> {
    let on_demand = WorkflowId::for_cluster(Operation::Sweep, cluster);
    if own_workflow_id == on_demand.as_str() {
        return None;
    }
    running
        .iter()
        .find(|w| w.operation == Operation::Sweep.as_str() && w.workflow_id != own_workflow_id)
        .map(|other| {
            format!(
                "another sweep runs: {} is sweeping cluster {cluster}; this scheduled run did nothing",
                other.workflow_id
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(id: &str) -> RunningWorkflow {
        RunningWorkflow {
            workflow_id: id.to_owned(),
            operation: "sweep".to_owned(),
            machine: None,
            pool: None,
        }
    }

    #[test]
    fn a_scheduled_run_gives_way_to_any_other_sweep_of_the_cluster_and_an_on_demand_one_never() {
        let prod = ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"));
        let scheduled = "sweep/prod-2026-04-01T10:15:00Z";
        let create = RunningWorkflow {
            workflow_id: "create/prod/web-aaaaa".to_owned(),
            operation: "create".to_owned(),
            machine: Some("web-aaaaa".to_owned()),
            pool: None,
        };
        assert_eq!(
            yield_to_running_sweep(&prod, scheduled, &[sweep("sweep/prod")]).as_deref(),
            Some(
                "another sweep runs: sweep/prod is sweeping cluster prod; this scheduled run did nothing"
            )
        );
        assert_eq!(
            yield_to_running_sweep(&prod, scheduled, &[sweep(scheduled), create.clone()]),
            None,
            "itself and other workflows are no other sweep"
        );
        assert_eq!(
            yield_to_running_sweep(&prod, "sweep/prod", &[sweep(scheduled)]),
            None,
            "the on-demand run never gives way"
        );
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any workflow IDs and operations: the on-demand run never gives way, and a run gives
        /// way only to another sweep.
        #[test]
        fn only_a_scheduled_run_gives_way_and_only_to_another_sweep(
            own in ".*",
            running in proptest::collection::vec((".*", prop_oneof![Just("sweep".to_owned()), ".*"]), 0..6),
        ) {
            let cluster = ClusterName::parse("cluster", "prod").map_err(|e| TestCaseError::fail(e.to_string()))?;
            let running: Vec<RunningWorkflow> = running
                .into_iter()
                .map(|(workflow_id, operation)| RunningWorkflow { workflow_id, operation, machine: None, pool: None })
                .collect();
            let on_demand = WorkflowId::for_cluster(Operation::Sweep, &cluster);
            prop_assert!(yield_to_running_sweep(&cluster, on_demand.as_str(), &running).is_none());
            let yields = yield_to_running_sweep(&cluster, &own, &running).is_some();
            let another = running.iter().any(|w| w.operation == "sweep" && w.workflow_id != own);
            prop_assert_eq!(yields, another && own != on_demand.as_str());
        }
    }
}
