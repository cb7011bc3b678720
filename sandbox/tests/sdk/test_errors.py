"""ARM's error answers as the SDK reads them: the exception type, the status and the error code
and message the SDK parses out of the body."""

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.mgmt.compute import models as cm

from sdk_support import RESOURCE_GROUP as RG, SandboxTestCase


class ErrorsTest(SandboxTestCase):
    def test_missing_resources_are_resource_not_found(self):
        with self.assertRaises(ResourceNotFoundError) as missing:
            self.compute.virtual_machines.get(RG, "sdk-nobody")
        self.assertEqual(missing.exception.status_code, 404)
        self.assertEqual(missing.exception.error.code, "ResourceNotFound")
        with self.assertRaises(ResourceNotFoundError):
            self.network.network_interfaces.get(RG, "sdk-nobody")

    def test_an_unsupported_api_version_is_refused_with_the_supported_ones(self):
        # The SDK takes an api-version per call (its client-wide setting is not used per group).
        with self.assertRaises(HttpResponseError) as refused:
            self.compute.disks.get(RG, "sdk-any", api_version="2019-03-01")
        self.assertEqual(refused.exception.status_code, 400)
        self.assertEqual(refused.exception.error.code, "InvalidApiVersionParameter")
        self.assertIn("The api-version '2019-03-01' is invalid", refused.exception.error.message)
        self.assertIn("2026-03-02", refused.exception.error.message)

    def test_a_bad_body_is_refused_naming_the_field(self):

        with self.assertRaises(HttpResponseError) as refused:
            self.compute.virtual_machines.begin_create_or_update(
                RG,
                "sdk-no-login",
                cm.VirtualMachine(
                    location="westeurope",
                    hardware_profile=cm.HardwareProfile(vm_size="Standard_D2s_v5"),
                    os_profile=cm.OSProfile(
                        computer_name="x",
                        admin_username="azureuser",
                        linux_configuration=cm.LinuxConfiguration(disable_password_authentication=True),
                    ),
                    storage_profile=cm.StorageProfile(
                        image_reference=cm.ImageReference(
                            publisher="Canonical", offer="ubuntu-24_04-lts", sku="server", version="latest"
                        ),
                        os_disk=cm.OSDisk(create_option="FromImage"),
                    ),
                    network_profile=cm.NetworkProfile(network_interfaces=[]),
                ),
            ).result()
        self.assertEqual(refused.exception.status_code, 400)
        self.assertEqual(refused.exception.error.code, "InvalidParameter")
        self.assertEqual(refused.exception.error.target, "linuxConfiguration")
