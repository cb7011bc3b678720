"""Virtual networks and subnets (`azure-mgmt-network` 33.1, default api-version 2026-03-01):
create with inline subnets, read, list in a group and in the subscription, subnets on their own,
usages, the private IP a NIC gets in a subnet, Azure's refusals (a full subnet, a subnet in use,
overlapping prefixes), delete."""

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.mgmt.network import models as nm

from sdk_support import LOCATION, RESOURCE_GROUP as RG, SandboxTestCase, api_versions_sent

NETWORK_API_VERSION = "2026-03-01"


class VirtualNetworksTest(SandboxTestCase):
    def test_network_subnets_addresses_and_usages(self):
        vnets = self.network.virtual_networks
        subnets = self.network.subnets
        nics = self.network.network_interfaces
        created = vnets.begin_create_or_update(
            RG,
            "sdk-vnet",
            nm.VirtualNetwork(
                location=LOCATION,
                address_space=nm.AddressSpace(address_prefixes=["10.20.0.0/16"]),
                subnets=[nm.Subnet(name="nodes", address_prefix="10.20.0.0/29")],
            ),
        ).result()
        self.assertEqual(created.provisioning_state, "Succeeded")
        self.assertEqual(created.address_space.address_prefixes, ["10.20.0.0/16"])
        self.assertEqual([s.name for s in created.subnets], ["nodes"])
        self.assertIn("sdk-vnet", [v.name for v in vnets.list(RG)])
        self.assertIn("sdk-vnet", [v.name for v in vnets.list_all()])

        extra = subnets.begin_create_or_update(
            RG, "sdk-vnet", "extra", nm.Subnet(address_prefix="10.20.1.0/24")
        ).result()
        self.assertEqual(extra.provisioning_state, "Succeeded")
        self.assertEqual(extra.address_prefix, "10.20.1.0/24")
        self.assertEqual(sorted(s.name for s in subnets.list(RG, "sdk-vnet")), ["extra", "nodes"])
        with self.assertRaises(HttpResponseError) as overlap:
            subnets.begin_create_or_update(
                RG, "sdk-vnet", "overlap", nm.Subnet(address_prefix="10.20.1.128/25")
            )
        self.assertEqual(overlap.exception.status_code, 400)
        self.assertEqual(overlap.exception.error.code, "NetcfgSubnetRangesOverlap")

        nodes = subnets.get(RG, "sdk-vnet", "nodes")
        addresses = []
        for name in ["sdk-vnet-nic-0", "sdk-vnet-nic-1", "sdk-vnet-nic-2"]:
            nic = nics.begin_create_or_update(
                RG,
                name,
                nm.NetworkInterface(
                    location=LOCATION,
                    ip_configurations=[
                        nm.NetworkInterfaceIPConfiguration(
                            name="ipconfig1", subnet=nm.Subnet(id=nodes.id)
                        )
                    ],
                ),
            ).result()
            addresses.append(nic.ip_configurations[0].private_ip_address)
        self.assertEqual(addresses, ["10.20.0.4", "10.20.0.5", "10.20.0.6"])
        with self.assertRaises(HttpResponseError) as full:
            nics.begin_create_or_update(
                RG,
                "sdk-vnet-nic-3",
                nm.NetworkInterface(
                    location=LOCATION,
                    ip_configurations=[
                        nm.NetworkInterfaceIPConfiguration(
                            name="ipconfig1", subnet=nm.Subnet(id=nodes.id)
                        )
                    ],
                ),
            )
        self.assertEqual(full.exception.status_code, 400)
        self.assertEqual(full.exception.error.code, "SubnetIsFull")

        in_nodes = subnets.get(RG, "sdk-vnet", "nodes").ip_configurations
        self.assertEqual(len(in_nodes), 3)
        usage = {u.id.lower(): u for u in vnets.list_usage(RG, "sdk-vnet")}
        row = usage[nodes.id.lower()]
        self.assertEqual((row.current_value, row.limit, row.unit), (3, 3, "Count"))
        self.assertEqual(row.name.value, "Subnet size and usage")

        with self.assertRaises(HttpResponseError) as in_use:
            subnets.begin_delete(RG, "sdk-vnet", "nodes")
        self.assertEqual(in_use.exception.error.code, "InUseSubnetCannotBeDeleted")

        for name in ["sdk-vnet-nic-0", "sdk-vnet-nic-1", "sdk-vnet-nic-2"]:
            nics.begin_delete(RG, name).result()
        subnets.begin_delete(RG, "sdk-vnet", "nodes").result()
        with self.assertRaises(ResourceNotFoundError):
            subnets.get(RG, "sdk-vnet", "nodes")
        vnets.begin_delete(RG, "sdk-vnet").result()
        with self.assertRaises(ResourceNotFoundError):
            vnets.get(RG, "sdk-vnet")
        self.assertEqual(api_versions_sent("/virtualNetworks"), {NETWORK_API_VERSION})
