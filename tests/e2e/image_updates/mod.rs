//! Image versions under the pool controller, against a Compute Gallery in the sandbox: a pool
//! whose file names the gallery image without a version is resolved to one version, which every
//! VM's tag and Node's label carries; a version published later is rolled to (`auto`, window
//! open), waited for (`auto`, window closed), only reported (`notify`: status and an Event) or
//! left (`pinned`, `pool image pin`); a machine created after a newer version was published
//! still gets the revision's version; a rollback goes back to the previous version and pins it;
//! a rollout without a controller resolves the version before its first step.

mod auto;
mod rollout;
mod window;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use nodewright_model::ownership::{
    LABEL_IMAGE_VERSION, LABEL_POOL, TAG_CLUSTER, TAG_IMAGE_VERSION, TAG_POOL,
};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use crate::controller::common::{controller_pool_file, delete_pool};
use crate::rollout::common::clean_up_pool;

/// What each test of this module runs with: a worker on its own task queue, a pool name and a
/// gallery of its own.
pub(crate) struct Case {
    pub stack: Stack,
    pub sandbox: Sandbox,
    pub task_queue: String,
    pub pool: String,
    pub gallery: Gallery,
    worker: KillableWorker,
}

/// How a case's pool is removed at its end.
#[derive(Clone, Copy)]
pub(crate) enum Kept {
    /// `pool delete --wait` (a controller keeps it).
    ByController,
    /// Its rollout terminated and its machines deleted.
    ByRollouts,
}

impl Case {
    /// Starts a worker and makes a gallery; `prefix` names the task queue, pool and gallery.
    pub(crate) async fn start(prefix: &str) -> Result<Self> {
        let stack = Stack::load()?;
        let sandbox = Sandbox::new(&stack)?;
        let task_queue = unique_task_queue(prefix);
        let pool = format!("{prefix}{}", unique_suffix());
        let worker = KillableWorker::start(&stack, &task_queue)?;
        let gallery =
            Gallery::create(&stack, &sandbox, &format!("{prefix}{}", unique_suffix())).await?;
        Ok(Self {
            stack,
            sandbox,
            task_queue,
            pool,
            gallery,
            worker,
        })
    }

    /// Removes the pool and the gallery whatever `outcome` was, and returns it with the
    /// worker's log when it failed.
    pub(crate) async fn end(self, outcome: Result<()>, kept: Kept) -> Result<()> {
        match kept {
            Kept::ByController => delete_pool(&self.stack, &self.task_queue, &self.pool).await,
            Kept::ByRollouts => clean_up_pool(&self.stack, &self.task_queue, &self.pool).await,
        }
        self.gallery.remove(&self.sandbox).await;
        outcome.with_context(|| format!("worker log:\n{}", self.worker.log_tail()))
    }
}

/// The gallery API version the tests write with.
const GALLERY_API: &str = "2023-07-03";

/// A Compute Gallery with one image definition, made for one test.
pub(crate) struct Gallery {
    /// The gallery's id.
    pub id: String,
    /// The image definition's id (what a pool names to follow its versions).
    pub definition: String,
    published: Vec<String>,
}

impl Gallery {
    /// Makes gallery `name` (letters and digits) with definition `node`.
    pub(crate) async fn create(stack: &Stack, sandbox: &Sandbox, name: &str) -> Result<Self> {
        let id = format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/galleries/{name}",
            stack.arm.subscription_id, stack.arm.resource_group
        );
        sandbox
            .arm_put(
                &at(&id),
                &json!({"location": stack.arm.location, "properties": {"description": "e2e"}}),
            )
            .await?;
        let definition = format!("{id}/images/node");
        sandbox
            .arm_put(
                &at(&definition),
                &json!({"location": stack.arm.location, "properties": {
                    "osType": "Linux", "osState": "Generalized", "hyperVGeneration": "V2",
                    "identifier": {"publisher": "e2e", "offer": "nodes", "sku": name}}}),
            )
            .await?;
        Ok(Self {
            id,
            definition,
            published: Vec::new(),
        })
    }

    /// Publishes `version` of the definition.
    pub(crate) async fn publish(
        &mut self,
        stack: &Stack,
        sandbox: &Sandbox,
        version: &str,
    ) -> Result<()> {
        self.publish_with(stack, sandbox, version, json!({})).await
    }

    /// Publishes `version` with `profile` as its `publishingProfile` (e.g.
    /// `excludeFromLatest`, `endOfLifeDate`).
    pub(crate) async fn publish_with(
        &mut self,
        stack: &Stack,
        sandbox: &Sandbox,
        version: &str,
        profile: serde_json::Value,
    ) -> Result<()> {
        let builder = format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines/image-builder",
            stack.arm.subscription_id, stack.arm.resource_group
        );
        sandbox
            .arm_put(
                &at(&format!("{}/versions/{version}", self.definition)),
                &json!({"location": stack.arm.location, "properties": {
                    "publishingProfile": profile,
                    "storageProfile": {"source": {"virtualMachineId": builder}}}}),
            )
            .await?;
        self.published.push(version.to_owned());
        Ok(())
    }

    /// Deletes the versions, the definition and the gallery (best effort: the test's outcome
    /// matters more).
    pub(crate) async fn remove(&self, sandbox: &Sandbox) {
        let mut ids: Vec<String> = self
            .published
            .iter()
            .map(|v| format!("{}/versions/{v}", self.definition))
            .collect();
        ids.push(self.definition.clone());
        ids.push(self.id.clone());
        for id in ids {
            if let Err(error) = sandbox.arm_delete(&at(&id)).await {
                eprintln!("clean-up: {id}: {error:#}");
            }
        }
    }
}

fn at(id: &str) -> String {
    format!("{id}?api-version={GALLERY_API}")
}

/// A controller pool file of `replicas` machines from `gallery`'s definition (no version),
/// with `spec` (YAML lines under `spec:`, two spaces in) added.
pub(crate) fn gallery_pool_file(
    stack: &Stack,
    pool: &str,
    replicas: u32,
    gallery: &Gallery,
    spec: &str,
) -> Result<PathBuf> {
    let path = controller_pool_file(stack, pool, replicas, "24.04.1", spec)?;
    let text = std::fs::read_to_string(&path)?;
    let marketplace = "    image:\n      publisher: Canonical\n      offer: ubuntu-24_04-lts\n      sku: server\n      version: \"24.04.1\"\n";
    ensure!(text.contains(marketplace), "unexpected pool file:\n{text}");
    let text = text.replace(
        marketplace,
        &format!("    image:\n      id: {}\n", gallery.definition),
    );
    let path = path.with_file_name(format!("{pool}-gallery.yaml"));
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The image version of each of the pool's machines: the VM's tag and the Node's label (`None`
/// for a missing one), by machine name.
pub(crate) async fn versions(
    stack: &Stack,
    pool: &str,
) -> Result<BTreeMap<String, (Option<String>, Option<String>)>> {
    let mut found: BTreeMap<String, (Option<String>, Option<String>)> = BTreeMap::new();
    for vm in stack.arm_client()?.list_vms().await? {
        let tag = |key: &str| vm.tags.get(key).cloned();
        if tag(TAG_CLUSTER).as_deref() == Some(stack.cluster.as_str())
            && tag(TAG_POOL).as_deref() == Some(pool)
        {
            found
                .entry(vm.name.clone().unwrap_or_default())
                .or_default()
                .0 = tag(TAG_IMAGE_VERSION);
        }
    }
    let nodes: Api<Node> = Api::all(stack.kube_client().await?);
    let listed = nodes
        .list(&ListParams::default().labels(&format!("{LABEL_POOL}={pool}")))
        .await?;
    for node in listed.items {
        let label = node
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(LABEL_IMAGE_VERSION).cloned());
        found
            .entry(node.metadata.name.clone().unwrap_or_default())
            .or_default()
            .1 = label;
    }
    Ok(found)
}

/// Whether every machine of the pool (there being `replicas`) carries `version` on its VM and
/// its Node.
pub(crate) fn all_at(
    seen: &BTreeMap<String, (Option<String>, Option<String>)>,
    replicas: usize,
    version: &str,
) -> bool {
    seen.len() == replicas
        && seen.values().all(|(tag, label)| {
            tag.as_deref() == Some(version) && label.as_deref() == Some(version)
        })
}
