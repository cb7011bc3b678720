//! The Temporal SDK's series that the dashboard reads (`nodewright_tests::monitoring::
//! TEMPORAL_SERIES`, kept in the tidy test's allow-list) are served by a running worker: after
//! a machine created and deleted (completed runs) and one create that Azure refuses
//! (`AllocationFailed`: failed activities and a failed run), its `/metrics` carries every one of
//! them. The `nodewright_*` series are checked against
//! `nodewright-worker --list-metrics` by `tests/tidy/monitoring.rs`.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::machines::{
    CliResult, KillableWorker, Sandbox, allocation_failure, create_machine, write_pool_file,
};
use nodewright_tests::monitoring::TEMPORAL_SERIES;
use nodewright_tests::scrape::scrape;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};

use nodewright_tests::kube_objects::unique_suffix;

use crate::machines::assert_nothing_left;

#[tokio::test]
async fn a_worker_serves_the_temporal_series_the_dashboard_reads() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("monitoring");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("m{}", unique_suffix());
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let kept = format!("{pool}-k7d2x");
    create_machine(&stack, &task_queue, &pool_file, &kept, &["--wait"])?
        .expect_code(0)
        .with_context(|| worker.log_tail())?;
    CliResult::run(
        &stack,
        &task_queue,
        &["machine", "delete", &kept, "--skip-drain", "--wait"],
    )?
    .expect_code(0)
    .with_context(|| worker.log_tail())?;
    assert_nothing_left(&stack, &sandbox, &kept).await?;

    let machine = format!("{pool}-m2k4x");
    let rule = sandbox.add_fault(allocation_failure(&pool)).await?;

    let created = create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])?;
    sandbox.remove_fault(rule).await?;
    created.expect_code(3).with_context(|| worker.log_tail())?;

    let address = worker.metrics_address()?;
    let missing = eventually(
        "every Temporal series of the dashboard to be served",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || async {
            let samples = scrape(address)?;
            let missing: Vec<&str> = TEMPORAL_SERIES
                .into_iter()
                .filter(|name| !samples.has(name, &[]))
                .collect();
            Ok(missing.is_empty().then_some(()).or_else(|| {
                eprintln!("not served yet: {}", missing.join(", "));
                None
            }))
        },
    )
    .await;
    let samples = scrape(address)?;
    ensure!(
        missing.is_ok(),
        "the worker serves every series of TEMPORAL_SERIES:\n{}",
        samples.text
    );
    assert_nothing_left(&stack, &sandbox, &machine).await
}
