//! Two workers on one task queue, one of them SIGKILLed for good in the middle of a rollout: the
//! other finishes it.
//!
//! A pool of 20 machines is made by a first rollout, then rolled to a new template with
//! maxSurge 25% (5) and maxUnavailable 10% (2), so that several creates and deletes run at once,
//! spread over both workers. Once some new machines are done and some children are in flight,
//! one worker is SIGKILLed and never started again. The rollout still ends `completed`: exactly
//! 20 machines, all of the new template, each with exactly one VM, NIC and OS disk; nothing
//! left of the machines it replaced; the sampler saw never more than 25 machines nor fewer than
//! 18 Ready Nodes; no Node of the pool is left unschedulable. How long the rollout took after
//! the kill is printed (a step lost with the killed worker resumes on the other after its
//! heartbeat or start-to-close timeout): a figure, not an assertion.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use nodewright_model::ownership::LABEL_POOL;
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;

use nodewright_model::rollout::RolloutPhase;
use nodewright_tests::documents::shown;

use crate::rollout::common::{
    PoolShape, Sampler, await_rollout, clean_up_pool, ensure_bounds, ensure_pool_is, pool_machines,
    roll, rollout_pool_file, start_rollout,
};

const REPLICAS: u32 = 20;
/// 25% of 20, rounded up.
const MAX_SURGE: usize = 5;
/// 10% of 20, rounded down.
const MAX_UNAVAILABLE: usize = 2;
/// How long the rollout may take to reach the kill point (its first new machines, on a loaded
/// machine), and to end after it. A step lost with the killed worker resumes on the other within
/// the 15 s heartbeat timeout (waits and ARM writes heartbeat, `activities/src/lifetime.rs`) or
/// the 30 s start-to-close of a Kubernetes write or a read; the deadlines are sized for the
/// 20 replacements on a loaded machine, not for the kill.
const REACH: Duration = Duration::from_secs(600);
const FINISH: Duration = Duration::from_secs(900);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_of_two_workers_killed_for_good_the_other_finishes_the_rollout() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("chaos-two");
    let pool = format!("tw{}", unique_suffix());
    let mut doomed =
        KillableWorker::start_logging_to(&stack, &task_queue, &format!("{task_queue}-a"))?;
    let mut survivor =
        KillableWorker::start_logging_to(&stack, &task_queue, &format!("{task_queue}-b"))?;
    let outcome = scenario(&stack, &task_queue, &pool, &mut doomed, &mut survivor).await;
    if outcome.is_err() {
        eprintln!("killed worker's log:\n{}", doomed.log_tail());
        eprintln!("surviving worker's log:\n{}", survivor.log_tail());
    }
    clean_up_pool(&stack, &task_queue, &pool).await;
    drop(doomed);
    drop(survivor);
    outcome
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    doomed: &mut KillableWorker,
    survivor: &mut KillableWorker,
) -> Result<()> {
    let shape = PoolShape::new(REPLICAS, "25%", "10%");
    let v1 = rollout_pool_file(stack, pool, &shape)?;
    let made = Instant::now();
    roll(stack, task_queue, &v1, &[]).await?;
    let mut old = pool_machines(stack, pool).await?;
    old.sort();
    ensure!(
        old.len() == REPLICAS as usize,
        "the first rollout made {REPLICAS} machines: {old:?}"
    );
    println!(
        "v1: {REPLICAS} machines made in {:.0}s",
        made.elapsed().as_secs_f64()
    );

    let sampler = Sampler::start(stack, pool).await?;
    let v2 = rollout_pool_file(stack, pool, &shape.version("24.04.2"))?;
    let rolled = Instant::now();
    start_rollout(stack, task_queue, &v2, &[]).await?;

    // Some new machines done, some children in flight: kill one worker for good.
    let at_kill = await_rollout(
        stack,
        task_queue,
        pool,
        "some new machines done and children in flight",
        REACH,
        |s| s.counts.updated >= 3 && s.created >= 3 && s.in_flight.len() >= 2,
    )
    .await?;
    let at_kill = &at_kill.status;
    doomed.kill();
    let killed = Instant::now();
    println!(
        "killed one worker {:.0}s into the rollout: {} updated, {} created, {} deleted, in flight {}",
        rolled.elapsed().as_secs_f64(),
        at_kill.counts.updated,
        at_kill.created,
        at_kill.deleted,
        shown(&at_kill.in_flight)
    );

    let done = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout to end on the surviving worker",
        FINISH,
        |s| {
            matches!(
                s.phase,
                RolloutPhase::Completed | RolloutPhase::Aborted | RolloutPhase::Canceled
            )
        },
    )
    .await;
    let extremes = sampler.stop().await?;
    let done = done?;
    println!(
        "the rollout ended {} {:.0}s after the kill ({:.0}s in all)",
        done.status.phase.as_str(),
        killed.elapsed().as_secs_f64(),
        rolled.elapsed().as_secs_f64()
    );
    ensure!(
        done.status.phase == RolloutPhase::Completed,
        "the rollout completed: {done}"
    );
    ensure!(
        survivor.is_running(),
        "the surviving worker still runs: {}",
        survivor.log_tail()
    );

    // The budget held the whole time.
    ensure_bounds(
        &extremes,
        REPLICAS as usize - MAX_UNAVAILABLE,
        REPLICAS as usize + MAX_SURGE,
    )?;

    // Exactly 20 machines of the new template, each with one VM, NIC and OS disk.
    let v2_hash = done.status.template_hash.as_str();
    ensure_pool_is(stack, pool, REPLICAS as usize, v2_hash).await?;
    let sandbox = Sandbox::new(stack)?;
    let machines = pool_machines(stack, pool).await?;
    ensure!(
        machines.len() == REPLICAS as usize,
        "{REPLICAS} machines, no duplicate: {machines:?}"
    );
    for machine in &machines {
        ensure!(
            !old.contains(machine),
            "{machine} of the old template is still there"
        );
        let resources = sandbox.machine_resources(machine).await?;
        ensure!(
            resources.vms.len() == 1 && resources.nics.len() == 1 && resources.disks.len() == 1,
            "{machine}: exactly one VM, NIC and OS disk: {resources:#?}"
        );
    }
    // Nothing is left of the machines it replaced.
    let kube = stack.kube_client().await?;
    for machine in &old {
        let resources = sandbox.machine_resources(machine).await?;
        ensure!(
            resources.is_empty(),
            "replaced machine {machine} left {resources:#?}"
        );
        ensure!(
            nodewright_tests::machines::node(&kube, machine)
                .await?
                .is_none(),
            "replaced machine {machine} left its Node"
        );
    }
    ensure!(
        done.status.created >= REPLICAS && done.status.deleted >= REPLICAS,
        "each machine replaced: {done}"
    );

    // No Node of the pool left unschedulable.
    let nodes: Api<Node> = Api::all(kube);
    let listed = nodes
        .list(&ListParams::default().labels(&format!("{LABEL_POOL}={pool}")))
        .await?;
    let cordoned: Vec<String> = listed
        .items
        .iter()
        .filter(|n| n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true))
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    ensure!(
        cordoned.is_empty(),
        "Nodes of the pool left unschedulable: {cordoned:?}"
    );
    println!(
        "{} created, {} deleted; every machine of template {v2_hash}",
        done.status.created, done.status.deleted
    );
    Ok(())
}
