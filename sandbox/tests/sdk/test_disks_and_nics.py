"""Managed disks (`azure-mgmt-compute` 39, default api-version 2026-03-02) and network interfaces
(`azure-mgmt-network` 33.1, default 2026-03-01): create, read, update, list in a group and in the
subscription, delete."""

from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.compute import models as cm
from azure.mgmt.network import models as nm

from sdk_support import LOCATION, RESOURCE_GROUP as RG, SandboxTestCase, api_versions_sent, arm_id

DISK_API_VERSION = "2026-03-02"
NIC_API_VERSION = "2026-03-01"


class DisksTest(SandboxTestCase):
    def test_disk_life_cycle(self):
        disks = self.compute.disks
        created = disks.begin_create_or_update(
            RG,
            "sdk-disk",
            cm.Disk(
                location=LOCATION,
                zones=["2"],
                tags={"nodewright.io-pool": "sdk"},
                sku=cm.DiskSku(name="StandardSSD_LRS"),
                creation_data=cm.CreationData(create_option="Empty"),
                disk_size_gb=64,
            ),
        ).result()
        self.assertEqual(created.provisioning_state, "Succeeded")
        self.assertEqual(created.disk_state, "Unattached")
        self.assertEqual(created.disk_size_gb, 64)
        self.assertEqual(created.sku.name, "StandardSSD_LRS")

        grown = disks.begin_update(RG, "sdk-disk", cm.DiskUpdate(disk_size_gb=128)).result()
        self.assertEqual(grown.disk_size_gb, 128)
        self.assertEqual(disks.get(RG, "sdk-disk").disk_size_gb, 128)

        self.assertIn("sdk-disk", [d.name for d in disks.list_by_resource_group(RG)])
        self.assertIn("sdk-disk", [d.name for d in disks.list()])

        disks.begin_delete(RG, "sdk-disk").result()
        with self.assertRaises(ResourceNotFoundError):
            disks.get(RG, "sdk-disk")
        self.assertEqual(api_versions_sent("/disks"), {DISK_API_VERSION})


class NetworkInterfacesTest(SandboxTestCase):
    def test_nic_life_cycle(self):
        nics = self.network.network_interfaces
        subnet = arm_id("Microsoft.Network/virtualNetworks", "nodes/subnets/nodes")
        created = nics.begin_create_or_update(
            RG,
            "sdk-nic",
            nm.NetworkInterface(
                location=LOCATION,
                tags={"nodewright.io-pool": "sdk"},
                ip_configurations=[
                    nm.NetworkInterfaceIPConfiguration(name="ipconfig1", subnet=nm.Subnet(id=subnet))
                ],
            ),
        ).result()
        self.assertEqual(created.provisioning_state, "Succeeded")
        self.assertEqual(created.ip_configurations[0].subnet.id.lower(), subnet.lower())
        self.assertIsNone(created.virtual_machine)

        self.assertEqual(nics.get(RG, "sdk-nic").tags, {"nodewright.io-pool": "sdk"})
        self.assertIn("sdk-nic", [n.name for n in nics.list(RG)])
        self.assertIn("sdk-nic", [n.name for n in nics.list_all()])

        nics.begin_delete(RG, "sdk-nic").result()
        with self.assertRaises(ResourceNotFoundError):
            nics.get(RG, "sdk-nic")
        self.assertEqual(api_versions_sent("/networkInterfaces"), {NIC_API_VERSION})


class PagingTest(SandboxTestCase):
    """Lists longer than a page: the SDK follows `nextLink` to the end."""

    def test_lists_follow_next_link(self):
        disks = self.compute.disks
        names = [f"sdk-page-{i}" for i in range(7)]
        for name in names:
            disks.begin_create_or_update(
                RG,
                name,
                cm.Disk(
                    location=LOCATION,
                    sku=cm.DiskSku(name="Standard_LRS"),
                    creation_data=cm.CreationData(create_option="Empty"),
                    disk_size_gb=4,
                ),
            ).result()
        listed = [d.name for d in disks.list_by_resource_group(RG) if d.name.startswith("sdk-page-")]
        self.assertEqual(sorted(listed), names)
        for name in names:
            disks.begin_delete(RG, name).result()
