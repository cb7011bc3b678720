//! What Azure's failures of a create's writes do (issue 30 items 8 and 10): a VM create Azure
//! ends `Failed` with `InternalExecutionError` is PUT again and the machine comes up; an OS disk
//! whose tags cannot be set leaves a warning and a good machine, and the delete still removes
//! the disk, found by its name under the machine's VM.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::arm::poll_schedule::OperationKind;
use nodewright_model::machine::{CreatedMachine, DeletedMachine, Outcome};
use nodewright_model::ownership::{TAG_CLUSTER, TAG_MACHINE};
use nodewright_tests::Stack;
use nodewright_tests::documents::ResultDocument;
use nodewright_tests::machines::{
    CliResult, KillableWorker, MachineStatusDocument, Sandbox, create_machine, ensure_joined,
    write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use super::{assert_nothing_left, unique_pool};

/// The machine's `status` query, read as a typed document.
fn status_of(stack: &Stack, task_queue: &str, machine: &str) -> Result<MachineStatusDocument> {
    CliResult::run(
        stack,
        task_queue,
        &["machine", "status", machine, "--output", "json"],
    )?
    .expect_code(0)?
    .parse()
}

#[tokio::test]
async fn a_vm_create_ended_failed_with_internal_execution_error_is_sent_again_and_comes_up()
-> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("resend");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("r");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-r3s2d");
    let rule = sandbox
        .add_fault(json!({
            "kind": "fail_operation", "operation": "vm.put", "vm": machine, "count": 1,
            "code": "InternalExecutionError",
            "message": "An internal execution error occurred. Please retry later.",
        }))
        .await?;

    let created = create_machine(
        &stack,
        &task_queue,
        &pool_file,
        &machine,
        &["--wait", "--output", "json"],
    )?;
    let fired = sandbox.fault(rule).await?;
    sandbox.remove_fault(rule).await?;
    let document: ResultDocument<CreatedMachine> = created
        .expect_code(0)
        .with_context(|| worker.log_tail())?
        .parse()?;
    ensure!(
        fired.as_ref().and_then(|r| r["fired"].as_u64()) == Some(1),
        "the create's first operation ended Failed: {fired:?}"
    );
    let resend = "VM create ended Failed (InternalExecutionError), sending again (2 of 3)";
    ensure!(
        document.result.warnings.iter().any(|w| w == resend),
        "the result names the resend: {document}"
    );

    // Azure: two PUTs of the VM, one VM, provisioned; its OS disk tagged as ours.
    let puts = sandbox
        .requests(&format!("virtualMachines/{machine}"))
        .await?
        .into_iter()
        .filter(|r| r["operation"] == "vm.put" && r["method"] == "PUT")
        .count();
    ensure!(puts == 2, "the VM PUT was sent twice, not {puts} times");
    let resources = sandbox.machine_resources(&machine).await?;
    ensure!(resources.vms.len() == 1, "one VM: {resources:#?}");
    ensure!(
        resources.vms[0]["properties"]["provisioningState"] == "Succeeded",
        "{resources:#?}"
    );
    ensure!(resources.disks.len() == 1, "one OS disk: {resources:#?}");
    ensure!(
        resources.disks[0]["tags"][TAG_CLUSTER] == stack.cluster.as_str(),
        "the OS disk is tagged: {resources:#?}"
    );
    // Kubernetes: the Node joined and is Ready.
    let kube = stack.kube_client().await?;
    ensure_joined(&kube, &machine, &pool).await?;

    let status = status_of(&stack, &task_queue, &machine)?;
    ensure!(status.status.outcome == Outcome::Succeeded, "{status:?}");
    ensure!(
        status.status.warnings.iter().any(|w| w == resend),
        "the status names the resend: {:?}",
        status.status.warnings
    );

    let deleted = CliResult::run(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--wait", "--skip-drain"],
    )?;
    deleted.expect_code(0).with_context(|| worker.log_tail())?;
    assert_nothing_left(&stack, &sandbox, &machine).await
}

#[tokio::test]
async fn an_os_disk_whose_tags_are_refused_warns_keeps_the_machine_and_delete_finds_it_by_name()
-> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("untagged");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("u");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-t4g5d");
    let os_disk = format!("{machine}-osdisk");
    // A refusal a retry cannot change (409 OperationNotAllowed), for every PATCH of the disk.
    let rule = sandbox
        .add_fault(json!({
            "kind": "conflict", "operation": "disk.patch", "path": format!("*/disks/{os_disk}"),
            "code": "OperationNotAllowed", "count": 1000,
            "message": "The tags of this disk cannot be changed now.",
        }))
        .await?;

    let created = create_machine(
        &stack,
        &task_queue,
        &pool_file,
        &machine,
        &["--wait", "--output", "json"],
    )?;
    let fired = sandbox.fault(rule).await?;
    sandbox.remove_fault(rule).await?;
    let document: ResultDocument<CreatedMachine> = created
        .expect_code(0)
        .with_context(|| worker.log_tail())?
        .parse()?;
    ensure!(
        fired
            .as_ref()
            .and_then(|r| r["fired"].as_u64())
            .is_some_and(|n| n >= 1),
        "the disk's PATCH was refused: {fired:?}"
    );
    let warned = |warnings: &[String]| {
        warnings.iter().any(|w| {
            w.starts_with(&format!("tagging OS disk {os_disk} failed"))
                && w.contains("OperationNotAllowed")
        })
    };
    ensure!(
        warned(&document.result.warnings),
        "the result warns of the tags: {document}"
    );
    let status = status_of(&stack, &task_queue, &machine)?;
    ensure!(status.status.outcome == Outcome::Succeeded, "{status:?}");
    ensure!(
        warned(&status.status.warnings),
        "the status warns of the tags: {:?}",
        status.status.warnings
    );
    // Nothing was undone: the VM runs, its Node is Ready, its OS disk carries no tag of ours.
    let resources = sandbox.machine_resources(&machine).await?;
    ensure!(resources.vms.len() == 1, "the VM stays: {resources:#?}");
    ensure!(
        resources.disks.len() == 1,
        "the OS disk stays: {resources:#?}"
    );
    ensure!(
        resources.disks[0]["tags"].get(TAG_CLUSTER).is_none()
            && resources.disks[0]["tags"].get(TAG_MACHINE).is_none(),
        "the OS disk is untagged: {resources:#?}"
    );
    let kube = stack.kube_client().await?;
    ensure_joined(&kube, &machine, &pool).await?;

    // The disk outlives its VM (deleteOption Detach, as on a VM made before nodewright set
    // Delete): only the removal's look by name can find it, since it carries no tag.
    let arm = stack.arm_client()?;
    let patched = arm
        .patch_vm(
            &machine,
            &json!({ "properties": { "storageProfile": {
                "osDisk": { "deleteOption": "Detach" } } } }),
        )
        .await?;
    if let Some(operation) = &patched.operation {
        arm.wait(operation, OperationKind::VmUpdate, Duration::from_secs(60))
            .await?;
    }

    let deleted = CliResult::run(
        &stack,
        &task_queue,
        &[
            "machine",
            "delete",
            &machine,
            "--wait",
            "--skip-drain",
            "--output",
            "json",
        ],
    )?;
    let deleted: ResultDocument<DeletedMachine> = deleted
        .expect_code(0)
        .with_context(|| worker.log_tail())?
        .parse()?;
    ensure!(
        deleted.result.leftovers_deleted.contains(&os_disk),
        "the untagged OS disk was found by its name and deleted: {deleted}"
    );
    assert_nothing_left(&stack, &sandbox, &machine).await
}
