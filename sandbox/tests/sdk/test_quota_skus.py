"""Resource SKUs and compute quota through `azure-mgmt-compute` 39 with its default api-versions
(2021-07-01 for `resource_skus.list`, 2026-04-01 for `usage.list`): the sizes the sandbox knows
with their capabilities and restrictions, usage per family and in total, and a VM create the
SDK sees refused for quota (409 `OperationNotAllowed`) or for a size restricted in its zone (409
`SkuNotAvailable`)."""

from azure.core.exceptions import HttpResponseError
from azure.mgmt.compute import models as cm

from sdk_support import LOCATION, RESOURCE_GROUP as RG, SandboxTestCase, api_versions_sent, sandbox_admin


def capability(sku, name):
    """The value of the SKU's capability `name`, or None."""
    return next((c.value for c in sku.capabilities or [] if c.name == name), None)


def vm_model(size, zone):
    """A VM of `size` in `zone` without NICs (the emulator does not require one)."""
    return cm.VirtualMachine(
        location=LOCATION,
        zones=[zone],
        hardware_profile=cm.HardwareProfile(vm_size=size),
        os_profile=cm.OSProfile(computer_name="quota", admin_username="azureuser", admin_password="Sandbox-only-1"),
        storage_profile=cm.StorageProfile(
            image_reference=cm.ImageReference(
                publisher="Canonical", offer="ubuntu-24_04-lts", sku="server", version="latest"
            ),
            os_disk=cm.OSDisk(create_option="FromImage", delete_option="Delete"),
        ),
        network_profile=cm.NetworkProfile(network_interfaces=[]),
    )


class QuotaAndSkusTest(SandboxTestCase):
    def tearDown(self):
        # The files share one emulator: leave the default quota for the others.
        sandbox_admin("/sandbox/quota", method="PUT", body={})

    def usages(self):
        return {u.name.value: u for u in self.compute.usage.list(LOCATION)}

    def test_resource_skus_list_the_known_sizes_of_a_location_over_pages(self):
        sandbox_admin(
            "/sandbox/quota",
            method="PUT",
            body={"restrictions": [{"size": "Standard_D4s_v5", "location": LOCATION, "zones": ["3"]}]},
        )
        skus = list(self.compute.resource_skus.list(filter=f"location eq '{LOCATION}'"))
        self.assertGreaterEqual(len(skus), 40)
        self.assertEqual(len({s.name for s in skus}), len(skus))
        self.assertTrue(all(s.resource_type == "virtualMachines" and s.locations == [LOCATION] for s in skus))
        d2s = next(s for s in skus if s.name == "Standard_D2s_v5")
        self.assertEqual((d2s.tier, d2s.size, d2s.family), ("Standard", "D2s_v5", "standardDSv5Family"))
        self.assertEqual(capability(d2s, "vCPUs"), "2")
        self.assertEqual(capability(d2s, "MemoryGB"), "8")
        self.assertEqual(capability(d2s, "PremiumIO"), "True")
        self.assertEqual(d2s.location_info[0].location, LOCATION)
        self.assertEqual(sorted(d2s.location_info[0].zones), ["1", "2", "3"])
        self.assertEqual(d2s.restrictions, [])
        d4s = next(s for s in skus if s.name == "Standard_D4s_v5")
        [restriction] = d4s.restrictions
        self.assertEqual(restriction.type, "Zone")
        self.assertEqual(restriction.reason_code, "NotAvailableForSubscription")
        self.assertEqual(restriction.restriction_info.zones, ["3"])
        self.assertEqual(api_versions_sent("/Microsoft.Compute/skus"), {"2021-07-01"})

    def test_usage_lists_the_regional_and_family_vcpus_the_vms_hold(self):
        before = self.usages()
        self.assertEqual(before["cores"].name.localized_value, "Total Regional vCPUs")
        self.assertEqual(before["standardDSv5Family"].name.localized_value, "Standard DSv5 Family vCPUs")
        self.assertEqual(before["cores"].unit, "Count")
        self.assertEqual(before["cores"].limit, 100000)
        self.compute.virtual_machines.begin_create_or_update(
            RG, "sdk-quota-counted", vm_model("Standard_D4s_v5", "1")
        ).result()
        after = self.usages()
        self.assertEqual(after["cores"].current_value, before["cores"].current_value + 4)
        self.assertEqual(
            after["standardDSv5Family"].current_value, before["standardDSv5Family"].current_value + 4
        )
        self.assertEqual(after["virtualMachines"].current_value, before["virtualMachines"].current_value + 1)
        self.compute.virtual_machines.begin_delete(RG, "sdk-quota-counted").result()
        self.assertEqual(self.usages()["cores"].current_value, before["cores"].current_value)
        self.assertEqual(api_versions_sent("/usages"), {"2026-04-01"})

    def test_a_create_beyond_the_family_quota_is_refused_for_the_sdk(self):
        used = self.usages()["standardDSv5Family"].current_value
        sandbox_admin("/sandbox/quota", method="PUT", body={"families": {"standardDSv5Family": used + 2}})
        with self.assertRaises(HttpResponseError) as refused:
            self.compute.virtual_machines.begin_create_or_update(
                RG, "sdk-quota-over", vm_model("Standard_D4s_v5", "1")
            ).result()
        self.assertEqual(refused.exception.status_code, 409)
        self.assertEqual(refused.exception.error.code, "OperationNotAllowed")
        self.assertIn(
            f"exceeding approved standardDSv5Family Cores quota. Additional details - Deployment Model: "
            f"Resource Manager, Location: {LOCATION}, Current Limit: {used + 2}, Current Usage: {used}, "
            f"Additional Required: 4, (Minimum) New Limit Required: {used + 4}.",
            refused.exception.error.message,
        )
        self.assertEqual(self.usages()["standardDSv5Family"].limit, used + 2)

    def test_a_size_restricted_in_its_zone_is_sku_not_available(self):
        sandbox_admin(
            "/sandbox/quota",
            method="PUT",
            body={"restrictions": [{"size": "Standard_D2s_v5", "location": LOCATION, "zones": ["2"]}]},
        )
        with self.assertRaises(HttpResponseError) as refused:
            self.compute.virtual_machines.begin_create_or_update(
                RG, "sdk-quota-zone", vm_model("Standard_D2s_v5", "2")
            ).result()
        self.assertEqual(refused.exception.status_code, 409)
        self.assertEqual(refused.exception.error.code, "SkuNotAvailable")
        self.assertIn(f"is currently not available in location '{LOCATION}' zones '2'", refused.exception.error.message)
