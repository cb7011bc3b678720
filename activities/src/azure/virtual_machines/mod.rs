//! Virtual machines (`Microsoft.Compute/virtualMachines`, api-version [`API_VERSION`]): the
//! typed properties nodewright reads and builds, and the REST calls in [`client`].
//!
//! Every struct keeps the fields it does not name in `other`, so a GET → change → PUT sends back
//! everything ARM returned. `None` fields are left out of bodies.

pub mod client;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::resource::Resource;

/// The compute api-version for VMs.
pub const API_VERSION: &str = "2024-07-01";

/// The ARM resource type.
pub const RESOURCE_TYPE: &str = "Microsoft.Compute/virtualMachines";

/// A VM as ARM returns and accepts it.
pub type VirtualMachine = Resource<VirtualMachineProperties>;

/// `properties` of a VM.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineProperties {
    /// The size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_profile: Option<HardwareProfile>,
    /// The image, OS disk and data disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_profile: Option<StorageProfile>,
    /// Computer name, admin user, custom data, Linux settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_profile: Option<OsProfile>,
    /// The NICs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_profile: Option<NetworkProfile>,
    /// Statuses, present when read with `$expand=instanceView`; read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_view: Option<InstanceView>,
    /// `Creating`, `Updating`, `Deleting`, `Succeeded`, `Failed`, `Canceled`; read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// The VM's unique id; read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_id: Option<String>,
    /// When the VM was created (RFC 3339); read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_created: Option<String>,
    /// Every other property, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `hardwareProfile`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HardwareProfile {
    /// The VM size, e.g. `Standard_D4s_v5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_size: Option<String>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `storageProfile`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageProfile {
    /// The image the OS disk is created from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_reference: Option<ImageReference>,
    /// The OS disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_disk: Option<OsDisk>,
    /// The data disks. `Some(vec![])` is sent as `[]` (detach all); `None` is left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_disks: Option<Vec<DataDisk>>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `imageReference`: a marketplace image, or a gallery image by `id`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageReference {
    /// The image publisher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// The image offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<String>,
    /// The image SKU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
    /// The image version, or `latest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// A gallery image version's ARM id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `managedDisk` of an OS or data disk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedDiskParameters {
    /// The disk's ARM id (to attach an existing disk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `Premium_LRS`, `StandardSSD_LRS`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_account_type: Option<String>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `osDisk`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsDisk {
    /// The disk name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `FromImage`, `Attach`, `Empty`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_option: Option<String>,
    /// `None`, `ReadOnly`, `ReadWrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caching: Option<String>,
    /// The size in GiB (`diskSizeGB`: camelCase would give `diskSizeGb`, which ARM ignores).
    #[serde(
        default,
        rename = "diskSizeGB",
        skip_serializing_if = "Option::is_none"
    )]
    pub disk_size_gb: Option<i64>,
    /// The managed disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_disk: Option<ManagedDiskParameters>,
    /// `Delete` or `Detach` when the VM is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<String>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// One entry of `storageProfile.dataDisks`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataDisk {
    /// The logical unit number, unique per VM.
    pub lun: i32,
    /// The disk name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `Attach` (an existing disk), `Empty`, `FromImage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_option: Option<String>,
    /// `None`, `ReadOnly`, `ReadWrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caching: Option<String>,
    /// The size in GiB (`diskSizeGB`: camelCase would give `diskSizeGb`, which ARM ignores).
    #[serde(
        default,
        rename = "diskSizeGB",
        skip_serializing_if = "Option::is_none"
    )]
    pub disk_size_gb: Option<i64>,
    /// The managed disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_disk: Option<ManagedDiskParameters>,
    /// `Delete` or `Detach` when the VM is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<String>,
    /// `true` asks ARM to detach this disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_be_detached: Option<bool>,
    /// `ForceDetach` with `to_be_detached`, for a disk a normal detach cannot release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detach_option: Option<String>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl DataDisk {
    /// The entry that attaches the existing managed disk `disk_id` at `lun`;
    /// `delete_option` is `Delete` or `Detach` (what happens to the disk when the VM is deleted).
    pub fn attach(lun: i32, disk_id: impl Into<String>, delete_option: impl Into<String>) -> Self {
        Self {
            lun,
            create_option: Some("Attach".to_owned()),
            managed_disk: Some(ManagedDiskParameters {
                id: Some(disk_id.into()),
                ..ManagedDiskParameters::default()
            }),
            delete_option: Some(delete_option.into()),
            ..Self::default()
        }
    }

    /// Marks this entry for detaching (`toBeDetached: true`), forcibly when `force`
    /// (`detachOption: ForceDetach`).
    pub fn mark_detached(&mut self, force: bool) {
        self.to_be_detached = Some(true);
        self.detach_option = force.then(|| "ForceDetach".to_owned());
    }
}

/// `osProfile`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsProfile {
    /// The host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computer_name: Option<String>,
    /// The admin user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_username: Option<String>,
    /// Base64 custom data (cloud-init); write-only, ARM never returns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_data: Option<String>,
    /// Linux settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linux_configuration: Option<LinuxConfiguration>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `osProfile.linuxConfiguration`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinuxConfiguration {
    /// Whether password login is disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_password_authentication: Option<bool>,
    /// SSH keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<SshConfiguration>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `linuxConfiguration.ssh`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SshConfiguration {
    /// Authorized keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_keys: Option<Vec<SshPublicKey>>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// One authorized SSH key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SshPublicKey {
    /// Where the key goes, e.g. `/home/azureuser/.ssh/authorized_keys`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_data: Option<String>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `networkProfile`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkProfile {
    /// The NIC references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_interfaces: Option<Vec<NetworkInterfaceReference>>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// One entry of `networkProfile.networkInterfaces`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceReference {
    /// The NIC's ARM id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Primary flag and delete option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<NetworkInterfaceReferenceProperties>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `properties` of a NIC reference.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceReferenceProperties {
    /// Whether this is the primary NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// `Delete` or `Detach` when the VM is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<String>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `instanceView` (read-only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceView {
    /// `ProvisioningState/...` and `PowerState/...` statuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statuses: Option<Vec<InstanceViewStatus>>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl InstanceView {
    /// The power state (`running`, `stopped`, `deallocated`, ...) from `PowerState/<state>`.
    pub fn power_state(&self) -> Option<&str> {
        self.statuses
            .iter()
            .flatten()
            .filter_map(|status| status.code.as_deref())
            .find_map(|code| code.strip_prefix("PowerState/"))
    }
}

/// One VM of a `statusOnly=true` list: its id and instance view only (ARM may leave out the
/// rest, tags and location included).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmStatus {
    /// The VM's full resource id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The VM's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its `instanceView`, under `properties`.
    #[serde(default)]
    pub properties: VmStatusProperties,
}

/// `properties` of a [`VmStatus`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmStatusProperties {
    /// The run-time statuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_view: Option<InstanceView>,
}

/// One instance view status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceViewStatus {
    /// E.g. `PowerState/running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// `Info`, `Warning`, `Error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// E.g. `VM running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_status: Option<String>,
    /// Details, for errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the status was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Every other field, kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The body of `POST …/attachDetachDataDisks`: incremental, unlike a PATCH of `dataDisks`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachDetachDataDisks {
    /// Disks to attach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_disks_to_attach: Vec<DataDiskToAttach>,
    /// Disks to detach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_disks_to_detach: Vec<DataDiskToDetach>,
}

/// One disk to attach by `attachDetachDataDisks`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataDiskToAttach {
    /// The managed disk's ARM id.
    pub disk_id: String,
    /// The LUN; ARM picks one when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lun: Option<i32>,
    /// `None`, `ReadOnly`, `ReadWrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caching: Option<String>,
    /// `Delete` or `Detach` when the VM is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<String>,
    /// Every other field (`diskEncryptionSet`, `writeAcceleratorEnabled`), kept as is.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// One disk to detach by `attachDetachDataDisks`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataDiskToDetach {
    /// The managed disk's ARM id.
    pub disk_id: String,
    /// `ForceDetach`, or `None` for a normal detach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detach_option: Option<String>,
}

impl NetworkInterfaceReference {
    /// A reference to the NIC `id`.
    pub fn new(id: impl Into<String>, primary: bool, delete_option: impl Into<String>) -> Self {
        Self {
            id: Some(id.into()),
            properties: Some(NetworkInterfaceReferenceProperties {
                primary: Some(primary),
                delete_option: Some(delete_option.into()),
                other: Map::new(),
            }),
            other: Map::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A VM as ARM returns it with `$expand=instanceView`, with unmodelled fields at every level.
    fn vm_from_arm() -> Value {
        json!({
            "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web-1",
            "name": "web-1",
            "type": "Microsoft.Compute/virtualMachines",
            "location": "westeurope",
            "tags": { "nodewright.io-cluster": "prod" },
            "zones": ["2"],
            "identity": { "type": "SystemAssigned", "principalId": "p" },
            "properties": {
                "vmId": "0b0c",
                "timeCreated": "2026-01-01T00:00:00Z",
                "provisioningState": "Succeeded",
                "hardwareProfile": { "vmSize": "Standard_D4s_v5", "vmSizeProperties": { "vCPUsAvailable": 4 } },
                "securityProfile": { "securityType": "TrustedLaunch" },
                "storageProfile": {
                    "imageReference": { "publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest", "exactVersion": "24.04.1" },
                    "osDisk": { "osType": "Linux", "name": "web-1-os", "createOption": "FromImage", "caching": "ReadWrite",
                                "managedDisk": { "id": "/d/os", "storageAccountType": "Premium_LRS" }, "deleteOption": "Delete", "diskSizeGB": 30 },
                    "dataDisks": [{ "lun": 0, "name": "web-1-data", "createOption": "Attach", "caching": "None",
                                    "managedDisk": { "id": "/d/data" }, "deleteOption": "Detach", "diskSizeGB": 64,
                                    "toBeDetached": false, "writeAcceleratorEnabled": false }],
                    "diskControllerType": "SCSI"
                },
                "osProfile": { "computerName": "web-1", "adminUsername": "azureuser", "allowExtensionOperations": true,
                               "linuxConfiguration": { "disablePasswordAuthentication": true, "provisionVMAgent": true,
                                                       "ssh": { "publicKeys": [{ "path": "/home/azureuser/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAA" }] } } },
                "networkProfile": { "networkInterfaces": [{ "id": "/n/web-1", "properties": { "primary": true, "deleteOption": "Delete" } }] },
                "instanceView": { "computerName": "web-1",
                                  "statuses": [{ "code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded", "time": "2026-01-01T00:01:00Z" },
                                               { "code": "PowerState/running", "level": "Info", "displayStatus": "VM running" }] }
            }
        })
    }

    #[test]
    fn a_full_vm_body_round_trips_unchanged() {
        let vm: VirtualMachine = serde_json::from_value(vm_from_arm()).expect("parses");
        let properties = &vm.properties;
        assert_eq!(
            properties
                .hardware_profile
                .as_ref()
                .and_then(|h| h.vm_size.as_deref()),
            Some("Standard_D4s_v5")
        );
        assert_eq!(
            properties
                .instance_view
                .as_ref()
                .and_then(InstanceView::power_state),
            Some("running")
        );
        let storage = properties.storage_profile.as_ref().expect("storage");
        let os_disk = storage.os_disk.as_ref().expect("an OS disk");
        let data_disks = storage.data_disks.as_deref().unwrap_or_default();
        assert_eq!(
            (os_disk.disk_size_gb, data_disks[0].disk_size_gb),
            (Some(30), Some(64)),
            "diskSizeGB is typed, not left in `other`"
        );
        assert_eq!(
            serde_json::to_value(&vm).expect("serializes"),
            vm_from_arm()
        );
    }

    #[test]
    fn data_disk_entries_are_the_shapes_arm_expects() {
        let attach = DataDisk::attach(3, "/d/extra", "Delete");
        assert_eq!(
            serde_json::to_value(&attach).expect("serializes"),
            json!({ "lun": 3, "createOption": "Attach", "managedDisk": { "id": "/d/extra" }, "deleteOption": "Delete" })
        );
        let mut normal = attach.clone();
        normal.mark_detached(false);
        assert_eq!(
            serde_json::to_value(&normal).expect("serializes")["toBeDetached"],
            json!(true)
        );
        assert!(normal.detach_option.is_none());
        let mut forced = attach;
        forced.mark_detached(true);
        assert_eq!(forced.detach_option.as_deref(), Some("ForceDetach"));
    }

    #[test]
    fn an_empty_data_disk_list_is_sent_not_dropped() {
        assert_eq!(
            client::data_disks_patch(&[]),
            json!({ "properties": { "storageProfile": { "dataDisks": [] } } })
        );
    }

    #[test]
    fn attach_detach_bodies_name_only_the_changing_disks() {
        let change = AttachDetachDataDisks {
            data_disks_to_attach: vec![DataDiskToAttach {
                disk_id: "/d/new".to_owned(),
                lun: Some(1),
                delete_option: Some("Delete".to_owned()),
                ..DataDiskToAttach::default()
            }],
            data_disks_to_detach: vec![DataDiskToDetach {
                disk_id: "/d/old".to_owned(),
                detach_option: Some("ForceDetach".to_owned()),
            }],
        };
        assert_eq!(
            serde_json::to_value(&change).expect("serializes"),
            json!({
                "dataDisksToAttach": [{ "diskId": "/d/new", "lun": 1, "deleteOption": "Delete" }],
                "dataDisksToDetach": [{ "diskId": "/d/old", "detachOption": "ForceDetach" }]
            })
        );
    }
}
