//! A pool's VMs as a rolling update observes them: every VM of the resource group tagged with
//! exactly this cluster and the pool, with its template hash, creation time, provisioning
//! state and availability zone, and, when asked (a pool controller's look), its power state.
//!
//! ARM gives no list of a resource group's VMs with their instance views: `$expand=instanceView`
//! on that list is refused without a scale set `$filter` (azure-rest-api-specs
//! `VirtualMachines_List`), and `statusOnly=true` is documented for the subscription's list
//! only, whose answer may lack tags. So power states come from a second list, the
//! subscription's statuses, joined by VM id with the resource group's list, which alone says
//! which VMs are the pool's: two lists per look, never a GET per VM.

use nodewright_model::pool::CapacityType;
use nodewright_model::pool::capacity_type::TAG_CAPACITY_TYPE;
use std::collections::{BTreeMap, HashMap};

use nodewright_model::ClusterName;
use nodewright_model::ownership::{
    MAX_TAG_VALUE_CHARS, TAG_CREATED, TAG_DRAIN, TAG_POOL, TAG_TEMPLATE, is_owned_by,
};
use nodewright_model::rollout::PoolVm;
use serde::{Deserialize, Serialize};

use super::MachineError;
use crate::azure::ArmClient;
use crate::azure::virtual_machines::{InstanceView, VirtualMachine, VmStatus};

/// List the VMs of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPoolVms {
    /// The owning cluster: only VMs with exactly its `nodewright.io-cluster` tag are listed.
    pub cluster: ClusterName,
    /// The pool: only VMs whose `nodewright.io-pool` tag is this are listed.
    pub pool: String,
    /// Whether each VM's power state is read too (from the subscription's VM statuses, one
    /// more list); without, `power_state` is none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub instance_view: bool,
    /// Where the VMs are read: the resource group's list (the default), or Azure Resource
    /// Graph (one request per 1000 VMs, power states always included; see [`super::pool_graph`]).
    #[serde(default, skip_serializing_if = "VmSource::is_resource_group")]
    pub source: VmSource,
    /// With Resource Graph: VMs the caller expects to exist (machines whose Node it holds but
    /// whose VM it has not listed yet). Each one the index lacks is read with a GET before it
    /// is left out, since the index trails ARM by seconds; at most
    /// [`super::pool_graph::MAX_CONFIRMED`] are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected: Vec<String>,
}

/// Where a pool's VMs are read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VmSource {
    /// The resource group's VM list (50 VMs a page), with the subscription's statuses for
    /// power states: exact at the moment of the call.
    #[default]
    ResourceGroup,
    /// One Azure Resource Graph query (1000 VMs a page, power states included): trails ARM by
    /// seconds, checked with GETs for the VMs expected.
    ResourceGraph,
}

impl VmSource {
    /// Whether this is the default, the resource group's list.
    pub fn is_resource_group(&self) -> bool {
        *self == Self::ResourceGroup
    }
}

/// Lists the resource group's VMs (every page) and keeps the pool's, sorted by name; with
/// `instance_view`, also lists the subscription's VM statuses (every page) for their power
/// states. `input.source` is not read: [`super::pool_graph`] lists from Resource Graph.
pub async fn list_pool_vms(
    client: &ArmClient,
    input: &ListPoolVms,
) -> Result<Vec<PoolVm>, MachineError> {
    let vms = client.list_vms().await?;
    let mut pool: Vec<(PoolVm, Option<&str>)> = vms
        .iter()
        .filter_map(|vm| Some((pool_vm(vm, &input.cluster, &input.pool)?, vm.id.as_deref())))
        .collect();
    if input.instance_view && !pool.is_empty() {
        let power = match client.list_vm_statuses().await {
            Ok(statuses) => power_states_by_id(&statuses),
            Err(error) if is_forbidden(&error) => {
                tracing::warn!(
                    error = %nodewright_model::text::error_chain(&error),
                    "the VMs' power states are unknown: listing the subscription's VM statuses \
                     needs Microsoft.Compute/virtualMachines/read at the subscription; assign \
                     the worker's role there too"
                );
                HashMap::new()
            }
            Err(error) => return Err(error.into()),
        };
        for (listed, id) in &mut pool {
            listed.power_state = id.and_then(|id| power.get(&id.to_ascii_lowercase()).cloned());
        }
    }
    let mut pool: Vec<PoolVm> = pool.into_iter().map(|(vm, _)| vm).collect();
    pool.sort_by(|a, b| a.name.cmp(&b.name));
    tracing::debug!(
        pool = %input.pool,
        listed = vms.len(),
        kept = pool.len(),
        "listed the pool's VMs"
    );
    Ok(pool)
}

/// Whether ARM refused the call for lack of a permission (403): the worker's role is assigned
/// on the resource group only.
fn is_forbidden(error: &crate::azure::Error) -> bool {
    error
        .arm_failure()
        .is_some_and(|failure| failure.status == 403)
}

/// Each VM's power state by its id (lowercase: ARM ids are case-insensitive), for those whose
/// instance view has one.
fn power_states_by_id(statuses: &[VmStatus]) -> HashMap<String, String> {
    statuses
        .iter()
        .filter_map(|vm| {
            let view = vm.properties.instance_view.as_ref()?;
            Some((vm.id.as_deref()?.to_ascii_lowercase(), power_state(view)?))
        })
        .collect()
}

/// The power state an instance view gives (`running`, `stopped`, `deallocated`, ...: the
/// `<state>` of its `PowerState/<state>` status, lowercase); none without a power status or a
/// state.
pub fn power_state(view: &InstanceView) -> Option<String> {
    view.statuses
        .iter()
        .flatten()
        .filter_map(|status| status.code.as_deref())
        .find_map(power_state_of_code)
}

/// The `<state>` of a status code `PowerState/<state>`, lowercase; none for another code or an
/// empty state.
pub fn power_state_of_code(code: &str) -> Option<String> {
    let (kind, state) = code.trim().split_once('/')?;
    let state = state.trim().to_ascii_lowercase();
    (kind.eq_ignore_ascii_case("PowerState") && !state.is_empty()).then_some(state)
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
    Some(pool_vm_of(
        name,
        &vm.tags,
        vm.zones.as_deref(),
        vm.properties.provisioning_state.as_deref(),
    ))
}

/// The VM as the pool sees it, from its name, tags, zones and provisioning state (power state
/// none).
pub fn pool_vm_of(
    name: String,
    tags: &BTreeMap<String, String>,
    zones: Option<&[String]>,
    provisioning_state: Option<&str>,
) -> PoolVm {
    PoolVm {
        name,
        template_hash: tags.get(TAG_TEMPLATE).cloned().unwrap_or_default(),
        created_at: created_at(tags),
        provisioning_state: provisioning_state.unwrap_or_default().to_owned(),
        zone: zones.and_then(|zones| zones.first()).cloned(),
        // Azure bounds a tag value; a longer one (not Azure's) is not carried.
        drain_tag: tags
            .get(TAG_DRAIN)
            .filter(|value| value.chars().count() <= MAX_TAG_VALUE_CHARS)
            .cloned(),
        power_state: None,
        capacity_type: tags
            .get(TAG_CAPACITY_TYPE)
            .and_then(|value| CapacityType::parse(value)),
    }
}

/// Whether `tags` carry exactly this cluster and the pool.
pub fn in_pool(tags: &BTreeMap<String, String>, cluster: &ClusterName, pool: &str) -> bool {
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
                capacity_type: None,
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
                capacity_type: None,
            })
        );
    }

    fn view(codes: &[&str]) -> InstanceView {
        serde_json::from_value(json!({
            "statuses": codes.iter().map(|code| json!({ "code": code })).collect::<Vec<_>>(),
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_power_state_is_the_state_of_the_powerstate_status() {
        let table: [(&str, &[&str], Option<&str>); 9] = [
            (
                "running",
                &["ProvisioningState/succeeded", "PowerState/running"],
                Some("running"),
            ),
            (
                "stopped",
                &["ProvisioningState/succeeded", "PowerState/stopped"],
                Some("stopped"),
            ),
            (
                "deallocated",
                &["ProvisioningState/succeeded", "PowerState/deallocated"],
                Some("deallocated"),
            ),
            (
                "while an operation runs",
                &["ProvisioningState/updating", "PowerState/starting"],
                Some("starting"),
            ),
            (
                "a failed provisioning keeps its power state",
                &[
                    "ProvisioningState/failed/AllocationFailed",
                    "PowerState/deallocated",
                ],
                Some("deallocated"),
            ),
            ("any case", &["powerstate/Running"], Some("running")),
            ("no power status", &["ProvisioningState/creating"], None),
            ("an empty state", &["PowerState/"], None),
            ("no statuses", &[], None),
        ];
        for (case, codes, expected) in table {
            assert_eq!(power_state(&view(codes)).as_deref(), expected, "{case}");
        }
        assert_eq!(power_state(&InstanceView::default()), None);
    }

    #[test]
    fn power_states_are_joined_by_case_insensitive_id_and_skip_vms_without_one() {
        let statuses: Vec<VmStatus> = serde_json::from_value(json!([
            { "id": "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/Web-1",
              "properties": { "instanceView": { "statuses": [{ "code": "PowerState/stopped" }] } } },
            { "id": "/subscriptions/s/resourceGroups/other/providers/Microsoft.Compute/virtualMachines/db-1",
              "properties": { "instanceView": { "statuses": [{ "code": "ProvisioningState/creating" }] } } },
            { "properties": { "instanceView": { "statuses": [{ "code": "PowerState/running" }] } } },
            { "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/bare" },
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        let by_id = power_states_by_id(&statuses);
        assert_eq!(
            by_id,
            HashMap::from([(
                "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/web-1"
                    .to_owned(),
                "stopped".to_owned()
            )])
        );
    }

    #[test]
    fn listings_recorded_before_instance_views_read_and_write_the_same() {
        let old: ListPoolVms = serde_json::from_value(json!({ "cluster": "prod", "pool": "web" }))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!old.instance_view);
        assert_eq!(
            serde_json::to_value(&old).unwrap_or_else(|e| panic!("{e}")),
            json!({ "cluster": "prod", "pool": "web" })
        );
        let controller = ListPoolVms {
            instance_view: true,
            ..old
        };
        assert_eq!(
            serde_json::to_value(&controller).unwrap_or_else(|e| panic!("{e}"))["instanceView"],
            json!(true)
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
