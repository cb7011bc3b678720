//! PoolController and its RollingUpdate child while it runs: what the controller tells it when
//! the pool changes under it (`model::controller::steer`: a new template or a deletion aborts
//! it, new replicas are signalled), and how its end is booked (the pool's templates, and a
//! template whose rollout did not complete held, so that an operator's abort is not undone).

use nodewright_model::controller::{InFlight, RolloutEnd, Steer, steer};
use nodewright_model::pool::ValidPool;
use nodewright_model::{ClusterName, Operation};
use temporalio_sdk::{SignalWorkflowOptions, WorkflowContext};

use super::{PoolControllerWorkflow, note};
use crate::rolling_update::RollingUpdateWorkflow;

/// Tells the rollout in flight what changed under it: a new template or the pool's deletion
/// aborts it (after a new template the next one starts when it has ended), new replicas are
/// planned with from its next look.
pub async fn steer_rollout(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    cluster: &ClusterName,
    pool: &ValidPool,
    flight: &mut InFlight,
    deleting: bool,
) {
    let workflow_id =
        nodewright_model::WorkflowId::for_subject(Operation::Rollout, cluster, &pool.name);
    let handle = ctx.external_workflow(workflow_id.to_string(), None);
    let (sent, what) = match steer(flight, pool, deleting) {
        Steer::Nothing => return,
        Steer::Abort => {
            flight.aborting = true;
            let (by, why) = if deleting {
                (
                    format!("controller: pool {} deleted", pool.name),
                    "the pool is being deleted".to_owned(),
                )
            } else {
                (
                    format!(
                        "controller: pool {} applied with template {}",
                        pool.name, pool.template_hash
                    ),
                    format!(
                        "for the newer template {}; machines in flight finish, the new rollout starts next",
                        pool.template_hash
                    ),
                )
            };
            let options = SignalWorkflowOptions::default();
            (
                handle
                    .signal(RollingUpdateWorkflow::abort, by, options)
                    .await,
                format!(
                    "aborting the rollout to template {} ({why})",
                    flight.template_hash
                ),
            )
        }
        Steer::Scale(replicas) => {
            flight.replicas = replicas;
            let options = SignalWorkflowOptions::default();
            (
                handle
                    .signal(RollingUpdateWorkflow::scale, replicas, options)
                    .await,
                format!("the rollout in flight now rolls {replicas} machines"),
            )
        }
    };
    match sent {
        Ok(()) => note(ctx, what),
        Err(e) => note(
            ctx,
            format!("could not tell {workflow_id} ({e}); it ends as it was"),
        ),
    }
}

/// Books the end of the controller's rollout: the pool's templates, and a template whose
/// rollout did not complete is held (not rolled to again on the controller's own account).
pub fn rollout_ended(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    pool: &ValidPool,
    template: String,
    end: RolloutEnd,
) {
    let name = &pool.name;
    ctx.state_mut(|s| s.state.rolling_out = false);
    let line = match end {
        RolloutEnd::Completed(history) => {
            ctx.state_mut(|s| {
                s.state.history = history;
                s.state.held_template = None;
            });
            format!("the rollout of pool {name} to template {template} completed")
        }
        RolloutEnd::Stopped(history) => {
            let newer = template != pool.template_hash;
            ctx.state_mut(|s| {
                s.state.history = history;
                s.state.held_template = Some(template.clone());
            });
            if newer {
                format!(
                    "the rollout of pool {name} to template {template} stopped; rolling to template {} next",
                    pool.template_hash
                )
            } else {
                format!(
                    "the rollout of pool {name} to template {template} stopped without completing: the controller does not roll to it again on its own (`nodewright pool rollout` or a new template does)"
                )
            }
        }
        RolloutEnd::Failed(reason) => {
            ctx.state_mut(|s| s.state.held_template = Some(template.clone()));
            format!(
                "the rollout of pool {name} to template {template} failed ({reason}): the controller does not roll to it again on its own"
            )
        }
    };
    note(ctx, line);
}
