//! Every workflow checks its input before its first step: the input's own rules
//! (`nodewright_model::input`, the same `check` the CLI runs before starting it) and its cluster,
//! which must be the cluster this run is for. A refused input ends the run at once, failed and
//! non-retryable with the type [`INVALID_INPUT`], its message naming every field and its fix; no
//! activity is scheduled and nothing in the world changes.
//!
//! The check issues no workflow command for a valid input, so every history recorded before it
//! replays unchanged and no patch marker is needed.
//!
//! # Which cluster a run is for
//!
//! Two sources, both compared with the input's `cluster`:
//!
//! 1. **The workflow ID** (`create/<cluster>/<machine>`, read by
//!    `nodewright_model::isolation::cluster_of_workflow_id`). It is part of the run's history, so
//!    reading it is deterministic on every worker and in replay, and the worker's activity guard
//!    (`worker/src/isolation.rs`) already admits activities only of runs whose ID names its
//!    cluster.
//! 2. **The worker's configured cluster**, set once by the worker at start-up with
//!    [`serve_cluster`] before it registers any workflow, and only read afterwards. The SDK gives
//!    workflow code no per-worker data (workflow interceptors need its `experimental` feature),
//!    so a process-wide value that never changes is the deterministic way to reach it: every
//!    workflow task of a run on this worker reads the same value. It catches what the ID alone
//!    cannot: a run of another cluster (ID and input agreeing) started on this cluster's task
//!    queue, refused before its first activity is scheduled rather than at it. Code that runs
//!    workflows without a worker of a cluster (replay tests, an in-test worker) leaves it unset,
//!    and only the workflow ID is compared.
//!
//! Task queue names are not used: `temporal.task_queue` may be configured to anything.

use std::sync::OnceLock;

use nodewright_model::ClusterName;
use nodewright_model::input::{InputError, check_cluster, check_subject};
use temporalio_sdk::{ApplicationFailure, WorkflowContext, WorkflowTermination};

use crate::progress::{HasStatus, fail};
use crate::search;

pub use nodewright_model::input::INVALID_INPUT;

/// The cluster of the worker in this process: set once at start-up by [`serve_cluster`].
static WORKER_CLUSTER: OnceLock<ClusterName> = OnceLock::new();

/// Records that this process's workflows run for `cluster` (the worker's configured cluster).
/// Call it once at start-up, before any workflow runs; a second call with the same cluster is
/// harmless.
///
/// # Errors
///
/// The cluster set before, when it is another one: one process serves one cluster.
pub fn serve_cluster(cluster: &ClusterName) -> Result<(), ClusterName> {
    let served = WORKER_CLUSTER.get_or_init(|| cluster.clone());
    if served == cluster {
        Ok(())
    } else {
        Err(served.clone())
    }
}

/// The cluster this process's workflows run for, when its worker set one.
pub fn served_cluster() -> Option<&'static ClusterName> {
    WORKER_CLUSTER.get()
}

/// What a run acts on, and where its input names it: the cluster, and for a run of one
/// machine, Node or pool the input's field and value (compared with the workflow ID's subject).
pub struct Subject<'a> {
    /// The input's `cluster`.
    pub cluster: &'a ClusterName,
    /// The input's field naming the machine, Node or pool (`machine`, `node`, `pool.name`) and
    /// its value; `None` for runs of a whole cluster (sweep, preflight).
    pub named: Option<(&'static str, &'a str)>,
}

/// The problems of an input of `workflow` acting on `subject`, whose own rules gave `checked`:
/// the cluster's (against the run's workflow ID and this worker's cluster) and the subject's
/// (against the workflow ID's) first, then the input's. Issues no command.
///
/// # Errors
///
/// [`InputError`] with every problem found.
pub fn check<W>(
    ctx: &WorkflowContext<W>,
    workflow: &'static str,
    subject: &Subject<'_>,
    checked: Result<(), InputError>,
) -> Result<(), InputError> {
    let mut errors = Vec::new();
    let workflow_id = ctx.workflow_id();
    if let Err(refused) = check_cluster(workflow, subject.cluster, workflow_id, served_cluster()) {
        errors.extend(refused.errors);
    }
    if let Some((field, value)) = subject.named
        && let Err(refused) = check_subject(workflow, field, value, workflow_id)
    {
        errors.extend(refused.errors);
    }
    if let Err(refused) = checked {
        errors.extend(refused.errors);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(InputError {
            workflow: workflow.to_owned(),
            errors,
        })
    }
}

/// Checks the input of a workflow that reports a machine status ([`check`]), and ends the run
/// failed (status, `NodewrightPhase=failed`, the UI's details line) when it is refused.
///
/// # Errors
///
/// The run's non-retryable [`INVALID_INPUT`] failure.
pub fn admit_machine_run<W: HasStatus>(
    ctx: &mut WorkflowContext<W>,
    workflow: &'static str,
    subject: &Subject<'_>,
    checked: Result<(), InputError>,
) -> Result<(), WorkflowTermination> {
    check(ctx, workflow, subject, checked)
        .map_err(|error| fail(ctx, INVALID_INPUT, error.to_string()))
}

/// Checks the input of any other workflow ([`check`]), and ends the run failed
/// (`NodewrightPhase=failed`, the UI's details line) when it is refused.
///
/// # Errors
///
/// The run's non-retryable [`INVALID_INPUT`] failure.
pub fn admit<W>(
    ctx: &mut WorkflowContext<W>,
    workflow: &'static str,
    subject: &Subject<'_>,
    checked: Result<(), InputError>,
) -> Result<(), WorkflowTermination> {
    check(ctx, workflow, subject, checked).map_err(|error| {
        let message = error.to_string();
        ctx.upsert_search_attributes([search::PHASE.value_set("failed".to_owned())]);
        ctx.set_current_details(message.clone());
        let error: Box<dyn std::error::Error + Send + Sync> = message.into();
        ApplicationFailure::builder(error)
            .type_name(INVALID_INPUT.to_owned())
            .non_retryable(true)
            .build()
            .into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_serves_one_cluster() {
        let cluster =
            |name: &str| ClusterName::parse("cluster", name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(serve_cluster(&cluster("local")), Ok(()));
        assert_eq!(serve_cluster(&cluster("local")), Ok(()));
        assert_eq!(serve_cluster(&cluster("other")), Err(cluster("local")));
        assert_eq!(served_cluster(), Some(&cluster("local")));
    }
}
