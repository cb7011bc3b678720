//! A machine name taken by another create is never adopted (issue 32, item 6): a VM and NIC
//! under the name `machine create --name` asks for, tagged as this cluster's machine but made by
//! another create run of another template, make the create fail `NameTaken` with a message that
//! says so, and the create touches nothing of them: no undo deletes them, no tag changes.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_activities::azure::{ArmClient, Submitted};
use nodewright_model::arm::poll_schedule::OperationKind;
use nodewright_model::machine::{Step, StepState};
use nodewright_tests::Stack;
use nodewright_tests::machines::{
    CliResult, KillableWorker, MachineStatusDocument, Sandbox, create_machine, write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::{Value, json};

use super::unique_pool;

async fn finish<T>(arm: &ArmClient, submitted: Submitted<T>) -> Result<()> {
    if let Some(operation) = submitted.operation {
        arm.wait(&operation, OperationKind::VmCreate, Duration::from_secs(60))
            .await?;
    }
    Ok(())
}

/// The tags another create of this cluster's pool `pool` gave machine `name`.
fn their_tags(stack: &Stack, pool: &str, name: &str) -> Value {
    json!({
        "nodewright.io-cluster": stack.cluster,
        "nodewright.io-pool": pool,
        "nodewright.io-machine": name,
        "nodewright.io-template": "0ld0ld0ld0ld",
        "nodewright.io-created": "2026-11-27T00:00:00Z",
        "nodewright.io-creation-deadline": "2026-11-27T00:20:00Z",
        "nodewright.io-create-run": format!("create/{}/{name}/an-earlier-run", stack.cluster),
    })
}

/// A VM `name` with its NIC `<name>-nic` (the names a create of `name` uses), made by another
/// create of this cluster's pool `pool`.
async fn their_machine(stack: &Stack, arm: &ArmClient, pool: &str, name: &str) -> Result<()> {
    let subnet = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/nodes/subnets/nodes",
        stack.arm.subscription_id, stack.arm.resource_group
    );
    let tags = their_tags(stack, pool, name);
    let nic_name = format!("{name}-nic");
    let nic = serde_json::from_value(json!({
        "location": stack.arm.location, "tags": tags,
        "properties": { "ipConfigurations": [{ "name": "ipconfig1", "properties": {
            "subnet": { "id": subnet }, "privateIPAllocationMethod": "Dynamic", "primary": true }}]},
    }))?;
    finish(arm, arm.put_nic(&nic_name, &nic).await?).await?;
    let vm = serde_json::from_value(json!({
        "location": stack.arm.location, "tags": tags,
        "properties": {
            "hardwareProfile": { "vmSize": "Standard_D2s_v5" },
            "storageProfile": {
                "imageReference": { "publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest" },
                "osDisk": { "name": format!("{name}-osdisk"), "createOption": "FromImage", "deleteOption": "Delete" },
            },
            "osProfile": { "computerName": name, "adminUsername": "them" },
            "networkProfile": { "networkInterfaces": [{ "id": arm.nic_id(&nic_name),
                "properties": { "primary": true, "deleteOption": "Delete" } }]},
        },
    }))?;
    finish(arm, arm.put_vm(name, &vm).await?).await
}

/// Every resource of `machine` by kind and name, with its tags.
async fn tags_of(sandbox: &Sandbox, machine: &str) -> Result<BTreeMap<String, Value>> {
    let left = sandbox.machine_resources(machine).await?;
    let mut found = BTreeMap::new();
    for (kind, resources) in [
        ("vm", &left.vms),
        ("nic", &left.nics),
        ("disk", &left.disks),
    ] {
        for resource in resources {
            let name = resource["name"].as_str().unwrap_or_default();
            found.insert(format!("{kind} {name}"), resource["tags"].clone());
        }
    }
    Ok(found)
}

#[tokio::test]
async fn a_name_taken_by_another_create_is_not_adopted_and_nothing_of_it_is_touched() -> Result<()>
{
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let arm = stack.arm_client()?;
    let task_queue = unique_task_queue("taken");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("n");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-t4k3n");
    their_machine(&stack, &arm, &pool, &machine).await?;
    let before = tags_of(&sandbox, &machine).await?;
    ensure!(
        before.contains_key(&format!("vm {machine}"))
            && before.contains_key(&format!("nic {machine}-nic")),
        "their VM and NIC are there: {before:#?}"
    );

    let created = create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])?;
    created.expect_code(3).with_context(|| worker.log_tail())?;
    ensure!(
        created.stderr.contains(&format!(
            "machine name {machine} is taken by a network interface made by create run"
        )) && created.stderr.contains("nothing of it was touched"),
        "the create says whose the name is: {}",
        created.stderr
    );

    // The run failed at the NIC and undid nothing.
    let status = CliResult::run(
        &stack,
        &task_queue,
        &["machine", "status", &machine, "--output", "json"],
    )?;
    status.expect_code(0)?;
    let document: MachineStatusDocument = status.parse()?;
    ensure!(document.run_status == "failed", "{document:#?}");
    let state = |step: Step| {
        document
            .status
            .steps
            .iter()
            .find(|s| s.step == step)
            .map(|s| s.state)
    };
    ensure!(
        state(Step::EnsureNic) == Some(StepState::Failed),
        "{document:#?}"
    );
    ensure!(
        matches!(state(Step::CreateVm), None | Some(StepState::Pending))
            && matches!(state(Step::Compensate), None | Some(StepState::Pending)),
        "no VM step and no undo ran: {document:#?}"
    );

    // Their VM, NIC and OS disk are all there, their tags as they were.
    let after = tags_of(&sandbox, &machine).await?;
    ensure!(
        after == before,
        "their resources changed:\nbefore {before:#?}\nafter {after:#?}"
    );

    // Clean up what the test made (the NIC and disk go with the VM).
    if let nodewright_activities::azure::Deletion::Started(operation) =
        arm.delete_vm(&machine, false).await?
    {
        arm.wait(&operation, OperationKind::VmDelete, Duration::from_secs(60))
            .await?;
    }
    let kube = stack.kube_client().await?;
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(kube);
    let _ = nodes.delete(&machine, &Default::default()).await;
    Ok(())
}
