//! The NIC REST calls: get, put, delete, list.

use reqwest::Method;

use super::{API_VERSION, NetworkInterface, RESOURCE_TYPE};
use crate::azure::client::{ArmClient, Deletion, Submitted};
use crate::azure::error::{Error, Result};

impl ArmClient {
    /// The ARM id of the NIC `name` in this resource group.
    pub fn nic_id(&self, name: &str) -> String {
        self.resource_id(RESOURCE_TYPE, name)
    }

    /// Reads the NIC `name`. A missing NIC is [`Error::GetNic`] with disposition `Gone`.
    pub async fn get_nic(&self, name: &str) -> Result<NetworkInterface> {
        let url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        self.get(url).await.map_err(|source| Error::GetNic {
            name: name.to_owned(),
            source,
        })
    }

    /// Creates or replaces the NIC `name` (200/201 + `Azure-AsyncOperation`).
    pub async fn put_nic(
        &self,
        name: &str,
        nic: &NetworkInterface,
    ) -> Result<Submitted<NetworkInterface>> {
        let url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        self.write(Method::PUT, url, nic)
            .await
            .map_err(|source| Error::PutNic {
                name: name.to_owned(),
                source,
            })
    }

    /// Deletes the NIC `name`. A missing NIC is [`Deletion::AlreadyGone`].
    pub async fn delete_nic(&self, name: &str) -> Result<Deletion> {
        let url = self.resource_url(RESOURCE_TYPE, &[name], API_VERSION);
        self.delete(url).await.map_err(|source| Error::DeleteNic {
            name: name.to_owned(),
            source,
        })
    }

    /// Lists the resource group's NICs, every page.
    pub async fn list_nics(&self) -> Result<Vec<NetworkInterface>> {
        let url = self.resource_url(RESOURCE_TYPE, &[], API_VERSION);
        self.list(url).await.map_err(Error::ListNics)
    }
}
