//! The worker is killed (SIGKILL) in the middle of a create, at several steps, and started
//! again: every run finishes with exactly one VM, one NIC and one OS disk per machine and a
//! Ready Node. A sandbox fault holds each run at its step long enough to kill the worker there.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::machine::{Outcome, Step};
use nodewright_tests::documents::shown;
use nodewright_tests::machines::{
    CliResult, KillableWorker, MachineStatusDocument, Sandbox, create_machine, node,
    write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};
use serde_json::{Value, json};

use super::{assert_nothing_left, unique_pool};

/// A machine's create run, held at `step` by `fault`.
struct Stage {
    step: &'static str,
    fault: fn(&str) -> Value,
}

const STAGES: [Stage; 4] = [
    // The NIC's PUT is throttled: the run waits out Retry-After inside ensure-nic.
    Stage {
        step: "ensure-nic",
        fault: |machine| {
            json!({ "kind": "throttle", "operation": "nic.put", "path": format!("*/{machine}-nic"),
                    "count": 1, "retry_after": 10 })
        },
    },
    // The VM's PUT is throttled: create-vm retries after Retry-After.
    Stage {
        step: "create-vm",
        fault: |machine| {
            json!({ "kind": "throttle", "operation": "vm.put", "vm": machine,
                    "count": 1, "retry_after": 10 })
        },
    },
    // The VM's PUT went through; polls of its operation are throttled: the worker dies while
    // the VM is being created, and the next worker must adopt it, never create a second one.
    Stage {
        step: "provision-vm",
        fault: |machine| {
            json!({ "kind": "throttle", "operation": "operation.status", "vm": machine,
                    "count": 2, "retry_after": 10 })
        },
    },
    // The VM runs but its node has not joined yet.
    Stage {
        step: "register-node",
        fault: |machine| json!({ "kind": "never_joins", "vm": machine }),
    },
];

/// The step the run is in, from `machine status`.
fn running_step(stack: &Stack, task_queue: &str, machine: &str) -> Result<Option<&'static str>> {
    let status = CliResult::run(
        stack,
        task_queue,
        &["machine", "status", machine, "--output", "json"],
    )?;
    if status.code != Some(0) {
        return Ok(None);
    }
    let document: MachineStatusDocument = status.parse()?;
    Ok(document.status.current().map(Step::as_str))
}

#[tokio::test]
async fn a_worker_killed_mid_create_at_any_step_leaves_exactly_one_machine() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("crash");
    let mut worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("k");
    let pool_file = write_pool_file(&stack, &pool, "10m")?;
    let kube = stack.kube_client().await?;

    for (index, stage) in STAGES.iter().enumerate() {
        let machine = format!("{pool}-c{index}zzz");
        let rule = sandbox.add_fault((stage.fault)(&machine)).await?;
        create_machine(&stack, &task_queue, &pool_file, &machine, &[])?.expect_code(0)?;
        let reached = eventually(
            &format!("{machine} to reach step {}", stage.step),
            Duration::from_secs(60),
            Duration::from_millis(300),
            || async {
                Ok(running_step(&stack, &task_queue, &machine)?.filter(|step| *step == stage.step))
            },
        )
        .await
        .with_context(|| worker.log_tail())?;
        if index == 0 {
            // A second start of the same machine's create is refused, with the way to follow it.
            let again = create_machine(&stack, &task_queue, &pool_file, &machine, &[])?;
            again.expect_code(5)?;
            ensure!(
                again.stderr.contains("already running")
                    && again
                        .stderr
                        .contains(&format!("nodewright machine status {machine}")),
                "the refusal says how to follow the run: {}",
                again.stderr
            );
        }
        worker.kill();
        tokio::time::sleep(Duration::from_secs(1)).await;
        sandbox.remove_fault(rule).await?;
        worker.restart()?;

        // The run finishes on the new worker.
        let outcome = eventually(
            &format!("{machine}'s create (killed at {reached}) to finish"),
            Duration::from_secs(180),
            Duration::from_secs(1),
            || async {
                let status = CliResult::run(
                    &stack,
                    &task_queue,
                    &["machine", "status", &machine, "--output", "json"],
                )?;
                if status.code != Some(0) {
                    return Ok(None);
                }
                let document: MachineStatusDocument = status.parse()?;
                Ok((document.run_status != "running").then_some(document))
            },
        )
        .await
        .with_context(|| worker.log_tail())?;
        ensure!(
            outcome.run_status == "completed" && outcome.status.outcome == Outcome::Succeeded,
            "killed at {reached}: {}",
            shown(&outcome)
        );
        let resources = sandbox.machine_resources(&machine).await?;
        ensure!(
            resources.vms.len() == 1 && resources.nics.len() == 1 && resources.disks.len() == 1,
            "killed at {reached}: exactly one VM, NIC and OS disk: {resources:#?}"
        );
        let node = node(&kube, &machine).await?;
        ensure!(
            node.as_ref()
                .is_some_and(nodewright_tests::kube_objects::is_node_ready),
            "killed at {reached}: the Node is Ready"
        );
    }

    // Clean up, and check that the VM creates were one PUT each despite the crashes.
    for index in 0..STAGES.len() {
        let machine = format!("{pool}-c{index}zzz");
        let puts = sandbox
            .requests(&format!("/virtualMachines/{machine}"))
            .await?
            .into_iter()
            .filter(|r| r["method"] == "PUT" && r["status"].as_u64().is_some_and(|s| s < 300))
            .count();
        ensure!(puts == 1, "{machine}: {puts} accepted VM PUTs, expected 1");
        CliResult::run(
            &stack,
            &task_queue,
            &["machine", "delete", &machine, "--wait"],
        )?
        .expect_code(0)
        .with_context(|| worker.log_tail())?;
        assert_nothing_left(&stack, &sandbox, &machine).await?;
    }
    Ok(())
}
