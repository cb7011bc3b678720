//! ARM throttling: every third ARM write of the pool is answered 429 with `Retry-After`. The
//! runs still complete, and every retry came at least `Retry-After` after its 429 (the sandbox's
//! request log has the times). The note's figures come from here too: ARM requests per create
//! and per delete.

use anyhow::{Context, Result, ensure};
use chrono::DateTime;
use nodewright_tests::Stack;
use nodewright_tests::machines::{
    CliResult, KillableWorker, Sandbox, create_machine, write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::{Value, json};

use super::{assert_nothing_left, unique_pool};

const RETRY_AFTER_SECONDS: u64 = 2;

fn millis(entry: &Value) -> Result<i64> {
    let time = entry["time"].as_str().context("request without time")?;
    Ok(DateTime::parse_from_rfc3339(time)?.timestamp_millis())
}

#[tokio::test]
async fn runs_complete_under_throttling_and_wait_retry_after_between_attempts() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("throttle");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("r");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machines = [format!("{pool}-t1bbb"), format!("{pool}-t2ccc")];
    let rule = sandbox
        .add_fault(json!({
            "kind": "throttle", "method": "write", "operation": "vm.*|disk.*|nic.*",
            "path": format!("*/{pool}-*"),
            "every": 3, "retry_after": RETRY_AFTER_SECONDS,
        }))
        .await?;

    for machine in &machines {
        create_machine(&stack, &task_queue, &pool_file, machine, &["--wait"])?
            .expect_code(0)
            .with_context(|| worker.log_tail())?;
    }
    for machine in &machines {
        CliResult::run(
            &stack,
            &task_queue,
            &["machine", "delete", machine, "--wait"],
        )?
        .expect_code(0)
        .with_context(|| worker.log_tail())?;
    }
    sandbox.remove_fault(rule).await?;
    for machine in &machines {
        assert_nothing_left(&stack, &sandbox, machine).await?;
    }

    let log = sandbox.requests(&format!("/{pool}-")).await?;
    let throttled: Vec<&Value> = log.iter().filter(|r| r["status"] == 429).collect();
    ensure!(
        throttled.len() >= 3,
        "expected several 429s, got {}: {log:#?}",
        throttled.len()
    );
    for answer in &throttled {
        let retry = log
            .iter()
            .find(|r| {
                r["seq"].as_u64() > answer["seq"].as_u64()
                    && r["method"] == answer["method"]
                    && r["path"] == answer["path"]
            })
            .with_context(|| format!("no retry after {answer}"))?;
        let waited = millis(retry)? - millis(answer)?;
        ensure!(
            waited >= (RETRY_AFTER_SECONDS * 1000) as i64 - 50,
            "retried {waited} ms after a 429 with Retry-After {RETRY_AFTER_SECONDS}: {answer} then {retry}"
        );
    }
    Ok(())
}
