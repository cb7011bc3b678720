//! The pool's image as `crate::image` reads it, and the pool with a concrete version put in:
//! the template every machine of a revision is made from when the file says `latest`.

use super::hash::template_hash;
use super::spec::ImageSource;
use super::valid::ValidPool;
use crate::image::{ImageRef, ImageVersion, PoolImage};

impl ImageSource {
    /// The image as `crate::image` reads it: the id when given, else the marketplace
    /// reference; `None` when neither is complete (validation refuses such a pool).
    pub fn to_ref(&self) -> Option<ImageRef> {
        if let Some(id) = &self.id {
            return Some(ImageRef::Id(id.clone()));
        }
        match (&self.publisher, &self.offer, &self.sku) {
            (Some(publisher), Some(offer), Some(sku)) => Some(ImageRef::Marketplace {
                publisher: publisher.clone(),
                offer: offer.clone(),
                sku: sku.clone(),
                version: self.version.clone(),
            }),
            _ => None,
        }
    }

    /// The source naming `image`.
    fn from_ref(image: ImageRef) -> Self {
        match image {
            ImageRef::Id(id) => Self {
                id: Some(id),
                ..Self::default()
            },
            ImageRef::Marketplace {
                publisher,
                offer,
                sku,
                version,
            } => Self {
                id: None,
                publisher: Some(publisher),
                offer: Some(offer),
                sku: Some(sku),
                version,
            },
        }
    }
}

impl ValidPool {
    /// The pool's image as `crate::image` reads it.
    pub fn image(&self) -> Option<ImageRef> {
        self.template.image.to_ref()
    }

    /// Whether the pool's image must be resolved to a concrete version before a machine is
    /// made from it (`latest`, or a gallery image without a version).
    pub fn image_needs_resolution(&self) -> bool {
        self.image().is_some_and(|image| image.needs_resolution())
    }

    /// The pool with its image at `version` and the template hash made again; `None` for an
    /// image without versions (a managed image).
    pub fn at_image_version(&self, version: &ImageVersion) -> Option<Self> {
        let image = self.image()?.with_version(version)?;
        let mut pool = self.clone();
        pool.template.image = ImageSource::from_ref(image);
        pool.template_hash = template_hash(&pool.template);
        Some(pool)
    }

    /// The pool a controller acts on: this one (as its file says) with its image at the version
    /// `image` holds, or itself when its image names a concrete version (or has none); `None`
    /// while an image that asks for resolution is not resolved yet.
    pub fn at_followed_version(&self, image: Option<&PoolImage>) -> Option<Self> {
        if !self.image_needs_resolution() {
            return Some(self.clone());
        }
        let lookup = self.image()?.lookup()?;
        let image = image.filter(|held| held.lookup == lookup)?;
        self.at_image_version(image.current())
    }

    /// [`Self::at_followed_version`], or this pool as it is when nothing is resolved (a
    /// controller recorded before image resolution holds no image).
    pub fn in_force(&self, image: Option<&PoolImage>) -> Self {
        self.at_followed_version(image)
            .unwrap_or_else(|| self.clone())
    }

    /// The version a rollback to `to` (a revision's pool) goes back to, when this pool (as its
    /// file says) follows `held`'s image and `to` runs a concrete version of it.
    pub fn rolled_back_version(&self, to: &Self, held: &PoolImage) -> Option<ImageVersion> {
        if !self.image_needs_resolution() || to.image_needs_resolution() {
            return None;
        }
        let image = to.image()?;
        (image.lookup()? == held.lookup)
            .then(|| image.version())
            .flatten()
    }

    /// The pool with `written`'s image (a pool file's, e.g. with `latest`) in place of its own,
    /// the template hash made again: a revision rolled back to keeps following the file's image.
    pub fn with_image_of(&self, written: &Self) -> Self {
        let mut pool = self.clone();
        pool.template.image = written.template.image.clone();
        pool.template_hash = template_hash(&pool.template);
        pool
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::VersionLookup;

    const GALLERY: &str =
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/node";

    fn version(text: &str) -> ImageVersion {
        ImageVersion::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn gallery_pool(id: &str) -> ValidPool {
        let mut pool = crate::pool::from_yaml(include_str!("../../../examples/pools/workers.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        pool.template.image = ImageSource {
            id: Some(id.to_owned()),
            ..ImageSource::default()
        };
        pool.template_hash = template_hash(&pool.template);
        pool
    }

    #[test]
    fn a_followed_image_is_in_force_at_the_version_held_and_a_rollback_pins_an_earlier_one() {
        let written = gallery_pool(GALLERY);
        let lookup = VersionLookup::Gallery {
            image_id: GALLERY.to_owned(),
        };
        let mut held = PoolImage::resolved(lookup, version("1.0.0"), 0);
        assert_eq!(written.at_followed_version(None), None, "not resolved yet");
        assert_eq!(written.in_force(None), written);
        let at_first = written.in_force(Some(&held));
        assert_eq!(
            at_first.template.image.id.as_deref(),
            Some(format!("{GALLERY}/versions/1.0.0").as_str())
        );
        held.update_to(version("1.0.1"));
        let at_second = written.in_force(Some(&held));
        assert_ne!(at_first.template_hash, at_second.template_hash);
        assert_eq!(
            written.rolled_back_version(&at_first, &held),
            Some(version("1.0.0"))
        );
        let other = gallery_pool(&format!("{GALLERY}x/versions/1.0.0"));
        assert_eq!(
            written.rolled_back_version(&other, &held),
            None,
            "another image"
        );
        assert_eq!(
            at_first.rolled_back_version(&at_second, &held),
            None,
            "a concrete file"
        );
        let concrete = gallery_pool(&format!("{GALLERY}/versions/2.0.0"));
        assert_eq!(
            concrete.at_followed_version(Some(&held)),
            Some(concrete.clone())
        );
    }

    fn source(id: Option<&str>, version: Option<&str>) -> ImageSource {
        match id {
            Some(id) => ImageSource {
                id: Some(id.to_owned()),
                ..ImageSource::default()
            },
            None => ImageSource {
                id: None,
                publisher: Some("Canonical".to_owned()),
                offer: Some("ubuntu-24_04-lts".to_owned()),
                sku: Some("server".to_owned()),
                version: version.map(str::to_owned),
            },
        }
    }

    #[test]
    fn a_source_reads_as_the_image_it_names_and_back() {
        let gallery = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/ubuntu";
        for written in [
            source(Some(gallery), None),
            source(None, Some("latest")),
            source(None, None),
        ] {
            let image = written.to_ref().expect("a complete source");
            assert!(image.needs_resolution(), "{written:?}");
            assert_eq!(ImageSource::from_ref(image), written);
        }
        assert_eq!(
            source(Some(gallery), None)
                .to_ref()
                .and_then(|i| i.lookup()),
            Some(VersionLookup::Gallery {
                image_id: gallery.to_owned()
            })
        );
        let written = source(Some(gallery), None);
        let at = written.to_ref().and_then(|i| {
            i.with_version(&ImageVersion::parse("1.0.1").unwrap_or_else(|e| panic!("{e}")))
        });
        assert_eq!(
            at.map(ImageSource::from_ref).and_then(|s| s.id),
            Some(format!("{gallery}/versions/1.0.1"))
        );
        let incomplete = ImageSource {
            publisher: Some("Canonical".to_owned()),
            ..ImageSource::default()
        };
        assert_eq!(incomplete.to_ref(), None);
    }
}
