//! What an orphan sweep reads from and does to Kubernetes: is the API healthy, the Nodes (paged,
//! with whether each carries the rollout's outdated taint), the Azure disks PersistentVolumes
//! use, and the conditional deletion of an orphan Node.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Preconditions};
use nodewright_model::ownership::{LABEL_MACHINE, LABEL_POOL};
use nodewright_model::rollout::TAINT_OUTDATED;
use nodewright_model::sweep::{NodeReadiness, NodeRecord, Recheck, name_from_id, recheck_node};
use serde::{Deserialize, Serialize};

use super::error::{Error, Result};
use super::node_spec::taints;

/// The CSI driver whose volumes are Azure managed disks.
const AZURE_DISK_DRIVER: &str = "disk.csi.azure.com";
/// A name no Node has: reading it answers 404 when the API works (as MCM probes health).
const PROBE_NODE: &str = "nodewright-health-probe.invalid";

/// Whether the Kubernetes API answers as it should.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiHealth {
    /// `/readyz` answered `ok`, a Node read answered (404 counts) and, when the activities
    /// know their cluster, the API carries that cluster's identity.
    pub healthy: bool,
    /// What was wrong, or what answered.
    pub detail: String,
}

/// One page of Nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListNodesPage {
    /// The `continue` token of the previous page (none: the first).
    #[serde(default)]
    pub continue_token: Option<String>,
    /// Nodes per page.
    pub limit: u32,
}

/// Nodes, and the token for the next page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodesPage {
    /// The Nodes of this page.
    pub nodes: Vec<NodeRecord>,
    /// The next page's token (none: this was the last).
    #[serde(default)]
    pub continue_token: Option<String>,
}

/// Delete an orphan Node, if it is still the one classified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOrphanNode {
    /// The Node.
    pub name: String,
    /// The uid it had when listed: a Node recreated under the name is not deleted.
    pub uid: String,
}

/// What became of an orphan Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "result")]
pub enum OrphanNodeDeleted {
    /// Deleted.
    Deleted,
    /// Already gone.
    AlreadyGone,
    /// Not deleted: it changed since it was listed.
    LeftAlone {
        /// How.
        reason: String,
    },
}

/// Reads `/readyz` and a Node that does not exist (404 is the healthy answer).
pub async fn api_health(client: &kube::Client) -> ApiHealth {
    let readyz = http::Request::get("/readyz")
        .body(Vec::new())
        .map_err(|e| e.to_string());
    let ready = match readyz {
        Ok(request) => client
            .request_text(request)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    match ready {
        Ok(text) if text.trim() == "ok" => {}
        Ok(text) => {
            return ApiHealth {
                healthy: false,
                detail: format!(
                    "/readyz answered {}",
                    nodewright_model::text::quoted(text.trim())
                ),
            };
        }
        Err(error) => {
            return ApiHealth {
                healthy: false,
                detail: format!("/readyz failed: {error}"),
            };
        }
    }
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes.get_opt(PROBE_NODE).await {
        Ok(_) => ApiHealth {
            healthy: true,
            detail: "/readyz ok; Nodes readable".to_owned(),
        },
        Err(error) => ApiHealth {
            healthy: false,
            detail: format!("reading Nodes failed: {error}"),
        },
    }
}

/// One page of Nodes, reduced to what the sweep needs.
pub async fn list_nodes_page(client: &kube::Client, input: &ListNodesPage) -> Result<NodesPage> {
    let api: Api<Node> = Api::all(client.clone());
    let mut params = ListParams::default().limit(input.limit.max(1));
    if let Some(token) = &input.continue_token {
        params = params.continue_token(token);
    }
    let list = api.list(&params).await.map_err(Error::ListNodes)?;
    Ok(NodesPage {
        nodes: list.items.iter().map(node_record).collect(),
        continue_token: list.metadata.continue_.filter(|token| !token.is_empty()),
    })
}

/// The Node as the classifier sees it.
pub fn node_record(node: &Node) -> NodeRecord {
    let labels = node.metadata.labels.as_ref();
    let label = |name: &str| labels.and_then(|labels| labels.get(name)).cloned();
    let created_at = node
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(0, |t| t.0.as_second());
    let ready = node
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"));
    let readiness = match ready {
        Some(condition) if condition.status == "True" => NodeReadiness::Ready,
        Some(condition) => NodeReadiness::NotReady {
            since: condition
                .last_transition_time
                .as_ref()
                .map_or(created_at, |t| t.0.as_second()),
            last_heartbeat: condition
                .last_heartbeat_time
                .as_ref()
                .map_or(created_at, |t| t.0.as_second()),
        },
        None => NodeReadiness::NotReady {
            since: created_at,
            last_heartbeat: created_at,
        },
    };
    NodeRecord {
        name: node.metadata.name.clone().unwrap_or_default(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
        provider_id: node.spec.as_ref().and_then(|spec| spec.provider_id.clone()),
        machine: label(LABEL_MACHINE),
        pool: label(LABEL_POOL),
        created_at,
        readiness,
        tainted_outdated: taints(node).iter().any(|t| t.key == TAINT_OUTDATED),
    }
}

/// The names (lower-cased) of the Azure disks every PersistentVolume refers to: CSI
/// `disk.csi.azure.com` volume handles and in-tree `azureDisk` disk URIs.
pub async fn volume_disks(client: &kube::Client) -> Result<BTreeSet<String>> {
    let api: Api<PersistentVolume> = Api::all(client.clone());
    let mut disks = BTreeSet::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let list = api.list(&params).await.map_err(Error::ListVolumes)?;
        for volume in &list.items {
            let Some(spec) = volume.spec.as_ref() else {
                continue;
            };
            let csi = spec
                .csi
                .as_ref()
                .filter(|csi| csi.driver == AZURE_DISK_DRIVER)
                .map(|csi| csi.volume_handle.as_str());
            let in_tree = spec.azure_disk.as_ref().map(|disk| disk.disk_uri.as_str());
            for id in csi.into_iter().chain(in_tree) {
                disks.insert(name_from_id(id).to_ascii_lowercase());
            }
        }
        match list.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(disks),
        }
    }
}

/// Deletes the Node when it still has the uid it was listed with and is still not Ready.
pub async fn delete_orphan_node(
    client: &kube::Client,
    input: &DeleteOrphanNode,
) -> Result<OrphanNodeDeleted> {
    let api: Api<Node> = Api::all(client.clone());
    let node = match api.get_opt(&input.name).await {
        Ok(Some(node)) => node,
        Ok(None) => return Ok(OrphanNodeDeleted::AlreadyGone),
        Err(source) => {
            return Err(Error::GetNode {
                name: input.name.clone(),
                source,
            });
        }
    };
    if let Recheck::LeaveAlone(reason) = recheck_node(&input.uid, &node_record(&node)) {
        return Ok(OrphanNodeDeleted::LeftAlone { reason });
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(input.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&input.name, &params).await {
        Ok(_) => Ok(OrphanNodeDeleted::Deleted),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(OrphanNodeDeleted::AlreadyGone),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(OrphanNodeDeleted::LeftAlone {
            reason: format!("Node {} changed: {}", input.name, status.message),
        }),
        Err(source) => Err(Error::DeleteNode {
            name: input.name.clone(),
            source,
        }),
    }
}
