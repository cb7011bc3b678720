//! A subnet's usage from its virtual network's usages (`GET …/virtualNetworks/{vnet}/usages`):
//! per subnet, the IP configurations in it (`currentValue`) and the addresses it can give out
//! (`limit`, its size less Azure's five reserved).

use nodewright_model::headroom::SubnetRoom;
use serde::Deserialize;

use crate::azure::network_interfaces::API_VERSION;
use crate::azure::{ArmClient, Error, Result};

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

/// The virtual network's id of a subnet id (`…/virtualNetworks/{vnet}/subnets/{subnet}`).
pub fn network_of(subnet_id: &str) -> Option<(&str, &str)> {
    let lower = subnet_id.to_ascii_lowercase();
    let at = lower.rfind("/subnets/")?;
    let (network, rest) = subnet_id.split_at(at);
    let name = rest.get("/subnets/".len()..)?;
    (!name.is_empty() && !name.contains('/')).then_some((network, name))
}

/// The usage of `subnet_id`; none when its network's usages do not list it.
pub async fn usage(client: &ArmClient, subnet_id: &str) -> Result<Option<SubnetRoom>> {
    let Some((network, name)) = network_of(subnet_id) else {
        return Ok(None);
    };
    let url = client.id_url(&format!("{network}/usages"), API_VERSION);
    let usages: Vec<VnetUsage> = client
        .list(url)
        .await
        .map_err(|source| Error::ReadCapacity {
            what: format!("the usages of virtual network {network}"),
            source,
        })?;
    Ok(usages
        .into_iter()
        .find(|usage| usage.id.eq_ignore_ascii_case(subnet_id))
        .map(|usage| SubnetRoom {
            name: name.to_owned(),
            usable: usage.limit,
            used: usage.current_value,
        }))
}
