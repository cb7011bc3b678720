//! Two clusters on one Temporal namespace: `local` (the stack's resource group) and
//! `other-<suffix>` (the resource group `other-rg-<suffix>`, its identity ConfigMap in the
//! namespace `nodewright-other-<suffix>` of the same apiserver, so both identities are valid).
//!
//! - With the default task queues (`nodewright-<cluster>`, no queue configured) a `machine create`
//!   of each cluster puts its VM, NIC and disk in its own resource group and its Node carries the
//!   right labels and providerID; every activity of each run ran on its own cluster's worker (the
//!   identities in the runs' histories).
//! - With both workers explicitly on one shared queue and the `local` worker gone, a `local` run
//!   reaches the `other` worker, whose workflow refuses its input before the first activity: the
//!   run fails with `InvalidInput` naming both clusters, no activity is scheduled, and nothing is
//!   created in either resource group. (Its activities would meet the activity guard's
//!   `WrongCluster` refusal, as before.)
//! - A sweep whose API's identity names another cluster, or that has none, freezes and deletes
//!   nothing, saying why.
//! - A worker whose identity ConfigMap names another cluster, or another apiserver's kube-system
//!   uid, or whose identity namespace does not exist, stops at start with one line naming the
//!   setting and both values.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use nodewright_model::identity::{IDENTITY_CONFIG_MAP, KEY_CLUSTER, KEY_KUBE_SYSTEM_UID};
use nodewright_model::ownership::{LABEL_MACHINE, LABEL_POOL, TAG_CLUSTER, provider_id};
use nodewright_model::sweep::SweepOutcome;
use nodewright_tests::documents::SweepAuditDocument;
use nodewright_tests::identity::{ensure_namespace, namespace_for};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox, cli, node, write_pool_file};
use nodewright_tests::stack::history_json;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::worker_process::{WorkerProcess, free_address, scratch_dir, stack_config};
use nodewright_tests::{Stack, eventually};
use serde_json::Value;

/// The second cluster: its name, resource group and identity namespace on the stack's apiserver.
struct Other {
    stack: Stack,
    identity_namespace: String,
}

impl Other {
    fn new(stack: &Stack) -> Self {
        let suffix = unique_suffix();
        let mut other = stack.clone();
        other.cluster = format!("other-{suffix}");
        other.arm.resource_group = format!("other-rg-{suffix}");
        Self {
            stack: other,
            identity_namespace: format!("nodewright-other-{suffix}"),
        }
    }

    fn env(&self) -> [(&str, &str); 1] {
        [(
            "NODEWRIGHT_IDENTITY_NAMESPACE",
            self.identity_namespace.as_str(),
        )]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_on_one_namespace_never_act_on_each_other() -> Result<()> {
    let stack = Stack::load()?;
    let other = Other::new(&stack);
    ensure_namespace(&stack, &other.identity_namespace)?;
    let mut machines: Vec<(Stack, String)> = Vec::new();
    let result = both_clusters(&stack, &other, &mut machines).await;
    let cleaned = clean_up(&stack, &other, &machines).await;
    result?;
    cleaned
}

async fn both_clusters(
    stack: &Stack,
    other: &Other,
    machines: &mut Vec<(Stack, String)>,
) -> Result<()> {
    derived_queues_keep_each_cluster_in_its_own_resource_group(stack, other, machines).await?;
    a_shared_queue_hands_a_run_to_the_other_cluster_which_refuses_it(stack, other, machines).await
}

/// (a) The default task queues.
async fn derived_queues_keep_each_cluster_in_its_own_resource_group(
    stack: &Stack,
    other: &Other,
    machines: &mut Vec<(Stack, String)>,
) -> Result<()> {
    // An empty queue leaves it unset: both the workers and the CLI derive nodewright-<cluster>.
    let local_worker =
        KillableWorker::start_with_env(stack, "", &format!("isolation-{}", stack.cluster), &[])?;
    let other_worker =
        KillableWorker::start_with_env(&other.stack, "", &other.stack.cluster, &other.env())?;
    let runs = [(stack, &local_worker), (&other.stack, &other_worker)];
    let mut created = Vec::new();
    for (cluster_stack, _) in runs {
        let pool = format!("iso{}", unique_suffix());
        let pool_file = write_pool_file(cluster_stack, &pool, "5m")?;
        let machine = format!("{pool}-a1b2c");
        machines.push((cluster_stack.clone(), machine.clone()));
        created.push((cluster_stack, pool, pool_file, machine));
    }
    // Both creates run at once, each on its own cluster's queue.
    let mut pending = Vec::new();
    for (cluster_stack, _, pool_file, machine) in &created {
        let pool_file = pool_file.to_string_lossy().into_owned();
        let args = [
            "machine",
            "create",
            "--pool",
            pool_file.as_str(),
            "--name",
            machine.as_str(),
            "--wait",
            "--output",
            "json",
        ]
        .map(str::to_owned);
        let cluster_stack = (*cluster_stack).clone();
        pending.push(tokio::spawn(async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cli(&cluster_stack, "", &args).await
        }));
    }
    for (index, run) in pending.into_iter().enumerate() {
        let (_, worker) = runs[index];
        run.await??
            .expect_code(0)
            .with_context(|| worker.log_tail())?;
    }

    let kube = stack.kube_client().await?;
    for ((cluster_stack, pool, _, machine), (_, worker)) in created.iter().zip(runs) {
        let resources = Sandbox::new(cluster_stack)?
            .machine_resources(machine)
            .await?;
        ensure!(
            resources.vms.len() == 1 && resources.nics.len() == 1 && resources.disks.len() == 1,
            "{machine}: one VM, NIC and disk in {}: {resources:#?}",
            cluster_stack.arm.resource_group
        );
        let group = format!(
            "/resourceGroups/{}/",
            cluster_stack.arm.resource_group.to_ascii_lowercase()
        );
        for resource in resources
            .vms
            .iter()
            .chain(&resources.nics)
            .chain(&resources.disks)
        {
            let id = resource["id"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase();
            ensure!(
                id.contains(&group.to_ascii_lowercase()),
                "{machine}: {id} is not in {group}"
            );
            ensure!(
                resource["tags"][TAG_CLUSTER] == cluster_stack.cluster.as_str(),
                "{resource}"
            );
        }
        let node_object = node(&kube, machine)
            .await?
            .with_context(|| format!("no Node {machine}"))?;
        let labels = node_object.metadata.labels.clone().unwrap_or_default();
        ensure!(
            labels.get(LABEL_POOL) == Some(pool) && labels.get(LABEL_MACHINE) == Some(machine),
            "Node {machine} labels {labels:?}"
        );
        let expected = provider_id(
            &cluster_stack.arm.subscription_id,
            &cluster_stack.arm.resource_group,
            machine,
        );
        let actual = node_object
            .spec
            .and_then(|spec| spec.provider_id)
            .unwrap_or_default();
        ensure!(
            actual.eq_ignore_ascii_case(&expected),
            "Node {machine} providerID {actual}, expected {expected}"
        );
        // Every activity of the run ran on this cluster's worker.
        let pid = worker.pid().context("the worker runs")?;
        let workflow_id = format!("create/{}/{machine}", cluster_stack.cluster);
        let mut identities = Vec::new();
        collect_identities(
            &history_json(stack, &workflow_id).await?,
            "activityTaskStartedEventAttributes",
            &mut identities,
        );
        ensure!(!identities.is_empty(), "{workflow_id}: no activity started");
        ensure!(
            identities
                .iter()
                .all(|identity| identity.ends_with(&format!(":{pid}"))),
            "{workflow_id}: activities ran on {identities:?}, not only on its worker (pid {pid})"
        );
    }
    Ok(())
}

/// (b) One queue for both clusters: the other cluster's worker refuses the local run.
async fn a_shared_queue_hands_a_run_to_the_other_cluster_which_refuses_it(
    stack: &Stack,
    other: &Other,
    machines: &mut Vec<(Stack, String)>,
) -> Result<()> {
    let shared = unique_task_queue("isolation-shared");
    let mut local_worker = KillableWorker::start_logging_to(stack, &shared, &shared)?;
    let other_worker = KillableWorker::start_with_env(
        &other.stack,
        &shared,
        &format!("{shared}-other"),
        &other.env(),
    )?;
    // Without the local worker, the other cluster's worker surely gets the local run.
    local_worker.kill();
    let pool = format!("iso{}", unique_suffix());
    let pool_file = write_pool_file(stack, &pool, "5m")?;
    let machine = format!("{pool}-d3e4f");
    machines.push((stack.clone(), machine.clone()));
    let pool_path = pool_file.to_string_lossy().into_owned();
    let created = cli(
        stack,
        &shared,
        &[
            "machine", "create", "--pool", &pool_path, "--name", &machine, "--wait",
        ],
    )
    .await?;
    let output = format!("{}{}", created.stdout, created.stderr);
    ensure!(
        created.code != Some(0),
        "the local run on the other worker failed: {output}\n{}",
        other_worker.log_tail()
    );
    let local = format!("\"{}\"", stack.cluster);
    let foreign = format!("\"{}\"", other.stack.cluster);
    for fragment in [
        local.as_str(),
        foreign.as_str(),
        "cluster:",
        "this worker manages",
        "task queue",
    ] {
        ensure!(
            output.contains(fragment),
            "{fragment} missing from the failed run's output: {output}"
        );
    }
    // The other cluster's worker took the run's workflow task and refused its input before
    // the first activity (its history says so): no activity was even scheduled.
    let pid = other_worker.pid().context("the other worker runs")?;
    let workflow_id = format!("create/{}/{machine}", stack.cluster);
    let history = history_json(stack, &workflow_id).await?;
    let mut identities = Vec::new();
    collect_identities(
        &history,
        "workflowTaskStartedEventAttributes",
        &mut identities,
    );
    ensure!(
        !identities.is_empty()
            && identities
                .iter()
                .all(|identity| identity.ends_with(&format!(":{pid}"))),
        "{workflow_id}: its workflow task reached the other worker (pid {pid}): {identities:?}"
    );
    let text = history.to_string();
    ensure!(
        !text.contains("activityTaskScheduledEventAttributes") && text.contains("InvalidInput"),
        "{workflow_id}: refused as InvalidInput before any activity was scheduled: {text}"
    );
    for cluster_stack in [stack, &other.stack] {
        let left = Sandbox::new(cluster_stack)?
            .machine_resources(&machine)
            .await?;
        ensure!(
            left.is_empty(),
            "nothing of {machine} in {}: {left:#?}",
            cluster_stack.arm.resource_group
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_on_another_clusters_api_stops_at_start_up_naming_both_clusters() -> Result<()> {
    let stack = Stack::load()?;
    let kube = stack.kube_client().await?;
    let suffix = unique_suffix();
    let namespaces = [
        format!("nodewright-id-cluster-{suffix}"),
        format!("nodewright-id-uid-{suffix}"),
    ];
    for namespace in &namespaces {
        ensure_namespace(&stack, namespace)?;
    }
    let result = async {
        let foreign = format!("other-{suffix}");
        record_identity(
            &kube,
            &namespaces[0],
            &foreign,
            &kube_system_uid(&kube).await?,
        )
        .await?;
        record_identity(
            &kube,
            &namespaces[1],
            &stack.cluster,
            "not-this-apiservers-uid",
        )
        .await?;
        let missing = format!("nodewright-missing-{suffix}");
        let cases: [(&str, &str, Vec<String>); 3] = [
            (
                "identity of another cluster",
                &namespaces[0],
                vec![
                    "cluster (NODEWRIGHT_CLUSTER)".to_owned(),
                    format!("\"{}\"", stack.cluster),
                    format!("\"{foreign}\""),
                    format!("{}/{IDENTITY_CONFIG_MAP}", namespaces[0]),
                ],
            ),
            (
                "identity of another apiserver",
                &namespaces[1],
                vec![
                    "\"not-this-apiservers-uid\"".to_owned(),
                    "kube-system".to_owned(),
                    format!("\"{}\"", stack.cluster),
                ],
            ),
            (
                "no identity namespace",
                &missing,
                vec![
                    "kubernetes.identity_namespace".to_owned(),
                    "NODEWRIGHT_IDENTITY_NAMESPACE".to_owned(),
                    format!("\"{missing}\""),
                ],
            ),
        ];
        for (case, namespace, fragments) in cases {
            let (health, metrics) = (free_address()?, free_address()?);
            let config = stack_config(&stack, "never-polled", health, metrics).replace(
                "[kubernetes]\n",
                &format!("[kubernetes]\nidentity_namespace = \"{namespace}\"\n"),
            );
            let dir = scratch_dir("worker-identity")?;
            let mut worker = WorkerProcess::spawn(&dir, &config, health, metrics, &[])?;
            let status = eventually(
                &format!("{case}: the worker exits"),
                Duration::from_secs(30),
                Duration::from_millis(200),
                || {
                    let exited = worker.try_exit();
                    async move { exited }
                },
            )
            .await?;
            let stderr = worker.stderr();
            ensure!(!status.success(), "{case}: exit {status}, stderr: {stderr}");
            let lines: Vec<&str> = stderr.lines().collect();
            ensure!(
                lines.len() == 1 && lines[0].starts_with("error: "),
                "{case}: one error line expected: {stderr}"
            );
            for fragment in &fragments {
                ensure!(
                    stderr.contains(fragment.as_str()),
                    "{case}: {fragment} missing from: {stderr}"
                );
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
        Ok(())
    }
    .await;
    for namespace in &namespaces {
        delete_namespace(&kube, namespace).await;
    }
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_whose_api_is_another_cluster_or_has_no_identity_freezes() -> Result<()> {
    let shared = Stack::load()?;
    let mut stack = shared.clone();
    stack.cluster = format!("swid-{}", unique_suffix());
    let task_queue = unique_task_queue("isolation-sweep");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    // The cluster's own identity namespace (never the stack's shared one).
    let namespace = namespace_for(&shared, &stack.cluster);
    ensure!(
        namespace != nodewright_model::identity::DEFAULT_IDENTITY_NAMESPACE,
        "the test's cluster has its own identity namespace"
    );
    let kube = stack.kube_client().await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(kube.clone(), &namespace);
    eventually(
        "the worker to record its cluster identity",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || async { Ok(config_maps.get_opt(IDENTITY_CONFIG_MAP).await?.map(|_| ())) },
    )
    .await
    .with_context(|| worker.log_tail())?;

    // The API now says it is another cluster.
    let patch = serde_json::json!({ "data": { "cluster": "someone-else" } });
    config_maps
        .patch(
            IDENTITY_CONFIG_MAP,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    let reason = frozen_sweep(&stack, &task_queue).await?;
    for fragment in ["\"someone-else\"", &format!("\"{}\"", stack.cluster)] {
        ensure!(
            reason.contains(fragment),
            "{fragment} missing from {reason}"
        );
    }

    // And now it carries no identity at all.
    config_maps
        .delete(IDENTITY_CONFIG_MAP, &DeleteParams::default())
        .await?;
    let reason = frozen_sweep(&stack, &task_queue).await?;
    ensure!(
        reason.contains("carries no cluster identity"),
        "the reason names the missing identity: {reason}"
    );
    Ok(())
}

/// Runs a sweep that must freeze, deleting nothing; returns its reason.
async fn frozen_sweep(stack: &Stack, task_queue: &str) -> Result<String> {
    let result = cli(
        stack,
        task_queue,
        &["--output", "json", "sweep", "run", "--wait"],
    )
    .await?;
    let audit: SweepAuditDocument = serde_json::from_str(result.stdout.trim())
        .with_context(|| format!("no audit: {}{}", result.stdout, result.stderr))?;
    ensure!(result.code == Some(3), "a frozen sweep exits 3: {audit}");
    let SweepOutcome::Frozen { reason } = &audit.outcome else {
        bail!("a frozen sweep: {audit}");
    };
    ensure!(
        audit.entries.is_empty(),
        "nothing decided while frozen: {audit}"
    );
    Ok(reason.clone())
}

/// The `identity` of every event attribute object named `attributes` in `value`.
fn collect_identities(value: &Value, attributes: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                if key == attributes {
                    if let Some(identity) = inner["identity"].as_str() {
                        found.push(identity.to_owned());
                    }
                } else {
                    collect_identities(inner, attributes, found);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                collect_identities(item, attributes, found);
            }
        }
        _ => {}
    }
}

async fn kube_system_uid(kube: &kube::Client) -> Result<String> {
    let namespaces: Api<Namespace> = Api::all(kube.clone());
    namespaces
        .get("kube-system")
        .await?
        .metadata
        .uid
        .context("kube-system has a uid")
}

async fn record_identity(
    kube: &kube::Client,
    namespace: &str,
    cluster: &str,
    uid: &str,
) -> Result<()> {
    let config_maps: Api<ConfigMap> = Api::namespaced(kube.clone(), namespace);
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(IDENTITY_CONFIG_MAP.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            (KEY_CLUSTER.to_owned(), cluster.to_owned()),
            (KEY_KUBE_SYSTEM_UID.to_owned(), uid.to_owned()),
        ])),
        ..ConfigMap::default()
    };
    config_maps
        .create(&PostParams::default(), &config_map)
        .await
        .with_context(|| format!("recording {cluster} in {namespace}"))?;
    Ok(())
}

async fn delete_namespace(kube: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(kube.clone());
    let _ = namespaces.delete(name, &DeleteParams::default()).await;
}

/// Deletes every machine made (each with its own cluster's CLI and worker), then the other
/// cluster's identity namespace (with its ConfigMap). Errors are collected, not stopped at.
async fn clean_up(stack: &Stack, other: &Other, machines: &[(Stack, String)]) -> Result<()> {
    let mut problems = Vec::new();
    {
        let _local = KillableWorker::start_with_env(stack, "", "isolation-cleanup-local", &[])?;
        let _other = KillableWorker::start_with_env(
            &other.stack,
            "",
            "isolation-cleanup-other",
            &other.env(),
        )?;
        for (cluster_stack, machine) in machines {
            match cli(cluster_stack, "", &["machine", "delete", machine, "--wait"]).await {
                Ok(result) if result.code == Some(0) => {}
                Ok(result) => problems.push(format!(
                    "deleting {machine}: {}{}",
                    result.stdout, result.stderr
                )),
                Err(error) => problems.push(format!("deleting {machine}: {error}")),
            }
        }
    }
    let kube = stack.kube_client().await?;
    delete_namespace(&kube, &other.identity_namespace).await;
    for (cluster_stack, machine) in machines {
        let left = Sandbox::new(cluster_stack)?
            .machine_resources(machine)
            .await?;
        if !left.is_empty() {
            problems.push(format!("{machine} leaked: {left:#?}"));
        }
        if node(&kube, machine).await?.is_some() {
            problems.push(format!("{machine} leaked its Node"));
        }
    }
    ensure!(problems.is_empty(), "clean-up: {}", problems.join("; "));
    Ok(())
}
