//! The VM REST calls: get (optionally with the instance view), put, patch, delete (optionally
//! forced), list (and the subscription's power statuses), data disk attach/detach, and the
//! restart and redeploy actions.
//!
//! Data disks can be changed two ways, both provided:
//! - [`ArmClient::attach_detach_data_disks`] (`POST …/attachDetachDataDisks`, 202 + `Location`)
//!   is incremental: it names only the disks that change, so two writers cannot overwrite each
//!   other's list. Preferred against real Azure.
//! - [`ArmClient::set_data_disks`] PATCHes the whole `storageProfile.dataDisks` list (entries from
//!   [`DataDisk::attach`], or marked with [`DataDisk::mark_detached`]). This is the path the ARM
//!   contract page and the sandbox describe; it needs the current list from a GET first.

use reqwest::Method;
use serde::Serialize;
use serde_json::{Value, json};

use super::{
    API_VERSION, AttachDetachDataDisks, DataDisk, RESOURCE_TYPE, VirtualMachine, VmStatus,
};
use crate::azure::client::{ArmClient, Deletion, Submitted};
use crate::azure::error::{Error, Result};
use crate::azure::operation::OperationHandle;

impl ArmClient {
    /// The ARM id of the VM `name` in this resource group.
    pub fn vm_id(&self, name: &str) -> String {
        self.resource_id(RESOURCE_TYPE, name)
    }

    /// Reads the VM `name`. A missing VM is [`Error::GetVm`] with disposition `Gone`.
    pub async fn get_vm(&self, name: &str) -> Result<VirtualMachine> {
        let url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        self.get(url).await.map_err(|source| Error::GetVm {
            name: name.to_owned(),
            source,
        })
    }

    /// Reads the VM `name` with `$expand=instanceView` (power state, statuses).
    pub async fn get_vm_with_instance_view(&self, name: &str) -> Result<VirtualMachine> {
        let mut url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        url.query_pairs_mut().append_pair("$expand", "instanceView");
        self.get(url).await.map_err(|source| Error::GetVm {
            name: name.to_owned(),
            source,
        })
    }

    /// Creates or replaces the VM `name` (201 or 200, with `Azure-AsyncOperation`).
    pub async fn put_vm(
        &self,
        name: &str,
        vm: &VirtualMachine,
    ) -> Result<Submitted<VirtualMachine>> {
        let url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        self.write(Method::PUT, url, vm)
            .await
            .map_err(|source| Error::PutVm {
                name: name.to_owned(),
                source,
            })
    }

    /// Creates the VM `name` only if there is none: `If-None-Match: *`, which Azure answers
    /// 412 `PreconditionFailed` (see [`is_already_there`]) when a VM of that name exists, so a
    /// create needs no GET first.
    pub async fn create_vm(
        &self,
        name: &str,
        vm: &VirtualMachine,
    ) -> Result<Submitted<VirtualMachine>> {
        let url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        self.write_with_headers(Method::PUT, url, vm, &[("If-None-Match", "*")])
            .await
            .map_err(|source| Error::PutVm {
                name: name.to_owned(),
                source,
            })
    }

    /// Updates the VM `name` with a partial body (JSON merge: arrays are replaced whole).
    pub async fn patch_vm<B: Serialize>(
        &self,
        name: &str,
        patch: &B,
    ) -> Result<Submitted<VirtualMachine>> {
        let url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        self.write(Method::PATCH, url, patch)
            .await
            .map_err(|source| Error::PatchVm {
                name: name.to_owned(),
                source,
            })
    }

    /// Replaces the VM's data disk list by PATCH: `disks` is the full list to keep, with new
    /// entries from [`DataDisk::attach`] and leaving ones marked by
    /// [`DataDisk::mark_detached`]. An empty list is sent as `[]`.
    pub async fn set_data_disks(
        &self,
        name: &str,
        disks: &[DataDisk],
    ) -> Result<Submitted<VirtualMachine>> {
        self.patch_vm(name, &data_disks_patch(disks)).await
    }

    /// Attaches and detaches data disks incrementally (`POST …/attachDetachDataDisks`). The
    /// operation's `Location` poll ends with the VM's storage profile as its result.
    pub async fn attach_detach_data_disks(
        &self,
        name: &str,
        change: &AttachDetachDataDisks,
    ) -> Result<Submitted<Value>> {
        let url = self.resource_url(RESOURCE_TYPE, &[name, "attachDetachDataDisks"], API_VERSION);
        self.write(Method::POST, url, change)
            .await
            .map_err(|source| Error::AttachDetachDataDisks {
                name: name.to_owned(),
                source,
            })
    }

    /// Deletes the VM `name`, with `forceDeletion=true` when `force`. A missing VM is
    /// [`Deletion::AlreadyGone`].
    pub async fn delete_vm(&self, name: &str, force: bool) -> Result<Deletion> {
        let mut url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        if force {
            url.query_pairs_mut().append_pair("forceDeletion", "true");
        }
        self.delete(url).await.map_err(|source| Error::DeleteVm {
            name: name.to_owned(),
            source,
        })
    }

    /// Lists the resource group's VMs, every page.
    pub async fn list_vms(&self) -> Result<Vec<VirtualMachine>> {
        let url = self.resource_url(RESOURCE_TYPE, &[], API_VERSION);
        self.list(url).await.map_err(Error::ListVms)
    }

    /// Lists the run-time status of every VM of the subscription, every page
    /// (`VirtualMachines_ListAll` with `statusOnly=true`): each VM's id, name and
    /// `properties.instanceView`. The one documented list that carries instance views of
    /// standalone VMs: the resource group's list takes `$expand=instanceView` only with a scale
    /// set `$filter`, and a `statusOnly` answer may lack tags, so callers join it by id with
    /// [`Self::list_vms`]. Needs `Microsoft.Compute/virtualMachines/read` at the subscription.
    pub async fn list_vm_statuses(&self) -> Result<Vec<VmStatus>> {
        let mut url = self.id_url(
            &format!(
                "/subscriptions/{}/providers/{RESOURCE_TYPE}",
                self.subscription_id()
            ),
            API_VERSION,
        );
        url.query_pairs_mut().append_pair("statusOnly", "true");
        self.list(url).await.map_err(Error::ListVms)
    }

    /// Starts the VM action `action` (`restart`, `redeploy`): `POST …/{name}/{action}` without
    /// a body, 202 with the operation to poll (none when ARM finished at once).
    pub async fn vm_action(
        &self,
        name: &str,
        action: &'static str,
    ) -> Result<Option<OperationHandle>> {
        let url = self.resource_url(RESOURCE_TYPE, &[name, action], API_VERSION);
        let failed = |source| Error::VmAction {
            name: name.to_owned(),
            action,
            source: Box::new(source),
        };
        let answer = self.send(Method::POST, url, None).await.map_err(failed)?;
        self.operation_handle(&answer).map_err(failed)
    }
}

/// The PATCH body that sets `storageProfile.dataDisks` to `disks`.
pub fn data_disks_patch(disks: &[DataDisk]) -> Value {
    json!({ "properties": { "storageProfile": { "dataDisks": disks } } })
}

/// Whether a create-only write ([`ArmClient::create_vm`]) found the resource there already
/// (412 `PreconditionFailed`).
pub fn is_already_there(error: &Error) -> bool {
    error
        .arm_failure()
        .is_some_and(|failure| failure.status == 412 && !failure.operation_failed)
}
