#![doc = include_str!("../runbooks/inspect_pool.md")]

use nodewright_activities::azure::machines::{ArmReadActivities, ListPoolVms, VmSource};
use nodewright_activities::kube::{KubeActivities, ListPoolNodes, ReadRevisions};
use nodewright_model::Operation;
use nodewright_model::rollout::revisions::config_map_name;
use nodewright_model::rollout::{
    InspectPoolRequest, PoolReport, PoolRevisions, StoredRevisions, observe,
};
use nodewright_model::workflow_type;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{WorkflowContext, WorkflowResult, WorkflowTermination};

use crate::progress::{activity_failure_text, now};
use crate::search;
use crate::{activity_options, cancellation, input};

/// Looks at a pool's machines; see the runbook above.
#[workflow]
#[derive(Default)]
pub struct InspectPoolWorkflow;

#[workflow_methods]
impl InspectPoolWorkflow {
    /// Runs the runbook.
    #[run(name = workflow_type::INSPECT_POOL)]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: InspectPoolRequest,
    ) -> WorkflowResult<PoolReport> {
        input::admit(
            ctx,
            workflow_type::INSPECT_POOL,
            &input::Subject {
                cluster: &request.cluster,
                named: Some(("pool", &request.pool)),
            },
            request.check(),
        )?;
        ctx.upsert_search_attributes([
            search::CLUSTER.value_set(request.cluster.to_string()),
            search::POOL.value_set(request.pool.clone()),
            search::OPERATION.value_set(Operation::Inspect.to_string()),
        ]);
        if cancellation::requested(ctx) {
            return Err(cancellation::end_reading(ctx, "none"));
        }
        let vms = ctx
            .execute_activity(
                ArmReadActivities::list_pool_vms,
                ListPoolVms {
                    cluster: request.cluster.clone(),
                    pool: request.pool.clone(),
                    instance_view: false,
                    source: VmSource::ResourceGroup,
                    expected: Vec::new(),
                },
                activity_options::paged(activity_options::read()),
            )
            .await;
        let vms = cancellation::read(ctx, "list-pool-vms", vms)?;
        let nodes = ctx
            .execute_activity(
                KubeActivities::list_pool_nodes,
                ListPoolNodes {
                    pool: request.pool.clone(),
                    lease_timeout_secs: None,
                },
                activity_options::read(),
            )
            .await;
        let nodes = cancellation::read(ctx, "list-pool-nodes", nodes)?;
        let revisions = if ctx.patched(REVISIONS_PATCH) {
            Some(read_revisions(ctx, &request.pool).await?)
        } else {
            None
        };
        Ok(PoolReport {
            pool: request.pool.clone(),
            machines: observe(&vms, &nodes, &[], ""),
            observed_at: now(ctx).timestamp(),
            revisions,
        })
    }
}

/// Patch marker of the revisions' read: runs recorded before it replay unchanged.
const REVISIONS_PATCH: &str = "inspect-reads-revisions";

/// Reads the pool's revisions ConfigMap; a read that fails is reported in it, not as the run's
/// failure (the machines were seen).
async fn read_revisions(
    ctx: &mut WorkflowContext<InspectPoolWorkflow>,
    pool: &str,
) -> Result<PoolRevisions, WorkflowTermination> {
    let answer = ctx
        .execute_activity(
            KubeActivities::read_revisions,
            ReadRevisions {
                pool: pool.to_owned(),
            },
            activity_options::read(),
        )
        .await;
    if cancellation::requested(ctx) {
        return Err(cancellation::end_reading(ctx, "read-revisions"));
    }
    Ok(answer.unwrap_or_else(|error| PoolRevisions {
        config_map: config_map_name(pool),
        stored: StoredRevisions::Unreadable(activity_failure_text(&error)),
    }))
}
