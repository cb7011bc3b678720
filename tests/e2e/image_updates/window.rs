//! `imageUpdate: auto` with the window closed: a published version waits, and the status says
//! when the window opens; a machine created after that publishing (a scale-up) still gets the
//! revision's version. Switched to `notify`, the status and an Event say a newer version
//! exists, and `pool image update` rolls to it (an operator's rollout, which a window for
//! automatic rollouts does not hold). Switched to `pinned`, a newer version changes nothing.

use anyhow::{Result, ensure};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use nodewright_model::ownership::LABEL_POOL;
use nodewright_tests::eventually;
use nodewright_tests::identity::namespace_for;

use super::auto::{await_image, await_versions, image_is};
use super::{Case, Kept, all_at, gallery_pool_file, versions};
use crate::controller::common::{apply, cli};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_window_holds_an_update_notify_reports_it_and_pinned_ignores_it() -> Result<()> {
    let mut case = Case::start("imw").await?;
    let outcome = scenario(&mut case).await;
    case.end(outcome, Kept::ByController).await
}

/// `spec` lines: `policy`, checked every 10 s, and a daily hour-long window opening twelve
/// hours from now (UTC), closed for the whole test.
fn spec(policy: &str) -> Result<String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let hour = (now / 3600 + 12) % 24;
    Ok(format!(
        "  imageUpdate:\n    policy: {policy}\n    checkInterval: 10s\n  maintenance:\n    windows:\n      - {{ schedule: \"0 {hour} * * *\", duration: 1h }}\n"
    ))
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
    let auto = gallery_pool_file(stack, pool, 1, gallery, &spec("auto")?)?;
    apply(stack, task_queue, &auto).await?;
    await_versions(stack, pool, "the machine at 1.0.0", 1, "1.0.0").await?;

    // Published while the window is closed: it waits, and says until when.
    gallery.publish(stack, sandbox, "1.0.1").await?;
    let waiting = await_image(
        stack,
        task_queue,
        pool,
        "1.0.1 waiting for the window",
        |doc| {
            image_is(doc, |i| {
                i.newest.as_deref() == Some("1.0.1")
                    && i.message
                        .contains("1.0.1 waits for the maintenance window (opens ")
            })
        },
    )
    .await?;
    ensure!(
        waiting
            .status
            .image
            .as_ref()
            .is_some_and(|i| i.current == "1.0.0"),
        "the version stays while the window is closed: {:?}",
        waiting.status.image
    );

    // A machine made after 1.0.1 was published is of the revision: 1.0.0.
    cli(
        stack,
        task_queue,
        &["pool", "scale", pool, "--replicas", "2"],
    )
    .await?
    .expect_code(0)?;
    await_versions(stack, pool, "both machines at 1.0.0", 2, "1.0.0").await?;

    // notify: the status and an Event say 1.0.1 exists.
    let notify = gallery_pool_file(stack, pool, 2, gallery, &spec("notify")?)?;
    apply(stack, task_queue, &notify).await?;
    await_image(stack, task_queue, pool, "1.0.1 reported", |doc| {
        image_is(doc, |i| {
            i.current == "1.0.0" && i.message.contains("1.0.1 is newer (imageUpdate notify)")
        })
    })
    .await?;
    let namespace = namespace_for(stack, stack.cluster.as_str());
    let events: Api<Event> = Api::namespaced(stack.kube_client().await?, &namespace);
    let selector = format!("{LABEL_POOL}={pool}");
    let event = eventually(
        "the NewerImageAvailable Event",
        std::time::Duration::from_secs(60),
        std::time::Duration::from_secs(1),
        || async {
            let listed = events
                .list(&ListParams::default().labels(&selector))
                .await?;
            Ok(listed
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("NewerImageAvailable")))
        },
    )
    .await?;
    let note = event.note.unwrap_or_default();
    ensure!(
        note.contains("image version 1.0.1 is newer than 1.0.0"),
        "the Event names both versions: {note}"
    );
    let seen = versions(stack, pool).await?;
    ensure!(
        all_at(&seen, 2, "1.0.0"),
        "notify changes nothing: {seen:?}"
    );

    // An operator's update rolls to it.
    cli(stack, task_queue, &["pool", "image", "update", pool])
        .await?
        .expect_code(0)?;
    await_versions(stack, pool, "both machines at 1.0.1", 2, "1.0.1").await?;

    // pinned: a newer version changes nothing.
    let pinned = gallery_pool_file(stack, pool, 2, gallery, &spec("pinned")?)?;
    apply(stack, task_queue, &pinned).await?;
    gallery.publish(stack, sandbox, "1.0.2").await?;
    let held = await_image(stack, task_queue, pool, "1.0.2 seen and left", |doc| {
        image_is(doc, |i| {
            i.newest.as_deref() == Some("1.0.2") && i.message.contains("imageUpdate pinned")
        })
    })
    .await?;
    ensure!(
        held.status
            .image
            .as_ref()
            .is_some_and(|i| i.current == "1.0.1"),
        "pinned keeps the version: {:?}",
        held.status.image
    );
    let seen = versions(stack, pool).await?;
    ensure!(
        all_at(&seen, 2, "1.0.1"),
        "pinned changes nothing: {seen:?}"
    );
    Ok(())
}
