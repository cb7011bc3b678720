//! Managed disks (`Microsoft.Compute/disks`, api-version [`API_VERSION`]): the typed properties
//! nodewright reads and builds, and the REST calls in [`client`].
//!
//! `sku` and `managedBy` are top-level fields, kept in the envelope's `other` and read through
//! [`Disk::managed_by`] and [`Disk::sku_name`].

pub mod client;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::resource::Resource;

/// The disk api-version.
pub const API_VERSION: &str = "2024-03-02";

/// The ARM resource type.
pub const RESOURCE_TYPE: &str = "Microsoft.Compute/disks";

/// A managed disk as ARM returns and accepts it.
pub type Disk = Resource<DiskProperties>;

/// `properties` of a managed disk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiskProperties {
    /// How the disk is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_data: Option<CreationData>,
    /// The size in GiB (`diskSizeGB`: camelCase would give `diskSizeGb`, which ARM ignores).
    #[serde(
        default,
        rename = "diskSizeGB",
        skip_serializing_if = "Option::is_none"
    )]
    pub disk_size_gb: Option<i64>,
    /// `Unattached`, `Attached`, `Reserved`, `ActiveSAS`, ...; read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_state: Option<String>,
    /// `Creating`, `Updating`, `Succeeded`, `Failed`, ...; read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// When the disk was created (RFC 3339); read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_created: Option<String>,
    /// Every other property, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `creationData`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreationData {
    /// `Empty`, `Copy`, `FromImage`, `Import`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_option: Option<String>,
    /// The source disk or snapshot of a `Copy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_resource_id: Option<String>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl Disk {
    /// The ARM id of the VM the disk is attached to (`managedBy`), if any.
    pub fn managed_by(&self) -> Option<&str> {
        self.other.get("managedBy").and_then(Value::as_str)
    }

    /// The SKU name (`sku.name`: `Premium_LRS`, `StandardSSD_LRS`, ...), if any.
    pub fn sku_name(&self) -> Option<&str> {
        self.other
            .get("sku")
            .and_then(|sku| sku.get("name"))
            .and_then(Value::as_str)
    }

    /// Sets `sku.name`, keeping other SKU fields.
    pub fn set_sku_name(&mut self, name: impl Into<String>) {
        let sku = self
            .other
            .entry("sku")
            .or_insert_with(|| Value::Object(Map::new()));
        if !sku.is_object() {
            *sku = Value::Object(Map::new());
        }
        if let Value::Object(fields) = sku {
            fields.insert("name".to_owned(), Value::String(name.into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn managed_by_and_sku_live_outside_properties_and_survive_a_round_trip() {
        let body = json!({
            "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d1",
            "name": "d1",
            "location": "westeurope",
            "tags": {},
            "managedBy": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-1",
            "sku": { "name": "Premium_LRS", "tier": "Premium" },
            "properties": {
                "creationData": { "createOption": "Empty", "logicalSectorSize": 4096 },
                "diskSizeGB": 64,
                "diskState": "Attached",
                "provisioningState": "Succeeded",
                "encryption": { "type": "EncryptionAtRestWithPlatformKey" }
            }
        });
        let mut disk: Disk = serde_json::from_value(body.clone()).expect("parses");
        assert_eq!(
            disk.managed_by(),
            Some(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-1"
            )
        );
        assert_eq!(disk.sku_name(), Some("Premium_LRS"));
        assert_eq!(disk.properties.disk_state.as_deref(), Some("Attached"));
        assert_eq!(
            disk.properties.disk_size_gb,
            Some(64),
            "diskSizeGB is typed"
        );
        assert_eq!(serde_json::to_value(&disk).expect("serializes"), body);
        disk.set_sku_name("StandardSSD_LRS");
        assert_eq!(
            serde_json::to_value(&disk).expect("serializes")["sku"],
            json!({ "name": "StandardSSD_LRS", "tier": "Premium" })
        );
    }
}
