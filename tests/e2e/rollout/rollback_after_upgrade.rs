//! `pool rollback` right after the upgrade that started keeping revisions (issue 32, review
//! finding 6): a 1-machine pool is rolled A → B, then its revisions ConfigMap is reduced to B's
//! entry, as the first rollout after the upgrade leaves it. `pool history` names no target, yet
//! `pool rollback` goes to A (the template before B that Temporal's newest completed rollout
//! recorded). That rollback is cancelled: A waits below B in the revisions (finding 7), B stays
//! current and the machine on B. `pool rollback` again goes to A and completes: A becomes the
//! current revision (3), B the rollback target, and the machine runs A.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use nodewright_model::rollout::RolloutPhase;
use nodewright_model::rollout::revisions::config_map_name;
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;

use super::common::REVISIONS_NAMESPACE as NAMESPACE;
use super::common::{
    PoolShape, await_rollout, clean_up_pool, cli, ensure_pool_is, read_history, revision_rows,
    roll, rollout_pool_file,
};

/// How long a rollout may take to end.
const WAIT: Duration = Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_right_after_the_upgrade_goes_to_the_template_before_by_temporal() -> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let pool = format!("ru{}", &suffix[..6]);
    let task_queue = unique_task_queue("rollback-upgrade");
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = scenario(&stack, &task_queue, &pool).await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    outcome
}

async fn scenario(stack: &Stack, task_queue: &str, pool: &str) -> Result<()> {
    let shape = PoolShape::new(1, "1", "0");
    let file_a = rollout_pool_file(stack, pool, &shape)?;
    let a = roll(stack, task_queue, &file_a, &[])
        .await?
        .result
        .pool
        .template_hash;
    let file_b = rollout_pool_file(stack, pool, &shape.clone().version("24.04.2"))?;
    let b = roll(stack, task_queue, &file_b, &[])
        .await?
        .result
        .pool
        .template_hash;
    ensure!(a != b, "the two files have one template {a}");
    ensure_pool_is(stack, pool, 1, &b).await?;

    // The revisions as the first rollout after the upgrade leaves them: only its own template.
    let config_maps: Api<ConfigMap> = Api::namespaced(stack.kube_client().await?, NAMESPACE);
    let mut stored = config_maps
        .get(&config_map_name(pool))
        .await
        .context("the revisions ConfigMap")?;
    let data = stored.data.take().unwrap_or_default();
    let only_b: BTreeMap<String, String> = data.into_iter().filter(|(key, _)| *key == b).collect();
    ensure!(only_b.len() == 1, "B's revision is recorded: {only_b:?}");
    stored.data = Some(only_b);
    config_maps
        .replace(&config_map_name(pool), &PostParams::default(), &stored)
        .await
        .context("reducing the revisions to B's")?;
    let history = read_history(stack, task_queue, pool).await?;
    ensure!(
        revision_rows(&history) == [(2, b.clone(), "completed".to_owned(), true, false)],
        "only B, current, no target: {history:?}"
    );
    ensure!(
        history
            .rollback_refusal
            .as_deref()
            .is_some_and(|refusal| refusal.contains("Temporal's history")),
        "the history says where `pool rollback` goes then: {history:?}"
    );

    // A rollback: to A by Temporal's history; cancelled, the machine stays on B.
    let started = cli(
        stack,
        task_queue,
        &["pool", "rollback", pool, "--observe-interval", "1s"],
    )
    .await?;
    started.expect_code(0)?;
    // The CLI breaks a long line at spaces to fit the terminal: read it as one.
    let said = started
        .stderr
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    ensure!(
        said.contains(&format!("from template {b} to {a}"))
            && said.contains("no earlier revision in the cluster yet"),
        "the rollback goes to A by Temporal's history: {}",
        started.stderr
    );
    cli(stack, task_queue, &["pool", "rollout", "cancel", pool])
        .await?
        .expect_code(0)?;
    await_rollout(
        stack,
        task_queue,
        pool,
        "the rollback to end canceled",
        WAIT,
        |s| s.phase == RolloutPhase::Canceled,
    )
    .await?;
    ensure_pool_is(stack, pool, 1, &b).await?;
    let rows = revision_rows(&read_history(stack, task_queue, pool).await?);
    ensure!(
        rows == [
            (1, a.clone(), "canceled".to_owned(), false, false),
            (2, b.clone(), "completed".to_owned(), true, false),
        ],
        "A waits below B, B stays current: {rows:?}"
    );

    // Again: to A, and it completes; A is the current revision, B the target.
    let rolled_back = cli(
        stack,
        task_queue,
        &[
            "pool",
            "rollback",
            pool,
            "--wait",
            "--observe-interval",
            "1s",
        ],
    )
    .await?;
    rolled_back.expect_code(0)?;
    ensure!(
        rolled_back
            .stderr
            .contains(&format!("from template {b} to {a}")),
        "the second rollback goes to A: {}",
        rolled_back.stderr
    );
    ensure_pool_is(stack, pool, 1, &a).await?;
    let history = read_history(stack, task_queue, pool).await?;
    let rows = revision_rows(&history);
    ensure!(
        rows == [
            (2, b.clone(), "completed".to_owned(), false, true),
            (3, a.clone(), "completed".to_owned(), true, false),
        ],
        "after the completed rollback: A is revision 3 (current), B the target: {rows:?}"
    );
    ensure!(history.rollback_refusal.is_none(), "{history:?}");
    Ok(())
}
