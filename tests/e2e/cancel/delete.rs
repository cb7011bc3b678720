//! DeleteMachine cancelled past its point of no return: the VM delete was sent (its operation's
//! polls are throttled, so the run waits in `delete-vm`) when `nodewright machine cancel --wait`
//! comes. The deletion finishes: the run ends Canceled, its status says the deletion finished,
//! and nothing of the machine is left.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::machine::Outcome;
use nodewright_tests::documents::shown;
use nodewright_tests::machines::{
    KillableWorker, MachineStatusDocument, Sandbox, cli, create_machine, write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};
use serde_json::json;

use super::running_step;
use crate::machines::assert_nothing_left;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_cancelled_after_its_vm_delete_was_sent_finishes_the_deletion() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("cancel-delete");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cx{}", nodewright_tests::kube_objects::unique_suffix());
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-d0zzz");
    let result = async {
        create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])?.expect_code(0)?;
        let rule = sandbox
            .add_fault(
                json!({ "kind": "throttle", "operation": "operation.status", "vm": machine,
                               "count": 3, "retry_after": 10 }),
            )
            .await?;
        cli(
            &stack,
            &task_queue,
            &["machine", "delete", &machine, "--skip-drain"],
        )
        .await?
        .expect_code(0)?;
        eventually(
            "the delete to wait for its VM delete",
            Duration::from_secs(60),
            Duration::from_millis(300),
            || async {
                let fired = sandbox
                    .fault(rule)
                    .await?
                    .is_some_and(|r| r["fired"].as_u64() >= Some(1));
                let status = cli(
                    &stack,
                    &task_queue,
                    &["machine", "status", &machine, "--output", "json"],
                )
                .await?;
                let step = running_step(status.expect_code(0)?)?;
                Ok((fired && step == Some("delete-vm")).then_some(()))
            },
        )
        .await?;
        let canceled = cli(
            &stack,
            &task_queue,
            &["machine", "cancel", &machine, "--wait"],
        )
        .await?;
        sandbox.remove_fault(rule).await?;
        canceled.expect_code(0)?;
        ensure!(
            canceled.stdout.contains("canceled during delete-vm")
                && canceled.stdout.contains("the deletion of machine")
                && canceled.stdout.contains("finished"),
            "machine cancel says the deletion finished: {}",
            canceled.stdout
        );
        let doc: MachineStatusDocument = cli(
            &stack,
            &task_queue,
            &["machine", "status", &machine, "--output", "json"],
        )
        .await?
        .expect_code(0)?
        .parse()?;
        ensure!(
            doc.run_status == "canceled" && doc.status.outcome == Outcome::Canceled,
            "the delete ended Canceled: {}",
            shown(&doc)
        );
        assert_nothing_left(&stack, &sandbox, &machine).await
    }
    .await
    .with_context(|| worker.log_tail());
    drop(worker);
    result
}
