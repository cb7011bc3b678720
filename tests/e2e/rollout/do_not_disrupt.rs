//! Do not disrupt holds a rollout's replacement: a 1-machine pool (maxSurge 1, maxUnavailable 0)
//! runs a bare pod annotated `karpenter.sh/do-not-disrupt: "true"` on its machine A. A rollout
//! to a new image makes the replacement B, then leaves A alone: the status lists A as held with
//! the pod's name, the holdup says why, and A is neither cordoned nor drained (the pod is still
//! there, same UID). Once the pod's annotation is removed, the rollout replaces A within its
//! re-check and completes: one machine, of the new template.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use nodewright_model::disruption::ANNOTATION_KARPENTER_DO_NOT_DISRUPT;
use nodewright_model::drain::TAINT_DRAINING;
use nodewright_model::rollout::{Holdup, RolloutPhase, RolloutStatus};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::Workloads;
use serde_json::json;

use super::common::{
    POLL, PoolShape, clean_up_pool, cli, ensure_pool_is, pool_machines, roll, rollout_pool_file,
    start_rollout,
};

/// How long the replacement and the hold may take to show.
const HOLD_WAIT: Duration = Duration::from_secs(180);
/// How long the rollout may take once the mark is gone (a 30 s re-check, a drain, a delete).
const FINISH_WAIT: Duration = Duration::from_secs(240);
/// The guarded pod.
const POD: &str = "guarded";

#[tokio::test]
async fn a_do_not_disrupt_pod_holds_its_machine_until_the_mark_goes() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("dnd");
    let pool = format!("dnd{}", unique_suffix());
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let workloads = Workloads::create(&stack, &pool).await?;
    let outcome = scenario(&stack, &task_queue, &pool, &workloads).await;
    workloads.clean_up().await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    workloads: &Workloads,
) -> Result<()> {
    let v1 = rollout_pool_file(stack, pool, &PoolShape::new(1, "1", "0"))?;
    roll(stack, task_queue, &v1, &[]).await?;
    let old = pool_machines(stack, pool).await?;
    ensure!(old.len() == 1, "the first rollout built {old:?}");
    let machine = old[0].clone();

    let pods: Api<Pod> = Api::namespaced(workloads.client().clone(), workloads.namespace());
    let guarded = create_guarded_pod(&pods, &machine).await?;

    let v2 = rollout_pool_file(stack, pool, &PoolShape::new(1, "1", "0").version("24.04.2"))?;
    start_rollout(stack, task_queue, &v2, &[]).await?;
    let held = wait_status(
        stack,
        task_queue,
        pool,
        "the old machine held",
        HOLD_WAIT,
        |s| {
            s.holdup == Some(Holdup::DoNotDisrupt)
                && s.counts.updated == 1
                && s.counts.available == 2
        },
    )
    .await?;
    let entry = held
        .held
        .iter()
        .find(|h| h.machine == machine)
        .with_context(|| format!("{machine} not listed as held: {:?}", held.held))?;
    let pod_key = format!("{}/{POD}", workloads.namespace());
    ensure!(
        entry.reason.contains(&pod_key)
            && entry.reason.contains(ANNOTATION_KARPENTER_DO_NOT_DISRUPT),
        "the hold's reason names neither the pod nor the annotation: {}",
        entry.reason
    );
    let text = cli(stack, task_queue, &["pool", "rollout", "status", pool])
        .await?
        .expect_code(0)?
        .stdout
        .clone();
    ensure!(
        text.contains("held") && text.contains(&machine) && text.contains(&pod_key),
        "`pool rollout status` does not show the hold:\n{text}"
    );

    // Held means untouched: the Node is not cordoned or tainted, the pod is the same one.
    let nodes: Api<Node> = Api::all(workloads.client().clone());
    let node = nodes.get(&machine).await?;
    let spec = node.spec.unwrap_or_default();
    ensure!(
        !spec.unschedulable.unwrap_or(false)
            && !spec
                .taints
                .unwrap_or_default()
                .iter()
                .any(|t| t.key == TAINT_DRAINING),
        "held machine {machine} was cordoned or tainted"
    );
    let still = pods.get(POD).await?;
    ensure!(
        still.metadata.uid == guarded.metadata.uid && still.metadata.deletion_timestamp.is_none(),
        "the guarded pod was disturbed"
    );

    // The mark goes: the rollout replaces the machine and completes.
    let unmark =
        json!({ "metadata": { "annotations": { ANNOTATION_KARPENTER_DO_NOT_DISRUPT: null } } });
    pods.patch(POD, &PatchParams::default(), &Patch::Merge(&unmark))
        .await
        .context("removing the pod's do-not-disrupt annotation")?;
    let finished = wait_status(
        stack,
        task_queue,
        pool,
        "the rollout completed",
        FINISH_WAIT,
        |s| s.phase == RolloutPhase::Completed,
    )
    .await?;
    ensure!(
        finished.held.is_empty(),
        "a completed rollout still lists held machines: {:?}",
        finished.held
    );
    ensure!(
        !pool_machines(stack, pool).await?.contains(&machine),
        "the old machine {machine} is still there"
    );
    ensure_pool_is(stack, pool, 1, &finished.template_hash).await
}

/// A bare pod bound to `node`, annotated do-not-disrupt; returns it as created.
async fn create_guarded_pod(pods: &Api<Pod>, node: &str) -> Result<Pod> {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": POD,
            "labels": { "app": POD },
            "annotations": { ANNOTATION_KARPENTER_DO_NOT_DISRUPT: "true" },
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{ "name": POD, "image": format!("registry.invalid/{POD}:1") }],
        },
    }))?;
    pods.create(&PostParams::default(), &pod)
        .await
        .context("creating the guarded pod")
}

/// Polls `pool rollout status` (typed) until `done` holds.
async fn wait_status(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(&RolloutStatus) -> bool,
) -> Result<RolloutStatus> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let read = cli(
            stack,
            task_queue,
            &["pool", "rollout", "status", pool, "--output", "json"],
        )
        .await?
        .expect_code(0)
        .and_then(|result| result.parse::<RolloutStatus>());
        let last = match read {
            Ok(status) if done(&status) => return Ok(status),
            Ok(status) => serde_json::to_string(&status)?,
            Err(error) => format!("{error:#}"),
        };
        ensure!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}; last status: {last}"
        );
        tokio::time::sleep(POLL).await;
    }
}
