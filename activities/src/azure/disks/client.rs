//! The managed disk REST calls: get, put, patch of the tags, delete, list.

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::json;

use super::{API_VERSION, Disk, RESOURCE_TYPE};
use crate::azure::client::{ArmClient, Deletion, Submitted};
use crate::azure::error::{Error, Result};

impl ArmClient {
    /// The ARM id of the managed disk `name` in this resource group.
    pub fn disk_id(&self, name: &str) -> String {
        self.resource_id(RESOURCE_TYPE, name)
    }

    /// Reads the disk `name`. A missing disk is [`Error::GetDisk`] with disposition `Gone`.
    pub async fn get_disk(&self, name: &str) -> Result<Disk> {
        let url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        self.get(url).await.map_err(|source| Error::GetDisk {
            name: name.to_owned(),
            source,
        })
    }

    /// Reads the managed disk with ARM id `id`, in whatever resource group it lives (the CSI
    /// driver may create volumes outside the cluster's). A missing disk is [`Error::GetDisk`]
    /// with disposition `Gone`.
    pub async fn get_disk_by_id(&self, id: &str) -> Result<Disk> {
        let url = self.id_url(id, API_VERSION);
        self.get(url).await.map_err(|source| Error::GetDisk {
            name: id.to_owned(),
            source,
        })
    }

    /// Creates or replaces the disk `name` (200, or 202 + `Location`).
    pub async fn put_disk(&self, name: &str, disk: &Disk) -> Result<Submitted<Disk>> {
        let url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        self.write(Method::PUT, url, disk)
            .await
            .map_err(|source| Error::PutDisk {
                name: name.to_owned(),
                source,
            })
    }

    /// Sets the disk's tags to `tags` with one PATCH `{"tags": {...}}` (200, or 202 +
    /// `Location`). ARM's PATCH replaces the whole tags object: `tags` must hold the disk's
    /// existing tags as well as the ones to add.
    pub async fn patch_disk_tags(
        &self,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<Submitted<Disk>> {
        let url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        self.write(Method::PATCH, url, &json!({ "tags": tags }))
            .await
            .map_err(|source| Error::PatchDisk {
                name: name.to_owned(),
                source,
            })
    }

    /// Deletes the disk `name`. A missing disk is [`Deletion::AlreadyGone`]; an attached disk
    /// fails with `OperationNotAllowed` (terminal: detach it first).
    pub async fn delete_disk(&self, name: &str) -> Result<Deletion> {
        let url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        self.delete(url).await.map_err(|source| Error::DeleteDisk {
            name: name.to_owned(),
            source,
        })
    }

    /// Lists the resource group's managed disks, every page.
    pub async fn list_disks(&self) -> Result<Vec<Disk>> {
        let url = self.resource_url(RESOURCE_TYPE, &[], API_VERSION);
        self.list(url).await.map_err(Error::ListDisks)
    }
}
