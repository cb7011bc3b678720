//! Headroom before creates, read from ARM: the subnet's free addresses (the virtual network's
//! usages), the vCPU quotas of the location (the compute usages) and the VM size's vCPUs and
//! restrictions (the resource SKUs, kept an hour). The arithmetic is `model::headroom`; this
//! module only reads.
//!
//! Three GETs a read at most, and one when the SKUs are kept: a batch of creates asks before
//! it starts, a steady pool never. The worker's identity needs `virtualNetworks/read` on the
//! subnet's network and `Microsoft.Compute/locations/usages/read` and `skus/read` on the
//! subscription (the README's role lists them).

mod quota;
mod skus;
mod subnet;

use std::sync::Arc;

use nodewright_model::headroom::{HeadroomQuestion, HeadroomReading, QuotaRoom};
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

pub use skus::{SizeFacts, SkuCache};

use crate::azure::{ArmClient, Error, Result};
use crate::lifetime;

/// The headroom reads: registered on the main task queue.
pub struct HeadroomActivities {
    client: ArmClient,
    location: String,
    skus: SkuCache,
}

impl HeadroomActivities {
    /// Reads through `client` in `location` (the worker's, where it creates).
    pub fn new(client: ArmClient, location: impl Into<String>) -> Self {
        Self {
            client,
            location: location.into(),
            skus: SkuCache::default(),
        }
    }

    /// What ARM says about the room for `question`'s machines.
    pub async fn read(&self, question: &HeadroomQuestion) -> Result<HeadroomReading> {
        let size = self
            .skus
            .size(&self.client, &self.location, &question.vm_size)
            .await?;
        let subnet = subnet::usage(&self.client, &question.subnet_id).await?;
        let usages = quota::usages(&self.client, &self.location).await?;
        let mut quotas: Vec<QuotaRoom> = Vec::new();
        if let Some(regional) = quota::find(&usages, quota::REGIONAL, "regional vCPUs") {
            quotas.push(regional);
        }
        if let Some(family) = size.family.as_deref()
            && let Some(room) = quota::find(&usages, family, &format!("{family} vCPUs"))
        {
            quotas.push(room);
        }
        Ok(HeadroomReading {
            location: self.location.clone(),
            subnet,
            quotas,
            vcpus: size.vcpus,
            restrictions: size.restrictions,
        })
    }
}

#[activities]
impl HeadroomActivities {
    /// The room for a batch of machines of one template: the subnet's usage, the vCPU quotas
    /// that apply to its size, the size's vCPUs and restrictions in the worker's location.
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "azure.read_headroom")]
    pub async fn read_headroom(
        self: Arc<Self>,
        ctx: ActivityContext,
        question: HeadroomQuestion,
    ) -> Result<HeadroomReading, ActivityError> {
        lifetime::heartbeating(&ctx, self.read(&question))
            .await
            .map_err(Error::into_activity_error)
    }
}

#[cfg(test)]
mod tests;
