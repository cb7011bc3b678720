//! Step 3's second half: which settings the drain uses (the sources gathered here, the
//! precedence decided by `model::drain::drain_settings`), the deadline, and the Node Event that
//! reports a refused annotation.

use chrono::{DateTime, Utc};
use nodewright_activities::azure::machines::{ArmReadActivities, DrainTag, ReadDrainTag};
use nodewright_activities::kube::{KubeActivities, NodeEvent};
use nodewright_model::drain::{
    AnnotationTrust, DrainRequest, DrainSettings, DrainedNode, NodeHealth, SettingsSources,
    TagRead, asks_salvage, drain_settings, hard_deadline,
};

use super::state::{Ctx, Drain, capped, extended, fresh_status, hard_text, with_status};
use crate::progress::{activity_failure_text, later, now, rfc3339};
use crate::{activity_options, cancellation};

/// The patch that keeps the readable fields of a refused drain-policy annotation (the pool's
/// settings) instead of all defaults: asked only when the annotation is refused.
const PATCH_SALVAGE_ANNOTATION: &str = "drain-annotation-per-field";

/// The patch that bounds the Node's drain-policy annotation by the trusted settings (the
/// request's, else the VM's `nodewright.io-drain` tag read by `azure.read_drain_tag`, else the
/// defaults) and reports a refused annotation as a Node Event (`kube.record_node_event`).
/// Asked once per fresh drain (not a resumed one); runs recorded before it trust the annotation
/// as they did then.
const PATCH_BOUNDED_ANNOTATION: &str = "drain-annotation-bounded";

/// The patch that tells the fields of the drain-policy annotation nodewright wrote itself (its
/// stamp, `nodewright.io/drain-policy-stamp`, else the VM's tag) from an operator's edits, and
/// takes only the edits as wishes: a rollout's delete then drains with the settings it rolls to,
/// not the ones stamped at create. Asked once per fresh drain of a Node with the annotation; a
/// Node without a stamp has its VM's tag read even when the request carries settings.
const PATCH_OWN_FIELDS: &str = "drain-annotation-own-fields";

/// The reason of the Node Event that reports a refused drain-policy annotation.
const EVENT_ANNOTATION_REFUSED: &str = "DrainAnnotationRefused";

/// The settings of the drain from every source (reading the VM's tag when the run bounds the
/// annotation and the request carries no settings).
pub(super) async fn settle(
    ctx: &mut Ctx,
    request: &DrainRequest,
    annotation: Option<&str>,
    stamp: Option<&str>,
) -> DrainSettings {
    let mut own_fields = false;
    let trust = if request.resume.is_none() && ctx.patched(PATCH_BOUNDED_ANNOTATION) {
        own_fields = annotation.is_some() && ctx.patched(PATCH_OWN_FIELDS);
        // The tag is the baseline without a request, and the record of a Node without a stamp.
        let tag_needed = request.policy.is_none() || (own_fields && stamp.is_none());
        let tag = if tag_needed {
            Some(read_drain_tag(ctx, request).await)
        } else {
            None
        };
        AnnotationTrust::Bounded(tag)
    } else if asks_salvage(request.policy.as_ref(), annotation)
        && ctx.patched(PATCH_SALVAGE_ANNOTATION)
    {
        AnnotationTrust::PerField
    } else {
        AnnotationTrust::Whole
    };
    drain_settings(&SettingsSources {
        node: &request.node,
        purpose: request.purpose,
        resumed: request.resume.as_ref().map(|resume| &resume.policy),
        request: request.policy.as_ref(),
        request_local_data: request.local_data,
        annotation,
        trust,
        stamp,
        own_fields,
    })
}

/// The VM's `nodewright.io-drain` tag (one GET of the VM, `azure.read_drain_tag`).
async fn read_drain_tag(ctx: &mut Ctx, request: &DrainRequest) -> TagRead {
    let read = ctx
        .execute_activity(
            ArmReadActivities::read_drain_tag,
            ReadDrainTag {
                cluster: request.cluster.clone(),
                machine: request.node.clone(),
            },
            cancellation::shielded(activity_options::read()),
        )
        .await;
    match read {
        Ok(DrainTag::Tagged { value }) => TagRead::Tagged(value),
        Ok(DrainTag::Untagged) => TagRead::Untagged,
        Ok(DrainTag::NoVm | DrainTag::NotOwned) => TagRead::NoVm,
        Err(error) => TagRead::Failed(activity_failure_text(&error)),
    }
}

/// The drain's state from its settings: the deadline (now + the timeout, or a resumed run's,
/// plus the extensions signalled so far) and what a resumed run carries; the status shows the
/// deadline, the settings and their warnings.
pub(super) fn start_state(
    ctx: &mut Ctx,
    request: &DrainRequest,
    vm_id: &str,
    settings: DrainSettings,
    health: NodeHealth,
) -> Drain {
    let (started_at, started, deadline, result) = match &request.resume {
        Some(resume) => (
            resume.started_at.clone(),
            parse_time(&resume.started_at).unwrap_or_else(|| now(ctx)),
            parse_time(&resume.deadline).unwrap_or_else(|| now(ctx)),
            resume.done_so_far.clone(),
        ),
        None => {
            let started = now(ctx);
            let deadline = later(started, settings.policy.timeout);
            let result = DrainedNode {
                node: request.node.clone(),
                node_found: true,
                ..DrainedNode::default()
            };
            (rfc3339(started), started, deadline, result)
        }
    };
    let hard = hard_deadline(started.timestamp(), &settings.policy);
    let DrainSettings {
        policy,
        fact,
        warnings,
        ..
    } = settings;
    ctx.state_mut(|s| {
        let deadline = extended(deadline, std::mem::take(&mut s.pending_extension_seconds));
        let (deadline, _) = capped(deadline, hard);
        s.deadline = Some(deadline);
        s.hard_deadline = hard;
        let status = s.status.get_or_insert_with(|| fresh_status(&request.node));
        status.deadline = Some(rfc3339(deadline));
        status.hard_deadline = hard.map(hard_text);
        status.run.facts.insert("drainSettings".to_owned(), fact);
        status.warnings.extend(warnings);
    });
    Drain {
        request: request.clone(),
        vm_id: vm_id.to_owned(),
        policy,
        started_at,
        result,
        health,
        in_flight: None,
        shielded: false,
        stuck: request
            .resume
            .as_ref()
            .map(|resume| resume.stuck_volumes.clone())
            .unwrap_or_default(),
    }
}

/// Reports a refused drain-policy annotation as a Warning Event on the Node (named after the
/// run, so a retried activity finds it); a failure to record it is a warning in the status.
pub(super) async fn report_refused_annotation(ctx: &mut Ctx, request: &DrainRequest, note: String) {
    let event = NodeEvent {
        node: request.node.clone(),
        name: format!("{}.drain-annotation.{}", request.node, ctx.run_id()),
        reason: EVENT_ANNOTATION_REFUSED.to_owned(),
        action: "Drain".to_owned(),
        note,
    };
    let recorded = ctx
        .execute_activity(
            KubeActivities::record_node_event,
            event,
            cancellation::shielded(activity_options::kube_write()),
        )
        .await;
    if let Err(error) = recorded {
        let warning = format!(
            "recording the Event {EVENT_ANNOTATION_REFUSED} on Node {} failed: {}",
            request.node,
            activity_failure_text(&error)
        );
        with_status(ctx, |status| status.warnings.push(warning));
    }
}

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}
