//! Image versions, the pure side of resolving "latest" and of image updates: the order of
//! versions, the pick of the newest eligible one from a listing, the image with a concrete
//! version put in, `spec.imageUpdate` and its decision, and the pool's version history.

mod candidate;
mod history;
mod policy;
mod pool_image;
mod source;
mod version;

pub use candidate::{ListedVersion, pick_newest};
pub use history::ImageHistory;
pub use policy::{
    DEFAULT_CHECK_INTERVAL, ImageAction, ImageUpdate, ImageUpdatePolicy, image_update,
};
pub use pool_image::{ImageStatus, PoolImage, for_lookup};
pub use source::{ImageRef, VersionLookup};
pub use version::{ImageVersion, InvalidVersion};

#[cfg(test)]
mod tests;
