//! A hard deadline lets a rollout replace a machine whose pod asks not to be disrupted, and its
//! drain keeps that pod until the deadline: a 1-machine pool (maxSurge 1) whose drain has
//! `timeout: 10s` and `terminationGracePeriod: 40s` runs two bare pods on its machine A, `web`
//! and `keeper`, `keeper` annotated `nodewright.io/do-not-disrupt: "true"`. A rollout to a new
//! image is not held (the pool has a hard deadline, so the drain keeps the pod itself):
//!
//! - the drain of A evicts `web` and shows `keeper` `held`, not evicted;
//! - at the drain's own deadline force mode starts and `keeper` is still there, the same pod
//!   without a deletion timestamp (force mode before the hard deadline does not override the
//!   mark);
//! - at the hard deadline force mode deletes `keeper`; the rollout completes with one machine of
//!   the new template, A is gone, and the drain names `keeper` as overridden, with its
//!   annotation and "terminationGracePeriod 40s passed", in its status and result.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use nodewright_model::disruption::ANNOTATION_DO_NOT_DISRUPT;
use nodewright_model::drain::{DrainMode, DrainStatus, PodState};
use nodewright_model::rollout::RolloutPhase;
use nodewright_tests::Stack;
use nodewright_tests::documents::MachineRunDocument;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{Placement, Workload, Workloads};

use super::common::{
    POLL, PoolShape, await_rollout, clean_up_pool, cli, ensure_pool_is, pool_machines, roll,
    rollout_pool_file, start_rollout,
};

/// How long the pods may take to run, and the drain to show the hold.
const WAIT: Duration = Duration::from_secs(240);
/// How long the rollout may take after the drain's deadline (30 s to the hard deadline, a
/// delete).
const FINISH_WAIT: Duration = Duration::from_secs(240);

#[tokio::test]
async fn a_rollouts_drain_keeps_a_do_not_disrupt_pod_until_the_hard_deadline_and_names_it()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("hard");
    let suffix = unique_suffix();
    let pool = format!("hd{suffix}");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let workloads = Workloads::create(&stack, &pool).await?;
    let outcome = scenario(&stack, &task_queue, &pool, &suffix, &workloads)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    workloads.clean_up().await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

/// The pool file of `shape` with a 10 s drain timeout and a 40 s hard deadline.
fn hard_pool_file(stack: &Stack, pool: &str, shape: &PoolShape) -> Result<std::path::PathBuf> {
    let path = rollout_pool_file(stack, pool, shape)?;
    let text = std::fs::read_to_string(&path)?;
    let drain = "  drain:\n    timeout: 3m\n";
    ensure!(text.contains(drain), "unexpected pool file:\n{text}");
    let text = text.replace(
        drain,
        "  drain:\n    timeout: 10s\n    terminationGracePeriod: 40s\n",
    );
    std::fs::write(&path, text)?;
    Ok(path)
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    suffix: &str,
    workloads: &Workloads,
) -> Result<()> {
    let v1 = hard_pool_file(stack, pool, &PoolShape::new(1, "1", "0"))?;
    roll(stack, task_queue, &v1, &[]).await?;
    let old = pool_machines(stack, pool).await?;
    ensure!(old.len() == 1, "the first rollout built {old:?}");
    let machine = old[0].clone();

    let (web, keeper) = (format!("web-{suffix}"), format!("keeper-{suffix}"));
    let here = || Placement::node(&machine);
    workloads.bare_pod(&Workload::new(&web, 1, here())).await?;
    let marked = Workload::new(&keeper, 1, here()).annotate(ANNOTATION_DO_NOT_DISRUPT, "true");
    workloads.bare_pod(&marked).await?;
    workloads
        .wait_app_running(&web, 1, Some(&machine), WAIT)
        .await?;
    let kept = workloads
        .wait_app_running(&keeper, 1, Some(&machine), WAIT)
        .await?;
    let keeper_uid = kept
        .first()
        .and_then(|pod| pod.metadata.uid.clone())
        .context("the keeper's UID")?;
    let namespace = workloads.namespace();
    let (web_key, keeper_key) = (
        format!("{namespace}/{web}"),
        format!("{namespace}/{keeper}"),
    );

    let v2 = hard_pool_file(stack, pool, &PoolShape::new(1, "1", "0").version("24.04.2"))?;
    start_rollout(stack, task_queue, &v2, &[]).await?;

    // The drain evicts web and holds the keeper.
    let held = wait_drain_of(stack, task_queue, &machine, "web gone, keeper held", |d| {
        state_of(d, &web_key) == Some(PodState::Gone)
            && state_of(d, &keeper_key) == Some(PodState::Held)
    })
    .await?;
    ensure!(
        held.hard_deadline.is_some(),
        "the drain shows no hard deadline: {}",
        serde_json::to_string(&held)?
    );

    // The drain's own deadline passes: force mode, the keeper untouched.
    wait_drain_of(stack, task_queue, &machine, "force mode at the deadline", |d| {
        matches!(&d.mode, DrainMode::Force { reason } if reason.contains("drain deadline passed"))
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(workloads.client().clone(), namespace);
    let still = pods.get(&keeper).await?;
    ensure!(
        still.metadata.uid.as_deref() == Some(keeper_uid.as_str())
            && still.metadata.deletion_timestamp.is_none(),
        "force mode at the drain's own deadline disturbed the do-not-disrupt pod {keeper_key}"
    );

    // The hard deadline: the keeper goes, the rollout completes, the override is named.
    let finished = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout completed",
        FINISH_WAIT,
        |s| s.phase == RolloutPhase::Completed,
    )
    .await?;
    ensure!(
        !pool_machines(stack, pool).await?.contains(&machine),
        "the old machine {machine} is still there"
    );
    ensure_pool_is(stack, pool, 1, &finished.status.template_hash).await?;
    let gone = pods.get_opt(&keeper).await?;
    ensure!(
        gone.as_ref()
            .is_none_or(|p| p.metadata.uid.as_deref() != Some(keeper_uid.as_str())
                || p.metadata.deletion_timestamp.is_some()),
        "the do-not-disrupt pod {keeper_key} outlived the hard deadline"
    );
    let last = drain_of(stack, task_queue, &machine)
        .await?
        .context("the drain's status after the delete")?;
    let named = format!("{keeper_key} ({ANNOTATION_DO_NOT_DISRUPT}): deleted with grace period 0");
    ensure!(
        last.overridden
            .iter()
            .any(|o| o.starts_with(&named) && o.contains("terminationGracePeriod 40s passed")),
        "the drain does not name the overridden mark ({named} ... terminationGracePeriod 40s passed): {:?}",
        last.overridden
    );
    ensure!(
        matches!(&last.mode, DrainMode::Force { reason } if reason.contains("terminationGracePeriod 40s passed")),
        "the drain did not end in force mode for the hard deadline: {:?}",
        last.mode
    );
    Ok(())
}

/// The state of `pod` in the drain's status.
fn state_of(drain: &DrainStatus, pod: &str) -> Option<PodState> {
    drain.pods.iter().find(|p| p.pod == pod).map(|p| p.state)
}

/// The drain status of `machine`'s latest run (its delete's drain), when it has one.
async fn drain_of(stack: &Stack, task_queue: &str, machine: &str) -> Result<Option<DrainStatus>> {
    let answer = cli(
        stack,
        task_queue,
        &["machine", "status", machine, "--output", "json"],
    )
    .await?;
    if answer.code != Some(0) {
        return Ok(None);
    }
    let doc: MachineRunDocument = answer.parse()?;
    Ok(doc.drain().cloned())
}

/// Polls [`drain_of`] until `done` holds.
async fn wait_drain_of(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
    what: &str,
    done: impl Fn(&DrainStatus) -> bool,
) -> Result<DrainStatus> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let last = drain_of(stack, task_queue, machine).await?;
        if let Some(drain) = last.as_ref().filter(|d| done(d)) {
            return Ok(drain.clone());
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}; last drain status: {}",
            serde_json::to_string(&last)?
        );
        tokio::time::sleep(POLL).await;
    }
}
