//! The newest eligible version of an image, for the pool controller and a rollout started
//! without one: `azure.list_image_versions`, then `model::image::pick_newest`.

use nodewright_activities::azure::images::ImageActivities;
use nodewright_model::image::{ImageVersion, VersionLookup, pick_newest};
use temporalio_sdk::WorkflowContext;

use crate::progress::activity_failure_text;
use crate::{activity_options, cancellation};

/// What a listing found.
pub struct Newest {
    /// The newest eligible version, if any.
    pub version: Option<ImageVersion>,
    /// How many versions were listed.
    pub listed: usize,
}

/// Lists `lookup`'s versions and picks the newest eligible at `now` (Unix seconds); the error
/// says why the listing failed.
pub async fn newest<W>(
    ctx: &mut WorkflowContext<W>,
    lookup: &VersionLookup,
    now: i64,
) -> Result<Newest, String> {
    let versions = ctx
        .execute_activity(
            ImageActivities::list_image_versions,
            lookup.clone(),
            // A read: let it answer after a cancellation request, so the caller ends the way it
            // ends every run (a rollout Canceled with its result, a controller at its next look).
            cancellation::shielded(activity_options::read()),
        )
        .await
        .map_err(|error| activity_failure_text(&error))?;
    Ok(Newest {
        version: pick_newest(&versions, now),
        listed: versions.len(),
    })
}
