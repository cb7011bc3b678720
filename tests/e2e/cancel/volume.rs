//! A drain cancelled while it moves a volume: the move in flight ends with the volume attached to
//! exactly one node.
//!
//! Two machines of a pool whose `spec.drain` gives a detach 30 s. A StatefulSet of one pod with
//! a `ReadWriteOnce` CSI volume on the first machine (A); a sandbox `hang_detach` rule holds every
//! CSI detach from A's VM. `machine drain A` evicts the pod and waits for its volume to detach;
//! then `machine cancel A`:
//!
//! - the drain does not give A back while the volume is half-way: a few seconds after the
//!   request it still runs (in `restore`), the volume's only VolumeAttachment is the one on A,
//!   being deleted, and A is still cordoned, so the pod cannot come back to it;
//! - the rule is removed (the detach goes through): the disk goes A → none → B, the pod runs on
//!   B with its volume, and only then is A uncordoned and untainted; the drain ends Canceled and
//!   says the move finished. The volume was never attached on two nodes.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox, cli};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::timeline::{Timeline, What};
use nodewright_tests::workloads::{
    Placement, Workload, Workloads, attachments_of, is_attached, set_unschedulable, wait_attached,
};
use serde_json::json;

use super::{NodeState, state_of};
use crate::drain::common::{
    create_machines, delete_machines, drain_document, drain_pool_file, wait_drain,
};
use nodewright_model::drain::VolumeState;
use nodewright_model::machine::Outcome;
use nodewright_tests::documents::{DrainLookup, print_steps, shown};

const WAIT: Duration = Duration::from_secs(90);
/// How often the disk's `managedBy` is sampled through ARM.
const SAMPLE: Duration = Duration::from_millis(50);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_cancelled_mid_volume_move_finishes_the_move_before_giving_the_node_back()
-> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("cancel-volume");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cv{}", unique_suffix());
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
    let mut workloads = Workloads::create(&stack, "cancel-volume").await?;
    let mut fault = None;
    let result = scenario(
        &stack,
        &sandbox,
        &task_queue,
        &pool,
        &pool_file,
        &machines,
        &mut workloads,
        &mut fault,
    )
    .await
    .with_context(|| format!("worker log:\n{}", worker.log_tail()));

    // The rule first (it would hold the clean-up's detaches), then pods and volumes, machines.
    if let Some(id) = fault
        && let Err(error) = sandbox.remove_fault(id).await
    {
        eprintln!("cleanup: removing fault rule {id}: {error:#}");
    }
    workloads.clean_up().await;
    delete_machines(&stack, &task_queue, &machines).await;
    drop(worker);
    result
}

#[allow(clippy::too_many_arguments)]
async fn scenario(
    stack: &Stack,
    sandbox: &Sandbox,
    task_queue: &str,
    pool: &str,
    pool_file: &Path,
    machines: &[String; 2],
    workloads: &mut Workloads,
    fault: &mut Option<u64>,
) -> Result<()> {
    let [node_a, node_b] = machines;
    let kube = workloads.client().clone();
    create_machines(stack, task_queue, pool_file, machines).await?;

    // One stateful pod on A with its volume attached there.
    set_unschedulable(&kube, node_b, true).await?;
    let mut timeline =
        Timeline::start(&kube, workloads.namespace(), &workloads.volume_prefix()).await?;
    let volumes = workloads
        .stateful_set(&Workload::new("db", 1, Placement::pool(pool)))
        .await?;
    let pv = volumes.first().context("one volume")?.name.clone();
    let pv = pv.as_str();
    timeline.sample_disks(workloads.arm(), &[pv.to_owned()], SAMPLE);
    workloads
        .wait_app_running("db", 1, Some(node_a), WAIT)
        .await?;
    wait_attached(&kube, pv, node_a, WAIT).await?;
    timeline
        .wait_for(&What::disk_managed_by(pv, Some(node_a)), WAIT)
        .await?;

    // Every CSI detach from A's VM hangs while the rule exists.
    *fault = Some(
        sandbox
            .add_fault(json!({ "kind": "hang_detach", "operation": "csi.detach", "vm": node_a }))
            .await?,
    );
    set_unschedulable(&kube, node_b, false).await?;
    cli(stack, task_queue, &["machine", "drain", node_a])
        .await?
        .expect_code(0)?;
    wait_drain(
        stack,
        task_queue,
        node_a,
        "the volume detaching",
        WAIT,
        |doc| {
            doc.status
                .volume(pv)
                .is_some_and(|v| v.state == VolumeState::Detaching)
        },
    )
    .await?;

    // The request comes while the volume is half-way.
    let canceling = timeline.mark(&format!("machine cancel {node_a}"));
    cli(stack, task_queue, &["machine", "cancel", node_a])
        .await?
        .expect_code(0)?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let waiting = drain_document(stack, task_queue, node_a).await?;
    ensure!(
        waiting.is_running(),
        "the cancelled drain waits for the volume before giving {node_a} back: {waiting}"
    );
    let attachments = attachments_of(&kube, pv).await?;
    ensure!(
        attachments.len() == 1
            && attachments[0].spec.node_name == *node_a
            && attachments[0].metadata.deletion_timestamp.is_some(),
        "{pv}: only its VolumeAttachment on {node_a}, being deleted: {attachments:?}"
    );
    ensure!(
        state_of(stack, node_a).await?.unschedulable,
        "{node_a} stays cordoned while its volume is half-way"
    );

    // The detach goes through: the move finishes, then A is given back.
    let releasing = timeline.mark("hang_detach rule removed");
    if let Some(id) = fault.take() {
        sandbox.remove_fault(id).await?;
    }
    let ended = wait_drain(stack, task_queue, node_a, "the drain to end", WAIT, |doc| {
        !doc.is_running()
    })
    .await?;
    let status = &ended.status;
    print_steps(&status.run);
    ensure!(
        ended.run_status == "canceled" && status.run.outcome == Outcome::Canceled,
        "the drain ended Canceled: {ended}"
    );
    let canceled = status
        .run
        .canceled
        .as_ref()
        .with_context(|| format!("what the cancellation did: {ended}"))?;
    ensure!(
        canceled
            .kept
            .iter()
            .any(|kept| kept.contains("the move finished")),
        "the cancelled drain says the volume move finished: {}",
        shown(canceled)
    );
    let attached_on_b = timeline
        .first_after(releasing, &What::attached(pv, node_b))
        .with_context(|| format!("{pv} attached on {node_b}\n{}", timeline.render()))?;
    ensure!(
        timeline
            .first_after(canceling, &What::attached(pv, node_b))
            .is_some_and(|at| at >= releasing),
        "{pv} attached on {node_b} only after the detach from {node_a} was let go\n{}",
        timeline.render()
    );
    ensure!(
        timeline.most_attached_at_once(pv) <= 1,
        "{pv} was attached on two nodes at once\n{}",
        timeline.render()
    );
    ensure!(
        state_of(stack, node_a).await?
            == NodeState {
                unschedulable: false,
                draining_taint: false,
                terminating: false,
            },
        "{node_a} is uncordoned and untainted once the move finished"
    );
    workloads
        .wait_app_running("db", 1, Some(node_b), WAIT)
        .await?;
    let attachments = attachments_of(&kube, pv).await?;
    ensure!(
        attachments.len() == 1
            && attachments[0].spec.node_name == *node_b
            && is_attached(&attachments[0]),
        "{pv}: one attached VolumeAttachment, on {node_b}: {attachments:?}"
    );
    println!(
        "rule removed -> attached on {node_b} {:.1}s",
        (attached_on_b - releasing).as_secs_f64()
    );
    Ok(())
}
