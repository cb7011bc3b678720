//! The Kubernetes control plane is real: kwok nodes become Ready, the scheduler and controllers
//! place and replace pods, the disruption controller makes PodDisruptionBudgets block evictions,
//! and the attach-detach controller creates VolumeAttachments for CSI volumes.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Api;
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use nodewright_tests::kube_objects::{
    create_bound_disk_claim, create_namespace, create_ready_node, delete_namespace_and_node,
    unique_suffix,
};
use nodewright_tests::{Stack, eventually};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(500);

/// Pod spec pieces shared by the test workloads: pinned to one node, image never pulled by kwok.
fn pinned_pod_spec(node: &str) -> serde_json::Value {
    json!({
        "nodeSelector": { "kubernetes.io/hostname": node },
        "tolerations": [{ "operator": "Exists" }],
        "containers": [{ "name": "app", "image": "registry.invalid/app:1" }],
    })
}

#[tokio::test]
async fn pdb_blocks_eviction_until_it_allows_a_disruption() -> Result<()> {
    let client = Stack::load()?.kube_client().await?;
    let suffix = unique_suffix();
    let (node, namespace) = (format!("smoke-pdb-{suffix}"), format!("smoke-pdb-{suffix}"));
    let result = pdb_scenario(&client, &node, &namespace).await;
    delete_namespace_and_node(&client, &namespace, &node).await;
    result
}

async fn pdb_scenario(client: &kube::Client, node: &str, namespace: &str) -> Result<()> {
    create_ready_node(client, node).await?;
    create_namespace(client, namespace).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), namespace);

    let mut pod_template = json!({ "metadata": { "labels": { "app": "web" } } });
    pod_template["spec"] = pinned_pod_spec(node);
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "web" } },
            "template": pod_template,
        },
    }))?;
    deployments
        .create(&PostParams::default(), &deployment)
        .await?;
    let first_pods = wait_for_running_pods(&pods, "app=web", node, 2).await?;

    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": { "name": "web" },
        "spec": { "minAvailable": 2, "selector": { "matchLabels": { "app": "web" } } },
    }))?;
    budgets.create(&PostParams::default(), &budget).await?;
    wait_for_budget(&budgets, "web", 2, 0).await?;

    let victim = first_pods.iter().next().context("a running pod")?.clone();
    match pods.evict(&victim, &EvictParams::default()).await {
        Err(kube::Error::Api(status)) if status.code == 429 => {}
        Err(other) => bail!("evicting {victim} under minAvailable=2: expected 429, got {other}"),
        Ok(_) => {
            bail!("evicting {victim} under minAvailable=2 succeeded; the PDB did not block it")
        }
    }

    let patch = json!({ "spec": { "minAvailable": 1 } });
    budgets
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    wait_for_budget(&budgets, "web", 2, 1).await?;
    pods.evict(&victim, &EvictParams::default())
        .await
        .with_context(|| format!("evicting {victim} under minAvailable=1"))?;

    // The ReplicaSet replaces the evicted pod: two Running pods again, the victim not among them.
    eventually(
        "the evicted pod to be gone and replaced by a new Running pod",
        WAIT,
        POLL,
        || async {
            let running = running_pods(&pods, "app=web", node).await?;
            Ok((running.len() == 2 && !running.contains(&victim)).then_some(()))
        },
    )
    .await
}

#[tokio::test]
async fn csi_volume_of_a_scheduled_pod_gets_a_volume_attachment() -> Result<()> {
    let client = Stack::load()?.kube_client().await?;
    let suffix = unique_suffix();
    let (node, namespace) = (format!("smoke-csi-{suffix}"), format!("smoke-csi-{suffix}"));
    let volume = format!("smoke-csi-{suffix}");
    let result = csi_scenario(&client, &node, &namespace, &volume).await;
    delete_namespace_and_node(&client, &namespace, &node).await;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    if let Err(error) = volumes.delete(&volume, &DeleteParams::default()).await {
        eprintln!("cleanup: deleting PersistentVolume {volume}: {error}");
    }
    result
}

async fn csi_scenario(
    client: &kube::Client,
    node: &str,
    namespace: &str,
    volume: &str,
) -> Result<()> {
    create_ready_node(client, node).await?;
    create_namespace(client, namespace).await?;
    let disk_id = format!(
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/nodewright-e2e/providers/Microsoft.Compute/disks/{volume}"
    );
    create_bound_disk_claim(client, namespace, volume, &disk_id, "1Gi").await?;

    let mut spec = pinned_pod_spec(node);
    spec["volumes"] = json!([{ "name": "data", "persistentVolumeClaim": { "claimName": "data" } }]);
    spec["containers"][0]["volumeMounts"] = json!([{ "name": "data", "mountPath": "/data" }]);
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "db", "labels": { "app": "db" } },
        "spec": spec,
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.create(&PostParams::default(), &pod).await?;

    let attachments: Api<VolumeAttachment> = Api::all(client.clone());
    let attachment = eventually(
        "the attach-detach controller to create a VolumeAttachment for the volume on the node",
        WAIT,
        POLL,
        || async {
            let all = attachments.list(&ListParams::default()).await?;
            Ok(all.items.into_iter().find(|va| {
                va.spec.node_name == node
                    && va.spec.source.persistent_volume_name.as_deref() == Some(volume)
            }))
        },
    )
    .await?;
    anyhow::ensure!(
        attachment.spec.attacher == "disk.csi.azure.com",
        "VolumeAttachment attacher: got {:?}",
        attachment.spec.attacher
    );
    // The disk behind the volume does not exist in the sandbox and the node is no Azure VM, so
    // the sandbox's disk attacher (the CSI attacher here) reports an error and never attaches it.
    let attached = attachment.status.as_ref().is_some_and(|s| s.attached);
    anyhow::ensure!(
        !attached,
        "the disk does not exist, yet the attachment says attached"
    );
    Ok(())
}

/// Names of the pods matching `selector` that run on `node` and are `Running`.
async fn running_pods(pods: &Api<Pod>, selector: &str, node: &str) -> Result<BTreeSet<String>> {
    let list = pods.list(&ListParams::default().labels(selector)).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .filter(|pod| pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|pod| pod.metadata.name)
        .collect())
}

async fn wait_for_running_pods(
    pods: &Api<Pod>,
    selector: &str,
    node: &str,
    count: usize,
) -> Result<BTreeSet<String>> {
    eventually(
        &format!("{count} Running pods ({selector}) on {node}"),
        WAIT,
        POLL,
        || async {
            let running = running_pods(pods, selector, node).await?;
            Ok((running.len() == count).then_some(running))
        },
    )
    .await
}

/// Waits until the disruption controller has observed the budget's latest spec and reports the
/// given healthy count and allowed disruptions.
async fn wait_for_budget(
    budgets: &Api<PodDisruptionBudget>,
    name: &str,
    healthy: i32,
    allowed: i32,
) -> Result<()> {
    eventually(
        &format!("PDB {name} to report {healthy} healthy and {allowed} disruptions allowed"),
        WAIT,
        POLL,
        || async {
            let budget = budgets.get(name).await?;
            let generation = budget.metadata.generation;
            Ok(budget
                .status
                .filter(|s| s.observed_generation == generation)
                .filter(|s| {
                    s.current_healthy == Some(healthy) && s.disruptions_allowed == Some(allowed)
                })
                .map(|_| ()))
        },
    )
    .await
}
