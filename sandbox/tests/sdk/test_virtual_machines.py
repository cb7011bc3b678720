"""Virtual machines through `azure-mgmt-compute` 39 with its default api-version (2026-04-01):
every VM operation nodewright's own client makes, and the ones a user of the SDK reaches for."""

import base64

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.mgmt.compute import models as cm
from azure.mgmt.network import models as nm

from sdk_support import LOCATION, RESOURCE_GROUP as RG, SandboxTestCase, api_versions_sent, arm_id

VM_API_VERSION = "2026-04-01"
SUBNET = arm_id("Microsoft.Network/virtualNetworks", "nodes/subnets/nodes")


def power_state(view):
    """The `PowerState/...` code of an instance view, without the prefix."""
    codes = [s.code for s in view.statuses or [] if s.code.startswith("PowerState/")]
    return codes[0].split("/", 1)[1] if codes else None


class VirtualMachinesTest(SandboxTestCase):
    def make_nic(self, name):
        nic = nm.NetworkInterface(
            location=LOCATION,
            ip_configurations=[
                nm.NetworkInterfaceIPConfiguration(name="ipconfig1", subnet=nm.Subnet(id=SUBNET))
            ],
        )
        return self.network.network_interfaces.begin_create_or_update(
            RG, name, nic
        ).result()

    def vm_model(self, name, nic_id, data_disks=()):
        return cm.VirtualMachine(
            location=LOCATION,
            zones=["1"],
            tags={"nodewright.io-pool": "sdk"},
            hardware_profile=cm.HardwareProfile(vm_size="Standard_D2s_v5"),
            os_profile=cm.OSProfile(
                computer_name=name,
                admin_username="azureuser",
                custom_data=base64.b64encode(b"#!/bin/sh\ntrue\n").decode(),
                linux_configuration=cm.LinuxConfiguration(
                    disable_password_authentication=True,
                    ssh=cm.SshConfiguration(
                        public_keys=[
                            cm.SshPublicKey(
                                path="/home/azureuser/.ssh/authorized_keys",
                                key_data="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO8sdk sdk@test",
                            )
                        ]
                    ),
                ),
            ),
            storage_profile=cm.StorageProfile(
                image_reference=cm.ImageReference(
                    publisher="Canonical", offer="ubuntu-24_04-lts", sku="server", version="latest"
                ),
                os_disk=cm.OSDisk(
                    create_option="FromImage",
                    delete_option="Delete",
                    managed_disk=cm.ManagedDiskParameters(storage_account_type="Premium_LRS"),
                ),
                data_disks=list(data_disks),
            ),
            network_profile=cm.NetworkProfile(
                network_interfaces=[
                    cm.NetworkInterfaceReference(id=nic_id, primary=True, delete_option="Delete")
                ]
            ),
        )

    def make_vm(self, name):
        nic = self.make_nic(f"{name}-nic")
        poller = self.compute.virtual_machines.begin_create_or_update(
            RG, name, self.vm_model(name, nic.id)
        )
        vm = poller.result()
        self.assertEqual(poller.status(), "Succeeded")
        return vm, nic

    def test_create_read_list_and_delete_with_cascade(self):
        vm, nic = self.make_vm("sdk-vm-1")
        self.assertEqual(vm.provisioning_state, "Succeeded")
        self.assertEqual(vm.name, "sdk-vm-1")
        self.assertEqual(vm.hardware_profile.vm_size, "Standard_D2s_v5")
        self.assertEqual(vm.zones, ["1"])
        self.assertEqual(vm.tags, {"nodewright.io-pool": "sdk"})
        self.assertTrue(vm.vm_id)

        got = self.compute.virtual_machines.get(RG, "sdk-vm-1", expand="instanceView")
        self.assertEqual(power_state(got.instance_view), "running")
        self.assertIn("ProvisioningState/succeeded", [s.code for s in got.instance_view.statuses])
        self.assertEqual(
            self.network.network_interfaces.get(RG, "sdk-vm-1-nic").virtual_machine.id.lower(),
            vm.id.lower(),
        )

        in_group = [v.name for v in self.compute.virtual_machines.list(RG)]
        self.assertIn("sdk-vm-1", in_group)
        everywhere = {v.name: v for v in self.compute.virtual_machines.list_all(status_only="true")}
        self.assertIn("sdk-vm-1", everywhere)
        self.assertEqual(power_state(everywhere["sdk-vm-1"].instance_view), "running")

        updated = self.compute.virtual_machines.begin_update(
            RG, "sdk-vm-1", cm.VirtualMachineUpdate(tags={"nodewright.io-pool": "sdk", "team": "a"})
        ).result()
        self.assertEqual(updated.tags["team"], "a")

        self.compute.virtual_machines.begin_delete(RG, "sdk-vm-1").result()
        with self.assertRaises(ResourceNotFoundError):
            self.compute.virtual_machines.get(RG, "sdk-vm-1")
        # The NIC went with the VM (deleteOption: Delete), as did the OS disk.
        with self.assertRaises(ResourceNotFoundError):
            self.network.network_interfaces.get(RG, nic.name)
        self.assertEqual(api_versions_sent("/virtualMachines"), {VM_API_VERSION})

    def test_power_actions_move_the_power_state(self):
        self.make_vm("sdk-vm-power")
        vms = self.compute.virtual_machines
        vms.begin_power_off(RG, "sdk-vm-power", skip_shutdown=True).result()
        self.assertEqual(power_state(vms.instance_view(RG, "sdk-vm-power")), "stopped")
        vms.begin_start(RG, "sdk-vm-power").result()
        self.assertEqual(power_state(vms.instance_view(RG, "sdk-vm-power")), "running")
        vms.begin_restart(RG, "sdk-vm-power").result()
        self.assertEqual(power_state(vms.instance_view(RG, "sdk-vm-power")), "running")
        vms.begin_deallocate(RG, "sdk-vm-power").result()
        self.assertEqual(power_state(vms.instance_view(RG, "sdk-vm-power")), "deallocated")
        with self.assertRaises(HttpResponseError) as refused:
            vms.begin_restart(RG, "sdk-vm-power").result()
        self.assertEqual(refused.exception.status_code, 409)
        self.assertEqual(refused.exception.error.code, "OperationNotAllowed")
        vms.begin_delete(RG, "sdk-vm-power", force_deletion=True).result()

    def test_data_disks_attach_and_detach(self):
        self.make_vm("sdk-vm-disks")
        disks = self.compute.disks
        for name in ("sdk-data-0", "sdk-data-1"):
            disks.begin_create_or_update(
                RG,
                name,
                cm.Disk(
                    location=LOCATION,
                    zones=["1"],
                    sku=cm.DiskSku(name="Premium_LRS"),
                    creation_data=cm.CreationData(create_option="Empty"),
                    disk_size_gb=32,
                ),
            ).result()
        vms = self.compute.virtual_machines

        # Attach through a PATCH of the VM's data disks, as nodewright does.
        vm = vms.get(RG, "sdk-vm-disks")
        vm_disks = list(vm.storage_profile.data_disks or [])
        vm_disks.append(
            cm.DataDisk(
                lun=0,
                create_option="Attach",
                delete_option="Detach",
                managed_disk=cm.ManagedDiskParameters(id=arm_id("Microsoft.Compute/disks", "sdk-data-0")),
            )
        )
        vms.begin_update(
            RG,
            "sdk-vm-disks",
            cm.VirtualMachineUpdate(storage_profile=cm.StorageProfile(data_disks=vm_disks)),
        ).result()
        attached = disks.get(RG, "sdk-data-0")
        self.assertEqual(attached.disk_state, "Attached")
        self.assertEqual(attached.managed_by.lower(), vm.id.lower())

        # And through attachDetachDataDisks.
        vms.begin_attach_detach_data_disks(
            RG,
            "sdk-vm-disks",
            cm.AttachDetachDataDisksRequest(
                data_disks_to_attach=[
                    cm.DataDisksToAttach(disk_id=arm_id("Microsoft.Compute/disks", "sdk-data-1"), lun=1)
                ],
                data_disks_to_detach=[
                    cm.DataDisksToDetach(disk_id=arm_id("Microsoft.Compute/disks", "sdk-data-0"))
                ],
            ),
        ).result()
        self.assertEqual(disks.get(RG, "sdk-data-0").disk_state, "Unattached")
        self.assertEqual(disks.get(RG, "sdk-data-1").disk_state, "Attached")
        luns = {d.lun: d.name for d in vms.get(RG, "sdk-vm-disks").storage_profile.data_disks}
        self.assertEqual(luns, {1: "sdk-data-1"})

        # An attached disk cannot be deleted; the VM's deletion leaves it (deleteOption: Detach).
        with self.assertRaises(HttpResponseError) as refused:
            disks.begin_delete(RG, "sdk-data-1").result()
        self.assertEqual(refused.exception.error.code, "OperationNotAllowed")

        # A ForceDetach through a PATCH marking the disk `toBeDetached`, as nodewright sends it.
        marked = [
            cm.DataDisk(
                lun=d.lun,
                create_option="Attach",
                managed_disk=cm.ManagedDiskParameters(id=d.managed_disk.id),
                to_be_detached=True,
                detach_option="ForceDetach",
            )
            for d in vms.get(RG, "sdk-vm-disks").storage_profile.data_disks
        ]
        vms.begin_update(
            RG, "sdk-vm-disks", cm.VirtualMachineUpdate(storage_profile=cm.StorageProfile(data_disks=marked))
        ).result()
        self.assertEqual(disks.get(RG, "sdk-data-1").disk_state, "Unattached")
        self.assertEqual(vms.get(RG, "sdk-vm-disks").storage_profile.data_disks, [])

        vms.begin_attach_detach_data_disks(
            RG,
            "sdk-vm-disks",
            cm.AttachDetachDataDisksRequest(
                data_disks_to_attach=[
                    cm.DataDisksToAttach(disk_id=arm_id("Microsoft.Compute/disks", "sdk-data-0"), lun=0)
                ]
            ),
        ).result()
        self.assertEqual(disks.get(RG, "sdk-data-0").disk_state, "Attached")
        vms.begin_delete(RG, "sdk-vm-disks").result()
        self.assertEqual(disks.get(RG, "sdk-data-0").disk_state, "Unattached")
        for name in ("sdk-data-0", "sdk-data-1"):
            disks.begin_delete(RG, name).result()
            with self.assertRaises(ResourceNotFoundError):
                disks.get(RG, name)
