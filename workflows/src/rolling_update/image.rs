//! A rollout given an image written without a concrete version (`pool rollout --pool FILE` of a
//! pool no controller keeps, with `version: latest` or a gallery definition) resolves it once,
//! before its first step (patch `rollout-resolves-images`; runs recorded before it made every
//! machine from the image as written): every machine it makes then runs the one version, and
//! the template it rolls to (and its hash) names it. A continued run carries the resolved pool.

use nodewright_model::rollout::RolloutRequest;
use temporalio_sdk::{ApplicationFailure, WorkflowContext, WorkflowTermination};

use crate::progress::now;
use crate::search;

/// The patch that resolves the image before the first step.
const RESOLVE_PATCH: &str = "rollout-resolves-images";

/// The failure type of a rollout whose image could not be resolved (nothing was started).
const IMAGE_UNRESOLVED: &str = "ImageUnresolved";

/// `request` with its pool's image at the newest eligible version; the run fails
/// (`ImageUnresolved`, nothing started) when the versions cannot be listed or none is eligible.
pub async fn resolved<W>(
    ctx: &mut WorkflowContext<W>,
    request: RolloutRequest,
) -> Result<RolloutRequest, WorkflowTermination> {
    if request.resume.is_some() || !request.pool.image_needs_resolution() {
        return Ok(request);
    }
    let Some(lookup) = request.pool.image().and_then(|image| image.lookup()) else {
        return Ok(request);
    };
    if !ctx.patched(RESOLVE_PATCH) {
        return Ok(request);
    }
    let at = now(ctx).timestamp();
    let failure = match crate::image::newest(ctx, &lookup, at).await {
        Ok(found) => match found
            .version
            .and_then(|version| request.pool.at_image_version(&version))
        {
            Some(pool) => return Ok(RolloutRequest { pool, ..request }),
            None => format!(
                "{lookup} has no eligible version (of {} listed: excluded from latest, past end of life, not provisioned, not replicated here or deprecated); nothing was started: publish one, or name a version in the pool file",
                found.listed
            ),
        },
        Err(reason) => format!(
            "could not list the versions of {lookup} to resolve the pool's image ({reason}); nothing was started: give the worker's identity the read (README, Azure role) or name a version in the pool file"
        ),
    };
    ctx.upsert_search_attributes([search::PHASE.value_set("failed".to_owned())]);
    ctx.set_current_details(failure.clone());
    let error: Box<dyn std::error::Error + Send + Sync> = failure.into();
    Err(ApplicationFailure::builder(error)
        .type_name(IMAGE_UNRESOLVED.to_owned())
        .non_retryable(true)
        .build()
        .into())
}
