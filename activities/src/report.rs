//! What a workflow found, handed to the worker's metrics: a local activity a workflow runs at
//! its end with facts only its own state holds (a sweep's findings), so that the metrics are
//! recorded by an activity and never by workflow code. Reporting is best effort: the workflow
//! goes on whatever the answer.

use std::sync::Arc;

use nodewright_model::sweep::SweepFindings;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// The reporting activities (no outside system: the worker's own metrics).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReportActivities;

#[activities]
impl ReportActivities {
    /// Records a finished sweep's outcome and findings in `nodewright_sweep_runs_total` and
    /// `nodewright_sweep_findings`.
    ///
    /// # Idempotency
    /// A rerun counts the run again (a local activity reruns only when its workflow task failed
    /// after it).
    #[activity(name = "report.sweep_ended")]
    pub async fn sweep_ended(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: SweepFindings,
    ) -> Result<(), ActivityError> {
        crate::metrics::sweep_ended(&input);
        Ok(())
    }
}
