//! Persistent volumes leaving a Node, seen through VolumeAttachments: wait until a moved pod's
//! volumes are detached here and attached on another node, and in force mode delete the Node's
//! VolumeAttachments so the attach/detach controller lets go of them.
//!
//! The waits follow the VolumeAttachments through one watch (`kube::follow`: a list, then a
//! watch from its `resourceVersion`, a LIST every 30 s besides, a heartbeat at least every 5 s).
//! VolumeAttachments have no field selector for `spec.nodeName`, so the watch and every list
//! take them all (page by page) and the waits filter them.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Api;
use kube::api::{DeleteParams, ListParams};

use super::wait::Heartbeat;
use super::{AwaitVolumes, NodeAttachments, Pending, Reattached};
use crate::kube::error::{Error, Result};
use crate::kube::follow::{Followed, Objects, follow, key_of};

/// How many VolumeAttachments one list page holds.
const PAGE_SIZE: u32 = 500;

/// Waits until none of the PVs has a VolumeAttachment on the Node (one being deleted still
/// counts), following the VolumeAttachments through a watch and heartbeating, until the
/// deadline; returns the PVs still attached then.
pub async fn await_volumes_detached(
    client: &kube::Client,
    heartbeat: &impl Heartbeat,
    input: &AwaitVolumes,
) -> Result<Pending> {
    let pending = follow_attachments(
        client,
        heartbeat,
        input.deadline,
        |attachments| attached_here(attachments.values(), &input.node, &input.persistent_volumes),
        Vec::is_empty,
    )
    .await?;
    Ok(Pending { pending })
}

/// Waits until each PV has an attached VolumeAttachment on another node, following the
/// VolumeAttachments through a watch and heartbeating, until the deadline; returns where each
/// attached and the PVs still waited for.
pub async fn await_volumes_reattached(
    client: &kube::Client,
    heartbeat: &impl Heartbeat,
    input: &AwaitVolumes,
) -> Result<Reattached> {
    follow_attachments(
        client,
        heartbeat,
        input.deadline,
        |attachments| {
            attached_elsewhere(attachments.values(), &input.node, &input.persistent_volumes)
        },
        |seen: &Reattached| seen.pending.is_empty(),
    )
    .await
}

/// Follows every VolumeAttachment (`kube::follow`, no field selector; the safety read is
/// [`list_attachments`]) until what `observe` makes of them is `done` or `deadline` passes;
/// returns the last observation.
async fn follow_attachments<T>(
    client: &kube::Client,
    heartbeat: &impl Heartbeat,
    deadline: DateTime<Utc>,
    observe: impl Fn(&Objects<VolumeAttachment>) -> T,
    done: impl Fn(&T) -> bool,
) -> Result<T> {
    let api: Api<VolumeAttachment> = Api::all(client.clone());
    let followed = follow(
        &api,
        "",
        heartbeat,
        deadline,
        |attachments| {
            let seen = observe(attachments);
            Ok(done(&seen).then_some(seen))
        },
        || async {
            let attachments = list_attachments(client).await?;
            Ok(attachments
                .into_iter()
                .map(|attachment| (key_of(&attachment), attachment))
                .collect())
        },
    )
    .await?;
    Ok(match followed {
        Followed::Done(seen) => seen,
        Followed::TimedOut(attachments) => observe(&attachments),
    })
}

/// Deletes every VolumeAttachment on the Node (MCM's `DelVolumesAttachments`, force mode);
/// returns the names whose deletion the apiserver accepted (an already absent one is skipped).
pub async fn delete_node_volume_attachments(
    client: &kube::Client,
    input: &NodeAttachments,
) -> Result<Vec<String>> {
    let api: Api<VolumeAttachment> = Api::all(client.clone());
    let attachments = list_attachments(client).await?;
    let mut deleted = Vec::new();
    for name in names_on_node(&attachments, &input.node) {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => deleted.push(name),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => return Err(Error::DeleteVolumeAttachment { name, source }),
        }
    }
    Ok(deleted)
}

/// Every VolumeAttachment, page by page.
pub(super) async fn list_attachments(client: &kube::Client) -> Result<Vec<VolumeAttachment>> {
    let api: Api<VolumeAttachment> = Api::all(client.clone());
    let mut params = ListParams::default().limit(PAGE_SIZE);
    let mut attachments = Vec::new();
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(Error::ListVolumeAttachments)?;
        attachments.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(attachments),
        }
    }
}

fn persistent_volume(attachment: &VolumeAttachment) -> Option<&str> {
    attachment.spec.source.persistent_volume_name.as_deref()
}

fn is_attached(attachment: &VolumeAttachment) -> bool {
    attachment.status.as_ref().is_some_and(|s| s.attached)
}

/// The PVs among `wanted` with a VolumeAttachment on `node`, whatever its state (one being
/// deleted or not yet attached still holds the volume), in `wanted`'s order.
pub(super) fn attached_here<'a>(
    attachments: impl IntoIterator<Item = &'a VolumeAttachment>,
    node: &str,
    wanted: &[String],
) -> Vec<String> {
    let here: BTreeSet<&str> = attachments
        .into_iter()
        .filter(|attachment| attachment.spec.node_name == node)
        .filter_map(persistent_volume)
        .collect();
    wanted
        .iter()
        .filter(|pv| here.contains(pv.as_str()))
        .cloned()
        .collect()
}

/// For each PV among `wanted`, the node of an attached VolumeAttachment not on `node`; the
/// others are pending.
pub(super) fn attached_elsewhere<'a>(
    attachments: impl IntoIterator<Item = &'a VolumeAttachment>,
    node: &str,
    wanted: &[String],
) -> Reattached {
    let mut elsewhere: BTreeMap<&str, &str> = BTreeMap::new();
    for attachment in attachments {
        if attachment.spec.node_name != node
            && is_attached(attachment)
            && let Some(pv) = persistent_volume(attachment)
        {
            elsewhere.insert(pv, &attachment.spec.node_name);
        }
    }
    let mut reattached = Reattached::default();
    for pv in wanted {
        match elsewhere.get(pv.as_str()) {
            Some(new_node) => reattached
                .attached
                .push((pv.clone(), (*new_node).to_owned())),
            None => reattached.pending.push(pv.clone()),
        }
    }
    reattached
}

/// The names of the VolumeAttachments on `node`.
pub(super) fn names_on_node(attachments: &[VolumeAttachment], node: &str) -> Vec<String> {
    attachments
        .iter()
        .filter(|attachment| attachment.spec.node_name == node)
        .filter_map(|attachment| attachment.metadata.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attachment(name: &str, node: &str, pv: Option<&str>, attached: bool) -> VolumeAttachment {
        serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": {
                "attacher": "disk.csi.azure.com",
                "nodeName": node,
                "source": { "persistentVolumeName": pv },
            },
            "status": { "attached": attached },
        }))
        .unwrap_or_else(|_| VolumeAttachment::default())
    }

    fn deleting(mut attachment: VolumeAttachment) -> VolumeAttachment {
        attachment.metadata.deletion_timestamp =
            serde_json::from_value(json!("2026-01-01T00:00:00Z")).ok();
        attachment
    }

    fn pvs(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn world() -> Vec<VolumeAttachment> {
        vec![
            attachment("va-1", "old", Some("pv-1"), true),
            deleting(attachment("va-2", "old", Some("pv-2"), false)),
            attachment("va-3", "new", Some("pv-3"), true),
            attachment("va-4", "new", Some("pv-4"), false),
            attachment("va-5", "old", None, true),
            attachment("va-6", "other", Some("pv-9"), true),
        ]
    }

    #[test]
    fn a_volume_is_attached_here_until_its_attachment_is_gone() {
        let wanted = pvs(&["pv-1", "pv-2", "pv-3", "pv-4", "pv-5"]);
        assert_eq!(
            attached_here(&world(), "old", &wanted),
            pvs(&["pv-1", "pv-2"])
        );
        assert!(attached_here(&world(), "gone", &wanted).is_empty());
    }

    #[test]
    fn a_volume_is_reattached_once_attached_on_another_node() {
        let wanted = pvs(&["pv-1", "pv-3", "pv-4", "pv-9"]);
        assert_eq!(
            attached_elsewhere(&world(), "old", &wanted),
            Reattached {
                attached: vec![
                    ("pv-3".into(), "new".into()),
                    ("pv-9".into(), "other".into()),
                ],
                pending: pvs(&["pv-1", "pv-4"]),
            }
        );
    }

    #[test]
    fn every_attachment_on_the_node_is_named_for_deletion() {
        assert_eq!(
            names_on_node(&world(), "old"),
            pvs(&["va-1", "va-2", "va-5"])
        );
        assert!(names_on_node(&world(), "nowhere").is_empty());
    }
}
