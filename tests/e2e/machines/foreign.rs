//! Nothing nodewright did not create is touched: a VM of the machine's name that is not this
//! cluster's makes the create fail (NotOwned), the create's own NIC is removed, and neither that
//! VM nor its Node is deleted or cordoned, by the create's compensation or by a delete.

use nodewright_model::arm::poll_schedule::OperationKind;

use anyhow::{Context, Result, ensure};
use nodewright_activities::azure::{ArmClient, Submitted};
use nodewright_tests::machines::{
    CliResult, KillableWorker, Sandbox, create_machine, node, write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};
use serde_json::json;
use std::time::Duration;

use super::unique_pool;

async fn finish<T>(arm: &ArmClient, submitted: Submitted<T>) -> Result<()> {
    if let Some(operation) = submitted.operation {
        arm.wait(&operation, OperationKind::VmCreate, Duration::from_secs(60))
            .await?;
    }
    Ok(())
}

/// A VM named `name` tagged for another cluster, with its own NIC.
async fn foreign_vm(stack: &Stack, arm: &ArmClient, name: &str) -> Result<()> {
    let subnet = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/nodes/subnets/nodes",
        stack.arm.subscription_id, stack.arm.resource_group
    );
    let tags = json!({ "nodewright.io-cluster": "someone-else", "nodewright.io-machine": name });
    let nic = serde_json::from_value(json!({
        "location": stack.arm.location, "tags": tags,
        "properties": { "ipConfigurations": [{ "name": "ipconfig1", "properties": {
            "subnet": { "id": subnet }, "privateIPAllocationMethod": "Dynamic", "primary": true }}]},
    }))?;
    let nic_name = format!("{name}-theirs");
    finish(arm, arm.put_nic(&nic_name, &nic).await?).await?;
    let vm = serde_json::from_value(json!({
        "location": stack.arm.location, "tags": tags,
        "properties": {
            "hardwareProfile": { "vmSize": "Standard_D2s_v5" },
            "storageProfile": {
                "imageReference": { "publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest" },
                "osDisk": { "createOption": "FromImage", "deleteOption": "Delete" },
            },
            "osProfile": { "computerName": name, "adminUsername": "them" },
            "networkProfile": { "networkInterfaces": [{ "id": arm.nic_id(&nic_name),
                "properties": { "primary": true, "deleteOption": "Delete" } }]},
        },
    }))?;
    finish(arm, arm.put_vm(name, &vm).await?).await
}

#[tokio::test]
async fn a_vm_of_the_same_name_that_is_not_ours_is_never_touched() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let arm = stack.arm_client()?;
    let kube = stack.kube_client().await?;
    let task_queue = unique_task_queue("foreign");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("f");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-f0x9g");
    foreign_vm(&stack, &arm, &machine).await?;
    eventually(
        "the foreign VM's Node to register",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async { node(&kube, &machine).await },
    )
    .await?;

    let created = create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])?;
    created.expect_code(3).with_context(|| worker.log_tail())?;
    ensure!(
        created
            .stderr
            .contains("does not touch resources it did not create"),
        "{}",
        created.stderr
    );
    let deleted = CliResult::run(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--wait"],
    )?;
    deleted.expect_code(3).with_context(|| worker.log_tail())?;
    ensure!(deleted.stderr.contains("was touched"), "{}", deleted.stderr);

    // Their VM and Node are intact, not cordoned; our own NIC is gone.
    let left = sandbox.machine_resources(&machine).await?;
    ensure!(
        left.vms.len() == 1 && left.vms[0]["tags"]["nodewright.io-cluster"] == "someone-else",
        "{left:#?}"
    );
    ensure!(
        left.nics
            .iter()
            .all(|nic| nic["name"] != format!("{machine}-nic").as_str()),
        "our NIC was removed: {left:#?}"
    );
    let their_node = node(&kube, &machine).await?.context("their Node is gone")?;
    ensure!(
        their_node.spec.and_then(|s| s.unschedulable) != Some(true),
        "their Node was cordoned"
    );

    // Clean up what the test made.
    if let nodewright_activities::azure::Deletion::Started(operation) =
        arm.delete_vm(&machine, false).await?
    {
        arm.wait(&operation, OperationKind::VmDelete, Duration::from_secs(60))
            .await?;
    }
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(kube.clone());
    let _ = nodes.delete(&machine, &Default::default()).await;
    Ok(())
}
