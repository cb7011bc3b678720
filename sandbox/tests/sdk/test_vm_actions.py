"""VM actions through `azure-mgmt-compute` 39 with its default api-version: `begin_redeploy`,
`begin_reimage`, `simulate_eviction` (Spot VMs, evicted after a 1 s Preempt notice), their
instance views, and the VM lists'
`$filter`/`$expand` (`list(filter=..., expand="instanceView")`)."""

import time

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.mgmt.compute import models as cm

from sdk_support import LOCATION, RESOURCE_GROUP as RG, SandboxTestCase, arm_id, sandbox_admin

SCALE_SET = arm_id("Microsoft.Compute/virtualMachineScaleSets", "sdk-actions-pool")


def power_state(view):
    """The `PowerState/...` code of an instance view, without the prefix."""
    codes = [s.code for s in view.statuses or [] if s.code.startswith("PowerState/")]
    return codes[0].split("/", 1)[1] if codes else None


def vm_model(priority=None, eviction_policy=None, scale_set=None, delete_option="Delete"):
    """A VM without NICs, its OS disk from an image."""
    return cm.VirtualMachine(
        location=LOCATION,
        hardware_profile=cm.HardwareProfile(vm_size="Standard_D2s_v5"),
        os_profile=cm.OSProfile(
            computer_name="sdk-actions", admin_username="azureuser", admin_password="Pa55word!x"
        ),
        storage_profile=cm.StorageProfile(
            image_reference=cm.ImageReference(
                publisher="Canonical", offer="ubuntu-24_04-lts", sku="server", version="latest"
            ),
            os_disk=cm.OSDisk(
                create_option="FromImage",
                delete_option=delete_option,
                managed_disk=cm.ManagedDiskParameters(storage_account_type="Premium_LRS"),
            ),
        ),
        priority=priority,
        eviction_policy=eviction_policy,
        virtual_machine_scale_set=cm.SubResource(id=scale_set) if scale_set else None,
    )


class VmActionsTest(SandboxTestCase):
    def make(self, name, **kwargs):
        return self.compute.virtual_machines.begin_create_or_update(
            RG, name, vm_model(**kwargs)
        ).result()

    def test_redeploy_and_reimage_end_running_with_a_new_os_disk(self):
        vms = self.compute.virtual_machines
        vm = self.make("sdk-act-rd", delete_option="Detach")
        old_disk = vm.storage_profile.os_disk.managed_disk.id
        poller = vms.begin_redeploy(RG, "sdk-act-rd")
        poller.result()
        self.assertEqual(poller.status(), "Succeeded")
        self.assertEqual(power_state(vms.instance_view(RG, "sdk-act-rd")), "running")

        poller = vms.begin_reimage(RG, "sdk-act-rd", cm.VirtualMachineReimageParameters(
            exact_version="24.04.202511010"
        ))
        poller.result()
        self.assertEqual(poller.status(), "Succeeded")
        after = vms.get(RG, "sdk-act-rd", expand="instanceView")
        self.assertEqual(power_state(after.instance_view), "running")
        self.assertNotEqual(after.storage_profile.os_disk.managed_disk.id.lower(), old_disk.lower())
        self.assertEqual(after.storage_profile.image_reference.exact_version, "24.04.202511010")
        kept = self.compute.disks.get(RG, old_disk.rsplit("/", 1)[1])
        self.assertEqual(kept.disk_state, "Unattached")

        with self.assertRaises(HttpResponseError) as refused:
            vms.begin_reimage(
                RG, "sdk-act-rd", cm.VirtualMachineReimageParameters(temp_disk=True)
            ).result()
        self.assertEqual(refused.exception.status_code, 400)
        self.assertEqual(refused.exception.error.code, "InvalidParameter")
        vms.begin_delete(RG, "sdk-act-rd").result()

    def test_simulate_eviction_evicts_spot_vms_only(self):
        vms = self.compute.virtual_machines
        self.make("sdk-act-regular")
        with self.assertRaises(HttpResponseError) as refused:
            vms.simulate_eviction(RG, "sdk-act-regular")
        self.assertEqual(refused.exception.status_code, 409)
        self.assertEqual(refused.exception.error.code, "OperationNotAllowed")

        # A short notice: the Preempt Scheduled Event comes 1 s before the eviction.
        notice = sandbox_admin("/sandbox/eviction-notice")
        sandbox_admin("/sandbox/eviction-notice", "PUT", {"seconds": 1})
        try:
            self.make("sdk-act-spot", priority="Spot", eviction_policy="Deallocate")
            self.assertIsNone(vms.simulate_eviction(RG, "sdk-act-spot"))
            view = self.poll_view("sdk-act-spot", lambda v: power_state(v) == "deallocated")
            self.assertIn("ProvisioningState/succeeded", [s.code for s in view.statuses])

            self.make("sdk-act-spot-del", priority="Spot", eviction_policy="Delete")
            vms.simulate_eviction(RG, "sdk-act-spot-del")
            deadline = time.monotonic() + 10
            with self.assertRaises(ResourceNotFoundError):
                while time.monotonic() < deadline:
                    vms.get(RG, "sdk-act-spot-del")
                    time.sleep(0.1)
        finally:
            sandbox_admin("/sandbox/eviction-notice", "PUT", notice)
        for name in ("sdk-act-regular", "sdk-act-spot"):
            vms.begin_delete(RG, name).result()

    def poll_view(self, name, done, timeout=10):
        """Polls VM `name`'s instance view until `done(view)` holds; returns that view."""
        deadline = time.monotonic() + timeout
        while True:
            view = self.compute.virtual_machines.instance_view(RG, name)
            if done(view) or time.monotonic() > deadline:
                return view
            time.sleep(0.1)

    def test_lists_filter_by_scale_set_with_instance_views(self):
        vms = self.compute.virtual_machines
        self.make("sdk-act-in-set", scale_set=SCALE_SET)
        self.make("sdk-act-alone")
        flt = f"virtualMachineScaleSet/id eq '{SCALE_SET}'"
        for listed in (
            list(vms.list(RG, filter=flt, expand="instanceView")),
            list(vms.list_all(filter=flt, expand="instanceView")),
        ):
            self.assertEqual([v.name for v in listed], ["sdk-act-in-set"])
            self.assertEqual(power_state(listed[0].instance_view), "running")
        with self.assertRaises(HttpResponseError) as refused:
            list(vms.list(RG, expand="instanceView"))
        self.assertEqual(refused.exception.status_code, 400)
        self.assertEqual(refused.exception.error.code, "BadRequest")
        for name in ("sdk-act-in-set", "sdk-act-alone"):
            vms.begin_delete(RG, name).result()
