//! Headroom before a batch of creates, for the rollout and the pool controller: one read of the
//! template's subnet, quotas and size (`azure.read_headroom`), then `model::headroom::cut`.
//!
//! A read that fails does not stop the batch: the workflow notes why and creates as it did
//! before headroom was checked (a worker whose identity lacks the new read permissions keeps
//! working; Azure's own refusals still fail a create cleanly).

use nodewright_activities::azure::headroom::HeadroomActivities;
use nodewright_model::headroom::{Buffer, Cut, HeadroomQuestion, cut};
use nodewright_model::pool::MachineTemplate;
use temporalio_sdk::WorkflowContext;

use crate::activity_options;
use crate::progress::activity_failure_text;

/// A batch of `wanted` machines of `template`, with `pending` already started that ARM does
/// not count yet.
pub struct Batch<'a> {
    /// The template the machines are made from.
    pub template: &'a MachineTemplate,
    /// Machines the plan wants to start.
    pub wanted: u32,
    /// Machines started whose VM is not listed yet.
    pub pending: u32,
    /// What is kept free (`spec.headroom.buffer`).
    pub buffer: Buffer,
}

/// The batch cut to its headroom, or why the headroom could not be read.
pub async fn cut_batch<W>(ctx: &mut WorkflowContext<W>, batch: &Batch<'_>) -> Result<Cut, String> {
    let question = HeadroomQuestion {
        subnet_id: batch.template.subnet_id.clone(),
        vm_size: batch.template.vm_size.clone(),
        zones: batch.template.zones.clone(),
    };
    let reading = ctx
        .execute_activity(
            HeadroomActivities::read_headroom,
            question.clone(),
            activity_options::read(),
        )
        .await
        .map_err(|error| activity_failure_text(&error))?;
    Ok(cut(
        batch.wanted,
        &question,
        &reading,
        batch.buffer,
        batch.pending,
    ))
}
