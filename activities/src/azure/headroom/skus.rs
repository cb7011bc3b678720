//! The VM sizes of a location from the resource SKUs (`GET /subscriptions/{sub}/providers/
//! Microsoft.Compute/skus?$filter=location eq '…'`), kept an hour: the list is large (every
//! resource type and size of the location) and changes rarely.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nodewright_model::headroom::Restriction;
use serde::Deserialize;

use crate::azure::{ArmClient, Error, Result};

/// The api-version of the resource SKUs.
pub const API_VERSION: &str = "2021-07-01";

/// How long a location's SKUs are kept.
const KEPT_FOR: Duration = Duration::from_secs(3600);

/// The reason given for a size the location's SKUs do not list.
pub const NOT_OFFERED: &str = "NotOfferedInLocation";

/// What a create needs to know about a VM size in a location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeFacts {
    /// Its vCPU quota family (`standardDSv5Family`).
    pub family: Option<String>,
    /// Its vCPUs.
    pub vcpus: u64,
    /// Its restrictions for this subscription.
    pub restrictions: Vec<Restriction>,
}

/// One resource SKU.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Sku {
    #[serde(default)]
    resource_type: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    family: Option<String>,
    #[serde(default)]
    capabilities: Vec<Capability>,
    #[serde(default)]
    restrictions: Vec<SkuRestriction>,
}

#[derive(Debug, Deserialize)]
struct Capability {
    #[serde(default)]
    name: String,
    #[serde(default)]
    value: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SkuRestriction {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    restriction_info: RestrictionInfo,
    #[serde(default)]
    reason_code: String,
}

#[derive(Debug, Default, Deserialize)]
struct RestrictionInfo {
    #[serde(default)]
    zones: Vec<String>,
}

impl Sku {
    fn facts(&self) -> SizeFacts {
        let vcpus = self
            .capabilities
            .iter()
            .find(|c| c.name == "vCPUs")
            .and_then(|c| c.value.parse().ok())
            .unwrap_or(0);
        let restrictions = self
            .restrictions
            .iter()
            .filter_map(|r| match r.kind.as_str() {
                "Location" => Some(Restriction {
                    zones: Vec::new(),
                    reason: r.reason_code.clone(),
                }),
                "Zone" if !r.restriction_info.zones.is_empty() => Some(Restriction {
                    zones: r.restriction_info.zones.clone(),
                    reason: r.reason_code.clone(),
                }),
                _ => None,
            })
            .collect();
        SizeFacts {
            family: self.family.clone(),
            vcpus,
            restrictions,
        }
    }
}

/// A location's VM sizes by lower-case name, and when they were read.
type Kept = (Instant, String, BTreeMap<String, SizeFacts>);

/// The VM sizes of the worker's location, read at most once an hour.
#[derive(Debug, Default)]
pub struct SkuCache {
    kept: Mutex<Option<Kept>>,
}

impl SkuCache {
    /// The facts of `size` in `location`; a size the location does not offer is restricted in
    /// the whole location ([`NOT_OFFERED`]).
    pub async fn size(&self, client: &ArmClient, location: &str, size: &str) -> Result<SizeFacts> {
        let key = size.to_ascii_lowercase();
        if let Some(facts) = self.kept_facts(location, &key) {
            return Ok(facts);
        }
        let sizes = read(client, location).await?;
        let facts = sizes.get(&key).cloned();
        if let Ok(mut kept) = self.kept.lock() {
            *kept = Some((Instant::now(), location.to_owned(), sizes));
        }
        Ok(facts.unwrap_or_else(|| SizeFacts {
            family: None,
            vcpus: 0,
            restrictions: vec![Restriction {
                zones: Vec::new(),
                reason: NOT_OFFERED.to_owned(),
            }],
        }))
    }

    /// The kept facts of `key`, when the location's list is fresh and lists it (a size it does
    /// not list is read again: it may be new).
    fn kept_facts(&self, location: &str, key: &str) -> Option<SizeFacts> {
        let kept = self.kept.lock().ok()?;
        let (at, kept_location, sizes) = kept.as_ref()?;
        (at.elapsed() < KEPT_FOR && kept_location.eq_ignore_ascii_case(location))
            .then(|| sizes.get(key).cloned())
            .flatten()
    }
}

/// Every VM size of `location`.
async fn read(client: &ArmClient, location: &str) -> Result<BTreeMap<String, SizeFacts>> {
    let path = format!(
        "/subscriptions/{}/providers/Microsoft.Compute/skus",
        client.subscription_id()
    );
    let mut url = client.id_url(&path, API_VERSION);
    url.query_pairs_mut()
        .append_pair("$filter", &format!("location eq '{location}'"));
    let skus: Vec<Sku> = client
        .list(url)
        .await
        .map_err(|source| Error::ReadCapacity {
            what: format!("the resource SKUs of {location}"),
            source,
        })?;
    Ok(skus
        .into_iter()
        .filter(|sku| sku.resource_type.eq_ignore_ascii_case("virtualMachines"))
        .map(|sku| (sku.name.to_ascii_lowercase(), sku.facts()))
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_skus_vcpus_family_and_restrictions_are_read_as_azure_lists_them() {
        let sku: Sku = serde_json::from_value(json!({
            "resourceType": "virtualMachines",
            "name": "Standard_D4s_v5",
            "family": "standardDSv5Family",
            "capabilities": [{"name": "MemoryGB", "value": "16"}, {"name": "vCPUs", "value": "4"}],
            "restrictions": [
                {"type": "Zone", "values": ["westeurope"], "restrictionInfo": {"locations": ["westeurope"], "zones": ["2", "3"]}, "reasonCode": "NotAvailableForSubscription"},
                {"type": "Location", "values": ["westeurope"], "restrictionInfo": {"locations": ["westeurope"]}, "reasonCode": "QuotaId"},
                {"type": "Zone", "values": ["westeurope"], "restrictionInfo": {"locations": ["westeurope"]}, "reasonCode": "Empty"}
            ]
        }))
        .unwrap();
        let facts = sku.facts();
        assert_eq!(facts.vcpus, 4);
        assert_eq!(facts.family.as_deref(), Some("standardDSv5Family"));
        assert_eq!(
            facts.restrictions,
            vec![
                Restriction {
                    zones: vec!["2".to_owned(), "3".to_owned()],
                    reason: "NotAvailableForSubscription".to_owned()
                },
                Restriction {
                    zones: Vec::new(),
                    reason: "QuotaId".to_owned()
                },
            ]
        );
    }
}
