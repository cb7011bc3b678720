//! Azure's retryable failures met for real on the local stack (issue 30 item 8), with the
//! sandbox answering as Azure does: a VM DELETE whose operation ends `Failed` once (sent again,
//! then gone), a create refused for quota whose clean-up meets the NIC reservation
//! (`NicReservedForAnotherVm`, waited out), and a create preempted by a delete of its machine
//! (`Canceled`, `OperationPreempted`). Each checks the world afterwards: no VM, NIC, disk or Node.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::documents::RunRow;
use nodewright_tests::machines::{
    KillableWorker, Sandbox, cli, create_machine, ensure_joined, write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};
use serde_json::{Value, json};

use super::{assert_nothing_left, unique_pool};

/// The logged ARM requests of `operation` (e.g. `vm.delete`) whose path contains `contains`.
async fn requests_of(sandbox: &Sandbox, contains: &str, operation: &str) -> Result<Vec<Value>> {
    Ok(sandbox
        .requests(contains)
        .await?
        .into_iter()
        .filter(|r| r["operation"] == operation)
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_delete_that_ends_failed_once_is_sent_again_and_the_machine_is_gone() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("vmdel-failed");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("vf");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-r3d7k");
    create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])?
        .expect_code(0)
        .with_context(|| worker.log_tail())?;
    ensure_joined(&stack.kube_client().await?, &machine, &pool).await?;

    let rule = sandbox
        .add_fault(json!({
            "kind": "fail_operation", "operation": "vm.delete", "vm": machine,
            "code": "InternalExecutionError", "message": "Please retry later", "count": 1,
        }))
        .await?;
    let deleted = cli(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--wait"],
    )
    .await?;
    let fired = sandbox.fault(rule).await?;
    sandbox.remove_fault(rule).await?;
    deleted.expect_code(0).with_context(|| worker.log_tail())?;

    let fired = fired.and_then(|r| r["fired"].as_u64());
    ensure!(fired == Some(1), "the rule fired once: {fired:?}");
    let sent = requests_of(
        &sandbox,
        &format!("/virtualMachines/{machine}"),
        "vm.delete",
    )
    .await?;
    let accepted = sent
        .iter()
        .filter(|r| {
            r["status"]
                .as_u64()
                .is_some_and(|s| (200..300).contains(&s))
        })
        .count();
    ensure!(
        accepted == 2,
        "the DELETE was accepted twice (once failed, once for good): {sent:#?}"
    );
    assert_nothing_left(&stack, &sandbox, &machine).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_refused_for_quota_waits_out_the_nic_reservation_and_leaves_nothing() -> Result<()>
{
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("quota");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("q");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-m2p8s");
    let rule = sandbox
        .add_fault(json!({
            "kind": "fail_operation", "operation": "vm.put", "vm": machine,
            "code": "OperationNotAllowed",
            "message": "Operation could not be completed as it results in exceeding approved standardDSv5Family Cores quota.",
        }))
        .await?;
    let created = create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"]);
    sandbox.remove_fault(rule).await?;
    let created = created?;
    created.expect_code(3).with_context(|| worker.log_tail())?;
    ensure!(
        created.stderr.contains("OperationNotAllowed") && created.stderr.contains("provision-vm"),
        "the failure names the step and the ARM code: {}",
        created.stderr
    );

    let nic = format!("/networkInterfaces/{machine}-nic");
    let nic_deletes = requests_of(&sandbox, &nic, "nic.delete").await?;
    let reserved = nic_deletes
        .iter()
        .filter(|r| r["status"] == 400 && r["code"] == "NicReservedForAnotherVm")
        .count();
    ensure!(
        reserved >= 1,
        "the clean-up met the NIC reservation at least once: {nic_deletes:#?}"
    );
    ensure!(
        nic_deletes
            .last()
            .and_then(|r| r["status"].as_u64())
            .is_some_and(|s| (200..300).contains(&s)),
        "the last NIC DELETE was accepted: {nic_deletes:#?}"
    );
    assert_nothing_left(&stack, &sandbox, &machine).await
}

/// Sets the sandbox's latency profile and scale; returns the setting it replaced.
async fn set_latency(stack: &Stack, latency: &Value) -> Result<Value> {
    let url = format!(
        "{}/sandbox/latency",
        stack.arm.endpoint.trim_end_matches('/')
    );
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let before: Value = http
        .get(&url)
        .bearer_auth(&stack.arm.token)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    http.put(&url)
        .bearer_auth(&stack.arm.token)
        .json(latency)
        .send()
        .await?
        .error_for_status()?;
    Ok(before)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_preempted_by_a_delete_of_its_machine_ends_and_leaves_nothing() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("preempt");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("p");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-w5n1c");

    // Realistic latency at half scale while the VM PUT is sent: its create then takes 30-60 s,
    // long enough for the delete to come during it. Short again as soon as it runs.
    let before = set_latency(&stack, &json!({ "profile": "realistic", "scale": 0.5 })).await?;
    let started = async {
        create_machine(&stack, &task_queue, &pool_file, &machine, &[])?.expect_code(0)?;
        eventually(
            "the machine's VM to be Creating",
            Duration::from_secs(120),
            Duration::from_millis(200),
            || async {
                let vms = sandbox.machine_resources(&machine).await?.vms;
                Ok(vms
                    .iter()
                    .any(|vm| vm["properties"]["provisioningState"] == "Creating")
                    .then_some(()))
            },
        )
        .await
    }
    .await;
    set_latency(&stack, &before).await?;
    started.with_context(|| worker.log_tail())?;

    let deleted = cli(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--wait"],
    )
    .await?;
    deleted.expect_code(0).with_context(|| worker.log_tail())?;

    let vm_path = format!("/virtualMachines/{machine}");
    let puts = requests_of(&sandbox, &vm_path, "vm.put").await?;
    ensure!(
        puts.iter().any(|r| r["status"] == 201),
        "the VM PUT was accepted: {puts:#?}"
    );
    let deletes = requests_of(&sandbox, &vm_path, "vm.delete").await?;
    ensure!(
        deletes.first().is_some_and(|r| r["status"] == 202),
        "the first DELETE, during the create, was accepted (it preempts the create): {deletes:#?}"
    );
    let runs: Vec<RunRow> = eventually(
        "both runs of the machine to end",
        Duration::from_secs(180),
        Duration::from_secs(1),
        || async {
            let listed = cli(
                &stack,
                &task_queue,
                &["runs", "--machine", &machine, "--output", "json"],
            )
            .await?;
            let runs: Vec<RunRow> = listed.expect_code(0)?.parse()?;
            let both = ["create", "delete"].iter().all(|prefix| {
                let id = format!("{prefix}/{}/{machine}", stack.cluster);
                runs.iter().any(|run| run.workflow_id == id)
            });
            let ended = both && runs.iter().all(|run| run.status != "running");
            Ok(ended.then_some(runs))
        },
    )
    .await
    .with_context(|| worker.log_tail())?;
    let status_of = |prefix: &str| {
        let id = format!("{prefix}/{}/{machine}", stack.cluster);
        runs.iter()
            .find(|run| run.workflow_id == id)
            .map(|run| run.status.clone())
    };
    ensure!(
        status_of("delete").as_deref() == Some("completed"),
        "the delete completed: {runs:#?}"
    );
    ensure!(
        matches!(status_of("create").as_deref(), Some("failed" | "canceled")),
        "the preempted create ended without a machine: {runs:#?}"
    );
    // Nothing comes back after both ended (a create that sent its PUT again would make a VM).
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_nothing_left(&stack, &sandbox, &machine).await
}
