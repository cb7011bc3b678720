//! The agent's one Node in the Kubernetes API: read it, write the condition on its status, the
//! annotation on its metadata, and create the Events that announce Scheduled Events. Each call is
//! one request; the caller decides what to write.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use nodewright_model::scheduled_events::{ANNOTATION_EVENTS, CONDITION_TYPE};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::publish::EVENT_NAMESPACE;

/// The field manager of the agent's writes (`managedFields`).
pub const FIELD_MANAGER: &str = "nodewright-node-agent";

/// The agent's Node.
#[derive(Clone)]
pub struct NodeApi {
    nodes: Api<Node>,
    events: Api<Event>,
    name: String,
}

impl NodeApi {
    /// The Node `name` through `client`.
    pub fn new(client: Client, name: &str) -> Self {
        Self {
            nodes: Api::all(client.clone()),
            events: Api::namespaced(client, EVENT_NAMESPACE),
            name: name.to_owned(),
        }
    }

    /// The Node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Node as the apiserver holds it.
    ///
    /// # Errors
    ///
    /// [`Error::GetNode`].
    pub async fn get(&self) -> Result<Node> {
        self.nodes
            .get(&self.name)
            .await
            .map_err(|source| Error::GetNode {
                node: self.name.clone(),
                source,
            })
    }

    /// Applies the strategic-merge `patch` to the Node's status (conditions merge by type).
    ///
    /// # Errors
    ///
    /// [`Error::PatchCondition`].
    pub async fn patch_condition(&self, patch: &Value) -> Result<()> {
        self.nodes
            .patch_status(&self.name, &patch_params(), &Patch::Strategic(patch))
            .await
            .map(drop)
            .map_err(|source| Error::PatchCondition {
                node: self.name.clone(),
                condition: CONDITION_TYPE,
                source,
            })
    }

    /// Applies the JSON merge `patch` (the events annotation) to the Node.
    ///
    /// # Errors
    ///
    /// [`Error::PatchAnnotation`].
    pub async fn patch_annotation(&self, patch: &Value) -> Result<()> {
        self.nodes
            .patch(&self.name, &patch_params(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(|source| Error::PatchAnnotation {
                node: self.name.clone(),
                annotation: ANNOTATION_EVENTS,
                source,
            })
    }

    /// Creates the Event `object` announcing `event_id`; `false` when it exists already (an
    /// earlier try or an earlier run of the agent sent it).
    ///
    /// # Errors
    ///
    /// [`Error::Json`] for an object that is not an Event, [`Error::CreateEvent`].
    pub async fn create_event(&self, object: Value, event_id: &str) -> Result<bool> {
        let event: Event = serde_json::from_value(object).map_err(|source| Error::Json {
            what: "the Event",
            source,
        })?;
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        match self.events.create(&params, &event).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(source) => Err(Error::CreateEvent {
                node: self.name.clone(),
                event_id: event_id.to_owned(),
                source,
            }),
        }
    }
}

/// The parameters of the agent's patches: its field manager.
fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}
