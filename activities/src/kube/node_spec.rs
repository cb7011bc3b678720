//! Read-modify-write of a machine's Node spec, for the fields server-side apply cannot share.
//!
//! `spec.taints` is an atomic list: with server-side apply one field manager would own all of it
//! and a forced apply would replace the taints of every other writer (the kubelet's startup
//! taints, a CNI's), so adding or removing a taint is a merge patch of the whole list as read,
//! carrying the `resourceVersion` read so that a concurrent writer makes it fail with 409 instead
//! of being overwritten; the Node is then read again and the change recomputed, a few times.
//! Only a Node that is the machine's is ever written.

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::ownership::{LABEL_MACHINE, provider_id_names_vm};
use serde_json::Value;

use super::error::{Error, Result};

/// How many times a spec change is tried when another writer changed the Node meanwhile.
const CONFLICT_ATTEMPTS: u32 = 5;

/// What a read (and possibly a change) of the machine's Node found.
pub(crate) enum Found {
    /// No Node of that name.
    Absent,
    /// A Node of that name that is not the machine's, with its providerID.
    NotOurs(Option<String>),
    /// The machine's Node, as it is after the change.
    Ours {
        /// The Node (as written, or as read when nothing was to change).
        node: Box<Node>,
        /// Whether this call wrote it.
        changed: bool,
    },
}

/// Reads the Node `name` and, when it is the machine of VM `vm_id` (see [`is_machine_node`]),
/// merge-patches it with what `patch` computes from it (`None`: nothing to change), as
/// `field_manager`; re-reads and recomputes when another writer changed the Node in between
/// (409). A failed write is reported through `error(name, source)`, which names the step.
pub(crate) async fn update_spec(
    api: &Api<Node>,
    name: &str,
    vm_id: &str,
    field_manager: &str,
    patch: impl Fn(&Node) -> Option<Value>,
    error: impl Fn(String, kube::Error) -> Error,
) -> Result<Found> {
    let is_ours = |node: &Node| is_machine_node(node, name, vm_id);
    update_node(api, name, is_ours, field_manager, patch, error).await
}

/// [`update_spec`] for a Node that `is_ours` tells apart: reads the Node `name` and, when
/// `is_ours` accepts it, merge-patches it with what `patch` computes from it, retrying on 409
/// up to [`CONFLICT_ATTEMPTS`] times; the last conflict is reported through `error`
/// (retryable). `patch` must carry the `resourceVersion` it computed from.
pub(crate) async fn update_node(
    api: &Api<Node>,
    name: &str,
    is_ours: impl Fn(&Node) -> bool,
    field_manager: &str,
    patch: impl Fn(&Node) -> Option<Value>,
    error: impl Fn(String, kube::Error) -> Error,
) -> Result<Found> {
    let params = PatchParams {
        field_manager: Some(field_manager.to_owned()),
        ..PatchParams::default()
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let node = match read_node(api, name, &is_ours).await? {
            Found::Ours { node, .. } => node,
            other => return Ok(other),
        };
        let Some(body) = patch(&node) else {
            return Ok(Found::Ours {
                node,
                changed: false,
            });
        };
        match api.patch(name, &params, &Patch::Merge(&body)).await {
            Ok(node) => {
                return Ok(Found::Ours {
                    node: Box::new(node),
                    changed: true,
                });
            }
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < CONFLICT_ATTEMPTS => {
                tracing::debug!(
                    node = name,
                    attempt,
                    "the Node changed meanwhile; reading it again"
                );
            }
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Found::Absent),
            Err(source) => return Err(error(name.to_owned(), source)),
        }
    }
}

async fn read_node(api: &Api<Node>, name: &str, is_ours: impl Fn(&Node) -> bool) -> Result<Found> {
    let node = api.get_opt(name).await.map_err(|source| Error::GetNode {
        name: name.to_owned(),
        source,
    })?;
    Ok(match node {
        None => Found::Absent,
        Some(node) if is_ours(&node) => Found::Ours {
            node: Box::new(node),
            changed: false,
        },
        Some(node) => Found::NotOurs(provider_id(&node).map(str::to_owned)),
    })
}

/// Whether `node` is the machine's: its providerID names the VM and nodewright labelled it
/// `nodewright.io/machine=<name>`.
pub(crate) fn is_machine_node(node: &Node, name: &str, vm_id: &str) -> bool {
    let names_vm = provider_id(node).is_some_and(|id| provider_id_names_vm(id, vm_id));
    names_vm && is_labelled_machine(node, name)
}

/// Whether nodewright labelled `node` `nodewright.io/machine=<name>`.
pub(crate) fn is_labelled_machine(node: &Node, name: &str) -> bool {
    node.metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(LABEL_MACHINE))
        .is_some_and(|machine| machine == name)
}

/// The Node's `spec.providerID`, when set.
pub(crate) fn provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}

/// The Node's taints (empty when it has none).
pub(crate) fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

/// Test fixtures: a JSON object with `extra` merged over it, key by key.
#[cfg(test)]
pub(crate) fn merge_json(base: &mut serde_json::Value, extra: serde_json::Value) {
    use serde_json::Value;
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (key, value) in extra {
                merge_json(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, extra) => *base = extra,
    }
}
