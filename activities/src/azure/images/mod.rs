//! The versions of an image, read from ARM for `model::image::pick_newest`: a Compute Gallery
//! image definition's versions (`publishingProfile.excludeFromLatest`, `endOfLifeDate`,
//! `provisioningState`), or a marketplace SKU's (`imageDeprecationStatus`, with
//! `$expand=properties`). Direct shared and community gallery images are listed through the
//! location's `sharedGalleries` / `communityGalleries`.
//!
//! One GET a check (more only when a gallery lists past a page); the worker's identity needs
//! `Microsoft.Compute/galleries/images/versions/read` on the gallery, or
//! `Microsoft.Compute/locations/publishers/artifacttypes/offers/skus/versions/read` for the
//! marketplace (the README's role lists them).

mod listed;

use std::sync::Arc;

use nodewright_model::image::{ListedVersion, VersionLookup};
use nodewright_model::limits::MAX_IMAGE_VERSIONS;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

use crate::azure::virtual_machines::API_VERSION;
use crate::azure::{ArmClient, Error, Result};
use crate::lifetime;

pub use listed::{GalleryVersion, MarketplaceVersion};

/// The API version of Compute Gallery reads.
pub const GALLERY_API_VERSION: &str = "2023-07-03";

/// The image version listings: registered on the main task queue.
pub struct ImageActivities {
    client: ArmClient,
    location: String,
}

impl ImageActivities {
    /// Lists through `client` in `location` (the worker's: marketplace versions and shared
    /// galleries are per location).
    pub fn new(client: ArmClient, location: impl Into<String>) -> Self {
        Self {
            client,
            location: location.into(),
        }
    }

    /// The versions `lookup` names, at most [`MAX_IMAGE_VERSIONS`].
    pub async fn list(&self, lookup: &VersionLookup) -> Result<Vec<ListedVersion>> {
        let failed = |source| Error::ListImageVersions {
            image: lookup.to_string(),
            source,
        };
        let mut versions: Vec<ListedVersion> = match lookup {
            VersionLookup::Marketplace {
                publisher,
                offer,
                sku,
            } => {
                let path = format!(
                    "/subscriptions/{}/providers/Microsoft.Compute/locations/{}/publishers/{publisher}/artifacttypes/vmimage/offers/{offer}/skus/{sku}/versions",
                    self.client.subscription_id(),
                    self.location
                );
                let mut url = self.client.id_url(&path, API_VERSION);
                url.query_pairs_mut().append_pair("$expand", "properties");
                let listed: Vec<MarketplaceVersion> = self.client.get(url).await.map_err(failed)?;
                listed.into_iter().map(MarketplaceVersion::listed).collect()
            }
            VersionLookup::Gallery { image_id } => {
                let definition =
                    gallery_path(image_id, self.client.subscription_id(), &self.location);
                let path = format!("{definition}/versions");
                let url = self.client.id_url(&path, GALLERY_API_VERSION);
                let listed: Vec<GalleryVersion> = self.client.list(url).await.map_err(failed)?;
                // A version not replicated to the location cannot make a VM here.
                listed
                    .into_iter()
                    .filter(|version| version.replicated_to(&self.location))
                    .map(GalleryVersion::listed)
                    .collect()
            }
        };
        versions.truncate(MAX_IMAGE_VERSIONS);
        Ok(versions)
    }
}

/// Where a gallery image definition's versions are listed: its own id for a Compute Gallery;
/// the location's `sharedGalleries` / `communityGalleries` for `/SharedGalleries/…` and
/// `/CommunityGalleries/…` ids.
fn gallery_path(image_id: &str, subscription: &str, location: &str) -> String {
    let trimmed = image_id.trim_start_matches('/');
    for (prefix, collection) in [
        ("sharedgalleries/", "sharedGalleries"),
        ("communitygalleries/", "communityGalleries"),
    ] {
        if trimmed.len() > prefix.len()
            && trimmed.is_char_boundary(prefix.len())
            && trimmed[..prefix.len()].eq_ignore_ascii_case(prefix)
        {
            let rest = &trimmed[prefix.len()..];
            return format!(
                "/subscriptions/{subscription}/providers/Microsoft.Compute/locations/{location}/{collection}/{rest}"
            );
        }
    }
    image_id.to_owned()
}

#[activities]
impl ImageActivities {
    /// The versions of a gallery image definition or a marketplace SKU, with what makes a
    /// version eligible as latest (excluded, end of life, provisioning, deprecation).
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "azure.list_image_versions")]
    pub async fn list_image_versions(
        self: Arc<Self>,
        ctx: ActivityContext,
        lookup: VersionLookup,
    ) -> Result<Vec<ListedVersion>, ActivityError> {
        lifetime::heartbeating(&ctx, self.list(&lookup))
            .await
            .map_err(Error::into_activity_error)
    }
}

#[cfg(test)]
mod tests;
