//! A rollout of a pool no controller keeps, whose file names a gallery image without a version:
//! it resolves the newest version (not one excluded from latest or past its end of life) before
//! its first step, every machine it makes runs that
//! version (tag and label), and the template it rolled to names it. A definition with no
//! version starts nothing: the rollout fails `ImageUnresolved`, and no VM is made.

use anyhow::{Result, ensure};
use serde_json::json;

use super::{Case, Kept, all_at, gallery_pool_file, versions};
use crate::controller::common::cli;
use crate::rollout::common::{pool_machines, roll};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_resolves_the_image_once_and_refuses_one_without_versions() -> Result<()> {
    let mut case = Case::start("imr").await?;
    let outcome = scenario(&mut case).await;
    case.end(outcome, Kept::ByRollouts).await
}

async fn scenario(case: &mut Case) -> Result<()> {
    let Case {
        stack,
        sandbox,
        task_queue,
        pool,
        gallery,
        ..
    } = case;
    let (stack, sandbox, task_queue, pool) =
        (&*stack, &*sandbox, task_queue.as_str(), pool.as_str());
    let file = gallery_pool_file(stack, pool, 2, gallery, "")?;

    // No version yet: nothing starts.
    let answer = cli(
        stack,
        task_queue,
        &[
            "pool",
            "rollout",
            "--pool",
            &file.to_string_lossy(),
            "--wait",
            "--observe-interval",
            "1s",
        ],
    )
    .await?;
    let said = format!("{}{}", answer.stdout, answer.stderr);
    ensure!(
        answer.code != Some(0) && said.contains("has no eligible version"),
        "a rollout without a version to resolve fails, saying why: exit {:?}: {said}",
        answer.code
    );
    let machines = pool_machines(stack, pool).await?;
    ensure!(machines.is_empty(), "nothing was made: {machines:?}");

    gallery.publish(stack, sandbox, "1.0.0").await?;
    gallery.publish(stack, sandbox, "1.0.1").await?;
    // Newer, but not to be picked: excluded from latest, and past its end of life.
    gallery
        .publish_with(stack, sandbox, "1.0.2", json!({"excludeFromLatest": true}))
        .await?;
    gallery
        .publish_with(
            stack,
            sandbox,
            "1.0.3",
            json!({"endOfLifeDate": "2020-01-01T00:00:00Z"}),
        )
        .await?;
    let done = roll(stack, task_queue, &file, &[]).await?;
    let image = done
        .result
        .pool
        .template
        .image
        .id
        .clone()
        .unwrap_or_default();
    ensure!(
        image == format!("{}/versions/1.0.1", gallery.definition),
        "the template rolled to names the version: {image}"
    );
    let seen = versions(stack, pool).await?;
    ensure!(
        all_at(&seen, 2, "1.0.1"),
        "both machines at 1.0.1: {seen:?}"
    );
    Ok(())
}
