//! CreateMachine cancelled while it waits, at two steps: `provision-vm` (the VM's operation
//! polls are throttled) through `temporal workflow cancel`, and `register-node` (the VM never
//! joins) through `nodewright machine cancel --wait`. Each run ends Canceled within seconds of
//! the request, its status names the step and what it removed, and no VM, NIC, OS disk or Node
//! of the machine is left.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::machine::Outcome;
use nodewright_tests::documents::shown;
use nodewright_tests::machines::{
    CliResult, KillableWorker, MachineStatusDocument, Sandbox, cli, create_machine, write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};
use serde_json::{Value, json};

use super::{running_step, temporal_cancel};
use crate::machines::assert_nothing_left;

/// How the request is sent.
#[derive(Debug, Clone, Copy)]
enum Via {
    /// `temporal workflow cancel` (the Temporal UI's "Request Cancellation").
    Temporal,
    /// `nodewright machine cancel NAME --wait`.
    Cli,
}

struct Stage {
    step: &'static str,
    fault: fn(&str) -> Value,
    via: Via,
}

const STAGES: [Stage; 2] = [
    Stage {
        step: "provision-vm",
        fault: |machine| {
            json!({ "kind": "throttle", "operation": "operation.status", "vm": machine,
                    "count": 3, "retry_after": 10 })
        },
        via: Via::Temporal,
    },
    Stage {
        step: "register-node",
        fault: |machine| json!({ "kind": "never_joins", "vm": machine }),
        via: Via::Cli,
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_cancelled_mid_wait_ends_canceled_with_nothing_left() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("cancel-create");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cc{}", nodewright_tests::kube_objects::unique_suffix());
    let pool_file = write_pool_file(&stack, &pool, "10m")?;

    for (index, stage) in STAGES.iter().enumerate() {
        let machine = format!("{pool}-x{index}zzz");
        let workflow_id = format!("create/{}/{machine}", stack.cluster);
        let rule = sandbox.add_fault((stage.fault)(&machine)).await?;
        create_machine(&stack, &task_queue, &pool_file, &machine, &[])?.expect_code(0)?;
        eventually(
            &format!("{machine} to reach step {}", stage.step),
            Duration::from_secs(60),
            Duration::from_millis(300),
            || async {
                let status = CliResult::run(
                    &stack,
                    &task_queue,
                    &["machine", "status", &machine, "--output", "json"],
                )?;
                if status.code != Some(0) {
                    return Ok(None);
                }
                Ok(running_step(&status)?.filter(|step| *step == stage.step))
            },
        )
        .await
        .with_context(|| worker.log_tail())?;

        let asked = std::time::Instant::now();
        match stage.via {
            Via::Temporal => temporal_cancel(&stack, &workflow_id).await?,
            Via::Cli => {
                let canceled = cli(
                    &stack,
                    &task_queue,
                    &["machine", "cancel", &machine, "--wait"],
                )
                .await?;
                canceled.expect_code(0).with_context(|| worker.log_tail())?;
                ensure!(
                    canceled
                        .stdout
                        .contains(&format!("asked {workflow_id} to cancel"))
                        && canceled
                            .stdout
                            .contains(&format!("canceled during {}", stage.step)),
                    "machine cancel says what it asked and how the run ended: {}",
                    canceled.stdout
                );
            }
        }
        let ended = eventually(
            &format!("{workflow_id} to end after the cancellation"),
            Duration::from_secs(180),
            Duration::from_millis(500),
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
        println!(
            "{workflow_id}: canceled at {} ({:?}), ended {:.1}s after the request",
            stage.step,
            stage.via,
            asked.elapsed().as_secs_f64()
        );
        sandbox.remove_fault(rule).await?;

        let shown_ended = shown(&ended);
        ensure!(
            ended.run_status == "canceled" && ended.status.outcome == Outcome::Canceled,
            "the run ended Canceled, not Failed: {shown_ended}"
        );
        let canceled = ended
            .status
            .canceled
            .as_ref()
            .with_context(|| format!("what the cancellation did: {shown_ended}"))?;
        ensure!(
            canceled.at_step == stage.step,
            "the status says at which step: {shown_ended}"
        );
        ensure!(
            canceled
                .undone
                .iter()
                .any(|u| u.contains("the VM (with its NIC and OS disk)")),
            "the status says the VM went: {shown_ended}"
        );
        ensure!(
            canceled.cleanup_failure.is_none(),
            "the clean-up succeeded: {shown_ended}"
        );
        assert_nothing_left(&stack, &sandbox, &machine).await?;
    }
    drop(worker);
    Ok(())
}
