//! What the pool controller tests share: a pool file with replicas, image version and health
//! settings; `pool apply` with a short observe interval; the controller's status document
//! through the CLI, typed; waiting for it; and the pool's world (VMs and Ready Nodes) as the
//! sandbox and the apiserver see it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use nodewright_model::controller::PoolStatusDocument;
use nodewright_model::ownership::{LABEL_POOL, TAG_CLUSTER, TAG_POOL};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::is_node_ready;

pub(crate) use nodewright_tests::machines::cli;

use crate::rollout::common::{PoolShape, rollout_pool_file};

/// How often a status is read while waiting for it.
const POLL: Duration = Duration::from_secs(1);

/// The observe interval the tests run controllers with.
pub(crate) const OBSERVE: &str = "3s";

/// Writes a pool file of `replicas` machines of image `version`, with `health` (YAML lines
/// under `spec:`, indented by two spaces) added when given.
pub(crate) fn controller_pool_file(
    stack: &Stack,
    pool: &str,
    replicas: u32,
    version: &'static str,
    health: &str,
) -> Result<PathBuf> {
    let shape = PoolShape::new(replicas, "1", "0").version(version);
    let path = rollout_pool_file(stack, pool, &shape)?;
    if health.is_empty() {
        return Ok(path);
    }
    let text = std::fs::read_to_string(&path)?;
    let text = text.replacen("  strategy:\n", &format!("{health}  strategy:\n"), 1);
    let path = path.with_file_name(format!("{pool}-{version}-health.yaml"));
    std::fs::write(&path, text)?;
    Ok(path)
}

/// `pool apply -f FILE` with the tests' observe interval; returns its JSON.
pub(crate) async fn apply(
    stack: &Stack,
    task_queue: &str,
    file: &std::path::Path,
) -> Result<serde_json::Value> {
    let file = file.to_string_lossy();
    cli(
        stack,
        task_queue,
        &[
            "pool",
            "apply",
            "-f",
            &file,
            "--observe-interval",
            OBSERVE,
            "--output",
            "json",
        ],
    )
    .await?
    .expect_code(0)?
    .json()
}

/// `pool scale POOL --replicas N`.
pub(crate) async fn scale(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    replicas: u32,
) -> Result<()> {
    let n = replicas.to_string();
    cli(
        stack,
        task_queue,
        &["pool", "scale", pool, "--replicas", &n],
    )
    .await?
    .expect_code(0)?;
    Ok(())
}

/// `pool status POOL --output json` of a pool under a controller, typed.
pub(crate) async fn status(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
) -> Result<PoolStatusDocument> {
    cli(
        stack,
        task_queue,
        &["pool", "status", pool, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()
}

/// Polls [`status`] until `done` holds; the error shows the last answer.
pub(crate) async fn await_status(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    what: &str,
    timeout: Duration,
    mut done: impl FnMut(&PoolStatusDocument) -> bool,
) -> Result<PoolStatusDocument> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let answer = cli(
            stack,
            task_queue,
            &["pool", "status", pool, "--output", "json"],
        )
        .await?;
        let last = if answer.code == Some(0) {
            match answer.parse::<PoolStatusDocument>() {
                Ok(document) if done(&document) => return Ok(document),
                Ok(document) => serde_json::to_string(&document)?,
                Err(error) => format!("{error}: {}", answer.stdout.trim()),
            }
        } else {
            format!("exit {:?}: {}", answer.code, answer.stderr.trim())
        };
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}; last status: {last}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The pool's world: the names of its VMs (tagged with the cluster and pool) and of its Ready
/// Nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct World {
    pub vms: BTreeSet<String>,
    pub ready_nodes: BTreeSet<String>,
    pub nodes: BTreeSet<String>,
}

impl World {
    /// Whether the pool has exactly `replicas` VMs, each with a Ready Node, and no other Node.
    pub(crate) fn is_steady(&self, replicas: usize) -> bool {
        self.vms.len() == replicas && self.ready_nodes == self.vms && self.nodes == self.vms
    }
}

/// Looks at the pool once.
pub(crate) async fn world(stack: &Stack, pool: &str) -> Result<World> {
    let kube = stack.kube_client().await?;
    let nodes: Api<Node> = Api::all(kube);
    let listed = nodes
        .list(&ListParams::default().labels(&format!("{LABEL_POOL}={pool}")))
        .await?;
    let mut world = World::default();
    for node in &listed.items {
        let name = node.metadata.name.clone().unwrap_or_default();
        if is_node_ready(node) {
            world.ready_nodes.insert(name.clone());
        }
        world.nodes.insert(name);
    }
    for vm in stack.arm_client()?.list_vms().await? {
        let tag = |key: &str| vm.tags.get(key).map(String::as_str);
        if tag(TAG_CLUSTER) == Some(stack.cluster.as_str()) && tag(TAG_POOL) == Some(pool) {
            world.vms.insert(vm.name.clone().unwrap_or_default());
        }
    }
    Ok(world)
}

/// Waits until the pool's world satisfies `done`; the error shows the last look.
pub(crate) async fn await_world(
    stack: &Stack,
    pool: &str,
    what: &str,
    timeout: Duration,
    mut done: impl FnMut(&World) -> bool,
) -> Result<World> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let seen = world(stack, pool).await?;
        if done(&seen) {
            return Ok(seen);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}; last look: {seen:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `pool delete POOL --wait`, as the clean-up of a test (its failure is printed, not
/// returned: the test's own outcome matters more).
pub(crate) async fn delete_pool(stack: &Stack, task_queue: &str, pool: &str) {
    match cli(stack, task_queue, &["pool", "delete", pool, "--wait"]).await {
        Ok(answer) if answer.code == Some(0) => {}
        Ok(answer) => eprintln!(
            "pool delete {pool}: exit {:?}: {}",
            answer.code, answer.stderr
        ),
        Err(error) => eprintln!("pool delete {pool}: {error}"),
    }
}
