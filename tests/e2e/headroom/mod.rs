//! Headroom before every create, against the sandbox's subnets and quotas: a rollout whose
//! surge is larger than the subnet's free addresses never starts a create that cannot get an
//! address; one that meets an exhausted vCPU quota waits with the reason and finishes once the
//! limit is raised; the pool controller's `CapacityAvailable` condition names the limit and
//! creates resume by themselves; `nodewright preflight --pool` reports the headroom.

mod controller;
mod preflight;
mod quota;
mod subnet;

use anyhow::Result;
use nodewright_tests::Stack;
use nodewright_tests::machines::Sandbox;
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// The sandbox's quota configuration is one for the whole stack: the tests that change it
/// read, change their own family and write under this lock, so they never undo each other.
static QUOTA: Mutex<()> = Mutex::const_new(());

/// Sets the vCPU limit of `family` (none: removes it), keeping every other setting.
pub(crate) async fn set_family_quota(
    sandbox: &Sandbox,
    family: &str,
    limit: Option<u64>,
) -> Result<()> {
    let _held = QUOTA.lock().await;
    let mut quota = sandbox.quota().await?;
    if !quota["families"].is_object() {
        quota["families"] = json!({});
    }
    if let Some(families) = quota["families"].as_object_mut() {
        match limit {
            Some(limit) => {
                families.insert(family.to_owned(), Value::from(limit));
            }
            None => {
                families.remove(family);
            }
        }
    }
    sandbox.set_quota(&quota).await
}

/// The ARM path of virtual network `name` in the stack's resource group, with `suffix` (e.g.
/// `/subnets/s`) and the network api-version.
pub(crate) fn network_path(stack: &Stack, name: &str, suffix: &str) -> String {
    format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{name}{suffix}?api-version=2024-03-01",
        stack.arm.subscription_id, stack.arm.resource_group
    )
}

/// The ARM id of subnet `subnet` of network `name`.
pub(crate) fn subnet_id(stack: &Stack, name: &str, subnet: &str) -> String {
    format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{name}/subnets/{subnet}",
        stack.arm.subscription_id, stack.arm.resource_group
    )
}

/// The ARM path of NIC `name` in the stack's resource group.
pub(crate) fn nic_path(stack: &Stack, name: &str) -> String {
    format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/networkInterfaces/{name}?api-version=2024-03-01",
        stack.arm.subscription_id, stack.arm.resource_group
    )
}

/// A network `name` with subnet `small` of `prefix` and `foreign` NICs in it that nodewright
/// did not make (someone else's addresses); returns the subnet's id.
pub(crate) async fn small_network(
    stack: &Stack,
    sandbox: &Sandbox,
    name: &str,
    prefix: &str,
    foreign: usize,
) -> Result<String> {
    sandbox
        .arm_put(
            &network_path(stack, name, ""),
            &json!({"location": stack.arm.location, "properties": {
                "addressSpace": {"addressPrefixes": [prefix]},
                "subnets": [{"name": "small", "properties": {"addressPrefix": prefix}}]}}),
        )
        .await?;
    let subnet = subnet_id(stack, name, "small");
    for n in 0..foreign {
        sandbox
            .arm_put(
                &nic_path(stack, &format!("{name}-foreign-{n}")),
                &json!({"location": stack.arm.location, "properties": {"ipConfigurations": [
                    {"name": "ipconfig1", "properties": {"subnet": {"id": subnet}}}]}}),
            )
            .await?;
    }
    Ok(subnet)
}

/// Deletes the foreign NICs and the network [`small_network`] made (best effort: a test's
/// clean-up must not hide its outcome).
pub(crate) async fn remove_network(stack: &Stack, sandbox: &Sandbox, name: &str, foreign: usize) {
    for n in 0..foreign {
        if let Err(error) = sandbox
            .arm_delete(&nic_path(stack, &format!("{name}-foreign-{n}")))
            .await
        {
            eprintln!("clean-up: NIC {name}-foreign-{n}: {error:#}");
        }
    }
    if let Err(error) = sandbox.arm_delete(&network_path(stack, name, "")).await {
        eprintln!("clean-up: network {name}: {error:#}");
    }
}

/// The subnet's usage as its network's usages give it: `(used, usable)`.
pub(crate) async fn subnet_usage(stack: &Stack, name: &str) -> Result<(u64, u64)> {
    let sandbox = Sandbox::new(stack)?;
    let usages = sandbox
        .arm_get(&network_path(stack, name, "/usages"))
        .await?;
    let entry = usages["value"]
        .as_array()
        .and_then(|list| list.first())
        .cloned()
        .unwrap_or_default();
    Ok((
        entry["currentValue"].as_u64().unwrap_or(0),
        entry["limit"].as_u64().unwrap_or(0),
    ))
}

/// A rollout pool file of `shape` whose machines go to `subnet`, of VM size `size`.
pub(crate) fn pool_file_in(
    stack: &Stack,
    pool: &str,
    shape: &crate::rollout::common::PoolShape,
    subnet: &str,
    size: &str,
) -> Result<std::path::PathBuf> {
    let path = crate::rollout::common::rollout_pool_file(stack, pool, shape)?;
    let text = std::fs::read_to_string(&path)?;
    let default_subnet = subnet_id(stack, "nodes", "nodes");
    anyhow::ensure!(
        text.contains(&default_subnet) && text.contains("vmSize: Standard_D2s_v5"),
        "unexpected pool file:\n{text}"
    );
    let text = text
        .replace(&default_subnet, subnet)
        .replace("vmSize: Standard_D2s_v5", &format!("vmSize: {size}"));
    std::fs::write(&path, text)?;
    Ok(path)
}
