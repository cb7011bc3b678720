"""Marketplace images and Azure Compute Galleries through `azure-mgmt-compute` 39 with its default
api-versions (2026-04-01 for `virtual_machine_images`, 2026-03-03 for the galleries): image
version lists and GETs, a version published while the emulator runs, a gallery with a definition
and versions made, listed, updated and deleted the SDK's way (long-running operations polled),
and VMs created from `latest` whose `image_reference.exact_version` names the version they got."""

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.mgmt.compute import models as cm

from sdk_support import LOCATION, RESOURCE_GROUP as RG, SandboxTestCase, api_versions_sent, sandbox_admin

OFFER = "ubuntu-24_04-lts"
GALLERY = "sdk_images_gallery"
DEFINITION = "sdk-node"


def vm_model(image_reference):
    """A VM from `image_reference` without NICs (the emulator does not require one)."""
    return cm.VirtualMachine(
        location=LOCATION,
        hardware_profile=cm.HardwareProfile(vm_size="Standard_D2s_v5"),
        os_profile=cm.OSProfile(computer_name="images", admin_username="azureuser", admin_password="Sandbox-only-1"),
        storage_profile=cm.StorageProfile(
            image_reference=image_reference,
            os_disk=cm.OSDisk(create_option="FromImage", delete_option="Delete"),
        ),
        network_profile=cm.NetworkProfile(network_interfaces=[]),
    )


def version_model(exclude_from_latest=False):
    return cm.GalleryImageVersion(
        location=LOCATION,
        publishing_profile=cm.GalleryImageVersionPublishingProfile(exclude_from_latest=exclude_from_latest),
        storage_profile=cm.GalleryImageVersionStorageProfile(
            source=cm.GalleryArtifactVersionFullSource(
                virtual_machine_id=f"/subscriptions/x/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachines/builder"
            )
        ),
    )


class MarketplaceImagesTest(SandboxTestCase):
    def test_versions_are_listed_newest_first_with_top_and_read_whole(self):
        images = self.compute.virtual_machine_images
        skus = [s.name for s in images.list_skus(LOCATION, "Canonical", OFFER)]
        self.assertIn("server", skus)
        self.assertIn("Canonical", [p.name for p in images.list_publishers(LOCATION)])
        self.assertIn(OFFER, [o.name for o in images.list_offers(LOCATION, "Canonical")])
        [newest] = images.list(LOCATION, "Canonical", OFFER, "server", top=1, orderby="name desc")
        self.assertEqual(newest.location, LOCATION)
        image = images.get(LOCATION, "Canonical", OFFER, "server", newest.name)
        self.assertEqual(image.os_disk_image.operating_system, "Linux")
        self.assertEqual(image.hyper_v_generation, "V2")
        self.assertEqual(image.architecture, "x64")
        whole = images.list_with_properties(LOCATION, "Canonical", OFFER, "server-arm64", expand="Properties")
        self.assertTrue(whole and all(v.architecture == "Arm64" for v in whole))
        with self.assertRaises(ResourceNotFoundError) as missing:
            images.get(LOCATION, "Canonical", OFFER, "server", "1.2.3")
        self.assertEqual(missing.exception.error.code, "NotFound")
        self.assertEqual(api_versions_sent("/artifacttypes/vmimage/"), {"2026-04-01"})

    def test_a_vm_from_latest_gets_a_version_published_while_the_sandbox_runs(self):
        sandbox_admin("/sandbox/images/Canonical/ubuntu-24_04-lts/server-gen1/24.04.209912310", method="PUT")
        try:
            reference = cm.ImageReference(publisher="Canonical", offer=OFFER, sku="server-gen1", version="latest")
            vm = self.compute.virtual_machines.begin_create_or_update(RG, "sdk-image-latest", vm_model(reference)).result()
            self.assertEqual(vm.storage_profile.image_reference.exact_version, "24.04.209912310")
            got = self.compute.virtual_machines.get(RG, "sdk-image-latest")
            self.assertEqual(got.storage_profile.image_reference.exact_version, "24.04.209912310")
            self.compute.virtual_machines.begin_delete(RG, "sdk-image-latest").result()
        finally:
            sandbox_admin("/sandbox/images/Canonical/ubuntu-24_04-lts/server-gen1/24.04.209912310", method="DELETE")

    def test_an_image_the_catalog_lacks_is_platform_image_not_found(self):
        reference = cm.ImageReference(publisher="Contoso", offer="none", sku="none", version="latest")
        with self.assertRaises(HttpResponseError) as refused:
            self.compute.virtual_machines.begin_create_or_update(RG, "sdk-image-none", vm_model(reference))
        self.assertEqual(refused.exception.status_code, 404)
        self.assertEqual(refused.exception.error.code, "PlatformImageNotFound")


class GalleriesTest(SandboxTestCase):
    def test_a_gallery_definition_and_versions_through_their_long_running_operations(self):
        galleries = self.compute.galleries
        definitions = self.compute.gallery_images
        versions = self.compute.gallery_image_versions
        gallery = galleries.begin_create_or_update(
            RG, GALLERY, cm.Gallery(location=LOCATION, description="nodes")
        ).result()
        self.assertEqual(gallery.provisioning_state, "Succeeded")
        self.assertTrue(gallery.identifier.unique_name.endswith("-" + GALLERY.upper()))
        definition = definitions.begin_create_or_update(
            RG,
            GALLERY,
            DEFINITION,
            cm.GalleryImage(
                location=LOCATION,
                os_type="Linux",
                os_state="Generalized",
                hyper_v_generation="V2",
                identifier=cm.GalleryImageIdentifier(publisher="contoso", offer="nodes", sku="ubuntu"),
            ),
        ).result()
        self.assertEqual(definition.provisioning_state, "Succeeded")
        for name, excluded in [("1.0.0", False), ("1.1.0", False), ("2.0.0", True)]:
            made = versions.begin_create_or_update(RG, GALLERY, DEFINITION, name, version_model(excluded)).result()
            self.assertEqual(made.provisioning_state, "Succeeded")
        listed = [v.name for v in versions.list_by_gallery_image(RG, GALLERY, DEFINITION)]
        self.assertEqual(listed, ["1.0.0", "1.1.0", "2.0.0"])
        self.assertIn(GALLERY, [g.name for g in galleries.list_by_resource_group(RG)])

        latest = self.compute.virtual_machines.begin_create_or_update(
            RG, "sdk-gallery-latest", vm_model(cm.ImageReference(id=definition.id))
        ).result()
        self.assertEqual(latest.storage_profile.image_reference.exact_version, "1.1.0")

        # Lifting 2.0.0's exclusion makes it the latest.
        updated = versions.begin_update(
            RG,
            GALLERY,
            DEFINITION,
            "2.0.0",
            cm.GalleryImageVersionUpdate(
                publishing_profile=cm.GalleryImageVersionPublishingProfile(exclude_from_latest=False)
            ),
        ).result()
        self.assertFalse(updated.publishing_profile.exclude_from_latest)
        newer = self.compute.virtual_machines.begin_create_or_update(
            RG, "sdk-gallery-newer", vm_model(cm.ImageReference(id=f"{definition.id}/versions/latest"))
        ).result()
        self.assertEqual(newer.storage_profile.image_reference.exact_version, "2.0.0")

        with self.assertRaises(ResourceExistsError) as nested:
            galleries.begin_delete(RG, GALLERY).result()
        self.assertEqual(nested.exception.error.code, "CannotDeleteResource")
        with self.assertRaises(HttpResponseError) as bad_name:
            versions.begin_create_or_update(RG, GALLERY, DEFINITION, "3.0", version_model()).result()
        self.assertEqual(bad_name.exception.status_code, 400)

        for vm in ["sdk-gallery-latest", "sdk-gallery-newer"]:
            self.compute.virtual_machines.begin_delete(RG, vm).result()
        for name in listed:
            versions.begin_delete(RG, GALLERY, DEFINITION, name).result()
        definitions.begin_delete(RG, GALLERY, DEFINITION).result()
        galleries.begin_delete(RG, GALLERY).result()
        with self.assertRaises(ResourceNotFoundError):
            galleries.get(RG, GALLERY)
        self.assertEqual(api_versions_sent("/galleries/"), {"2026-03-03"})
