//! Which image a pool names, whether its version must be resolved, and the same image with a
//! concrete version put in.
//!
//! The forms are those `activities/src/azure/machines/body.rs` hands to Azure: a marketplace
//! reference, or an id — a Compute Gallery image (`…/galleries/g/images/i[/versions/v]`), a
//! direct shared gallery image (`/SharedGalleries/…/Images/i[/Versions/v]`), a community gallery
//! image (`/CommunityGalleries/…`), or a managed image (no versions). Ids are read without
//! regard to case, as ARM does. This type holds plain text so that `pool` can convert its
//! `ImageSource` to and from it without `image` depending on `pool`.

use super::version::ImageVersion;

/// An image as a pool names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageRef {
    /// A marketplace image; a missing version or `latest` asks for resolution.
    Marketplace {
        /// e.g. `Canonical`.
        publisher: String,
        /// e.g. `ubuntu-24_04-lts`.
        offer: String,
        /// e.g. `server`.
        sku: String,
        /// e.g. `24.04.202411030` or `latest`.
        version: Option<String>,
    },
    /// An image named by its id.
    Id(String),
}

/// Where the versions of an image are listed: the marketplace SKU or the gallery image
/// definition it is a version of.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum VersionLookup {
    /// The marketplace SKU's versions.
    Marketplace {
        /// The publisher.
        publisher: String,
        /// The offer.
        offer: String,
        /// The SKU.
        sku: String,
    },
    /// The versions of a gallery image definition, named by its id (any of the three forms,
    /// without `/versions/…`).
    Gallery {
        /// The image definition's id.
        image_id: String,
    },
}

impl std::fmt::Display for VersionLookup {
    /// `marketplace Canonical:ubuntu-24_04-lts:server` or `gallery image <id>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Marketplace {
                publisher,
                offer,
                sku,
            } => write!(f, "marketplace image {publisher}:{offer}:{sku}"),
            Self::Gallery { image_id } => write!(f, "gallery image {image_id}"),
        }
    }
}

/// A gallery image id cut at its parts.
struct GalleryId<'a> {
    /// The id up to and including the image definition's name.
    definition: String,
    /// The `versions` segment as written, and the version after it.
    version: Option<(&'a str, &'a str)>,
}

/// Reads `id` as a gallery image id (any of the three forms), with or without a version.
fn gallery_id(id: &str) -> Option<GalleryId<'_>> {
    let segments: Vec<&str> = id.split('/').collect();
    let images_at = segments.iter().enumerate().position(|(index, segment)| {
        segment.eq_ignore_ascii_case("images")
            && index >= 2
            && segments.get(index - 2).is_some_and(|kind| {
                ["galleries", "sharedgalleries", "communitygalleries"]
                    .iter()
                    .any(|gallery| kind.eq_ignore_ascii_case(gallery))
            })
    })?;
    let name_end = images_at.checked_add(2)?;
    let head = segments.get(..name_end)?;
    if head.iter().skip(1).any(|segment| segment.is_empty()) {
        return None;
    }
    let version = match segments.get(name_end..)? {
        [] => None,
        [versions, version] if versions.eq_ignore_ascii_case("versions") && !version.is_empty() => {
            Some((*versions, *version))
        }
        _ => return None,
    };
    Some(GalleryId {
        definition: head.join("/"),
        version,
    })
}

fn is_latest(version: &str) -> bool {
    version.eq_ignore_ascii_case("latest")
}

impl ImageRef {
    /// Whether the image's version must be resolved to a concrete one: marketplace without a
    /// version or with `latest`, a gallery image without `/versions/…` or with
    /// `/versions/latest`. A managed image has no versions and never asks.
    pub fn needs_resolution(&self) -> bool {
        match self {
            Self::Marketplace { version, .. } => version.as_deref().is_none_or(is_latest),
            Self::Id(id) => gallery_id(id).is_some_and(|gallery| {
                gallery
                    .version
                    .is_none_or(|(_, version)| is_latest(version))
            }),
        }
    }

    /// Where to list the versions, when the image asks for resolution.
    pub fn version_lookup(&self) -> Option<VersionLookup> {
        if !self.needs_resolution() {
            return None;
        }
        self.lookup()
    }

    /// Where the versions of the image (whatever version it names) are listed: `None` for an
    /// id that is no gallery image (a managed image has no versions).
    pub fn lookup(&self) -> Option<VersionLookup> {
        match self {
            Self::Marketplace {
                publisher,
                offer,
                sku,
                ..
            } => Some(VersionLookup::Marketplace {
                publisher: publisher.clone(),
                offer: offer.clone(),
                sku: sku.clone(),
            }),
            Self::Id(id) => gallery_id(id).map(|gallery| VersionLookup::Gallery {
                image_id: gallery.definition,
            }),
        }
    }

    /// The concrete version the image names, if it names one.
    pub fn version(&self) -> Option<ImageVersion> {
        let written = match self {
            Self::Marketplace { version, .. } => version.as_deref()?,
            Self::Id(id) => gallery_id(id)?.version?.1,
        };
        ImageVersion::parse(written).ok()
    }

    /// The same image at `version`: the marketplace version replaced, or the gallery id with
    /// `/versions/<version>` put in (or replacing `latest`). `None` for an id that is no gallery
    /// image (a managed image has no versions).
    pub fn with_version(&self, version: &ImageVersion) -> Option<Self> {
        match self {
            Self::Marketplace {
                publisher,
                offer,
                sku,
                ..
            } => Some(Self::Marketplace {
                publisher: publisher.clone(),
                offer: offer.clone(),
                sku: sku.clone(),
                version: Some(version.as_str().to_owned()),
            }),
            Self::Id(id) => {
                let gallery = gallery_id(id)?;
                let versions = gallery.version.map_or("versions", |(versions, _)| versions);
                Some(Self::Id(format!(
                    "{}/{versions}/{version}",
                    gallery.definition
                )))
            }
        }
    }
}
