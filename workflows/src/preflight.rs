#![doc = include_str!("../runbooks/preflight.md")]

use nodewright_activities::kube::KubeActivities;
use nodewright_model::workflow_type;
use nodewright_model::{ClusterName, Operation, preflight::PreflightReport};
use serde::{Deserialize, Serialize};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{WorkflowContext, WorkflowContextView, WorkflowResult};

use crate::{activity_options, cancellation, search};

/// What to check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreflightInput {
    /// The cluster the starter believes the worker manages; the report echoes it.
    pub cluster: ClusterName,
}

/// The answer to the `status` query.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreflightStatus {
    /// The step the run is in: `started`, `inspecting-kubernetes`, `done` or `canceled`.
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
            Ok(()),
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
        let report = PreflightReport {
            cluster: input.cluster.to_string(),
            kubernetes,
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
