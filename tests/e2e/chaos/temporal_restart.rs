//! The Temporal server SIGKILLed and started again in the middle of a drain: the drain goes on
//! from what the server had persisted and completes.
//!
//! The test runs a Temporal dev server of its own (the shared stack's is never touched), a worker
//! and the CLI against it, with the shared stack's Kubernetes and sandbox. Two machines of a
//! pool; a Deployment's two pods on the first, A, under a PodDisruptionBudget that allows no
//! disruption. `machine drain A` waits with both pods `blocked`; the server is SIGKILLed, left
//! down a few seconds, and started again on the same ports and database file; the budget is
//! relaxed. The drain completes with each pod evicted and gone (no other pod in its record), A is
//! left cordoned as a maintenance drain leaves it, and `machine uncordon A` makes it
//! schedulable again; both machines are deleted (`--skip-drain --wait`) and nothing of them is
//! left in Azure or Kubernetes. How long the server was down and how long the drain took after
//! the restart are printed: figures, not assertions.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use nodewright_model::drain::{DrainMode, PodState};
use nodewright_model::machine::{Outcome, Step};
use nodewright_tests::documents::{DrainLookup, DrainStatusDocument, MachineRunDocument, shown};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox, cli, node};
use nodewright_tests::temporal_server::TemporalServer;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{Placement, Workload, Workloads};
use nodewright_tests::{Stack, eventually};

use crate::drain::common::{create_machines, delete_machines, drain_pool_file};

const REPLICAS: usize = 2;
/// Generous: the machine is loaded, and after the restart the worker reconnects and a lost
/// workflow task times out before it runs again.
const WAIT: Duration = Duration::from_secs(120);
const FINISH: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(500);
/// How long the server stays down.
const DOWN: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_temporal_server_restarted_in_the_middle_of_a_drain_the_drain_completes() -> Result<()>
{
    let shared = Stack::load()?;
    let mut server = TemporalServer::start(&shared, "chaos-restart").await?;
    println!(
        "private Temporal server on {} ({})",
        server.address(),
        server.db_file().display()
    );
    let stack = server.stack(&shared);
    let task_queue = unique_task_queue("chaos-temporal");
    let mut worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("tr{}", unique_suffix());
    let pool_file = drain_pool_file(
        &stack,
        &pool,
        &[
            ("timeout", "10m"),
            ("pdbRetryInterval", "2s"),
            ("volumeDetachTimeout", "30s"),
            ("volumeAttachTimeout", "60s"),
            ("forceAfterUnhealthy", "5m"),
        ],
    )?;
    let machines = [format!("{pool}-b2c4d"), format!("{pool}-f5g6h")];
    let workloads = Workloads::create(&stack, "chaos-temporal").await?;

    let outcome = scenario(
        &stack,
        &task_queue,
        &pool_file,
        &machines,
        &workloads,
        &mut server,
        &mut worker,
    )
    .await;
    if outcome.is_err() {
        eprintln!("worker log:\n{}", worker.log_tail());
        eprintln!(
            "Temporal server log ({}):\n{}",
            server.log_path().display(),
            server.log_tail()
        );
    }
    workloads.clean_up().await;
    // Deleted already when the scenario passed; after a failure, deleted here (the server must
    // run for that, so it is restarted if it is down).
    if outcome.is_err() {
        if !server.is_running()
            && let Err(error) = server.restart().await
        {
            eprintln!("cleanup: restarting the Temporal server: {error:#}");
        }
        if !worker.is_running() {
            let _ = worker.restart();
        }
        delete_machines(&stack, &task_queue, &machines).await;
    }
    drop(worker);
    drop(server);
    outcome
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool_file: &std::path::Path,
    machines: &[String; 2],
    workloads: &Workloads,
    server: &mut TemporalServer,
    worker: &mut KillableWorker,
) -> Result<()> {
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    create_machines(stack, task_queue, pool_file, machines).await?;

    // Two pods on A under a budget that never lets one go.
    workloads
        .deployment(&Workload::new(
            "web",
            i32::try_from(REPLICAS)?,
            Placement::node(node_a),
        ))
        .await?;
    let pods = workloads
        .wait_app_running("web", REPLICAS, Some(node_a), WAIT)
        .await?;
    let mut keys: Vec<String> = pods
        .iter()
        .map(|pod| {
            format!(
                "{}/{}",
                workloads.namespace(),
                pod.metadata.name.clone().unwrap_or_default()
            )
        })
        .collect();
    keys.sort();
    let uids: Vec<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    workloads
        .pod_disruption_budget("web", "web", i32::try_from(REPLICAS)?)
        .await?;

    // The drain waits with both pods blocked.
    let drain_started = Instant::now();
    cli(stack, task_queue, &["machine", "drain", node_a])
        .await?
        .expect_code(0)?;
    let blocked = eventually("both pods blocked by the budget", WAIT, POLL, || async {
        let doc = drain_doc(stack, task_queue, node_a).await?;
        Ok(doc.filter(|d| {
            d.is_running()
                && keys.iter().all(|k| {
                    d.status
                        .pod(k)
                        .is_some_and(|p| p.state == PodState::Blocked)
                })
        }))
    })
    .await?;
    println!(
        "both pods blocked {:.1}s after the drain started; step {}",
        drain_started.elapsed().as_secs_f64(),
        blocked.status.run.current().map_or("none", Step::as_str)
    );

    // Kill the server, leave it down, start it again on the same ports and file.
    server.kill();
    let killed = Instant::now();
    tokio::time::sleep(DOWN).await;
    let startup = server.restart().await?;
    let restarted = Instant::now();
    println!(
        "Temporal server down {:.1}s (start-up {:.1}s)",
        killed.elapsed().as_secs_f64(),
        startup.as_secs_f64()
    );
    workloads.set_min_available("web", 0).await?;

    // The drain completes: each pod evicted, nothing else in its record.
    let finished = eventually(
        "the drain to end after the restart",
        FINISH,
        POLL,
        || async {
            let doc = drain_doc(stack, task_queue, node_a).await?;
            Ok(doc.filter(|d| !d.is_running()))
        },
    )
    .await?;
    println!(
        "the drain ended {} {:.1}s after the restart ({:.1}s after the kill)",
        finished.run_status,
        restarted.elapsed().as_secs_f64(),
        killed.elapsed().as_secs_f64()
    );
    ensure!(
        finished.run_status == "completed" && finished.status.run.outcome == Outcome::Succeeded,
        "the drain completed: {finished}"
    );
    ensure!(
        finished.status.mode == DrainMode::Graceful,
        "the drain stayed graceful: {finished}"
    );
    let mut recorded: Vec<String> = finished.status.pods.iter().map(|p| p.pod.clone()).collect();
    recorded.sort();
    ensure!(
        recorded == keys,
        "the drain's pods are {recorded:?}, expected {keys:?}"
    );
    for key in &keys {
        let pod = finished.status.pod(key).context("pod entry")?;
        ensure!(
            pod.state == PodState::Gone && pod.detail.as_deref() == Some("evicted"),
            "{key} evicted and gone: {}",
            shown(pod)
        );
        println!("  pod {}", shown(pod));
    }
    let left: Vec<String> = workloads
        .pods_on(node_a)
        .await?
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .filter(|uid| uids.contains(uid))
        .collect();
    ensure!(left.is_empty(), "the evicted pods are gone from {node_a}");
    ensure!(
        worker.is_running(),
        "the worker outlived the Temporal restart: {}",
        worker.log_tail()
    );

    // A maintenance drain leaves A cordoned; uncordon gives it back.
    ensure!(
        unschedulable(&kube, node_a).await? == Some(true),
        "{node_a} is cordoned after its drain"
    );
    cli(stack, task_queue, &["machine", "uncordon", node_a])
        .await?
        .expect_code(0)?;
    eventually("A schedulable again", WAIT, POLL, || async {
        Ok((unschedulable(&kube, node_a).await? == Some(false)).then_some(()))
    })
    .await?;

    // Both machines deleted; nothing of them is left.
    for machine in machines {
        cli(
            stack,
            task_queue,
            &["machine", "delete", machine, "--skip-drain", "--wait"],
        )
        .await?
        .expect_code(0)?;
    }
    let sandbox = Sandbox::new(stack)?;
    for machine in [node_a, node_b] {
        let resources = sandbox.machine_resources(machine).await?;
        ensure!(resources.is_empty(), "{machine} left {resources:#?}");
        ensure!(
            node(&kube, machine).await?.is_none(),
            "{machine} left its Node"
        );
    }
    Ok(())
}

/// `machine status A --output json` when it answers with A's drain; `None` while it cannot
/// (the server or the worker not back yet) or the latest run is not the drain.
async fn drain_doc(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
) -> Result<Option<DrainStatusDocument>> {
    let status = cli(
        stack,
        task_queue,
        &["machine", "status", machine, "--output", "json"],
    )
    .await?;
    if status.code != Some(0) {
        return Ok(None);
    }
    // The latest run may be the create still; a drain's document must parse.
    let doc: MachineRunDocument = status.parse()?;
    let expected = format!("drain/{}/{machine}", stack.cluster);
    Ok(match doc {
        MachineRunDocument::Drain(drain) if drain.workflow_id == expected => Some(*drain),
        _ => None,
    })
}

/// `spec.unschedulable` of the Node, `None` when there is no Node.
async fn unschedulable(kube: &kube::Client, name: &str) -> Result<Option<bool>> {
    Ok(node(kube, name)
        .await?
        .map(|n| n.spec.and_then(|s| s.unschedulable).unwrap_or(false)))
}
