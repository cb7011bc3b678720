//! The compute quotas of a location (`GET /subscriptions/{sub}/providers/Microsoft.Compute/
//! locations/{location}/usages`): `cores` is the region's vCPU quota, each size family's
//! (`standardDSv5Family`) its own.

use nodewright_model::headroom::QuotaRoom;
use serde::Deserialize;

use crate::azure::virtual_machines::API_VERSION;
use crate::azure::{ArmClient, Error, Result};

/// The usage name of the region's vCPU quota.
pub const REGIONAL: &str = "cores";

/// One quota and its use.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(default)]
    name: UsageName,
    #[serde(default)]
    current_value: u64,
    #[serde(default)]
    limit: u64,
}

/// A usage's name.
#[derive(Debug, Default, Deserialize)]
struct UsageName {
    #[serde(default)]
    value: String,
}

/// Every compute usage of `location`.
pub async fn usages(client: &ArmClient, location: &str) -> Result<Vec<Usage>> {
    let path = format!(
        "/subscriptions/{}/providers/Microsoft.Compute/locations/{location}/usages",
        client.subscription_id()
    );
    client
        .list(client.id_url(&path, API_VERSION))
        .await
        .map_err(|source| Error::ReadCapacity {
            what: format!("the compute usages of {location}"),
            source,
        })
}

/// The quota named `name` (case-insensitive), called `label` in messages.
pub fn find(usages: &[Usage], name: &str, label: &str) -> Option<QuotaRoom> {
    usages
        .iter()
        .find(|usage| usage.name.value.eq_ignore_ascii_case(name))
        .map(|usage| QuotaRoom {
            name: label.to_owned(),
            limit: usage.limit,
            used: usage.current_value,
        })
}
