//! A pool's VMs from Azure Resource Graph: one query (1000 VMs a page) that carries each VM's
//! power state, instead of the resource group's list (50 a page) and the subscription's statuses.
//!
//! The index trails ARM by seconds. A VM it still lists after its deletion reads as present for
//! those seconds (the controller only waits longer for its replacement); a VM it does not list
//! yet would read as gone, and a pool controller deletes the Node of a machine whose VM is
//! gone. So every VM the caller expects (its Nodes without a listed VM, and the VMs of the list
//! it holds) that the index lacks is read with a GET, at most [`MAX_CONFIRMED`] per look, and
//! kept when ARM still has it. A steady pool expects nothing the index lacks: one request.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_model::rollout::PoolVm;
use serde::Deserialize;

use super::MachineError;
use super::pool::{ListPoolVms, in_pool, pool_vm, pool_vm_of, power_state, power_state_of_code};
use crate::azure::ArmClient;
use crate::azure::resource_graph::kql_string;
use crate::azure::virtual_machines::VirtualMachine;
use nodewright_model::ownership::TAG_POOL;

/// The most expected VMs read with a GET in one listing; the rest are left as the index says
/// (the next look reads more). Bounds the cost of a pool whose VMs were all deleted at once.
pub const MAX_CONFIRMED: usize = 20;

/// One row of the query.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
    #[serde(default)]
    zones: Option<Vec<String>>,
    #[serde(default)]
    provisioning_state: Option<String>,
    #[serde(default)]
    power_state: Option<String>,
}

/// The query for the pool's VMs in the client's resource group (the cluster tag is checked on
/// the rows, as the resource group's list checks it).
pub fn pool_query(resource_group: &str, pool: &str) -> String {
    format!(
        "Resources \
         | where type =~ 'microsoft.compute/virtualmachines' \
         | where resourceGroup =~ {rg} and tags[{tag}] == {pool} \
         | project name, tags, zones, provisioningState = properties.provisioningState, \
           powerState = properties.extended.instanceView.powerState.code",
        rg = kql_string(resource_group),
        tag = kql_string(TAG_POOL),
        pool = kql_string(pool),
    )
}

/// The pool's VMs from one query, with their power states, plus those of `input.expected` and
/// `held` that the index lacks and a GET finds; sorted by name.
pub async fn list_pool_vms(
    client: &ArmClient,
    input: &ListPoolVms,
    held: &[String],
) -> Result<Vec<PoolVm>, MachineError> {
    let rows: Vec<Row> = client
        .query_resource_graph(&pool_query(client.resource_group(), &input.pool))
        .await?;
    let mut pool: Vec<PoolVm> = rows
        .into_iter()
        .filter_map(|row| kept(row, input))
        .collect();
    let listed: BTreeSet<String> = pool.iter().map(|vm| vm.name.clone()).collect();
    let unlisted = to_confirm(&listed, &input.expected, held);
    for name in &unlisted {
        match client.get_vm_with_instance_view(name).await {
            Ok(vm) => {
                if let Some(found) = confirmed(&vm, input) {
                    tracing::info!(vm = %name, "a VM Resource Graph does not list yet is there");
                    pool.push(found);
                }
            }
            Err(error) if error.disposition() == nodewright_model::arm::Disposition::Gone => {}
            Err(error) => return Err(error.into()),
        }
    }
    pool.sort_by(|a, b| a.name.cmp(&b.name));
    tracing::debug!(
        pool = %input.pool,
        listed = listed.len(),
        confirmed = unlisted.len(),
        kept = pool.len(),
        "listed the pool's VMs from Resource Graph"
    );
    Ok(pool)
}

/// A row as the pool sees it, when it is this cluster's and the pool's and has a name.
fn kept(row: Row, input: &ListPoolVms) -> Option<PoolVm> {
    let tags = row.tags.unwrap_or_default();
    if !in_pool(&tags, &input.cluster, &input.pool) {
        return None;
    }
    let mut vm = pool_vm_of(
        row.name.filter(|name| !name.is_empty())?,
        &tags,
        row.zones.as_deref(),
        row.provisioning_state.as_deref(),
    );
    vm.power_state = row.power_state.as_deref().and_then(power_state_of_code);
    Some(vm)
}

/// A VM read with a GET, as the pool sees it, when it is the pool's.
fn confirmed(vm: &VirtualMachine, input: &ListPoolVms) -> Option<PoolVm> {
    let mut found = pool_vm(vm, &input.cluster, &input.pool)?;
    found.power_state = vm.properties.instance_view.as_ref().and_then(power_state);
    Some(found)
}

/// The names expected (`expected`, then `held`) that are not `listed`, without repeats, at
/// most [`MAX_CONFIRMED`].
fn to_confirm(listed: &BTreeSet<String>, expected: &[String], held: &[String]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    expected
        .iter()
        .chain(held)
        .filter(|name| !listed.contains(*name) && seen.insert((*name).clone()))
        .take(MAX_CONFIRMED)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use nodewright_model::ClusterName;
    use nodewright_model::ownership::TAG_CLUSTER;
    use serde_json::json;

    use super::*;
    use crate::azure::machines::pool::VmSource;

    fn input() -> ListPoolVms {
        ListPoolVms {
            cluster: ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}")),
            pool: "web".to_owned(),
            instance_view: false,
            source: VmSource::ResourceGraph,
            expected: Vec::new(),
        }
    }

    fn row(value: serde_json::Value) -> Row {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_row_of_the_pool_keeps_its_power_state_and_others_are_dropped() {
        let ours = row(json!({
            "name": "web-a", "tags": { TAG_CLUSTER: "prod", TAG_POOL: "web" },
            "zones": ["3"], "provisioningState": "Succeeded",
            "powerState": "PowerState/deallocated",
        }));
        let vm = kept(ours, &input()).unwrap_or_else(|| panic!("kept"));
        assert_eq!(vm.power_state.as_deref(), Some("deallocated"));
        assert_eq!(vm.zone.as_deref(), Some("3"));
        assert_eq!(vm.provisioning_state, "Succeeded");
        let foreign = row(json!({
            "name": "web-b", "tags": { TAG_CLUSTER: "staging", TAG_POOL: "web" },
        }));
        assert_eq!(kept(foreign, &input()), None, "another cluster's");
        let nameless = row(json!({ "tags": { TAG_CLUSTER: "prod", TAG_POOL: "web" } }));
        assert_eq!(kept(nameless, &input()), None);
        let untagged = row(json!({ "name": "web-c", "tags": null }));
        assert_eq!(kept(untagged, &input()), None);
    }

    #[test]
    fn only_expected_vms_the_index_lacks_are_confirmed_once_and_bounded() {
        let listed: BTreeSet<String> = ["a".to_owned()].into();
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            to_confirm(&listed, &names(&["a", "b"]), &names(&["b", "c", "a"])),
            names(&["b", "c"])
        );
        assert!(to_confirm(&listed, &[], &names(&["a"])).is_empty());
        let many: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
        assert_eq!(to_confirm(&listed, &many, &[]).len(), MAX_CONFIRMED);
    }

    #[test]
    fn the_query_quotes_what_it_is_given() {
        let query = pool_query("rg-prod", "web");
        assert!(query.contains("resourceGroup =~ 'rg-prod'"), "{query}");
        assert!(
            query.contains("tags['nodewright.io-pool'] == 'web'"),
            "{query}"
        );
        assert!(pool_query("rg", "it's").contains(r"== 'it\'s'"));
    }
}
