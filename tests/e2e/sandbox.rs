//! The sandbox on the real local Kubernetes: a VM created through nodewright's ARM client boots
//! into a Ready Node (the node joiner), and a pod's CSI volume follows the pod from one VM to
//! another through real VolumeAttachments (kube-controller-manager's attach-detach controller,
//! the sandbox's disk attacher and the emulator's disk state).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use base64::Engine;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use nodewright_activities::azure::virtual_machines::VirtualMachine;
use nodewright_activities::azure::{ArmClient, Deletion, Submitted};
use nodewright_model::arm::poll_schedule::OperationKind;
use nodewright_tests::kube_objects::{
    create_bound_disk_claim, create_namespace, is_node_ready, unique_suffix,
};
use nodewright_tests::stack::ArmScope;
use nodewright_tests::{Stack, eventually};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(100);
const OPERATION_WAIT: Duration = Duration::from_secs(120);
/// The lease (40 s) plus the node-lifecycle controller's grace period (50 s), with room to spare.
const NOT_READY_WAIT: Duration = Duration::from_secs(150);
const POOL_LABEL: (&str, &str) = ("nodewright.io/pool", "sandbox-e2e");

#[tokio::test]
async fn a_vm_becomes_a_ready_node_and_its_disk_follows_the_pod_to_another_vm() -> Result<()> {
    let stack = Stack::load()?;
    let kube = stack.kube_client().await?;
    let arm = stack.arm_client()?;
    let suffix = unique_suffix();
    let world = World {
        vms: [format!("sbx-a-{suffix}"), format!("sbx-b-{suffix}")],
        disk: format!("pvc-sbx-{suffix}"),
        namespace: format!("sbx-{suffix}"),
    };
    let result = scenario(&stack.arm, &arm, &kube, &world).await;
    world.clean_up(&arm, &kube).await;
    result
}

/// Everything the test creates, so that it can be removed whether the test passes or fails.
struct World {
    vms: [String; 2],
    disk: String,
    namespace: String,
}

async fn scenario(
    scope: &ArmScope,
    arm: &ArmClient,
    kube: &kube::Client,
    world: &World,
) -> Result<()> {
    let [vm_a, vm_b] = &world.vms;
    let (machine_a, machine_b) = tokio::try_join!(
        create_machine(scope, arm, vm_a),
        create_machine(scope, arm, vm_b)
    )?;
    for machine in [&machine_a, &machine_b] {
        wait_for_joined_node(kube, machine).await?;
    }

    let disk_id = create_data_disk(scope, arm, &world.disk).await?;
    create_namespace(kube, &world.namespace).await?;
    create_bound_disk_claim(kube, &world.namespace, &world.disk, &disk_id, "4Gi").await?;

    // The pod lands on VM A: its volume is attached there, in Kubernetes and in Azure.
    let pods: Api<Pod> = Api::namespaced(kube.clone(), &world.namespace);
    pods.create(&PostParams::default(), &pod_on("db-1", &machine_a.node))
        .await?;
    wait_until_attached(kube, arm, &world.disk, &machine_a).await?;

    // The pod moves to VM B: detached from A first, then attached to B, and the attachments follow.
    pods.delete("db-1", &DeleteParams::default()).await?;
    pods.create(&PostParams::default(), &pod_on("db-2", &machine_b.node))
        .await?;
    let seen = watch_the_move(kube, arm, &world.disk, &machine_a, &machine_b).await?;
    ensure!(
        !seen
            .windows(2)
            .any(|pair| pair[0] == Some(machine_a.id.to_lowercase())
                && pair[1] == Some(machine_b.id.to_lowercase())),
        "the disk went from VM A to VM B without being detached in between: {seen:?}"
    );

    // Deleting VM A stops its kubelet's heartbeat: the node-lifecycle controller marks the Node
    // NotReady once its lease expires (grace period ~50 s). The Node object stays, as in Azure.
    delete_vm(arm, vm_a).await?;
    let nodes: Api<Node> = Api::all(kube.clone());
    eventually(
        "the Node of the deleted VM to go NotReady (and stay)",
        NOT_READY_WAIT,
        Duration::from_secs(1),
        || async {
            let node = nodes.get_opt(&machine_a.node).await?;
            let node = node.context("the Node of a deleted VM was removed; it should stay")?;
            Ok((!is_node_ready(&node)).then_some(()))
        },
    )
    .await?;
    let node_b = nodes.get(&machine_b.node).await?;
    ensure!(
        is_node_ready(&node_b),
        "the Node of the VM still running went NotReady too"
    );
    Ok(())
}

/// A VM as the test knows it.
struct Machine {
    id: String,
    node: String,
}

async fn create_machine(scope: &ArmScope, arm: &ArmClient, name: &str) -> Result<Machine> {
    let subnet = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/nodes/subnets/nodes",
        scope.subscription_id, scope.resource_group
    );
    let nic_name = format!("{name}-nic");
    let nic = serde_json::from_value(json!({
        "location": scope.location,
        "tags": { "nodewright.io-test": "e2e" },
        "properties": { "ipConfigurations": [{ "name": "ipconfig1", "properties": {
            "subnet": { "id": subnet }, "privateIPAllocationMethod": "Dynamic", "primary": true,
        }}]},
    }))?;
    finish(arm, arm.put_nic(&nic_name, &nic).await?).await?;

    let bootstrap = format!(
        "#!/bin/bash\nexec /usr/bin/kubelet --node-labels={}={} --cloud-provider=external\n",
        POOL_LABEL.0, POOL_LABEL.1
    );
    let vm: VirtualMachine = serde_json::from_value(json!({
        "location": scope.location,
        "tags": { "nodewright.io-test": "e2e" },
        "properties": {
            "hardwareProfile": { "vmSize": "Standard_D2s_v5" },
            "storageProfile": {
                "imageReference": { "publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest" },
                "osDisk": { "createOption": "FromImage", "managedDisk": { "storageAccountType": "Premium_LRS" }, "deleteOption": "Delete" },
            },
            "osProfile": {
                "computerName": name,
                "adminUsername": "nodewright",
                "customData": base64::engine::general_purpose::STANDARD.encode(bootstrap),
                "linuxConfiguration": { "disablePasswordAuthentication": true, "ssh": { "publicKeys": [{
                    "path": "/home/nodewright/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2eTestKey e2e@nodewright",
                }]}},
            },
            "networkProfile": { "networkInterfaces": [{
                "id": arm.nic_id(&nic_name), "properties": { "primary": true, "deleteOption": "Delete" },
            }]},
        },
    }))?;
    finish(arm, arm.put_vm(name, &vm).await?).await?;
    let created = arm.get_vm(name).await?;
    ensure!(
        created.properties.provisioning_state.as_deref() == Some("Succeeded"),
        "VM {name} after its operation: provisioningState {:?}",
        created.properties.provisioning_state
    );
    Ok(Machine {
        id: created.id.context("a VM without an id")?,
        node: name.to_owned(),
    })
}

/// Waits for a write's async operation, when ARM started one.
async fn finish<T>(arm: &ArmClient, submitted: Submitted<T>) -> Result<()> {
    if let Some(operation) = submitted.operation {
        arm.wait(&operation, OperationKind::VmCreate, OPERATION_WAIT)
            .await?;
    }
    Ok(())
}

async fn wait_for_joined_node(kube: &kube::Client, machine: &Machine) -> Result<()> {
    let nodes: Api<Node> = Api::all(kube.clone());
    let node = eventually(
        &format!("VM {} to register its Node and become Ready", machine.node),
        WAIT,
        POLL,
        || async {
            let node = nodes.get_opt(&machine.node).await?;
            Ok(node.filter(is_node_ready))
        },
    )
    .await?;
    let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.clone());
    ensure!(
        provider_id.as_deref() == Some(format!("azure://{}", machine.id).as_str()),
        "node {}: providerID {provider_id:?}, expected azure://{}",
        machine.node,
        machine.id
    );
    let labels = node.metadata.labels.unwrap_or_default();
    ensure!(
        labels.get(POOL_LABEL.0).map(String::as_str) == Some(POOL_LABEL.1),
        "node {}: the label given through custom data is missing: {labels:?}",
        machine.node
    );
    Ok(())
}

async fn create_data_disk(scope: &ArmScope, arm: &ArmClient, name: &str) -> Result<String> {
    let disk = serde_json::from_value(json!({
        "location": scope.location,
        "sku": { "name": "Premium_LRS" },
        "tags": { "kubernetes.io-created-for-pvc-name": "data" },
        "properties": { "creationData": { "createOption": "Empty" }, "diskSizeGB": 4 },
    }))?;
    finish(arm, arm.put_disk(name, &disk).await?).await?;
    let created = arm.get_disk(name).await?;
    ensure!(
        created.managed_by().is_none(),
        "a new disk is already attached"
    );
    created.id.context("a disk without an id")
}

fn pod_on(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "labels": { "app": "db" } },
        "spec": {
            "nodeSelector": { "kubernetes.io/hostname": node },
            "containers": [{ "name": "db", "image": "registry.invalid/db:1",
                             "volumeMounts": [{ "name": "data", "mountPath": "/data" }] }],
            "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": "data" } }],
        },
    }))
    .unwrap_or_default()
}

/// The VolumeAttachment of `volume` on `node`, if any.
async fn attachment_on(
    kube: &kube::Client,
    volume: &str,
    node: &str,
) -> Result<Option<VolumeAttachment>> {
    let attachments: Api<VolumeAttachment> = Api::all(kube.clone());
    let all = attachments.list(&ListParams::default()).await?;
    Ok(all.items.into_iter().find(|va| {
        va.spec.node_name == node
            && va.spec.source.persistent_volume_name.as_deref() == Some(volume)
    }))
}

fn is_attached(attachment: &VolumeAttachment) -> bool {
    attachment.status.as_ref().is_some_and(|s| s.attached)
}

/// The VM the disk is attached to in Azure, lower-cased (ARM ids compare case-insensitively).
async fn disk_managed_by(arm: &ArmClient, disk: &str) -> Result<Option<String>> {
    Ok(arm
        .get_disk(disk)
        .await?
        .managed_by()
        .map(str::to_lowercase))
}

async fn wait_until_attached(
    kube: &kube::Client,
    arm: &ArmClient,
    volume: &str,
    machine: &Machine,
) -> Result<()> {
    eventually(
        &format!(
            "the volume's attachment on {} to be attached, with the disk managedBy its VM",
            machine.node
        ),
        WAIT,
        POLL,
        || async {
            let attached = attachment_on(kube, volume, &machine.node)
                .await?
                .is_some_and(|va| is_attached(&va));
            let managed_by = disk_managed_by(arm, volume).await?;
            Ok((attached && managed_by == Some(machine.id.to_lowercase())).then_some(()))
        },
    )
    .await
}

/// Follows the volume from `from` to `to`, failing if both attachments are ever attached at once;
/// returns the sequence of distinct `managedBy` values the disk went through.
async fn watch_the_move(
    kube: &kube::Client,
    arm: &ArmClient,
    volume: &str,
    from: &Machine,
    to: &Machine,
) -> Result<Vec<Option<String>>> {
    let mut seen: Vec<Option<String>> = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let old = attachment_on(kube, volume, &from.node).await?;
        let new = attachment_on(kube, volume, &to.node).await?;
        let managed_by = disk_managed_by(arm, volume).await?;
        if seen.last() != Some(&managed_by) {
            seen.push(managed_by.clone());
        }
        let (old_attached, new_attached) = (
            old.as_ref().is_some_and(is_attached),
            new.as_ref().is_some_and(is_attached),
        );
        ensure!(
            !(old_attached && new_attached),
            "the volume is attached on both {} and {} at once",
            from.node,
            to.node
        );
        if old.is_none() && new_attached && managed_by == Some(to.id.to_lowercase()) {
            return Ok(seen);
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "timed out after {WAIT:?} waiting for the volume to move from {} to {}: old attachment {:?}, new attachment attached {new_attached}, disk managedBy went through {seen:?}",
                from.node,
                to.node,
                old.map(|va| va.status),
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn delete_vm(arm: &ArmClient, name: &str) -> Result<()> {
    if let Deletion::Started(operation) = arm.delete_vm(name, false).await? {
        arm.wait(&operation, OperationKind::VmDelete, OPERATION_WAIT)
            .await?;
    }
    Ok(())
}

impl World {
    /// Removes every Kubernetes object and Azure resource the test made, reporting (not failing
    /// on) what could not be removed.
    async fn clean_up(&self, arm: &ArmClient, kube: &kube::Client) {
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(kube.clone());
        if let Err(error) = namespaces
            .delete(&self.namespace, &DeleteParams::default())
            .await
        {
            eprintln!("cleanup: deleting namespace {}: {error}", self.namespace);
        }
        for vm in &self.vms {
            if let Err(error) = delete_vm(arm, vm).await {
                eprintln!("cleanup: deleting VM {vm}: {error}");
            }
        }
        // With the VMs gone the disk is detached, so it can be deleted.
        if let Err(error) = delete_disk(arm, &self.disk).await {
            eprintln!("cleanup: deleting disk {}: {error}", self.disk);
        }
        let volumes: Api<PersistentVolume> = Api::all(kube.clone());
        if let Err(error) = volumes.delete(&self.disk, &DeleteParams::default()).await {
            eprintln!("cleanup: deleting PersistentVolume {}: {error}", self.disk);
        }
        let nodes: Api<Node> = Api::all(kube.clone());
        for vm in &self.vms {
            if let Err(error) = nodes.delete(vm, &DeleteParams::default()).await {
                eprintln!("cleanup: deleting node {vm}: {error}");
            }
        }
    }
}

async fn delete_disk(arm: &ArmClient, name: &str) -> Result<()> {
    eventually(
        &format!("disk {name} to be deleted"),
        WAIT,
        Duration::from_millis(500),
        || async {
            match arm.delete_disk(name).await {
                Ok(Deletion::Started(operation)) => {
                    arm.wait(&operation, OperationKind::Disk, OPERATION_WAIT)
                        .await?;
                    Ok(Some(()))
                }
                Ok(_) => Ok(Some(())),
                // Still attached while its VM is being deleted: try again.
                Err(_) => Ok(None),
            }
        },
    )
    .await
}
