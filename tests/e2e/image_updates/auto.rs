//! `imageUpdate: auto` with a window open now: the pool is resolved to the gallery's only
//! version, rolls by itself to a version published later, holds when pinned although a newer
//! one appears, and `pool rollback` takes it back to the previous version, pinned.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::controller::PoolStatusDocument;
use nodewright_tests::{Stack, eventually};

use super::{Case, Kept, all_at, gallery_pool_file, versions};
use crate::controller::common::{apply, await_status, cli};

/// Checks every 10 s; a window open at every minute for an hour is always open.
const SPEC: &str = "  imageUpdate:\n    policy: auto\n    checkInterval: 10s\n  maintenance:\n    windows:\n      - { schedule: \"* * * * *\", duration: 1h }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_rolls_to_a_published_version_a_pin_holds_and_a_rollback_goes_back() -> Result<()> {
    let mut case = Case::start("ima").await?;
    let outcome = scenario(&mut case).await;
    case.end(outcome, Kept::ByController).await
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
    gallery.publish(stack, sandbox, "1.0.0").await?;
    let file = gallery_pool_file(stack, pool, 1, gallery, SPEC)?;
    apply(stack, task_queue, &file).await?;
    await_versions(stack, pool, "the machine at 1.0.0", 1, "1.0.0").await?;
    let resolved = await_image(stack, task_queue, pool, "current 1.0.0", |doc| {
        image_is(doc, |i| i.current == "1.0.0")
    })
    .await?;
    ensure!(
        resolved
            .status
            .last_actions
            .iter()
            .any(|a| a.text.ends_with("resolved to version 1.0.0")),
        "the resolution is in the last actions: {:?}",
        resolved.status.last_actions
    );

    // A newer version: rolled to by itself.
    gallery.publish(stack, sandbox, "1.0.1").await?;
    await_versions(stack, pool, "the machine replaced at 1.0.1", 1, "1.0.1").await?;
    let rolled = await_image(stack, task_queue, pool, "current 1.0.1", |doc| {
        image_is(doc, |i| i.current == "1.0.1" && i.previous == ["1.0.0"])
    })
    .await?;
    ensure!(
        rolled
            .status
            .last_actions
            .iter()
            .any(|a| a.text.contains("rolling to it (imageUpdate auto)")),
        "the update is in the last actions: {:?}",
        rolled.status.last_actions
    );

    // Pinned: a newer version is seen and left.
    cli(stack, task_queue, &["pool", "image", "pin", pool])
        .await?
        .expect_code(0)?;
    gallery.publish(stack, sandbox, "1.0.2").await?;
    let held = await_image(stack, task_queue, pool, "1.0.2 seen, 1.0.1 kept", |doc| {
        image_is(doc, |i| {
            i.newest.as_deref() == Some("1.0.2") && i.message.contains("pinned")
        })
    })
    .await?;
    let image = held.status.image.as_ref().context("the image status")?;
    ensure!(
        image.current == "1.0.1" && image.pinned,
        "a pin holds the version: {image:?}"
    );
    let seen = versions(stack, pool).await?;
    ensure!(
        all_at(&seen, 1, "1.0.1"),
        "nothing rolled while pinned: {seen:?}"
    );

    // A rollback goes back to the previous version and stays there.
    cli(stack, task_queue, &["pool", "rollback", pool])
        .await?
        .expect_code(0)?;
    await_versions(stack, pool, "the machine back at 1.0.0", 1, "1.0.0").await?;
    let back = await_image(stack, task_queue, pool, "current 1.0.0, pinned", |doc| {
        image_is(doc, |i| i.current == "1.0.0" && i.pinned)
    })
    .await?;
    let answer = cli(stack, task_queue, &["pool", "image", pool]).await?;
    let shown = answer.expect_code(0)?;
    ensure!(
        shown.stdout.contains("current    1.0.0")
            && shown.stdout.contains("newest     1.0.2")
            && shown.stdout.contains("previous   1.0.1"),
        "pool image shows the versions: {}",
        shown.stdout
    );
    ensure!(
        back.status
            .image
            .as_ref()
            .is_some_and(|i| i.previous.first().map(String::as_str) == Some("1.0.1")),
        "the version rolled back from is the previous one: {:?}",
        back.status.image
    );
    Ok(())
}

/// Whether the status has an image part for which `check` holds.
pub(super) fn image_is(
    doc: &PoolStatusDocument,
    check: impl Fn(&nodewright_model::image::ImageStatus) -> bool,
) -> bool {
    doc.status.image.as_ref().is_some_and(check)
}

/// Waits (up to 3 minutes) until the status's image satisfies `done`.
pub(super) async fn await_image(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    what: &str,
    done: impl FnMut(&PoolStatusDocument) -> bool,
) -> Result<PoolStatusDocument> {
    await_status(
        stack,
        task_queue,
        pool,
        what,
        Duration::from_secs(180),
        done,
    )
    .await
}

/// Waits (up to 6 minutes) until the pool has `replicas` machines, each at `version` on its VM
/// tag and Node label.
pub(super) async fn await_versions(
    stack: &Stack,
    pool: &str,
    what: &str,
    replicas: usize,
    version: &str,
) -> Result<()> {
    eventually(
        what,
        Duration::from_secs(360),
        Duration::from_secs(2),
        || async {
            let seen = versions(stack, pool).await?;
            Ok(all_at(&seen, replicas, version).then_some(()))
        },
    )
    .await
}
