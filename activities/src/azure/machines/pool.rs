//! A pool's VMs as a rolling update observes them: every VM of the resource group tagged with
//! exactly this cluster and the pool, with its template hash, creation time, provisioning
//! state and availability zone.

use std::collections::BTreeMap;

use nodewright_model::ClusterName;
use nodewright_model::ownership::{
    MAX_TAG_VALUE_CHARS, TAG_CREATED, TAG_DRAIN, TAG_POOL, TAG_TEMPLATE, is_owned_by,
};
use nodewright_model::rollout::PoolVm;
use serde::{Deserialize, Serialize};

use super::MachineError;
use crate::azure::ArmClient;
use crate::azure::virtual_machines::VirtualMachine;

/// List the VMs of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPoolVms {
    /// The owning cluster: only VMs with exactly its `nodewright.io-cluster` tag are listed.
    pub cluster: ClusterName,
    /// The pool: only VMs whose `nodewright.io-pool` tag is this are listed.
    pub pool: String,
}

/// Lists the resource group's VMs (every page) and keeps the pool's, sorted by name.
pub async fn list_pool_vms(
    client: &ArmClient,
    input: &ListPoolVms,
) -> Result<Vec<PoolVm>, MachineError> {
    let vms = client.list_vms().await?;
    let mut pool: Vec<PoolVm> = vms
        .iter()
        .filter_map(|vm| pool_vm(vm, &input.cluster, &input.pool))
        .collect();
    pool.sort_by(|a, b| a.name.cmp(&b.name));
    tracing::debug!(
        pool = %input.pool,
        listed = vms.len(),
        kept = pool.len(),
        "listed the pool's VMs"
    );
    Ok(pool)
}

/// The VM as the pool sees it, when it is this cluster's and the pool's (and has a name).
pub fn pool_vm(vm: &VirtualMachine, cluster: &ClusterName, pool: &str) -> Option<PoolVm> {
    if !in_pool(&vm.tags, cluster, pool) {
        return None;
    }
    let Some(name) = vm.name.clone() else {
        tracing::warn!(
            id = vm.id.as_deref().unwrap_or("(none)"),
            "a VM of the pool is listed without a name; skipped"
        );
        return None;
    };
    Some(PoolVm {
        name,
        template_hash: vm.tags.get(TAG_TEMPLATE).cloned().unwrap_or_default(),
        created_at: created_at(&vm.tags),
        provisioning_state: vm.properties.provisioning_state.clone().unwrap_or_default(),
        zone: vm.zones.as_ref().and_then(|zones| zones.first()).cloned(),
        // Azure bounds a tag value; a longer one (not Azure's) is not carried.
        drain_tag: vm
            .tags
            .get(TAG_DRAIN)
            .filter(|value| value.chars().count() <= MAX_TAG_VALUE_CHARS)
            .cloned(),
        power_state: None,
    })
}

/// Whether `tags` carry exactly this cluster and the pool.
fn in_pool(tags: &BTreeMap<String, String>, cluster: &ClusterName, pool: &str) -> bool {
    is_owned_by(tags, cluster) && tags.get(TAG_POOL).map(String::as_str) == Some(pool)
}

/// The `nodewright.io-created` tag (RFC 3339) as Unix seconds; 0 when missing or unreadable.
fn created_at(tags: &BTreeMap<String, String>) -> i64 {
    tags.get(TAG_CREATED)
        .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
        .map_or(0, |time| time.timestamp())
}

#[cfg(test)]
mod tests {
    use nodewright_model::ownership::TAG_CLUSTER;
    use serde_json::{Value, json};

    use super::*;

    fn cluster(name: &str) -> ClusterName {
        ClusterName::parse("cluster", name).unwrap_or_else(|e| panic!("{e}"))
    }

    fn vm(name: &str, tags: Value, state: Option<&str>) -> VirtualMachine {
        serde_json::from_value(json!({
            "name": name,
            "location": "westeurope",
            "tags": tags,
            "properties": { "provisioningState": state },
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_zone_is_the_vms_first_zone_or_none() {
        let prod = cluster("prod");
        let tags = json!({ TAG_CLUSTER: "prod", TAG_POOL: "web" });
        let mut zoned = vm("web-abcde", tags.clone(), Some("Succeeded"));
        zoned.zones = Some(vec!["2".to_owned()]);
        assert_eq!(
            pool_vm(&zoned, &prod, "web").and_then(|v| v.zone),
            Some("2".to_owned())
        );
        let unzoned = vm("web-fghij", tags, Some("Succeeded"));
        assert_eq!(pool_vm(&unzoned, &prod, "web").and_then(|v| v.zone), None);
        // A result recorded before the zone was read still reads.
        let old: PoolVm = serde_json::from_value(json!({
            "name": "web-abcde",
            "templateHash": "7f3a9c",
            "createdAt": 1,
            "provisioningState": "Succeeded",
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(old.zone, None);
    }

    #[test]
    fn only_vms_tagged_with_exactly_the_cluster_and_the_pool_are_kept() {
        let prod = cluster("prod");
        let table = [
            (
                "ours",
                json!({ TAG_CLUSTER: "prod", TAG_POOL: "web" }),
                true,
            ),
            (
                "another pool",
                json!({ TAG_CLUSTER: "prod", TAG_POOL: "db" }),
                false,
            ),
            (
                "a pool with a longer name",
                json!({ TAG_CLUSTER: "prod", TAG_POOL: "web2" }),
                false,
            ),
            (
                "another cluster",
                json!({ TAG_CLUSTER: "prod-weu", TAG_POOL: "web" }),
                false,
            ),
            ("no cluster tag", json!({ TAG_POOL: "web" }), false),
            ("untagged", json!({}), false),
        ];
        for (case, tags, expected) in table {
            assert_eq!(
                pool_vm(&vm("web-abcde", tags, None), &prod, "web").is_some(),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn template_creation_time_and_state_come_from_tags_and_properties() {
        let prod = cluster("prod");
        let tagged = vm(
            "web-abcde",
            json!({
                TAG_CLUSTER: "prod",
                TAG_POOL: "web",
                TAG_TEMPLATE: "7f3a9c",
                TAG_CREATED: "2026-01-02T03:04:05Z",
            }),
            Some("Succeeded"),
        );
        assert_eq!(
            pool_vm(&tagged, &prod, "web"),
            Some(PoolVm {
                name: "web-abcde".to_owned(),
                template_hash: "7f3a9c".to_owned(),
                created_at: 1_767_323_045,
                provisioning_state: "Succeeded".to_owned(),
                zone: None,
                drain_tag: None,
                power_state: None,
            })
        );
        let bare = vm(
            "web-fghij",
            json!({ TAG_CLUSTER: "prod", TAG_POOL: "web" }),
            None,
        );
        assert_eq!(
            pool_vm(&bare, &prod, "web"),
            Some(PoolVm {
                name: "web-fghij".to_owned(),
                template_hash: String::new(),
                created_at: 0,
                provisioning_state: String::new(),
                zone: None,
                drain_tag: None,
                power_state: None,
            })
        );
    }

    #[test]
    fn creation_times_read_as_rfc3339_with_offsets_and_fractions_or_zero() {
        let table = [
            ("2026-01-02T03:04:05Z", 1_767_323_045),
            ("2026-01-02T04:04:05+01:00", 1_767_323_045),
            ("2026-01-02T03:04:05.789Z", 1_767_323_045),
            ("2026-01-02 03:04:05", 0),
            ("yesterday", 0),
            ("", 0),
        ];
        for (text, expected) in table {
            let tags = BTreeMap::from([(TAG_CREATED.to_owned(), text.to_owned())]);
            assert_eq!(created_at(&tags), expected, "{text:?}");
        }
        assert_eq!(created_at(&BTreeMap::new()), 0);
    }
}
