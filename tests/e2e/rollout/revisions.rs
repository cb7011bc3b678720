//! A pool's revisions kept in the cluster (issue 32, item 4): a 1-machine pool whose bootstrap is
//! a Secret holding a join token is rolled A → B, then rolled back to A and cancelled. `pool
//! history` lists A (the cancelled rollback's target, still what a rollback picks) and B
//! (current); `pool rollback` goes to A, not to B, and completes; then `pool history` shows A as
//! the current revision and B as the rollback target. The ConfigMap
//! `nodewright/nodewright-revisions-<pool>` carries nodewright's labels, one key per template,
//! the Secret's name and never its token; the machine runs A's template afterwards.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use nodewright_model::ownership::LABEL_POOL;
use nodewright_model::rollout::RolloutPhase;
use nodewright_model::rollout::revisions::{LABEL_MANAGED_BY, MANAGED_BY, config_map_name};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use super::common::{
    PoolShape, await_rollout, clean_up_pool, cli, ensure_pool_is, read_history, revision_rows,
    roll, rollout_pool_file,
};

use super::common::REVISIONS_NAMESPACE as NAMESPACE;

/// How long a rollout may take to end.
const WAIT: Duration = Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_goes_to_the_revision_before_the_current_one_as_the_config_map_records()
-> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let pool = format!("rv{}", &suffix[..6]);
    let task_queue = unique_task_queue("revisions");
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let kube = stack.kube_client().await?;
    let secrets: Api<Secret> = Api::namespaced(kube.clone(), NAMESPACE);
    let secret_name = format!("bootstrap-{pool}");
    // A bootstrap token's form, unique to this run: [a-z0-9]{6}.[a-z0-9]{16}.
    let token = format!("{}.{}{}", &suffix[..6], &suffix, &suffix[..8]);
    let text = format!(
        "#!/bin/bash\nkubeadm join 10.0.0.4:6443 --token {token} --discovery-token-ca-cert-hash sha256:00\nexec /usr/bin/kubelet --cloud-provider=external\n"
    );
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": secret_name, "namespace": NAMESPACE },
        "stringData": { "bootstrap": text },
    }))?;
    secrets.create(&PostParams::default(), &secret).await?;

    let outcome = scenario(&stack, &task_queue, &pool, &secret_name, &token).await;

    clean_up_pool(&stack, &task_queue, &pool).await;
    let _ = secrets.delete(&secret_name, &DeleteParams::default()).await;
    outcome
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    secret_name: &str,
    token: &str,
) -> Result<()> {
    let shape = PoolShape::new(1, "1", "0");
    let file_a = by_reference(stack, pool, &shape, secret_name)?;
    let file_b = by_reference(stack, pool, &shape.clone().version("24.04.2"), secret_name)?;
    let a = roll(stack, task_queue, &file_a, &[])
        .await?
        .result
        .pool
        .template_hash;
    let b = roll(stack, task_queue, &file_b, &[])
        .await?
        .result
        .pool
        .template_hash;
    ensure!(a != b, "the two files have one template {a}");
    ensure_pool_is(stack, pool, 1, &b).await?;

    // A rollback to A, cancelled: the machine stays on B.
    let started = cli(
        stack,
        task_queue,
        &["pool", "rollback", pool, "--observe-interval", "1s"],
    )
    .await?;
    started.expect_code(0)?;
    ensure!(
        started
            .stderr
            .contains(&format!("from template {b} to {a}")),
        "the rollback names both templates: {}",
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

    let history = read_history(stack, task_queue, pool).await?;
    ensure!(
        history.config_map == format!("{NAMESPACE}/{}", config_map_name(pool)),
        "the history names its ConfigMap: {history:?}"
    );
    let rows = revision_rows(&history);
    ensure!(
        rows == [
            (1, a.clone(), "canceled".to_owned(), false, true),
            (2, b.clone(), "completed".to_owned(), true, false),
        ],
        "after the cancelled rollback: A (1, its target still) and B (2, current): {rows:?}"
    );
    ensure!(
        history
            .revisions
            .first()
            .is_some_and(|r| r.rollback && r.completed_once),
        "A's last rollout was a rollback, and A completed once: {history:?}"
    );

    // `pool rollback` again: to A (not to B), and it completes.
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
            .contains(&format!("from template {b} to {a}"))
            && rolled_back.stderr.contains("revision 2 to revision 1"),
        "the second rollback goes to A by the revisions: {}",
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

    // The ConfigMap: nodewright's labels, one key per template, the Secret's name, no token.
    let config_maps: Api<ConfigMap> = Api::namespaced(stack.kube_client().await?, NAMESPACE);
    let stored = config_maps
        .get(&config_map_name(pool))
        .await
        .context("the revisions ConfigMap")?;
    let labels = stored.metadata.labels.clone().unwrap_or_default();
    ensure!(
        labels.get(LABEL_MANAGED_BY).map(String::as_str) == Some(MANAGED_BY)
            && labels.get(LABEL_POOL).map(String::as_str) == Some(pool),
        "the ConfigMap's labels: {labels:?}"
    );
    let data = stored.data.unwrap_or_default();
    let mut keys: Vec<&String> = data.keys().collect();
    keys.sort();
    let mut expected = vec![&a, &b];
    expected.sort();
    ensure!(keys == expected, "one key per template: {keys:?}");
    let whole: String = data.values().cloned().collect();
    ensure!(
        whole.contains(secret_name),
        "the revisions hold the pool (the Secret's name), so the scan below means something"
    );
    ensure!(
        !whole.contains(token) && !whole.contains("kubeadm join"),
        "the revisions ConfigMap holds the bootstrap Secret's text"
    );
    Ok(())
}

/// The rollout pool file of `shape` with its bootstrap given by the Secret `secret_name`.
fn by_reference(
    stack: &Stack,
    pool: &str,
    shape: &PoolShape,
    secret_name: &str,
) -> Result<std::path::PathBuf> {
    let path = rollout_pool_file(stack, pool, shape)?;
    let inline = std::fs::read_to_string(&path)?;
    let by_reference = inline.replace(
        "    bootstrap: |\n      #!/bin/bash\n      exec /usr/bin/kubelet --cloud-provider=external <<REGISTER_WITH_TAINTS>>\n",
        &format!("    bootstrapSecretRef:\n      namespace: {NAMESPACE}\n      name: {secret_name}\n"),
    );
    ensure!(
        by_reference != inline,
        "the pool file's bootstrap was not replaced"
    );
    std::fs::write(&path, by_reference)?;
    Ok(path)
}
