//! Network interfaces (`Microsoft.Network/networkInterfaces`, api-version [`API_VERSION`]): the
//! typed properties nodewright reads and builds, and the REST calls in [`client`].

pub mod client;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::resource::{Resource, SubResource};

/// The network api-version.
pub const API_VERSION: &str = "2024-03-01";

/// The ARM resource type.
pub const RESOURCE_TYPE: &str = "Microsoft.Network/networkInterfaces";

/// A NIC as ARM returns and accepts it.
pub type NetworkInterface = Resource<NetworkInterfaceProperties>;

/// `properties` of a NIC.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceProperties {
    /// The IP configurations (at least one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_configurations: Option<Vec<IpConfiguration>>,
    /// Whether accelerated networking is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_accelerated_networking: Option<bool>,
    /// The VM the NIC is attached to; read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine: Option<SubResource>,
    /// `Updating`, `Deleting`, `Succeeded`, `Failed`; read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Every other property, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// One entry of `ipConfigurations`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpConfiguration {
    /// The configuration name, unique in the NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The configuration's ARM id; read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Subnet and addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<IpConfigurationProperties>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `properties` of an IP configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpConfigurationProperties {
    /// The subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<SubResource>,
    /// `Dynamic` or `Static`.
    #[serde(
        default,
        rename = "privateIPAllocationMethod",
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_allocation_method: Option<String>,
    /// The private address.
    #[serde(
        default,
        rename = "privateIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_address: Option<String>,
    /// Whether this is the primary configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl NetworkInterface {
    /// The ARM id of the VM the NIC is attached to, if any.
    pub fn attached_vm(&self) -> Option<&str> {
        self.properties
            .virtual_machine
            .as_ref()
            .and_then(|vm| vm.id.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_nic_body_round_trips_with_its_odd_ip_casing() {
        let body = json!({
            "name": "nic-1",
            "location": "westeurope",
            "tags": { "nodewright.io-cluster": "prod" },
            "properties": {
                "ipConfigurations": [{
                    "name": "ipconfig1",
                    "properties": {
                        "subnet": { "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes" },
                        "privateIPAllocationMethod": "Dynamic",
                        "privateIPAddress": "10.0.0.4",
                        "privateIPAddressVersion": "IPv4",
                        "primary": true
                    }
                }],
                "virtualMachine": { "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-1" },
                "macAddress": "00-0D-3A-00-00-01",
                "provisioningState": "Succeeded"
            }
        });
        let nic: NetworkInterface = serde_json::from_value(body.clone()).expect("parses");
        let config = nic
            .properties
            .ip_configurations
            .as_ref()
            .and_then(|configs| configs.first())
            .and_then(|config| config.properties.as_ref())
            .expect("an ip configuration");
        assert_eq!(config.private_ip_address.as_deref(), Some("10.0.0.4"));
        assert_eq!(
            nic.attached_vm(),
            Some(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-1"
            )
        );
        assert_eq!(serde_json::to_value(&nic).expect("serializes"), body);
    }
}
