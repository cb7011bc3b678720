//! The ARM bodies of a machine's NIC and VM, built from its validated template (pure).

use std::collections::BTreeMap;

use base64::Engine;
use nodewright_model::machine::os_disk_name;
use nodewright_model::pool::{CapacityType, MachineTemplate};
use serde_json::{Value, json};

use crate::azure::network_interfaces::NetworkInterface;
use crate::azure::virtual_machines::VirtualMachine;

/// The NIC `<machine>-nic` in `subnet_id`, dynamic private IP, with `tags`.
pub fn nic_body(
    location: &str,
    subnet_id: &str,
    tags: &BTreeMap<String, String>,
) -> serde_json::Result<NetworkInterface> {
    serde_json::from_value(json!({
        "location": location,
        "tags": tags,
        "properties": {
            "ipConfigurations": [{
                "name": "ipconfig1",
                "properties": {
                    "subnet": { "id": subnet_id },
                    "privateIPAllocationMethod": "Dynamic",
                    "primary": true,
                },
            }],
        },
    }))
}

/// The VM `machine`: size, image, OS disk `<machine>-osdisk` and the NIC, both deleted with the
/// VM (`deleteOption: Delete`), computer name = machine name, `bootstrap` (the template's text,
/// inline or read from its Secret) as customData; a Spot VM (`capacity`) with the template's
/// eviction policy and maximum price.
#[allow(clippy::too_many_arguments)]
pub fn vm_body(
    location: &str,
    machine: &str,
    template: &MachineTemplate,
    bootstrap: Option<&str>,
    nic_id: &str,
    zone: Option<&str>,
    capacity: CapacityType,
    tags: &BTreeMap<String, String>,
) -> serde_json::Result<VirtualMachine> {
    let image = &template.image;
    let image_reference = match &image.id {
        Some(id) => image_reference_by_id(id),
        None => json!({
            "publisher": image.publisher, "offer": image.offer,
            "sku": image.sku, "version": image.version,
        }),
    };
    let mut os_disk = json!({
        "name": os_disk_name(machine),
        "createOption": "FromImage",
        "caching": "ReadWrite",
        "managedDisk": { "storageAccountType": template.os_disk.storage_account_type },
        "deleteOption": "Delete",
    });
    if let Some(size) = template.os_disk.size_gb {
        os_disk["diskSizeGB"] = json!(size);
    }
    let mut linux = json!({ "disablePasswordAuthentication": true });
    if let Some(key) = &template.ssh_public_key {
        linux["ssh"] = json!({ "publicKeys": [{
            "path": format!("/home/{}/.ssh/authorized_keys", template.admin_username),
            "keyData": key,
        }]});
    }
    let mut os_profile = json!({
        "computerName": machine,
        "adminUsername": template.admin_username,
        "linuxConfiguration": linux,
    });
    if let Some(bootstrap) = bootstrap {
        os_profile["customData"] =
            Value::String(base64::engine::general_purpose::STANDARD.encode(bootstrap));
    }
    let mut body = json!({
        "location": location,
        "tags": tags,
        "properties": {
            "hardwareProfile": { "vmSize": template.vm_size },
            "storageProfile": { "imageReference": image_reference, "osDisk": os_disk },
            "osProfile": os_profile,
            "networkProfile": { "networkInterfaces": [{
                "id": nic_id,
                "properties": { "primary": true, "deleteOption": "Delete" },
            }]},
        },
    });
    if let Some(zone) = zone {
        body["zones"] = json!([zone]);
    }
    if capacity == CapacityType::Spot {
        let spot = template.spot_settings();
        body["properties"]["priority"] = json!("Spot");
        body["properties"]["evictionPolicy"] = json!(spot.eviction_policy().as_str());
        body["properties"]["billingProfile"] = json!({ "maxPrice": spot.max_price() });
    }
    serde_json::from_value(body)
}

/// The `imageReference` of an image named by id, in the field Azure reads it from: a direct shared
/// gallery's `/SharedGalleries/…` in `sharedGalleryImageId`, a community gallery's
/// `/CommunityGalleries/…` in `communityGalleryImageId`, any ARM id (a Compute Gallery image
/// version or definition, a managed image) in `id`.
fn image_reference_by_id(id: &str) -> serde_json::Value {
    let lower = id.to_ascii_lowercase();
    if lower.starts_with("/sharedgalleries/") {
        json!({ "sharedGalleryImageId": id })
    } else if lower.starts_with("/communitygalleries/") {
        json!({ "communityGalleryImageId": id })
    } else {
        json!({ "id": id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_model::pool::{ImageSource, OsDiskSpec};

    fn template() -> MachineTemplate {
        MachineTemplate {
            vm_size: "Standard_D2s_v5".to_owned(),
            image: ImageSource {
                publisher: Some("Canonical".to_owned()),
                offer: Some("ubuntu-24_04-lts".to_owned()),
                sku: Some("server".to_owned()),
                version: Some("latest".to_owned()),
                id: None,
            },
            os_disk: OsDiskSpec {
                size_gb: Some(64),
                storage_account_type: "Premium_LRS".to_owned(),
            },
            subnet_id: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/n".to_owned(),
            zones: vec!["1".to_owned()],
            labels: BTreeMap::new(),
            taints: Vec::new(),
            tags: BTreeMap::new(),
            admin_username: "nodewright".to_owned(),
            ssh_public_key: Some("ssh-ed25519 AAAA test".to_owned()),
            bootstrap: Some("#!/bin/bash\necho hi\n".to_owned()),
            bootstrap_secret_ref: None,
            bootstrap_key_vault_secret: None,
            bootstrap_token: None,
            capacity_types: Vec::new(),
            spot: None,
        }
    }

    #[test]
    fn the_vm_body_carries_every_template_field_and_deletes_its_nic_and_disk_with_it() {
        let tags = BTreeMap::from([("nodewright.io-cluster".to_owned(), "dev".to_owned())]);
        let vm = vm_body(
            "westeurope",
            "web-b2c4d",
            &template(),
            template().bootstrap.as_deref(),
            "/nic/id",
            Some("2"),
            CapacityType::OnDemand,
            &tags,
        )
        .expect("builds");
        let json = serde_json::to_value(&vm).expect("serializes");
        assert_eq!(json["zones"], json!(["2"]));
        assert_eq!(json["tags"]["nodewright.io-cluster"], "dev");
        let p = &json["properties"];
        assert_eq!(p["hardwareProfile"]["vmSize"], "Standard_D2s_v5");
        assert_eq!(
            p["storageProfile"]["imageReference"]["offer"],
            "ubuntu-24_04-lts"
        );
        assert_eq!(p["storageProfile"]["osDisk"]["name"], "web-b2c4d-osdisk");
        assert_eq!(p["storageProfile"]["osDisk"]["diskSizeGB"], 64);
        assert_eq!(p["storageProfile"]["osDisk"]["deleteOption"], "Delete");
        assert_eq!(p["networkProfile"]["networkInterfaces"][0]["id"], "/nic/id");
        assert_eq!(
            p["networkProfile"]["networkInterfaces"][0]["properties"]["deleteOption"],
            "Delete"
        );
        assert_eq!(p["osProfile"]["computerName"], "web-b2c4d");
        let custom = p["osProfile"]["customData"].as_str().expect("customData");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(custom)
            .expect("base64");
        assert_eq!(decoded, b"#!/bin/bash\necho hi\n");
        assert_eq!(
            p["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0]["path"],
            "/home/nodewright/.ssh/authorized_keys"
        );
    }

    #[test]
    fn a_spot_vm_carries_its_priority_eviction_policy_and_maximum_price() {
        let mut t = template();
        t.capacity_types = vec![CapacityType::Spot, CapacityType::OnDemand];
        let spot = |t: &MachineTemplate, capacity| {
            let vm = vm_body(
                "westeurope",
                "m",
                t,
                None,
                "/nic",
                None,
                capacity,
                &BTreeMap::new(),
            )
            .expect("builds");
            serde_json::to_value(&vm).expect("serializes")["properties"].clone()
        };
        // Defaults: deleted on eviction, never evicted for price.
        let p = spot(&t, CapacityType::Spot);
        assert_eq!(p["priority"], "Spot");
        assert_eq!(p["evictionPolicy"], "Delete");
        assert_eq!(p["billingProfile"]["maxPrice"], json!(-1.0));
        t.spot = Some(nodewright_model::pool::SpotSpec {
            max_price: Some(serde_json::from_str("0.05123").expect("a number")),
            eviction_policy: Some(nodewright_model::pool::EvictionPolicy::Deallocate),
            aks_labels: false,
        });
        let p = spot(&t, CapacityType::Spot);
        assert_eq!(p["evictionPolicy"], "Deallocate");
        assert_eq!(p["billingProfile"]["maxPrice"], json!(0.05123));
        // The same template's on-demand machine (a fallback) is a regular VM.
        let p = spot(&t, CapacityType::OnDemand);
        assert!(p.get("priority").is_none(), "{p}");
        assert!(p.get("billingProfile").is_none(), "{p}");
    }

    #[test]
    fn a_gallery_image_is_referenced_by_id_only() {
        let mut t = template();
        t.image = ImageSource {
            id: Some("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/i/versions/1.0.0".to_owned()),
            ..ImageSource::default()
        };
        let vm = vm_body(
            "westeurope",
            "m",
            &t,
            None,
            "/nic",
            None,
            CapacityType::OnDemand,
            &BTreeMap::new(),
        )
        .expect("builds");
        let json = serde_json::to_value(&vm).expect("serializes");
        let image = &json["properties"]["storageProfile"]["imageReference"];
        assert!(
            image["id"]
                .as_str()
                .is_some_and(|id| id.ends_with("/versions/1.0.0"))
        );
        assert!(image.get("publisher").is_none());
        assert!(json.get("zones").is_none());
    }

    #[test]
    fn shared_and_community_gallery_images_go_in_their_own_fields() {
        let cases = [
            (
                "/SharedGalleries/0b1f-nodes/Images/ubuntu/Versions/1.0.0",
                "sharedGalleryImageId",
            ),
            (
                "/CommunityGalleries/flatcar-23/Images/flatcar/Versions/4081.2.0",
                "communityGalleryImageId",
            ),
            (
                "/communitygalleries/flatcar-23/images/flatcar/versions/latest",
                "communityGalleryImageId",
            ),
            (
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/images/golden",
                "id",
            ),
        ];
        for (id, field) in cases {
            let mut t = template();
            t.image = ImageSource {
                id: Some(id.to_owned()),
                ..ImageSource::default()
            };
            let vm = vm_body(
                "westeurope",
                "m",
                &t,
                None,
                "/nic",
                None,
                CapacityType::OnDemand,
                &BTreeMap::new(),
            )
            .expect("builds");
            let json = serde_json::to_value(&vm).expect("serializes");
            let image = &json["properties"]["storageProfile"]["imageReference"];
            assert_eq!(image, &json!({ field: id }), "{id}");
        }
    }
}
