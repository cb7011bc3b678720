//! The controller's batch of creates (scale-up, replacements) cut to its headroom before it
//! starts (`crate::headroom`): how many start and in which zones, and the `CapacityAvailable`
//! condition's view of it. At zero room nothing starts; the next look checks again, so creates
//! resume by themselves when room returns.

use std::collections::BTreeSet;

use nodewright_model::controller::{CapacityView, WorkKind};
use nodewright_model::pool::ValidPool;
use nodewright_model::rollout::PoolVm;
use temporalio_sdk::WorkflowContext;

use super::children::Child;
use super::{PoolControllerWorkflow, note};
use crate::headroom::{Batch, cut_batch};

/// The patch that reads the headroom before a batch of creates; runs recorded before it
/// created what the decision asked for.
const HEADROOM_PATCH: &str = "controller-checks-headroom";

/// The creates to start now, at most `wanted`, and the zones they may use (the template's
/// less those where the size is restricted). `vms` are the pool's VMs as listed: a create in
/// flight whose VM is not among them is pending, not yet counted by ARM.
pub async fn fit_creates(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    pool: &ValidPool,
    vms: &[PoolVm],
    children: &[Child],
    wanted: u32,
) -> (u32, Vec<String>) {
    let zones = pool.template.zones.clone();
    if wanted == 0 || !ctx.patched(HEADROOM_PATCH) {
        return (wanted, zones);
    }
    let listed: BTreeSet<&str> = vms.iter().map(|vm| vm.name.as_str()).collect();
    let pending = children
        .iter()
        .filter(|c| c.work.kind == WorkKind::Create && !listed.contains(c.machine.as_str()))
        .count();
    let batch = Batch {
        template: &pool.template,
        wanted,
        pending: u32::try_from(pending).unwrap_or(u32::MAX),
        buffer: pool.headroom,
    };
    match cut_batch(ctx, &batch).await {
        Ok(cut) => {
            let view = CapacityView::of(wanted, &cut);
            let changed = ctx.state_mut(|s| {
                let changed = s.state.capacity != view;
                s.state.capacity = view.clone();
                changed
            });
            if changed && let Some(limit) = &cut.limit {
                note(
                    ctx,
                    format!(
                        "creating {} of {wanted} machines now: {}",
                        cut.machines,
                        limit.message()
                    ),
                );
            }
            let skipped = if changed { cut.skipped.as_slice() } else { &[] };
            for zone in skipped {
                note(
                    ctx,
                    format!(
                        "zone {} skipped: {} is restricted there ({})",
                        zone.zone, pool.template.vm_size, zone.reason
                    ),
                );
            }
            (cut.machines, cut.zones)
        }
        Err(reason) => {
            note(
                ctx,
                format!("could not read the headroom ({reason}); creating without the check"),
            );
            (wanted, zones)
        }
    }
}
