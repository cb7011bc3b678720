//! Drain settings changed without the template: a rollout of the same file with another `drain`
//! replaces no machine, and writes the new settings on every machine (the Node's annotation and
//! its stamp, the VM's tag), keeping what an operator edited in an annotation. A maintenance
//! drain then runs with the new settings (the VM's tag), the Node's stamped fields yielding to
//! them, the operator's edit still taken where it makes the drain more patient.
//!
//! And a rollout's delete drains with the settings it rolls to: a machine built with two-hour
//! drains, holding a pod its budget never lets go, is drained in force mode 20 s after its
//! drain began when the rollout's file says `timeout: 20s`, without a refusal of the Node's
//! stamped annotation.
//!
//! Before, the template hash left the drain out, so the rollout completed at its first look
//! touching nothing: the Nodes kept their create-time annotation and the VMs their tag.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::drain::{
    ANNOTATION_DRAIN_POLICY, ANNOTATION_DRAIN_POLICY_STAMP, DrainMode, TAG_DRAIN,
};
use nodewright_model::rollout::{RolloutOutcome, RolloutPhase, RolloutResult};
use nodewright_tests::Stack;
use nodewright_tests::documents::{MachineRunDocument, shown};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{Placement, Workload, Workloads};
use serde_json::{Value, json};

use super::common::{
    PoolShape, await_rollout, clean_up_pool, cli, ensure_pool_is, pool_machines, roll,
    rollout_pool_file, start_rollout,
};
use crate::drain::common::drain_document;

const REPLICAS: u32 = 2;

#[tokio::test]
async fn a_drain_only_change_restamps_every_machine_and_keeps_an_operators_edit() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ds");
    let pool = format!("ds{}", unique_suffix());
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = restamped(&stack, &task_queue, &pool).await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn restamped(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let shape = PoolShape::new(REPLICAS, "1", "0");
    let file = rollout_pool_file(stack, pool, &shape)?;
    let built = roll(stack, task_queue, &file, &[]).await?.result;
    ensure_completed(&built)?;
    let mut machines = pool_machines(stack, pool).await?;
    machines.sort();
    let [edited, plain] = machines.as_slice() else {
        anyhow::bail!("two machines, found {machines:?}");
    };
    let kube = stack.kube_client().await?;
    let nodes: Api<Node> = Api::all(kube.clone());

    // An operator makes one Node's drains more patient.
    let (annotation, stamp) = annotations(&nodes, edited).await?;
    let stamp = stamp.context("a Node created now carries the stamp")?;
    ensure!(
        annotation == stamp,
        "unedited at create: {annotation} vs {stamp}"
    );
    let mut wish: Value = serde_json::from_str(&annotation)?;
    wish["timeout"] = json!(14400);
    let patch =
        json!({ "metadata": { "annotations": { ANNOTATION_DRAIN_POLICY: wish.to_string() } } });
    nodes
        .patch(edited, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;

    // The same template with other drain settings.
    let text = std::fs::read_to_string(&file)?;
    let old_drain = "  drain:\n    timeout: 3m\n    pdbRetryInterval: 2s\n";
    ensure!(text.contains(old_drain), "the pool file's drain:\n{text}");
    let changed = file.with_file_name(format!("{pool}-drain.yaml"));
    std::fs::write(
        &changed,
        text.replace(
            old_drain,
            "  drain:\n    timeout: 10m\n    pdbRetryInterval: 5s\n",
        ),
    )?;
    let rolled = roll(stack, task_queue, &changed, &[]).await?.result;
    ensure_completed(&rolled)?;
    let status = &rolled.status;
    ensure!(
        status.template_hash == built.status.template_hash
            && status.created == 0
            && status.deleted == 0,
        "no machine replaced: template {} (was {}), created {}, deleted {}",
        status.template_hash,
        built.status.template_hash,
        status.created,
        status.deleted
    );
    let mut after = pool_machines(stack, pool).await?;
    after.sort();
    ensure!(after == machines, "the same VMs: {after:?} vs {machines:?}");
    let stamps = status
        .drain_stamps
        .as_ref()
        .context("the status says how the drain settings were written")?;
    ensure!(
        stamps.restamped == REPLICAS && stamps.pending == 0 && stamps.failures.is_empty(),
        "both machines restamped: {}",
        shown(stamps)
    );
    ensure!(
        stamps.kept_edits.get(edited.as_str()) == Some(&vec!["timeout".to_owned()])
            && stamps.kept_edits.len() == 1,
        "the operator's timeout is named as kept: {}",
        shown(stamps)
    );

    // The world: tags, annotations, stamps.
    let arm = stack.arm_client()?;
    for machine in &machines {
        let vm = arm.get_vm(machine).await?;
        let tag = vm.tags.get(TAG_DRAIN).cloned().unwrap_or_default();
        ensure!(
            tag.starts_with("timeout=600,pdbRetryInterval=5,"),
            "{machine}'s VM tag carries the new settings: {tag}"
        );
    }
    let (annotation, stamp) = annotations(&nodes, plain).await?;
    let stamp = stamp.context("a restamped Node carries the stamp")?;
    let settings: Value = serde_json::from_str(&stamp)?;
    ensure!(
        annotation == stamp
            && settings["timeout"] == json!(600)
            && settings["pdbRetryInterval"] == json!(5),
        "{plain}: the new settings, stamped: {annotation} / {stamp}"
    );
    let (annotation, stamp) = annotations(&nodes, edited).await?;
    let kept: Value = serde_json::from_str(&annotation)?;
    ensure!(
        kept["timeout"] == json!(14400)
            && kept["pdbRetryInterval"] == json!(5)
            && stamp
                .as_deref()
                .is_some_and(|s| s.contains("\"timeout\":600")),
        "{edited}: the operator's timeout kept over the new settings: {annotation} / {stamp:?}"
    );

    // A maintenance drain of the plain machine: the new settings, from the VM's tag.
    let drained = cli(stack, task_queue, &["machine", "drain", plain, "--wait"]).await?;
    ensure!(
        drained.code == Some(0),
        "the drain finishes: {}{}",
        drained.stdout,
        drained.stderr
    );
    let document = drain_document(stack, task_queue, plain).await?;
    let fact = document
        .status
        .run
        .facts
        .get("drainSettings")
        .cloned()
        .unwrap_or_default();
    ensure!(
        fact.starts_with("timeout 600s, PDB retry 5s,")
            && fact.contains(
                "the pool, VM tag nodewright.io-drain; the Node's annotation is the pool's stamp"
            ),
        "the drain's settings: {fact}"
    );
    ensure!(
        document.status.warnings.is_empty(),
        "no warning: {}",
        document.status.warnings.join("; ")
    );
    cli(stack, task_queue, &["machine", "uncordon", plain])
        .await?
        .expect_code(0)?;
    Ok(())
}

/// The Node's drain-policy annotation and its stamp.
async fn annotations(nodes: &Api<Node>, name: &str) -> Result<(String, Option<String>)> {
    let node = nodes.get(name).await?;
    let annotations = node.metadata.annotations.unwrap_or_default();
    let annotation = annotations
        .get(ANNOTATION_DRAIN_POLICY)
        .cloned()
        .with_context(|| format!("{name} has no {ANNOTATION_DRAIN_POLICY}"))?;
    Ok((
        annotation,
        annotations.get(ANNOTATION_DRAIN_POLICY_STAMP).cloned(),
    ))
}

/// Completed, nothing counted as failed.
fn ensure_completed(result: &RolloutResult) -> Result<()> {
    ensure!(
        result.outcome == RolloutOutcome::Completed && result.status.failures_counted == 0,
        "completed without failures: outcome {}, {} failures counted",
        shown(&result.outcome),
        result.status.failures_counted
    );
    Ok(())
}

/// How long the rollout may take once started: a create, a 20 s drain deadline, a delete.
const ROLL_WAIT: Duration = Duration::from_secs(240);

#[tokio::test]
async fn a_rollouts_delete_drains_with_the_settings_it_rolls_to_not_the_nodes_stamp() -> Result<()>
{
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("dn");
    let suffix = unique_suffix();
    let pool = format!("dn{suffix}");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let workloads = Workloads::create(&stack, &pool).await?;
    let outcome = drained_with_new_settings(&stack, &task_queue, &pool, &suffix, &workloads)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    workloads.clean_up().await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

/// The pool file of `version` with the drain `timeout`.
fn timeout_pool_file(
    stack: &Stack,
    pool: &str,
    version: &'static str,
    timeout: &str,
) -> Result<std::path::PathBuf> {
    let path = rollout_pool_file(stack, pool, &PoolShape::new(1, "1", "0").version(version))?;
    let text = std::fs::read_to_string(&path)?;
    let drain = "  drain:\n    timeout: 3m\n";
    ensure!(text.contains(drain), "unexpected pool file:\n{text}");
    std::fs::write(
        &path,
        text.replace(drain, &format!("  drain:\n    timeout: {timeout}\n")),
    )?;
    Ok(path)
}

async fn drained_with_new_settings(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    suffix: &str,
    workloads: &Workloads,
) -> Result<()> {
    // Built with patient drains: the Node's annotation and stamp say two hours.
    let v1 = timeout_pool_file(stack, pool, "24.04.1", "2h")?;
    ensure_completed(&roll(stack, task_queue, &v1, &[]).await?.result)?;
    let old = pool_machines(stack, pool).await?;
    let [machine] = old.as_slice() else {
        anyhow::bail!("one machine, found {old:?}");
    };
    // A pod its budget never lets go: only force mode at the drain's deadline moves it.
    let web = format!("web-{suffix}");
    workloads
        .bare_pod(&Workload::new(&web, 1, Placement::node(machine)))
        .await?;
    workloads
        .wait_app_running(&web, 1, Some(machine), ROLL_WAIT)
        .await?;
    workloads
        .pod_disruption_budget(&format!("{web}-pdb"), &web, 1)
        .await?;

    // Rolled to a new image whose drains give up after 20 s.
    let v2 = timeout_pool_file(stack, pool, "24.04.2", "20s")?;
    start_rollout(stack, task_queue, &v2, &[]).await?;
    let finished = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout completed (the old machine's drain forced after 20 s, not two hours)",
        ROLL_WAIT,
        |s| s.phase == RolloutPhase::Completed,
    )
    .await?;
    ensure_pool_is(stack, pool, 1, &finished.status.template_hash).await?;
    ensure!(
        !pool_machines(stack, pool).await?.contains(machine),
        "the old machine {machine} is gone"
    );
    let run: MachineRunDocument = cli(
        stack,
        task_queue,
        &["machine", "status", machine, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()?;
    let drain = run.drain().context("the old machine's delete drained it")?;
    let fact = drain
        .run
        .facts
        .get("drainSettings")
        .cloned()
        .unwrap_or_default();
    ensure!(
        fact.starts_with("timeout 20s,")
            && fact.contains("(from the request; the Node's annotation is the pool's stamp)"),
        "the delete drained with the settings rolled to: {fact}"
    );
    ensure!(
        matches!(&drain.mode, DrainMode::Force { reason } if reason.contains("drain deadline passed")),
        "force mode at the 20 s deadline: {}",
        shown(&drain.mode)
    );
    ensure!(
        drain.warnings.is_empty(),
        "no refusal of the stamped annotation: {}",
        drain.warnings.join("; ")
    );
    Ok(())
}
