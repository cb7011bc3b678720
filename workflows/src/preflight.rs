#![doc = include_str!("../runbooks/preflight.md")]

use nodewright_activities::azure::headroom::HeadroomActivities;
use nodewright_activities::kube::KubeActivities;
use nodewright_model::input::check_preflight_pools;
use nodewright_model::preflight::{PoolHeadroom, PreflightPool, PreflightReport};
use nodewright_model::workflow_type;
use nodewright_model::{ClusterName, Operation};
use serde::{Deserialize, Serialize};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{WorkflowContext, WorkflowContextView, WorkflowResult};

use crate::progress::activity_failure_text;
use crate::{activity_options, cancellation, search};

/// What to check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreflightInput {
    /// The cluster the starter believes the worker manages; the report echoes it.
    pub cluster: ClusterName,
    /// The pools whose headroom to report (from `--pool` files; where their machines go only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PreflightPool>,
}

/// The answer to the `status` query.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreflightStatus {
    /// The step the run is in: `started`, `inspecting-kubernetes`, `reading-headroom`, `done`
    /// or `canceled`.
    pub phase: String,
    /// The report, once the run has it.
    pub report: Option<PreflightReport>,
}

/// Checks that the worker reaches and can read the Kubernetes cluster it manages.
#[workflow]
#[derive(Default)]
pub struct PreflightWorkflow {
    status: PreflightStatus,
}

#[workflow_methods]
impl PreflightWorkflow {
    /// Runs the check; see the runbook above.
    #[run(name = workflow_type::PREFLIGHT)]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        input: PreflightInput,
    ) -> WorkflowResult<PreflightReport> {
        crate::input::admit(
            ctx,
            workflow_type::PREFLIGHT,
            &crate::input::Subject {
                cluster: &input.cluster,
                named: None,
            },
            check_preflight_pools(&input.pools),
        )?;
        ctx.upsert_search_attributes([
            search::CLUSTER.value_set(input.cluster.to_string()),
            search::OPERATION.value_set(Operation::Preflight.to_string()),
        ]);
        if cancellation::requested(ctx) {
            ctx.state_mut(|s| s.status.phase = "canceled".to_owned());
            return Err(cancellation::end_reading(ctx, "none"));
        }
        enter_phase(ctx, "inspecting-kubernetes");
        let kubernetes = ctx
            .execute_activity(
                KubeActivities::inspect_kubernetes,
                (),
                activity_options::read(),
            )
            .await;
        if cancellation::requested(ctx) {
            ctx.state_mut(|s| s.status.phase = "canceled".to_owned());
        }
        let kubernetes = cancellation::read(ctx, "inspecting-kubernetes", kubernetes)?;
        let mut headroom = Vec::new();
        if !input.pools.is_empty() {
            enter_phase(ctx, "reading-headroom");
        }
        for pool in &input.pools {
            if cancellation::requested(ctx) {
                ctx.state_mut(|s| s.status.phase = "canceled".to_owned());
                return Err(cancellation::end_reading(ctx, "reading-headroom"));
            }
            let read = ctx
                .execute_activity(
                    HeadroomActivities::read_headroom,
                    pool.question.clone(),
                    activity_options::read(),
                )
                .await
                .map_err(|error| activity_failure_text(&error));
            headroom.push(PoolHeadroom::of(pool, read));
        }
        let report = PreflightReport {
            cluster: input.cluster.to_string(),
            kubernetes,
            headroom,
        };
        ctx.state_mut(|s| s.status.report = Some(report.clone()));
        enter_phase(ctx, "done");
        Ok(report)
    }

    /// The current phase and, once known, the report.
    #[query(name = "status")]
    pub fn status(&self, _ctx: &WorkflowContextView) -> PreflightStatus {
        self.status.clone()
    }
}

/// Records the phase in the state (for `status`), the search attribute and the UI's details.
fn enter_phase(ctx: &mut WorkflowContext<PreflightWorkflow>, phase: &str) {
    ctx.state_mut(|s| s.status.phase = phase.to_owned());
    ctx.upsert_search_attributes([search::PHASE.value_set(phase.to_owned())]);
    ctx.set_current_details(format!("phase: {phase}"));
}
