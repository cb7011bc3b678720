//! Kubernetes objects for tests: kwok-managed nodes, throwaway namespaces, and their removal.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, ServiceAccount,
};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::eventually;

/// The annotation kwok selects the nodes it manages by (see `dev/stack`).
pub const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";
/// The annotation that hands a node's volumes to the attach-detach controller.
pub const ATTACH_DETACH_ANNOTATION: &str = "volumes.kubernetes.io/controller-managed-attach-detach";

/// A short random suffix for names that must not collide between tests and runs.
pub fn unique_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()
}

/// A Node kwok manages, as a kubelet would register it: capacity, the attach-detach annotation.
pub fn kwok_node(name: &str) -> Result<Node> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": { KWOK_ANNOTATION: "fake", ATTACH_DETACH_ANNOTATION: "true" },
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "type": "kwok",
                "nodewright.io/test": "e2e",
            },
        },
        "status": {
            "capacity": { "cpu": "4", "memory": "16Gi", "pods": "110" },
            "allocatable": { "cpu": "4", "memory": "16Gi", "pods": "110" },
        },
    }))?)
}

/// Creates a kwok node and waits until its `Ready` condition is `True`.
pub async fn create_ready_node(client: &kube::Client, name: &str) -> Result<Node> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(&PostParams::default(), &kwok_node(name)?)
        .await
        .with_context(|| format!("creating node {name}"))?;
    eventually(
        &format!("node {name} to become Ready (is kwok running?)"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let node = nodes.get(name).await?;
            Ok(is_node_ready(&node).then_some(node))
        },
    )
    .await
}

/// Whether the node's `Ready` condition is `True`.
pub fn is_node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Creates a namespace and waits for its `default` ServiceAccount (pods are refused before it).
pub async fn create_namespace(client: &kube::Client, name: &str) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": { "name": name, "labels": { "nodewright.io/test": "e2e" } },
    }))?;
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    eventually(
        &format!("the default ServiceAccount of namespace {name}"),
        Duration::from_secs(30),
        Duration::from_millis(250),
        || async { Ok(accounts.get_opt("default").await?.map(|_| ())) },
    )
    .await
}

/// Creates a `ReadWriteOnce` PersistentVolume `volume` for the Azure disk `disk_id` (CSI driver
/// `disk.csi.azure.com`, as the Azure Disk CSI driver would provision it) and a claim `data` in
/// `namespace` bound to it, and waits until the claim is `Bound`.
pub async fn create_bound_disk_claim(
    client: &kube::Client,
    namespace: &str,
    volume: &str,
    disk_id: &str,
    size: &str,
) -> Result<()> {
    let persistent_volume: PersistentVolume = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": { "name": volume },
        "spec": {
            "capacity": { "storage": size },
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": { "namespace": namespace, "name": "data" },
            "csi": { "driver": "disk.csi.azure.com", "volumeHandle": disk_id },
        },
    }))?;
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &persistent_volume)
        .await
        .with_context(|| format!("creating PersistentVolume {volume}"))?;
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": { "name": "data" },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "volumeName": volume,
            "resources": { "requests": { "storage": size } },
        },
    }))?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    claims
        .create(&PostParams::default(), &claim)
        .await
        .with_context(|| format!("creating claim data in {namespace}"))?;
    eventually(
        "the claim to bind to its volume",
        Duration::from_secs(90),
        Duration::from_millis(250),
        || async {
            let claim = claims.get("data").await?;
            let phase = claim.status.and_then(|s| s.phase).unwrap_or_default();
            Ok((phase == "Bound").then_some(()))
        },
    )
    .await
}

/// Deletes a namespace and a node, ignoring ones already gone. Tests call it whether they pass or
/// fail, so a failed run leaves nothing behind.
pub async fn delete_namespace_and_node(client: &kube::Client, namespace: &str, node: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let params = DeleteParams::default();
    if let Err(error) = namespaces.delete(namespace, &params).await {
        eprintln!("cleanup: deleting namespace {namespace}: {error}");
    }
    if let Err(error) = nodes.delete(node, &params).await {
        eprintln!("cleanup: deleting node {node}: {error}");
    }
}
