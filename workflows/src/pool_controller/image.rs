//! The pool's image resolved and followed (patch `controller-resolves-images`, asked by the
//! loop): an image the file names without a concrete version (`latest`, a gallery image without
//! `/versions/…`) is resolved once to the newest eligible version (`azure.list_image_versions`,
//! `model::image::pick_newest`), and every machine of the template is made at exactly that
//! version. Every `spec.imageUpdate.checkInterval` the versions are listed again; a newer one
//! is rolled to (`auto`, inside the maintenance windows), reported in the status and an Event
//! (`notify`), or left (`pinned`, or `pool image pin`).

use nodewright_activities::kube::{KubeActivities, PoolEvent};
use nodewright_model::image::{ImageAction, PoolImage, VersionLookup, for_lookup};
use nodewright_model::maintenance::{DisruptionKind, Gate, gate};
use nodewright_model::pool::ValidPool;
use temporalio_sdk::WorkflowContext;

use super::{PoolControllerWorkflow, note};
use crate::activity_options;
use crate::progress::{activity_failure_text, rfc3339};

/// The reason of the Event that says a newer version exists.
const EVENT_NEWER_IMAGE: &str = "NewerImageAvailable";

/// Resolves and follows `written`'s image at `now`; `may_roll`: no rollout runs and the
/// controller acts, so an update may start one. Returns the pool to act on, `None` while the
/// image is not resolved (nothing is created then).
pub async fn follow(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    written: &ValidPool,
    now: i64,
    may_roll: bool,
) -> Option<ValidPool> {
    let lookup = written
        .image()
        .filter(|image| image.needs_resolution())
        .and_then(|image| image.lookup());
    let Some(lookup) = lookup else {
        ctx.state_mut(|s| {
            s.state.image = None;
            s.state.image_words = None;
        });
        return Some(written.clone());
    };
    let mut held = for_lookup(ctx.state_mut(|s| s.state.image.take()), &lookup);
    let due = held
        .as_ref()
        .is_none_or(|image| image.check_due(&written.image_update, now));
    if due {
        held = check(ctx, &lookup, held, now).await;
    }
    let words = match held.as_mut() {
        Some(image) => Some(act(ctx, written, image, now, may_roll).await),
        None => Some(format!(
            "{lookup}: not resolved yet; no machine is made until a version is found"
        )),
    };
    let pool = written.at_followed_version(held.as_ref());
    ctx.state_mut(|s| {
        s.state.image = held;
        s.state.image_words = words;
    });
    pool
}

/// Lists the versions and books what was found: the first resolution, or the newest version.
async fn check(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    lookup: &VersionLookup,
    mut held: Option<PoolImage>,
    now: i64,
) -> Option<PoolImage> {
    match crate::image::newest(ctx, lookup, now).await {
        Ok(found) => match (held.as_mut(), found.version) {
            (Some(image), newest) => image.checked(newest, now),
            (None, Some(version)) => {
                note(ctx, format!("{lookup} resolved to version {version}"));
                held = Some(PoolImage::resolved(lookup.clone(), version, now));
            }
            (None, None) => note(
                ctx,
                format!(
                    "{lookup} has no eligible version (of {} listed: excluded from latest, past end of life, not provisioned, not replicated here or deprecated); looking again",
                    found.listed
                ),
            ),
        },
        Err(reason) => {
            note(
                ctx,
                format!("could not list the versions of {lookup} ({reason}); looking again"),
            );
            // Looked at: the next check comes after the interval, not at every look.
            if let Some(image) = held.as_mut() {
                image.checked_at = now;
            }
        }
    }
    held
}

/// Acts on a newer version as the policy says; returns the image's state in words.
async fn act(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    written: &ValidPool,
    image: &mut PoolImage,
    now: i64,
    may_roll: bool,
) -> String {
    let window = match gate(
        written.maintenance.as_ref(),
        DisruptionKind::AutomaticRollout,
        now,
    ) {
        Gate::Ungated => None,
        Gate::Open(state) | Gate::Closed(state) => Some(state),
    };
    let current = image.current().clone();
    match image.action(&written.image_update, window.as_ref()) {
        ImageAction::Nothing => match image.newest.as_ref().filter(|n| **n > current) {
            Some(newer) if image.pinned => format!(
                "version {current}, pinned (newer: {newer}); `nodewright pool image unpin {}` lets imageUpdate move it",
                written.name
            ),
            Some(newer) => format!("version {current} (imageUpdate pinned; newer: {newer})"),
            None => format!("version {current}, the newest eligible"),
        },
        ImageAction::Notify { newer } => {
            if image.notified.as_ref() != Some(&newer) {
                notify(ctx, written, &current, &newer).await;
                image.notified = Some(newer.clone());
            }
            format!(
                "version {current}; {newer} is newer (imageUpdate notify): `nodewright pool image update {}` rolls to it",
                written.name
            )
        }
        ImageAction::Roll { to } if may_roll => {
            note(
                ctx,
                format!(
                    "image version {to} is newer than {current}: rolling to it (imageUpdate auto)"
                ),
            );
            record_running(ctx, written, image);
            image.update_to(to.clone());
            format!("version {to} (imageUpdate auto, from {current})")
        }
        ImageAction::Roll { to } => {
            format!("version {current}; rolls to {to} once the rollout in flight ends")
        }
        ImageAction::WaitForWindow { to, opens_at } => {
            let opens = opens_at
                .and_then(|at| chrono::DateTime::from_timestamp(at, 0))
                .map(|at| format!(" (opens {})", rfc3339(at)))
                .unwrap_or_default();
            format!("version {current}; {to} waits for the maintenance window{opens}")
        }
    }
}

/// Keeps the template the pool runs now in the controller's history before the version moves,
/// so that the rollout's result names it and `pool rollback` can go back to it.
fn record_running(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    written: &ValidPool,
    image: &PoolImage,
) {
    let running = written.in_force(Some(image));
    ctx.state_mut(|s| s.state.remember_running(&running));
}

/// Records the Event that a newer version exists (a failure is noted, not retried: the status
/// says it too).
async fn notify(
    ctx: &mut WorkflowContext<PoolControllerWorkflow>,
    written: &ValidPool,
    current: &nodewright_model::image::ImageVersion,
    newer: &nodewright_model::image::ImageVersion,
) {
    let event = PoolEvent {
        pool: written.name.clone(),
        name: format!("nodewright-{}-image-{newer}", written.name),
        reason: EVENT_NEWER_IMAGE.to_owned(),
        action: "CheckImage".to_owned(),
        note: format!(
            "pool {}: image version {newer} is newer than {current} (imageUpdate notify); `nodewright pool image update {}` rolls to it",
            written.name, written.name
        ),
    };
    note(
        ctx,
        format!("image version {newer} is newer than {current} (imageUpdate notify)"),
    );
    let recorded = ctx
        .execute_activity(
            KubeActivities::record_pool_event,
            event,
            activity_options::kube_write(),
        )
        .await;
    if let Err(error) = recorded {
        note(
            ctx,
            format!(
                "recording the Event {EVENT_NEWER_IMAGE} failed: {}",
                activity_failure_text(&error)
            ),
        );
    }
}
