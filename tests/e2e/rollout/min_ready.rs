//! minReadySeconds holds an old machine until its replacement has served that long: a 1-machine
//! pool (maxSurge 1, maxUnavailable 0) rolls to a new image with `minReadySeconds: 40`. The new
//! machine's Node becomes Ready, the rollout's status shows it Ready but warming up (`availableIn`,
//! and `Ready (available in …)` in `pool rollout status`) while the old machine is still there,
//! and the old machine's DeleteMachine starts no earlier than 40 s after the new Node's Ready
//! `lastTransitionTime` (both read from the world: the Node and the child's start in Temporal,
//! not from sleeps). The rollout completes with one machine of the new template; the old VM and
//! Node are gone.
//!
//! Without minReadySeconds the old machine's delete starts within a look (a second here) of the
//! new Node being Ready, so this test fails on a planner that ignores the setting.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodewright_model::rollout::{Activity, ChildKind, Health, RolloutPhase};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::stack::describe_workflow;
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::{
    PoolShape, await_rollout, clean_up_pool, cli, ensure_pool_is, pool_machines, roll,
    rollout_pool_file, start_rollout,
};

/// The pool's `spec.strategy.minReadySeconds`.
const MIN_READY_SECS: i64 = 40;
/// How long the new machine may take to be created and show as warming up.
const WARMING_WAIT: Duration = Duration::from_secs(180);
/// How long the rest may take: the 40 s warm-up, a drain and a delete.
const FINISH_WAIT: Duration = Duration::from_secs(240);

#[tokio::test]
async fn an_old_machine_goes_only_once_its_replacement_was_ready_for_min_ready_seconds()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("minready");
    let pool = format!("mr{}", unique_suffix());
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = scenario(&stack, &task_queue, &pool).await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn scenario(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let v1 = rollout_pool_file(stack, pool, &PoolShape::new(1, "1", "0"))?;
    roll(stack, task_queue, &v1, &[]).await?;
    let old = pool_machines(stack, pool).await?;
    ensure!(old.len() == 1, "the first rollout built {old:?}");
    let old = old[0].clone();

    let v2 = with_min_ready(&rollout_pool_file(
        stack,
        pool,
        &PoolShape::new(1, "1", "0").version("24.04.2"),
    )?)?;
    start_rollout(stack, task_queue, &v2, &[]).await?;

    // The new machine Ready but not yet available: the status says when it will be, and the
    // old machine is neither deleted nor being deleted.
    let warming = await_rollout(
        stack,
        task_queue,
        pool,
        "the new machine Ready and warming up",
        WARMING_WAIT,
        |s| {
            s.machines
                .iter()
                .any(|m| m.updated && m.health == Health::Ready && m.available_in.is_some())
        },
    )
    .await?
    .status;
    let new = warming
        .machines
        .iter()
        .find(|m| m.updated && m.available_in.is_some())
        .context("the warming machine")?;
    let available_in = new.available_in.unwrap_or_default();
    ensure!(
        (1..=MIN_READY_SECS).contains(&available_in),
        "{} available in {available_in}s, want 1 to {MIN_READY_SECS}",
        new.name
    );
    let old_view = warming.machines.iter().find(|m| m.name == old);
    ensure!(
        old_view.is_some_and(|m| m.activity == Activity::Idle)
            && !warming
                .in_flight
                .iter()
                .any(|c| c.kind == ChildKind::Delete),
        "the old machine {old} is already going while {} warms up: {warming:?}",
        new.name
    );
    // (The old machine, built moments ago by the first rollout, may still be warming up too.)
    ensure!(
        warming.counts.ready == 2 && warming.counts.updated_available == 0,
        "while warming: 2 Ready, no new one available, got {:?}",
        warming.counts
    );
    let text = cli(stack, task_queue, &["pool", "rollout", "status", pool])
        .await?
        .expect_code(0)?
        .stdout
        .clone();
    ensure!(
        text.contains("Ready (available in "),
        "`pool rollout status` does not say when the new machine counts available:\n{text}"
    );
    let new_machine = new.name.clone();

    let finished = await_rollout(
        stack,
        task_queue,
        pool,
        "the rollout completed",
        FINISH_WAIT,
        |s| s.phase == RolloutPhase::Completed,
    )
    .await?
    .status;

    // The order, from the world: the new Node's Ready transition, then 40 s, then the delete.
    let ready_at = ready_transition(stack, &new_machine).await?;
    let delete_id = format!("delete/{}/{old}", stack.cluster);
    let delete_started = started_at(stack, &delete_id).await?;
    println!(
        "new Node {new_machine} Ready since {ready_at}; {delete_id} started at {delete_started} ({}s later)",
        delete_started - ready_at
    );
    ensure!(
        delete_started >= ready_at + MIN_READY_SECS,
        "{delete_id} started {}s after {new_machine}'s Node became Ready, before minReadySeconds {MIN_READY_SECS}",
        delete_started - ready_at
    );

    ensure!(
        !pool_machines(stack, pool).await?.contains(&old),
        "the old machine {old} is still there"
    );
    let nodes: Api<Node> = Api::all(stack.kube_client().await?);
    ensure!(
        nodes.get_opt(&old).await?.is_none(),
        "the old machine's Node {old} is still there"
    );
    ensure!(
        finished.deleted == 1 && finished.created == 1,
        "one created, one deleted: {} and {}",
        finished.created,
        finished.deleted
    );
    ensure_pool_is(stack, pool, 1, &finished.template_hash).await
}

/// The pool file at `file` with `minReadySeconds` added to its strategy.
fn with_min_ready(file: &std::path::Path) -> Result<std::path::PathBuf> {
    let text = std::fs::read_to_string(file)?;
    let anchor = "    progressDeadline: 10m\n";
    ensure!(text.contains(anchor), "no progressDeadline in:\n{text}");
    let text = text.replace(
        anchor,
        &format!("{anchor}    minReadySeconds: {MIN_READY_SECS}\n"),
    );
    let path = file.with_extension("min-ready.yaml");
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The Unix second of the Ready condition's `lastTransitionTime` of the Node `name`.
async fn ready_transition(stack: &Stack, name: &str) -> Result<i64> {
    let nodes: Api<Node> = Api::all(stack.kube_client().await?);
    let node = nodes.get(name).await?;
    node.status
        .and_then(|status| status.conditions)
        .and_then(|conditions| conditions.into_iter().find(|c| c.type_ == "Ready"))
        .filter(|ready| ready.status == "True")
        .and_then(|ready| ready.last_transition_time)
        .map(|time| time.0.as_second())
        .with_context(|| format!("Node {name} is not Ready or has no lastTransitionTime"))
}

/// The Unix second at which the latest run of `workflow_id` started (`temporal workflow
/// describe`).
async fn started_at(stack: &Stack, workflow_id: &str) -> Result<i64> {
    let described = describe_workflow(stack, workflow_id).await?;
    let start = described["workflowExecutionInfo"]["startTime"]
        .as_str()
        .with_context(|| format!("no startTime for {workflow_id}: {described}"))?;
    Ok(chrono::DateTime::parse_from_rfc3339(start)
        .with_context(|| format!("startTime {start} of {workflow_id}"))?
        .timestamp())
}
