//! A rollout on a Temporal server with low history limits (issue 32 item 3): the server
//! suggests continue-as-new at 150 events and terminates a run at 1,000. The old machine's drain
//! is held for two minutes by a PodDisruptionBudget (until its deadline and force mode) while the
//! rollout looks at the pool every second, about ten events a look: a run that waited for its
//! children before continuing as new would pass 1,000 events and be terminated. The rollout
//! continues as new with the delete running, the next runs find it again by its workflow ID, and
//! the rollout completes with the new template. How many runs it took is printed.
//!
//! The test runs a Temporal dev server of its own (the shared stack's is never touched), a worker
//! and the CLI against it, with the shared stack's Kubernetes and sandbox.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::rollout::{ChildKind, RolloutPhase};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_server::TemporalServer;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{Placement, Workload, Workloads};

use super::common::{
    PoolShape, await_rollout, clean_up_pool, ensure_pool_is, pool_machines, roll,
    rollout_pool_file, start_rollout,
};

const LIMITS: [(&str, &str); 2] = [
    ("limit.historyCount.suggestContinueAsNew", "150"),
    ("limit.historyCount.error", "1000"),
];
const WAIT: Duration = Duration::from_secs(240);
const FINISH: Duration = Duration::from_secs(480);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_under_low_history_limits_continues_as_new_with_its_delete_running() -> Result<()>
{
    let shared = Stack::load()?;
    let server =
        TemporalServer::start_with_dynamic_config(&shared, "history-limits", &LIMITS).await?;
    let stack = server.stack(&shared);
    let task_queue = unique_task_queue("rhl");
    let pool = format!("rhl{}", unique_suffix());
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let workloads = Workloads::create(&stack, &pool).await?;
    let outcome = scenario(&stack, &task_queue, &pool, &workloads)
        .await
        .with_context(|| {
            format!(
                "worker log:\n{}\nTemporal server log ({}):\n{}",
                worker.log_tail(),
                server.log_path().display(),
                server.log_tail()
            )
        });
    workloads.clean_up().await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    drop(worker);
    drop(server);
    outcome
}

/// The rollout's pool file with a two-minute drain deadline.
fn pool_file(stack: &Stack, pool: &str, shape: &PoolShape) -> Result<std::path::PathBuf> {
    let path = rollout_pool_file(stack, pool, shape)?;
    let text = std::fs::read_to_string(&path)?;
    let drain = "  drain:\n    timeout: 3m\n";
    ensure!(text.contains(drain), "unexpected pool file:\n{text}");
    std::fs::write(&path, text.replace(drain, "  drain:\n    timeout: 2m\n"))?;
    Ok(path)
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    workloads: &Workloads,
) -> Result<()> {
    let shape = PoolShape::new(1, "1", "0");
    roll(stack, task_queue, &pool_file(stack, pool, &shape)?, &[]).await?;
    let old = pool_machines(stack, pool).await?;
    let [old] = old.as_slice() else {
        anyhow::bail!("one machine of v1 expected: {old:?}");
    };

    // One pod on the old machine under a budget that never lets it go: the drain waits until
    // its deadline, then force mode deletes it.
    workloads
        .deployment(&Workload::new("web", 1, Placement::pool(pool)))
        .await?;
    workloads
        .wait_app_running("web", 1, Some(old), WAIT)
        .await?;
    workloads.pod_disruption_budget("web", "web", 1).await?;

    start_rollout(
        stack,
        task_queue,
        &pool_file(stack, pool, &shape.version("24.04.2"))?,
        &[],
    )
    .await?;
    let continued = await_rollout(
        stack,
        task_queue,
        pool,
        "a run continued as new with the old machine's delete in flight",
        WAIT,
        |s| {
            s.continuation >= 1
                && s.in_flight
                    .iter()
                    .any(|c| c.kind == ChildKind::Delete && &c.machine == old)
        },
    )
    .await?;
    println!(
        "continued as new with the delete of {old} in flight (run {} of the rollout)",
        continued.status.continuation + 1
    );

    let done = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout to complete",
        FINISH,
        |s| s.phase == RolloutPhase::Completed,
    )
    .await?;
    println!(
        "completed after {} continuations; {} created, {} deleted",
        done.status.continuation, done.status.created, done.status.deleted
    );
    ensure!(
        done.status.continuation >= 2 && done.status.deleted == 1 && done.status.created == 1,
        "the rollout continued as new while its delete ran, and booked it: {done}"
    );
    ensure!(done.status.failures.is_empty(), "no child failed: {done}");
    ensure_pool_is(stack, pool, 1, &done.status.template_hash).await?;
    let left = pool_machines(stack, pool).await?;
    ensure!(!left.contains(old), "the old VM is gone: {left:?}");
    Ok(())
}
