//! The ARM resource envelope, typed where nodewright reads or writes and lossless everywhere else.
//!
//! nodewright updates resources it does not fully model (a VM has dozens of properties, and other
//! tools set some of them). Every level keeps the fields it does not name in `other`, so a
//! GET → change → PUT sends back exactly what it got plus the change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `{id, name, type, location, tags, etag, zones, properties, ...}` with typed `properties`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource<P> {
    /// The full resource id; read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The resource name; read-only in bodies (it is in the URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The resource type, e.g. `Microsoft.Compute/virtualMachines`; read-only.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    /// The Azure region.
    pub location: String,
    /// Tags; nodewright's ownership tags live here.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// The entity tag, for `If-Match`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// Availability zones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<String>>,
    /// The resource's properties.
    pub properties: P,
    /// Every other top-level field (`plan`, `identity`, `extendedLocation`, ...), kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Properties nodewright only needs the provisioning state of; everything else is kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Properties {
    /// `Creating`, `Updating`, `Deleting`, `Succeeded`, `Failed`, `Canceled`; read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Every other property, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A reference to another resource: `{"id": ...}`, keeping anything else ARM adds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubResource {
    /// The referenced resource's ARM id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl SubResource {
    /// A reference to `id`.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: Some(id.into()),
            other: Map::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A VM as ARM returns it, with fields nodewright does not model at every level.
    fn vm_from_arm() -> Value {
        json!({
            "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web-a1b2c",
            "name": "web-a1b2c",
            "type": "Microsoft.Compute/virtualMachines",
            "location": "westeurope",
            "tags": { "nodewright.io-cluster": "prod", "costCenter": "42" },
            "etag": "\"3\"",
            "zones": ["2"],
            "identity": { "type": "UserAssigned", "userAssignedIdentities": { "/x": {} } },
            "plan": { "name": "p", "publisher": "q", "product": "r" },
            "properties": {
                "provisioningState": "Succeeded",
                "vmId": "0b0c",
                "hardwareProfile": { "vmSize": "Standard_D4s_v5" },
                "securityProfile": { "securityType": "TrustedLaunch", "uefiSettings": { "secureBootEnabled": true } },
                "timeCreated": null,
                "storageProfile": { "dataDisks": [] }
            }
        })
    }

    #[test]
    fn unknown_fields_survive_a_get_change_put_round_trip() {
        let mut vm: Resource<Properties> =
            serde_json::from_value(vm_from_arm()).expect("a VM body parses");
        assert_eq!(
            vm.properties.provisioning_state.as_deref(),
            Some("Succeeded")
        );
        vm.tags
            .insert("nodewright.io-template".to_owned(), "9f86d0".to_owned());

        let sent = serde_json::to_value(&vm).expect("serializes");
        let mut expected = vm_from_arm();
        expected["tags"]["nodewright.io-template"] = json!("9f86d0");
        assert_eq!(sent, expected);
    }

    #[test]
    fn a_minimal_body_parses_and_sends_only_what_it_has() {
        let nic: Resource<Properties> = serde_json::from_value(json!({
            "location": "westeurope",
            "properties": { "ipConfigurations": [] }
        }))
        .expect("a minimal body parses");
        assert!(nic.tags.is_empty() && nic.id.is_none());
        assert_eq!(
            serde_json::to_value(&nic).expect("serializes"),
            json!({ "location": "westeurope", "tags": {}, "properties": { "ipConfigurations": [] } })
        );
    }
}
