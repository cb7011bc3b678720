//! Kubernetes Events (events.k8s.io/v1) nodewright records about a Node, so that `kubectl
//! describe node` and `kubectl events` show what it refused (e.g. a drain-policy annotation
//! bounded by the pool's settings).

use k8s_openapi::api::core::v1::{ConfigMap, Node, ObjectReference};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use nodewright_model::identity::IDENTITY_CONFIG_MAP;
use nodewright_model::ownership::LABEL_POOL;
use serde::{Deserialize, Serialize};

use crate::kube::error::{Error, Result};

/// The `reportingController` of nodewright's Events.
pub const REPORTING_CONTROLLER: &str = "nodewright.io/worker";

/// The namespace of Events about Nodes (cluster-scoped objects), where `kubectl describe node`
/// looks.
pub const NODE_EVENTS_NAMESPACE: &str = "default";

/// The longest `note` the apiserver accepts, in bytes.
const MAX_NOTE_BYTES: usize = 1024;

/// The longest `reportingInstance` and `action`, in bytes.
const MAX_SHORT_BYTES: usize = 128;

/// Record a Warning Event about a Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeEvent {
    /// The Node.
    pub node: String,
    /// The Event's name: the same for every attempt of one run (e.g. from the run's id), so a
    /// retried activity finds its Event instead of creating another.
    pub name: String,
    /// `reason`, e.g. `DrainAnnotationRefused` (UpperCamelCase).
    pub reason: String,
    /// `action`, e.g. `Drain`.
    pub action: String,
    /// `note`, for people (cut to the 1 KiB the apiserver accepts).
    pub note: String,
}

/// What became of the Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventRecorded {
    /// Created now.
    Created,
    /// An earlier attempt created it.
    Already,
    /// There is no Node of that name: nothing to report on.
    NoNode,
}

/// Creates the Warning Event `input.name` about the Node (in [`NODE_EVENTS_NAMESPACE`],
/// `regarding` the Node with its uid, reported by [`REPORTING_CONTROLLER`]); an Event of that
/// name already there is the one an earlier attempt created.
pub async fn record_node_event(client: &kube::Client, input: &NodeEvent) -> Result<EventRecorded> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = match nodes.get_opt(&input.node).await {
        Ok(Some(node)) => node,
        Ok(None) => return Ok(EventRecorded::NoNode),
        Err(source) => {
            return Err(Error::GetNode {
                name: input.node.clone(),
                source,
            });
        }
    };
    let occurrence = Occurrence {
        node: &input.node,
        reason: &input.reason,
        action: &input.action,
        subject: "",
        note: input.note.clone(),
        warning: true,
    };
    let event = new_event(&occurrence, &input.name, node.metadata.uid.clone());
    let events: Api<Event> = Api::namespaced(client.clone(), NODE_EVENTS_NAMESPACE);
    match events.create(&PostParams::default(), &event).await {
        Ok(_) => {
            crate::metrics::node_event(&input.reason);
            Ok(EventRecorded::Created)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(EventRecorded::Already),
        Err(source) => Err(Error::CreateEvent {
            name: input.node.clone(),
            event: input.name.clone(),
            source,
        }),
    }
}

/// One thing that happened to a Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence<'a> {
    /// The Node.
    pub node: &'a str,
    /// `reason`, UpperCamelCase: `Joined`, `Cordoned`, `EvictionBlocked`...
    pub reason: &'a str,
    /// `action`: `Create`, `Drain`, `Remediate`, `Delete`.
    pub action: &'a str,
    /// What makes two occurrences the same one repeated (a pod, a pod and its budget, a
    /// volume); empty when the reason alone does.
    pub subject: &'a str,
    /// `note`, for people.
    pub note: String,
    /// A Warning rather than a Normal Event.
    pub warning: bool,
}

/// The Event `name` telling `occurrence` about its Node (of `uid`, when known).
pub(super) fn new_event(occurrence: &Occurrence<'_>, name: &str, uid: Option<String>) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NODE_EVENTS_NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        type_: Some(
            if occurrence.warning {
                "Warning"
            } else {
                "Normal"
            }
            .to_owned(),
        ),
        reason: Some(occurrence.reason.to_owned()),
        action: Some(cut(occurrence.action, MAX_SHORT_BYTES)),
        note: Some(cut(&occurrence.note, MAX_NOTE_BYTES)),
        reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
        reporting_instance: Some(cut(&instance(), MAX_SHORT_BYTES)),
        regarding: Some(ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(occurrence.node.to_owned()),
            uid,
            ..ObjectReference::default()
        }),
        ..Event::default()
    }
}

/// Record a Normal Event about a pool: Kubernetes has no object for a pool, so the Event is
/// `regarding` the cluster's identity ConfigMap, in its namespace, and names the pool in its
/// note (`kubectl events -n nodewright` lists it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolEvent {
    /// The pool.
    pub pool: String,
    /// The Event's name: the same for every attempt (see [`NodeEvent::name`]).
    pub name: String,
    /// `reason`, e.g. `NewerImageAvailable`.
    pub reason: String,
    /// `action`, e.g. `CheckImage`.
    pub action: String,
    /// `note`, for people.
    pub note: String,
}

/// Creates the Normal Event `input.name` about a pool in `namespace`, regarding the identity
/// ConfigMap there; an Event of that name already there is an earlier attempt's.
pub async fn record_pool_event(
    client: &kube::Client,
    namespace: &str,
    input: &PoolEvent,
) -> Result<EventRecorded> {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    // The uid only links the Event to the object; without it the Event still lists.
    let uid = config_maps
        .get_opt(IDENTITY_CONFIG_MAP)
        .await
        .ok()
        .flatten()
        .and_then(|found| found.metadata.uid);
    let event = Event {
        metadata: ObjectMeta {
            name: Some(input.name.clone()),
            namespace: Some(namespace.to_owned()),
            labels: Some(std::collections::BTreeMap::from([(
                LABEL_POOL.to_owned(),
                input.pool.clone(),
            )])),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        type_: Some("Normal".to_owned()),
        reason: Some(input.reason.clone()),
        action: Some(cut(&input.action, MAX_SHORT_BYTES)),
        note: Some(cut(&input.note, MAX_NOTE_BYTES)),
        reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
        reporting_instance: Some(cut(&instance(), MAX_SHORT_BYTES)),
        regarding: Some(ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("ConfigMap".to_owned()),
            namespace: Some(namespace.to_owned()),
            name: Some(IDENTITY_CONFIG_MAP.to_owned()),
            uid,
            ..ObjectReference::default()
        }),
        ..Event::default()
    };
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    match events.create(&PostParams::default(), &event).await {
        Ok(_) => Ok(EventRecorded::Created),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(EventRecorded::Already),
        Err(source) => Err(Error::CreateEvent {
            name: format!("pool {}", input.pool),
            event: input.name.clone(),
            source,
        }),
    }
}

/// The worker's name as Events report it.
fn instance() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "nodewright-worker".to_owned())
}

/// `text` cut on a character boundary to at most `max` bytes (the last character `…` when cut).
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let room = max.saturating_sub('…'.len_utf8());
    let mut end = room;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_cut_to_what_the_apiserver_accepts_on_a_character_boundary() {
        assert_eq!(cut("short", 1024), "short");
        let long = "é".repeat(1000);
        let cut_text = cut(&long, MAX_NOTE_BYTES);
        assert!(cut_text.len() <= MAX_NOTE_BYTES, "{}", cut_text.len());
        assert!(cut_text.ends_with('…'));
    }
}
