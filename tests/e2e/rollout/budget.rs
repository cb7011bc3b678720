//! The headline scenario: a 6-machine pool running a StatefulSet on Azure Disk CSI volumes and a
//! Deployment, both with PodDisruptionBudgets, is rolled to a new image. With maxSurge 2 and
//! maxUnavailable 0 a sampler must never see fewer than 6 Ready nodes of the pool nor more than
//! 8 machines; with maxSurge 0 and maxUnavailable 1, never fewer than 5 nor more than 6. At the
//! end every machine runs the new template and is Ready, there are 6, every pod is Running and
//! every volume attached where its pod runs.
//!
//! The test prints the rollout's makespan against the lower bound
//! `ceil(replicas / (maxSurge + maxUnavailable)) × (create + delete)`, with the average create
//! and delete (drain included) durations the rollout measured itself, for the team's note.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use nodewright_model::rollout::{RolloutOutcome, RolloutStatus};
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{
    Placement, Workload, Workloads, attachments_of, is_attached, node_of,
};

use super::common::{
    PoolShape, Sampler, clean_up_pool, ensure_bounds, ensure_pool_is, roll, rollout_pool_file,
};

/// Replicas of the pool.
const REPLICAS: u32 = 6;
/// Pods of the StatefulSet (one volume each) and of the Deployment.
const DB: i32 = 3;
const WEB: i32 = 4;
/// How long the pods may take to run.
const APP_WAIT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn surge_two_never_drops_below_six_ready_nor_above_eight_machines() -> Result<()> {
    rolls_within_bounds("rs", "2", "0", 6, 8).await
}

#[tokio::test]
async fn unavailable_one_stays_between_five_ready_and_six_machines() -> Result<()> {
    rolls_within_bounds("ru", "0", "1", 5, 6).await
}

async fn rolls_within_bounds(
    prefix: &str,
    surge: &'static str,
    unavailable: &'static str,
    min_ready: usize,
    max_machines: usize,
) -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue(prefix);
    let pool = format!("{prefix}{}", unique_suffix());
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let mut workloads = Workloads::create(&stack, &pool).await?;
    let outcome = scenario(
        &stack,
        &task_queue,
        &pool,
        &mut workloads,
        (surge, unavailable),
        (min_ready, max_machines),
    )
    .await;
    workloads.clean_up().await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    workloads: &mut Workloads,
    (surge, unavailable): (&'static str, &'static str),
    (min_ready, max_machines): (usize, usize),
) -> Result<()> {
    // The pool is built by a first rollout (of an empty pool).
    let v1 = rollout_pool_file(stack, pool, &PoolShape::new(REPLICAS, surge, unavailable))?;
    let built = roll(stack, task_queue, &v1, &[]).await?;
    let v1_hash = built.result.status.template_hash;
    ensure_pool_is(stack, pool, REPLICAS as usize, &v1_hash).await?;

    let placement = Placement::pool(pool);
    workloads
        .deployment(&Workload::new("web", WEB, placement.clone()))
        .await?;
    workloads
        .pod_disruption_budget("web", "web", WEB - 2)
        .await?;
    let volumes = workloads
        .stateful_set(&Workload::new("db", DB, placement))
        .await?;
    workloads.pod_disruption_budget("db", "db", 1).await?;
    workloads
        .wait_app_running("web", WEB as usize, None, APP_WAIT)
        .await?;
    workloads
        .wait_app_running("db", DB as usize, None, APP_WAIT)
        .await?;

    let sampler = Sampler::start(stack, pool).await?;
    let v2 = rollout_pool_file(
        stack,
        pool,
        &PoolShape::new(REPLICAS, surge, unavailable).version("24.04.2"),
    )?;
    let started = Instant::now();
    let rolled = roll(stack, task_queue, &v2, &[]).await;
    let makespan = started.elapsed();
    let extremes = sampler.stop().await?;
    let rolled = rolled?;
    ensure_bounds(&extremes, min_ready, max_machines)?;

    let result = &rolled.result;
    ensure!(
        result.outcome == RolloutOutcome::Completed,
        "rollout: {rolled}"
    );
    let v2_hash = result.status.template_hash.as_str();
    ensure!(
        v2_hash != v1_hash,
        "the new image must change the template hash"
    );
    let history = &result.history;
    ensure!(
        history
            .current
            .as_ref()
            .is_some_and(|t| t.template_hash == v2_hash)
            && history
                .previous
                .as_ref()
                .is_some_and(|t| t.template_hash == v1_hash),
        "the result records the new template as current and the old as previous: {}",
        shown(history)
    );
    let status = &result.status;
    ensure!(
        status.created == REPLICAS && status.deleted == REPLICAS,
        "6 created and 6 deleted: {}",
        shown(status)
    );
    ensure_pool_is(stack, pool, REPLICAS as usize, v2_hash).await?;

    // Every pod Running; every volume attached to the node its pod runs on.
    workloads
        .wait_app_running("web", WEB as usize, None, APP_WAIT)
        .await?;
    workloads
        .wait_app_running("db", DB as usize, None, APP_WAIT)
        .await?;
    let pods = workloads.pods().await?;
    for volume in &volumes {
        let pod = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(volume.pod.as_str()))
            .with_context(|| format!("pod {} is gone", volume.pod))?;
        let on = node_of(pod).unwrap_or_default().to_owned();
        let attached: Vec<String> = attachments_of(workloads.client(), &volume.name)
            .await?
            .into_iter()
            .filter(is_attached)
            .map(|a| a.spec.node_name)
            .collect();
        ensure!(
            attached == [on.clone()],
            "volume {} attached to {attached:?}, its pod runs on {on}",
            volume.name
        );
    }
    report_makespan(status, surge, unavailable, makespan);
    Ok(())
}

/// Prints the makespan against `ceil(replicas / (surge + unavailable)) × (create + delete)`.
fn report_makespan(status: &RolloutStatus, surge: &str, unavailable: &str, makespan: Duration) {
    let timings = &status.timings;
    let create = timings.create_millis as f64 / f64::from(timings.creates.max(1));
    let delete = timings.delete_millis as f64 / f64::from(timings.deletes.max(1));
    let budget = &status.strategy.budget;
    let pace = budget.surge + budget.unavailable;
    let waves = REPLICAS.div_ceil(pace.max(1));
    let bound = waves as f64 * (create + delete) / 1000.0;
    println!(
        "makespan maxSurge {surge} maxUnavailable {unavailable}: {:.1} s; lower bound {waves} × ({:.1} s create + {:.1} s delete) = {bound:.1} s; ratio {:.2}",
        makespan.as_secs_f64(),
        create / 1000.0,
        delete / 1000.0,
        makespan.as_secs_f64() / bound.max(0.001)
    );
}
