//! The node joiner and the disk attacher against the real API server of the local stack, with a
//! small in-test [`Compute`] standing in for the ARM emulator.
//!
//! Some tests use the real ARM emulator instead, in-process, and drive it with raw ARM requests.
//!
//! Run with `cargo test -p nodewright-sandbox --test kube_actors` after `dev/stack up`. The
//! kubeconfig comes from `KUBECONFIG`, or else from the stack's env file (`.run/env`); without
//! either the tests print why and pass without running.
//!
//! Each test uses its own subscription id and CSI driver name, so the actors it runs never touch
//! objects of other tests or of a sandbox running in the stack.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Secret};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use nodewright_sandbox::arm::{FaultKind, FaultRule};
use nodewright_sandbox::attacher::{self, AttacherSettings};
use nodewright_sandbox::compute::Compute;
use nodewright_sandbox::compute::{GuestState, MachineView};
use nodewright_sandbox::joiner::{
    self, HEARTBEAT_STOPPED_ANNOTATION, JoinerSettings, STOPPED_LEASE_HOLDER,
};
use serde_json::json;

use crate::arm::Arm;
use crate::fake_compute::FakeCompute;

#[path = "kube_actors/arm.rs"]
mod arm;
#[path = "kube_actors/fake_compute.rs"]
mod fake_compute;

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

#[tokio::test]
async fn joiner_registers_a_node_for_a_booted_vm_and_stops_its_heartbeat_when_the_vm_goes()
-> Result<()> {
    let client = kube_client().await?;
    let scope = Scope::new();
    let name = format!("kat-join-{}", scope.suffix);
    let compute = Arc::new(FakeCompute::default());
    let mut machine = scope.machine(&name);
    machine.computer_name = name.to_uppercase();
    machine.custom_data = Some(
        "#!/bin/bash\nKUBELET_FLAGS=\"--node-labels=nodewright.io/pool=kat,tier=db --register-with-taints=dedicated=kat:NoSchedule\"\n"
            .to_owned(),
    );
    machine.tags.insert(
        "k8s-node-label.nodewright.io:team".to_owned(),
        "sandbox".to_owned(),
    );
    compute.put_machine(machine.clone());
    let settings = JoinerSettings {
        resync: Duration::from_millis(250),
        managed_provider_id_prefix: format!("azure:///subscriptions/{}/", scope.subscription),
        ..JoinerSettings::default()
    };
    let task = tokio::spawn(joiner::run(client.clone(), compute.clone(), settings));
    let result = joiner_scenario(&client, &compute, &machine, &name).await;
    task.abort();
    delete_ignoring_missing(&Api::<Node>::all(client.clone()), &name).await;
    delete_ignoring_missing(&Api::<Lease>::namespaced(client, "kube-node-lease"), &name).await;
    result
}

#[tokio::test]
async fn joiner_registers_a_node_only_for_a_bootstrap_token_the_apiserver_accepts() -> Result<()> {
    let config = kube_config().await?;
    let client = kube::Client::try_from(config.clone())?;
    let scope = Scope::new();
    let id = |first: char| format!("{first}{}", &scope.suffix[..5]);
    let (accepted, refused, unknown) = (id('a'), id('r'), id('u'));
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    for token_id in [&accepted, &refused] {
        secrets
            .create(
                &PostParams::default(),
                &token_secret(token_id, "0123456789abcdef")?,
            )
            .await?;
    }
    let compute = Arc::new(FakeCompute::default());
    let machine = |name: &str, custom_data: Option<String>| {
        let mut machine = scope.machine(&format!("kat-tok-{name}-{}", scope.suffix));
        machine.custom_data = custom_data;
        machine
    };
    let join = |token: String| {
        Some(format!(
            "#!/bin/bash\nkubeadm join 10.0.0.4:6443 --token {token}\n"
        ))
    };
    let machines = [
        machine("accepted", join(format!("{accepted}.0123456789abcdef"))),
        machine("refused", join(format!("{refused}.fedcba9876543210"))),
        machine("unknown", join(format!("{unknown}.0123456789abcdef"))),
        machine("none", None),
    ];
    for machine in &machines {
        compute.put_machine(machine.clone());
    }
    let settings = JoinerSettings {
        resync: Duration::from_millis(250),
        managed_provider_id_prefix: format!("azure:///subscriptions/{}/", scope.subscription),
        ..JoinerSettings::default()
    };
    let task = tokio::spawn(joiner::run_with_token_check(
        client.clone(),
        config,
        compute.clone(),
        settings,
    ));
    let result = token_scenario(&client, &secrets, &machines, &refused).await;
    task.abort();
    for machine in &machines {
        delete_ignoring_missing(&Api::<Node>::all(client.clone()), &machine.name).await;
        delete_ignoring_missing(
            &Api::<Lease>::namespaced(client.clone(), "kube-node-lease"),
            &machine.name,
        )
        .await;
    }
    for token_id in [&accepted, &refused] {
        delete_ignoring_missing(&secrets, &format!("bootstrap-token-{token_id}")).await;
    }
    result
}

/// The accepted token's VM, the one whose token no Secret holds and the one without a token
/// join; the one whose secret part is wrong does not, until its Secret carries that secret.
async fn token_scenario(
    client: &kube::Client,
    secrets: &Api<Secret>,
    machines: &[MachineView; 4],
    refused_id: &str,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let [accepted, refused, unknown, none] = machines;
    for machine in [accepted, unknown, none] {
        eventually(&format!("{} to be registered", machine.name), || async {
            Ok(nodes.get_opt(&machine.name).await?)
        })
        .await?;
    }
    // Several passes (250 ms apart) have seen the refused VM by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    if nodes.get_opt(&refused.name).await?.is_some() {
        bail!("{} joined with a token the apiserver refuses", refused.name);
    }
    secrets
        .replace(
            &format!("bootstrap-token-{refused_id}"),
            &PostParams::default(),
            &{
                let mut fixed = token_secret(refused_id, "fedcba9876543210")?;
                fixed.metadata.resource_version = secrets
                    .get(&format!("bootstrap-token-{refused_id}"))
                    .await?
                    .metadata
                    .resource_version;
                fixed
            },
        )
        .await?;
    eventually(
        &format!("{} to join once its token is valid", refused.name),
        || async { Ok(nodes.get_opt(&refused.name).await?) },
    )
    .await?;
    Ok(())
}

/// A bootstrap token Secret for authentication, valid for an hour.
fn token_secret(id: &str, secret: &str) -> Result<Secret> {
    let expiration = (chrono::Utc::now() + chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    Ok(serde_json::from_value(json!({
        "metadata": { "name": format!("bootstrap-token-{id}"), "namespace": "kube-system" },
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {
            "token-id": id,
            "token-secret": secret,
            "expiration": expiration,
            "usage-bootstrap-authentication": "true",
        },
    }))?)
}

async fn joiner_scenario(
    client: &kube::Client,
    compute: &FakeCompute,
    machine: &MachineView,
    name: &str,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = eventually(
        "the node to be registered and made Ready by kwok",
        || async { Ok(nodes.get_opt(name).await?.filter(is_ready)) },
    )
    .await?;
    let spec = node.spec.clone().unwrap_or_default();
    ensure_eq(
        "providerID",
        spec.provider_id,
        Some(format!("azure://{}", machine.id)),
    )?;
    // The node-lifecycle controller's condition taints (`node.kubernetes.io/not-ready` until it
    // has seen the Ready condition) come and go on their own schedule; only the taints the VM
    // registered with are the joiner's.
    let taints: Vec<String> = spec
        .taints
        .unwrap_or_default()
        .iter()
        .filter(|taint| !taint.key.starts_with("node.kubernetes.io/"))
        .map(|taint| {
            format!(
                "{}={}:{}",
                taint.key,
                taint.value.clone().unwrap_or_default(),
                taint.effect
            )
        })
        .collect();
    ensure_eq(
        "taints",
        taints,
        vec!["dedicated=kat:NoSchedule".to_owned()],
    )?;
    let labels = node.metadata.labels.clone().unwrap_or_default();
    for (key, value) in [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
        ("node.kubernetes.io/instance-type", "Standard_D4s_v5"),
        ("topology.kubernetes.io/region", "westeurope"),
        ("topology.kubernetes.io/zone", "westeurope-1"),
        ("nodewright.io/pool", "kat"),
        ("tier", "db"),
        ("nodewright.io/team", "sandbox"),
    ] {
        ensure_eq(key, labels.get(key).map(String::as_str), Some(value))?;
    }
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    for (key, value) in [
        ("kwok.x-k8s.io/node", "fake"),
        (
            "volumes.kubernetes.io/controller-managed-attach-detach",
            "true",
        ),
    ] {
        ensure_eq(key, annotations.get(key).map(String::as_str), Some(value))?;
    }
    // kube-controller-manager's TTL controller annotates every Node it sees; its value steps
    // with the cluster's size (0 s up to 100 Nodes, then 15, 30, 60, 300), so any step will do.
    let ttl = annotations
        .get("node.alpha.kubernetes.io/ttl")
        .map(String::as_str);
    if !matches!(ttl, Some("0" | "15" | "30" | "60" | "300")) {
        bail!("node.alpha.kubernetes.io/ttl is {ttl:?}, not a step of the TTL controller");
    }
    let status = node.status.clone().unwrap_or_default();
    let capacity = status.capacity.unwrap_or_default();
    ensure_eq("cpu", capacity.get("cpu").map(|q| q.0.as_str()), Some("4"))?;
    ensure_eq(
        "memory",
        capacity.get("memory").map(|q| q.0.as_str()),
        Some("16Gi"),
    )?;
    ensure_eq(
        "kubeletVersion",
        status.node_info.map(|info| info.kubelet_version),
        Some("v1.36.3".to_owned()),
    )?;

    // Deallocated: the heartbeat stops, and the node-lifecycle controller notices (about 50 s).
    compute.set_guest(&machine.id, GuestState::Down);
    wait_for_heartbeat(client, name, false, "deallocated").await?;
    eventually_within(
        "the node to stop being Ready once its heartbeat stopped",
        Duration::from_secs(150),
        || async { Ok((!is_ready(&nodes.get(name).await?)).then_some(())) },
    )
    .await?;
    compute.set_guest(&machine.id, GuestState::Running);
    wait_for_heartbeat(client, name, true, "started again").await?;
    eventually("the node to be Ready again", || async {
        Ok(is_ready(&nodes.get(name).await?).then_some(()))
    })
    .await?;
    compute.remove_machine(&machine.id);
    wait_for_heartbeat(client, name, false, "deleted").await?;
    Ok(())
}

/// Waits until the joiner has stopped (`beating == false`) or restored the node's heartbeat: the
/// heartbeat-stopped annotation and the lease holder say so, and the node is never deleted.
async fn wait_for_heartbeat(
    client: &kube::Client,
    name: &str,
    beating: bool,
    vm: &str,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let what = format!(
        "the heartbeat to be {} once the VM is {vm}",
        if beating { "restored" } else { "stopped" }
    );
    eventually(&what, || async {
        let node = nodes.get_opt(name).await?.context("the node was deleted")?;
        let annotations = node.metadata.annotations.unwrap_or_default();
        let stopped = annotations.contains_key(HEARTBEAT_STOPPED_ANNOTATION);
        let holder = leases
            .get_opt(name)
            .await?
            .and_then(|lease| lease.spec)
            .and_then(|spec| spec.holder_identity);
        let held_by_joiner = holder.as_deref() == Some(STOPPED_LEASE_HOLDER);
        let kwok = annotations.contains_key("kwok.x-k8s.io/node");
        Ok((kwok && stopped != beating && held_by_joiner != beating).then_some(()))
    })
    .await
}

#[tokio::test]
async fn attacher_attaches_then_detaches_and_a_second_vm_waits_for_the_disk() -> Result<()> {
    let client = kube_client().await?;
    let scope = Scope::new();
    let driver = format!("kat-{}.disk.csi.azure.com", scope.suffix);
    let (node_a, node_b) = (
        format!("kat-a-{}", scope.suffix),
        format!("kat-b-{}", scope.suffix),
    );
    let (vm_a, vm_b) = (scope.machine(&node_a).id, scope.machine(&node_b).id);
    let volume = format!("kat-{}", scope.suffix);
    let disk = format!(
        "/subscriptions/{}/resourceGroups/kat/providers/Microsoft.Compute/disks/{volume}",
        scope.subscription
    );
    let compute = Arc::new(FakeCompute::default());
    compute.put_disk(&disk);
    let settings = AttacherSettings {
        driver_name: driver.clone(),
        retry_initial: Duration::from_millis(200),
        retry_max: Duration::from_secs(1),
        ..AttacherSettings::default()
    };
    let task = tokio::spawn(attacher::run(client.clone(), compute.clone(), settings));
    let names = AttachScenario {
        driver,
        nodes: [(node_a.clone(), vm_a), (node_b.clone(), vm_b)],
        volume: volume.clone(),
        disk,
        attachments: [
            format!("kat-a-{}", scope.suffix),
            format!("kat-b-{}", scope.suffix),
        ],
    };
    let result = attach_scenario(&client, &compute, &names).await;
    task.abort();
    let attachments: Api<VolumeAttachment> = Api::all(client.clone());
    for attachment in &names.attachments {
        let patch = json!({ "metadata": { "finalizers": null } });
        let _ = attachments
            .patch(attachment, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        delete_ignoring_missing(&attachments, attachment).await;
    }
    delete_ignoring_missing(&Api::<PersistentVolume>::all(client.clone()), &volume).await;
    for node in [node_a, node_b] {
        delete_ignoring_missing(&Api::<Node>::all(client.clone()), &node).await;
    }
    result
}

struct AttachScenario {
    driver: String,
    /// Node name and VM id of A and B.
    nodes: [(String, String); 2],
    volume: String,
    disk: String,
    attachments: [String; 2],
}

async fn attach_scenario(
    client: &kube::Client,
    compute: &FakeCompute,
    names: &AttachScenario,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    for (node, vm) in &names.nodes {
        let object: Node = serde_json::from_value(json!({
            "metadata": { "name": node, "labels": { "nodewright.io/test": "sandbox" } },
            "spec": { "providerID": format!("azure://{vm}") },
        }))?;
        nodes.create(&PostParams::default(), &object).await?;
    }
    let volume: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": names.volume, "labels": { "nodewright.io/test": "sandbox" } },
        "spec": {
            "capacity": { "storage": "1Gi" },
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "csi": { "driver": names.driver, "volumeHandle": names.disk },
        },
    }))?;
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &volume)
        .await?;
    let attachments: Api<VolumeAttachment> = Api::all(client.clone());
    let [(node_a, vm_a), (node_b, vm_b)] = &names.nodes;
    let [attachment_a, attachment_b] = &names.attachments;
    for (attachment, node) in [(attachment_a, node_a), (attachment_b, node_b)] {
        if attachment == attachment_b {
            wait_attached(&attachments, attachment_a).await?;
            ensure_eq(
                "attach calls",
                compute.calls("attach"),
                vec![(vm_a.clone(), names.disk.clone())],
            )?;
        }
        let object: VolumeAttachment = serde_json::from_value(json!({
            "metadata": { "name": attachment, "labels": { "nodewright.io/test": "sandbox" } },
            "spec": {
                "attacher": names.driver,
                "nodeName": node,
                "source": { "persistentVolumeName": names.volume },
            },
        }))?;
        attachments.create(&PostParams::default(), &object).await?;
    }
    let attached_a = attachments.get(attachment_a).await?;
    ensure_eq(
        "finalizers of the attached attachment",
        attached_a.metadata.finalizers,
        Some(vec![format!(
            "external-attacher/{}",
            names.driver.replace('.', "-")
        )]),
    )?;

    // Multi-Attach: B waits with an attachError naming the VM that holds the disk.
    let message = eventually("attachError on the second attachment", || async {
        let status = attachments
            .get(attachment_b)
            .await?
            .status
            .unwrap_or_default();
        if status.attached {
            bail!("the disk was attached to a second VM");
        }
        Ok(status.attach_error.and_then(|error| error.message))
    })
    .await?;
    if !message.contains(vm_a.as_str()) {
        bail!("attachError {message:?} does not name the VM holding the disk ({vm_a})");
    }

    attachments
        .delete(attachment_a, &DeleteParams::default())
        .await?;
    wait_gone(&attachments, attachment_a).await?;
    ensure_eq(
        "detach calls",
        compute.calls("detach"),
        vec![(vm_a.clone(), names.disk.clone())],
    )?;

    let attached_b = wait_attached(&attachments, attachment_b).await?;
    ensure_eq(
        "attachError once attached",
        attached_b.status.and_then(|status| status.attach_error),
        None,
    )?;
    ensure_eq(
        "disk holder",
        compute.managed_by(&names.disk),
        Some(vm_b.clone()),
    )?;
    attachments
        .delete(attachment_b, &DeleteParams::default())
        .await?;
    wait_gone(&attachments, attachment_b).await?;
    ensure_eq(
        "disk holder after detach",
        compute.managed_by(&names.disk),
        None,
    )
}

#[tokio::test]
async fn joiner_stops_the_heartbeat_when_the_vm_is_powered_off_or_deallocated_through_arm()
-> Result<()> {
    let client = kube_client().await?;
    let scope = Scope::new();
    let name = format!("kat-power-{}", scope.suffix);
    let arm = Arm::start(&scope.subscription, 0.2).await?;
    arm.create_vm(&name).await?;
    let settings = JoinerSettings {
        resync: Duration::from_millis(250),
        managed_provider_id_prefix: format!("azure:///subscriptions/{}/", scope.subscription),
        ..JoinerSettings::default()
    };
    let task = tokio::spawn(joiner::run(
        client.clone(),
        Arc::new(arm.emulator.clone()),
        settings,
    ));
    let result = power_scenario(&client, &arm, &name).await;
    task.abort();
    delete_ignoring_missing(&Api::<Node>::all(client.clone()), &name).await;
    delete_ignoring_missing(&Api::<Lease>::namespaced(client, "kube-node-lease"), &name).await;
    result
}

async fn power_scenario(client: &kube::Client, arm: &Arm, name: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    eventually("the node to be registered", || async {
        Ok(nodes.get_opt(name).await?)
    })
    .await?;
    wait_for_heartbeat(client, name, true, "created").await?;
    for (action, state, beating) in [
        ("/powerOff", "powered off (skipShutdown)", false),
        ("/start", "started", true),
        ("/deallocate", "deallocated", false),
    ] {
        let mut path = arm.vm(name, action);
        if action == "/powerOff" {
            path.push_str("&skipShutdown=true");
        }
        let answer = arm
            .send(reqwest::Method::POST, &path, Some(&json!({})))
            .await?;
        ensure_eq(&format!("status of POST {action}"), answer.status, 202)?;
        wait_for_heartbeat(client, name, beating, state).await?;
        arm.succeed(action, &answer).await?;
    }
    Ok(())
}

#[tokio::test]
async fn attacher_ends_a_hung_csi_detach_once_the_disk_is_force_detached_through_arm() -> Result<()>
{
    let client = kube_client().await?;
    let scope = Scope::new();
    let arm = Arm::start(&scope.subscription, 0.5).await?;
    let driver = format!("kat-fd-{}.disk.csi.azure.com", scope.suffix);
    let nodes = [
        format!("kat-fd-a-{}", scope.suffix),
        format!("kat-fd-b-{}", scope.suffix),
    ];
    let volume = format!("kat-fd-{}", scope.suffix);
    for node in &nodes {
        arm.create_vm(node).await?;
    }
    arm.create_disk(&volume).await?;
    let settings = AttacherSettings {
        driver_name: driver.clone(),
        retry_initial: Duration::from_millis(200),
        retry_max: Duration::from_secs(1),
        ..AttacherSettings::default()
    };
    let task = tokio::spawn(attacher::run(
        client.clone(),
        Arc::new(arm.emulator.clone()),
        settings,
    ));
    let attachments = [
        format!("kat-fd-a-{}", scope.suffix),
        format!("kat-fd-b-{}", scope.suffix),
    ];
    let result = force_detach_scenario(&client, &arm, &driver, &nodes, &volume, &attachments).await;
    task.abort();
    let api: Api<VolumeAttachment> = Api::all(client.clone());
    for attachment in &attachments {
        let patch = json!({ "metadata": { "finalizers": null } });
        let _ = api
            .patch(attachment, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        delete_ignoring_missing(&api, attachment).await;
    }
    delete_ignoring_missing(&Api::<PersistentVolume>::all(client.clone()), &volume).await;
    for node in &nodes {
        delete_ignoring_missing(&Api::<Node>::all(client.clone()), node).await;
    }
    result
}

async fn force_detach_scenario(
    client: &kube::Client,
    arm: &Arm,
    driver: &str,
    nodes: &[String; 2],
    volume: &str,
    attachments: &[String; 2],
) -> Result<()> {
    let disk = arm.disk_id(volume);
    let node_api: Api<Node> = Api::all(client.clone());
    for node in nodes {
        let object: Node = serde_json::from_value(json!({
            "metadata": { "name": node, "labels": { "nodewright.io/test": "sandbox" } },
            "spec": { "providerID": format!("azure://{}", arm.vm_id(node)) },
        }))?;
        node_api.create(&PostParams::default(), &object).await?;
    }
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": volume, "labels": { "nodewright.io/test": "sandbox" } },
        "spec": {
            "capacity": { "storage": "1Gi" },
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "csi": { "driver": driver, "volumeHandle": disk },
        },
    }))?;
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &pv)
        .await?;
    let api: Api<VolumeAttachment> = Api::all(client.clone());
    let attachment_for = |name: &str, node: &str| -> Result<VolumeAttachment> {
        Ok(serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "nodewright.io/test": "sandbox" } },
            "spec": { "attacher": driver, "nodeName": node, "source": { "persistentVolumeName": volume } },
        }))?)
    };
    let [node_a, node_b] = nodes;
    let [attachment_a, attachment_b] = attachments;
    api.create(
        &PostParams::default(),
        &attachment_for(attachment_a, node_a)?,
    )
    .await?;
    wait_attached(&api, attachment_a).await?;
    let (vm_a, vm_b) = (arm.vm_id(node_a), arm.vm_id(node_b));
    ensure_eq(
        "disk holder",
        arm.emulator.disk_managed_by(&disk)?,
        Some(vm_a.clone()),
    )?;

    // The drain's normal detach hangs: the VolumeAttachment stays, its finalizer held.
    let mut hang = FaultRule::new(FaultKind::HangDetach);
    hang.operation = Some("csi.detach".to_owned());
    hang.vm = Some(node_a.clone());
    arm.emulator.add_fault(hang);
    api.delete(attachment_a, &DeleteParams::default()).await?;
    api.create(
        &PostParams::default(),
        &attachment_for(attachment_b, node_b)?,
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure_eq(
        "the attachment whose detach hangs still exists",
        api.get_opt(attachment_a).await?.is_some(),
        true,
    )?;
    ensure_eq(
        "disk holder while the detach hangs",
        arm.emulator.disk_managed_by(&disk)?,
        Some(vm_a.clone()),
    )?;
    let waiting = api.get(attachment_b).await?.status.unwrap_or_default();
    ensure_eq("the other node's attachment waits", waiting.attached, false)?;

    // Force mode: ARM force-detaches the disk; the hung CSI detach ends with it.
    let started = std::time::Instant::now();
    let forced = arm
        .send(
            reqwest::Method::POST,
            &arm.vm(node_a, "/attachDetachDataDisks"),
            Some(&json!({ "dataDisksToDetach": [{ "diskId": disk, "detachOption": "ForceDetach" }] })),
        )
        .await?;
    ensure_eq("status of the force detach", forced.status, 202)?;
    arm.succeed("force detach", &forced).await?;
    eventually_within(
        &format!("{attachment_a} to lose its finalizer and go"),
        Duration::from_secs(20),
        || async { Ok(api.get_opt(attachment_a).await?.is_none().then_some(())) },
    )
    .await?;
    let took = started.elapsed();
    if took > Duration::from_secs(20) {
        bail!("the hung detach ended {took:?} after the force detach");
    }
    eprintln!("the hung CSI detach ended {took:?} after the force detach was sent");

    // The volume comes up on the other node.
    wait_attached(&api, attachment_b).await?;
    ensure_eq(
        "disk holder after the force detach",
        arm.emulator.disk_managed_by(&disk)?,
        Some(vm_b),
    )?;
    let tagged = arm
        .send(
            reqwest::Method::PATCH,
            &arm.vm(node_a, ""),
            Some(&json!({ "tags": { "drained": "true" } })),
        )
        .await?;
    ensure_eq(
        "status of a PATCH of the drained VM (no longer busy)",
        tagged.status,
        200,
    )
}

async fn wait_attached(
    attachments: &Api<VolumeAttachment>,
    name: &str,
) -> Result<VolumeAttachment> {
    eventually(&format!("{name} to be attached"), || async {
        let attachment = attachments.get(name).await?;
        let attached = attachment
            .status
            .as_ref()
            .is_some_and(|status| status.attached);
        Ok(attached.then_some(attachment))
    })
    .await
}

async fn wait_gone(attachments: &Api<VolumeAttachment>, name: &str) -> Result<()> {
    eventually(&format!("{name} to be detached and gone"), || async {
        Ok(attachments.get_opt(name).await?.is_none().then_some(()))
    })
    .await
}

/// Names unique to one test: a suffix and a subscription id no other test or sandbox uses.
struct Scope {
    suffix: String,
    subscription: String,
}

impl Scope {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let mixed = (nanos as u64) ^ (u64::from(std::process::id()) << 40);
        let suffix = format!("{:08x}", (mixed ^ (mixed >> 29)) as u32);
        let subscription = format!("00000000-0000-0000-0000-0000{suffix}");
        Self {
            suffix,
            subscription,
        }
    }

    fn machine(&self, name: &str) -> MachineView {
        MachineView {
            id: format!(
                "/subscriptions/{}/resourceGroups/KAT/providers/Microsoft.Compute/virtualMachines/{name}",
                self.subscription
            ),
            name: name.to_owned(),
            computer_name: name.to_owned(),
            location: "westeurope".to_owned(),
            zone: Some("1".to_owned()),
            vm_size: "Standard_D4s_v5".to_owned(),
            tags: BTreeMap::new(),
            custom_data: None,
            guest: GuestState::Running,
            joins_cluster: true,
        }
    }
}

/// A client for the stack's API server (`dev/stack up` must have run).
async fn kube_client() -> Result<kube::Client> {
    Ok(kube::Client::try_from(kube_config().await?)?)
}

/// The configuration of the stack's API server (`dev/stack up` must have run).
async fn kube_config() -> Result<kube::Config> {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let Some(path) = kubeconfig_path() else {
        bail!("KUBECONFIG is not set and no stack env file names one; run `dev/stack up`");
    };
    let kubeconfig =
        Kubeconfig::read_from(&path).with_context(|| format!("reading {}", path.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    nodewright_sandbox::tls::install_crypto_provider();
    Ok(config)
}

fn kubeconfig_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("KUBECONFIG") {
        return Some(PathBuf::from(path));
    }
    let run_dir = std::env::var_os("NODEWRIGHT_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.run"));
    let text = std::fs::read_to_string(run_dir.join("env")).ok()?;
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("KUBECONFIG="))
        .map(PathBuf::from)
        .next()
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|condition| condition.type_ == "Ready" && condition.status == "True")
        })
}

async fn eventually<T, F, Fut>(what: &str, check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    eventually_within(what, WAIT, check).await
}

async fn eventually_within<T, F, Fut>(what: &str, wait: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {wait:?} waiting for {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

fn ensure_eq<T: PartialEq + std::fmt::Debug>(what: &str, value: T, expected: T) -> Result<()> {
    if value != expected {
        bail!("{what}: got {value:?}, expected {expected:?}");
    }
    Ok(())
}

async fn delete_ignoring_missing<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => eprintln!("cleanup: deleting {name}: {error}"),
    }
}
