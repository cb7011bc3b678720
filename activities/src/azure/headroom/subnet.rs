//! A subnet's usage: from its virtual network's usages (`GET …/virtualNetworks/{vnet}/usages`:
//! per subnet the IP configurations in it, `currentValue`, and the addresses it can give out,
//! `limit`, its size less Azure's five reserved), or, when the identity may read only the
//! subnet (a role assigned at the subnet's scope answers the network's usages 403), from the
//! subnet itself: its prefix and its `ipConfigurations`.

use nodewright_model::headroom::SubnetRoom;
use serde::Deserialize;

use crate::azure::network_interfaces::API_VERSION;
use crate::azure::{ArmClient, CallError, Error, Result};

/// One entry of a virtual network's usages.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VnetUsage {
    #[serde(default)]
    id: String,
    #[serde(default)]
    current_value: u64,
    #[serde(default)]
    limit: u64,
}

/// A subnet as its GET answers it (the fields read).
#[derive(Debug, Default, Deserialize)]
struct Subnet {
    #[serde(default)]
    properties: SubnetProperties,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubnetProperties {
    #[serde(default)]
    address_prefix: Option<String>,
    #[serde(default)]
    address_prefixes: Vec<String>,
    #[serde(default)]
    ip_configurations: Vec<serde_json::Value>,
}

/// The virtual network's id of a subnet id (`…/virtualNetworks/{vnet}/subnets/{subnet}`) and the
/// subnet's name.
pub fn network_of(subnet_id: &str) -> Option<(&str, &str)> {
    let lower = subnet_id.to_ascii_lowercase();
    let at = lower.rfind("/subnets/")?;
    let (network, rest) = subnet_id.split_at(at);
    let name = rest.get("/subnets/".len()..)?;
    (!name.is_empty() && !name.contains('/')).then_some((network, name))
}

/// The prefix length of an IPv4 prefix (`10.0.0.0/24` → 24); none for IPv6 or a malformed one.
pub fn ipv4_prefix_len(prefix: &str) -> Option<u8> {
    let (address, len) = prefix.split_once('/')?;
    if address.parse::<std::net::Ipv4Addr>().is_err() {
        return None;
    }
    len.parse().ok().filter(|len| *len <= 32)
}

/// The usage of `subnet_id`; none when its network's usages do not list it (or, read from the
/// subnet, when it has no IPv4 prefix).
pub async fn usage(client: &ArmClient, subnet_id: &str) -> Result<Option<SubnetRoom>> {
    let Some((network, name)) = network_of(subnet_id) else {
        return Ok(None);
    };
    let url = client.id_url(&format!("{network}/usages"), API_VERSION);
    match client.list::<VnetUsage>(url).await {
        Ok(usages) => Ok(usages
            .into_iter()
            .find(|usage| usage.id.eq_ignore_ascii_case(subnet_id))
            .map(|usage| SubnetRoom {
                name: name.to_owned(),
                usable: usage.limit,
                used: usage.current_value,
            })),
        Err(error) if is_forbidden(&error) => from_subnet(client, subnet_id, name).await,
        Err(source) => Err(Error::ReadCapacity {
            what: format!("the usages of virtual network {network}"),
            source,
        }),
    }
}

/// Whether ARM refused the read for want of a permission.
fn is_forbidden(error: &CallError) -> bool {
    error
        .arm_failure()
        .is_some_and(|failure| failure.status == 403)
}

/// The usage read from the subnet itself: its first IPv4 prefix's size less Azure's five, and
/// its IP configurations.
async fn from_subnet(
    client: &ArmClient,
    subnet_id: &str,
    name: &str,
) -> Result<Option<SubnetRoom>> {
    let subnet: Subnet = client
        .get(client.id_url(subnet_id, API_VERSION))
        .await
        .map_err(|source| Error::ReadCapacity {
            what: format!("subnet {subnet_id}"),
            source,
        })?;
    let properties = subnet.properties;
    let prefix = properties
        .address_prefix
        .iter()
        .chain(properties.address_prefixes.iter())
        .find_map(|prefix| ipv4_prefix_len(prefix));
    let used = u64::try_from(properties.ip_configurations.len()).unwrap_or(u64::MAX);
    Ok(prefix.and_then(|len| SubnetRoom::from_prefix(name, len, used)))
}
