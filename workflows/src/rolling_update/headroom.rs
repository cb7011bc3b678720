//! The rollout's batch of creates cut to its headroom before it starts: the plan's creates
//! shrink to what the subnet, the vCPU quotas and the size's restrictions leave room for
//! (`crate::headroom`), zones where the size is restricted are avoided like exhausted ones, and
//! the status names the limit (`capacity`). At zero room the plan starts no create and the
//! rollout waits (`Holdup::Capacity`) until a later look finds room.

use std::collections::BTreeSet;

use nodewright_model::capacity::mark_exhausted;
use nodewright_model::rollout::{Holdup, Plan, RolloutRequest};
use temporalio_sdk::WorkflowContext;

use super::state::HasRollout;
use super::status::note;
use crate::headroom::{Batch, cut_batch};

/// The patch that reads the headroom before a batch of creates; runs recorded before it
/// created what the plan asked for.
const HEADROOM_PATCH: &str = "rollout-checks-headroom";

/// `decided` with its creates cut to the headroom. `creating` are the machines of the creates
/// in flight (this run's and inherited ones): those whose VM the last listing lacks are
/// pending, not yet counted by ARM. `at` is now, Unix seconds.
pub async fn fit_to_headroom<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    creating: &[&str],
    mut decided: Plan,
    at: i64,
) -> Plan {
    if decided.create == 0 || !ctx.patched(HEADROOM_PATCH) {
        return decided;
    }
    // The VMs as listed: the observed machines also hold the creates in flight without a VM.
    let listed: BTreeSet<String> = ctx.state(|s| {
        s.rollout()
            .known_vms
            .as_ref()
            .map(|(_, vms)| vms.iter().map(|vm| vm.name.clone()).collect())
            .unwrap_or_default()
    });
    let pending = creating.iter().filter(|m| !listed.contains(**m)).count();
    let template = &request.pool.template;
    let batch = Batch {
        template,
        wanted: decided.create,
        pending: u32::try_from(pending).unwrap_or(u32::MAX),
        buffer: request.pool.headroom,
    };
    let cut = match cut_batch(ctx, &batch).await {
        Ok(cut) => cut,
        Err(reason) => {
            note(
                ctx,
                format!("could not read the headroom ({reason}); creating without the check"),
            );
            return decided;
        }
    };
    let limit = cut.limit.as_ref().map(|limit| limit.message());
    let changed = ctx.state_mut(|s| {
        let mut changed = false;
        s.rollout_mut().with_status(|status| {
            for skipped in &cut.skipped {
                mark_exhausted(
                    &mut status.exhausted,
                    &template.vm_size,
                    &skipped.zone,
                    &skipped.reason,
                    at,
                );
            }
            changed = status.capacity != limit;
            status.capacity.clone_from(&limit);
        });
        changed
    });
    if changed && let Some(limit) = &limit {
        note(
            ctx,
            format!(
                "creating {} of {} new machines now: {limit}",
                cut.machines, decided.create
            ),
        );
    }
    decided.create = cut.machines;
    if decided.create == 0 && decided.delete.is_empty() && decided.holdup.is_none() {
        decided.holdup = Some(Holdup::Capacity);
    }
    decided
}
