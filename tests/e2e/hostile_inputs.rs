//! Workflows started by hand, past the CLI, with hostile inputs: each run fails at once,
//! non-retryable `InvalidInput`, its failure naming the field; its history has no
//! `ActivityTaskScheduled` (nor a child started); and nothing changed in the world: no VM, NIC
//! or disk of the machine in the sandbox, the Node as it was. Needs the local stack (a worker
//! process of the stack's cluster on its own task queue, the sandbox, the apiserver with kwok).
//!
//! - CreateMachine with a template that fails the pool file's rules (VM size, a control-plane
//!   role label) and a creation timeout of 10¹² s.
//! - DeleteMachine of another cluster started on this cluster's task queue (workflow ID and input
//!   agreeing on the other cluster), and one whose input names another cluster than its ID.
//! - DeleteMachine of this cluster's machine under another machine's workflow ID (a second run
//!   for one machine).
//! - UncordonNode started with `temporal workflow start` and raw JSON, naming no machine.
//! - DrainNode with an absurd policy (a drain timeout of u64::MAX seconds, no PDB retry).
//! - RollingUpdate with a max surge of 5000 machines and a canary beyond the replicas.
//! - PoolController with 1001 replicas, an observe interval of a day, a history limit of 0 and
//!   no remediation in flight; and one whose pool name breaks the name rule. Neither lists,
//!   watches or creates anything: no VM or NIC tagged with the pool.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use nodewright_model::controller::ControllerRequest;
use nodewright_model::disruption::Disruption;
use nodewright_model::drain::{DrainPurpose, DrainRequest};
use nodewright_model::limits::MAX_REPLICAS;
use nodewright_model::machine::{CreateMachineRequest, DeleteMachineRequest};
use nodewright_model::ownership::{TAG_CLUSTER, TAG_POOL};
use nodewright_model::pool::{Amount, DrainPolicy, from_yaml};
use nodewright_model::rollout::{
    DEFAULT_HISTORY_LIMIT, DEFAULT_OBSERVE_INTERVAL, PoolHistory, RolloutRequest,
};
use nodewright_model::{ClusterName, Operation, WorkflowId};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::{kwok_node, unique_suffix};
use nodewright_tests::machines::{KillableWorker, Sandbox, write_pool_file};
use nodewright_tests::stack::{history_json, temporal_cli};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_workflows::{
    CreateMachineWorkflow, DeleteMachineWorkflow, DrainNodeWorkflow, PoolControllerWorkflow,
    RollingUpdateWorkflow,
};
use serde_json::Value;
use temporalio_client::{WorkflowGetResultOptions, WorkflowStartOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_inputs_fail_at_once_naming_the_field_and_change_nothing() -> Result<()> {
    let stack = Stack::load()?;
    let kube = stack.kube_client().await?;
    let task_queue = unique_task_queue("hostile");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("hst{}", unique_suffix());
    let machine = format!("{pool}-bcdfg");
    // The Node need not be Ready: nothing may touch it either way.
    let nodes: Api<Node> = Api::all(kube.clone());
    let node_before = nodes
        .create(&PostParams::default(), &kwok_node(&machine)?)
        .await
        .with_context(|| format!("creating Node {machine}"))?;
    let outcome = hostile_runs(&stack, &task_queue, &pool, &machine, &node_before).await;
    if let Err(error) = nodes.delete(&machine, &DeleteParams::default()).await {
        eprintln!("cleanup: deleting node {machine}: {error}");
    }
    outcome.with_context(|| format!("worker log:\n{}", worker.log_tail()))
}

async fn hostile_runs(
    stack: &Stack,
    task_queue: &str,
    pool_name: &str,
    machine: &str,
    node_before: &Node,
) -> Result<()> {
    let client = stack.temporal_client().await?;
    let cluster = ClusterName::parse("cluster", &stack.cluster)?;
    let other = ClusterName::parse("cluster", &format!("other-{}", unique_suffix()))?;
    let pool_file = write_pool_file(stack, pool_name, "5m")?;
    let pool = from_yaml(&std::fs::read_to_string(&pool_file)?)?;
    let options = |workflow_id: &WorkflowId| {
        WorkflowStartOptions::new(task_queue.to_owned(), workflow_id.to_string())
            .execution_timeout(Duration::from_secs(300))
            .build()
    };

    // CreateMachine with a template of its own design.
    let mut template = pool.template.clone();
    template.vm_size = "Standard_Huge; rm -rf /".to_owned();
    template.labels.insert(
        "node-role.kubernetes.io/control-plane".to_owned(),
        String::new(),
    );
    let create = CreateMachineRequest {
        cluster: cluster.clone(),
        pool: pool.name.clone(),
        machine: machine.to_owned(),
        template,
        template_hash: pool.template_hash.clone(),
        creation_timeout: Duration::from_secs(1_000_000_000_000),
        keep_on_failure: false,
        drain: pool.drain.clone(),
        zone: None,
        capacity_type: None,
    };
    let create_id = WorkflowId::for_subject(Operation::Create, &cluster, machine);
    client
        .start_workflow(CreateMachineWorkflow::run, create, options(&create_id))
        .await?;
    refused(
        stack,
        &create_id,
        &[
            "template.vmSize",
            "template.labels[\"node-role.kubernetes.io/control-plane\"]",
            "creationTimeout",
            "1000000000000s",
        ],
    )
    .await?;

    // DeleteMachine of another cluster, on this cluster's queue: ID and input agree.
    let delete = |cluster: &ClusterName| DeleteMachineRequest {
        cluster: cluster.clone(),
        machine: machine.to_owned(),
        skip_drain: true,
        force: true,
        drain_policy: None,
        skip_hooks: false,
        hook_timeout: None,
        disruption: Disruption::Operator,
    };
    let foreign_id = WorkflowId::for_subject(Operation::Delete, &other, machine);
    client
        .start_workflow(
            DeleteMachineWorkflow::run,
            delete(&other),
            options(&foreign_id),
        )
        .await?;
    let this_cluster = format!("this worker manages (\"{cluster}\"");
    refused(stack, &foreign_id, &["cluster:", &this_cluster]).await?;

    // DeleteMachine whose input names another cluster than its workflow ID.
    let mismatched_id = WorkflowId::for_subject(Operation::Delete, &cluster, machine);
    client
        .start_workflow(
            DeleteMachineWorkflow::run,
            delete(&other),
            options(&mismatched_id),
        )
        .await?;
    let id_names = format!("names (\"{cluster}\")");
    refused(stack, &mismatched_id, &["cluster:", &id_names]).await?;

    // DeleteMachine of this cluster's machine under another machine's workflow ID: a second
    // run for one machine, past Temporal's one run per ID.
    let other_subject_id =
        WorkflowId::for_subject(Operation::Delete, &cluster, &format!("{pool_name}-zzzzz"));
    client
        .start_workflow(
            DeleteMachineWorkflow::run,
            delete(&cluster),
            options(&other_subject_id),
        )
        .await?;
    refused(
        stack,
        &other_subject_id,
        &["machine:", "is not the subject of the workflow ID"],
    )
    .await?;

    // UncordonNode started with `temporal workflow start` and raw JSON, as anyone with the
    // namespace's start permission can: a Node name that is no machine name.
    let hostile_name = format!("{pool_name}_Node");
    let raw_id = WorkflowId::for_subject(Operation::Uncordon, &cluster, &hostile_name);
    let input = serde_json::json!({ "cluster": cluster.as_str(), "machine": hostile_name });
    let started = Command::new(temporal_cli()?)
        .args([
            "workflow",
            "start",
            "--type",
            nodewright_model::workflow_type::UNCORDON_NODE,
            "--task-queue",
            task_queue,
            "--workflow-id",
            raw_id.as_str(),
            "--input",
            &input.to_string(),
            "--address",
            &stack.temporal_address,
            "--namespace",
            &stack.temporal_namespace,
        ])
        .output()?;
    ensure!(
        started.status.success(),
        "temporal workflow start {raw_id}: {}",
        String::from_utf8_lossy(&started.stderr)
    );
    refused(
        stack,
        &raw_id,
        &["machine:", "_Node", "contains a character other than"],
    )
    .await?;

    // DrainNode with an absurd policy.
    let drain = DrainRequest {
        cluster: cluster.clone(),
        node: machine.to_owned(),
        purpose: DrainPurpose::Deletion,
        policy: Some(DrainPolicy {
            timeout: Duration::from_secs(u64::MAX),
            pdb_retry_interval: Duration::ZERO,
            ..DrainPolicy::default()
        }),
        force: false,
        local_data: None,
        resume: None,
        disruption: Disruption::Operator,
        history_limit: None,
    };
    let drain_id = WorkflowId::for_subject(Operation::Drain, &cluster, machine);
    client
        .start_workflow(DrainNodeWorkflow::run, drain, options(&drain_id))
        .await?;
    refused(
        stack,
        &drain_id,
        &["policy.timeout", "policy.pdb_retry_interval", "is zero"],
    )
    .await?;

    // RollingUpdate with budgets beyond any pool.
    let mut rolled = pool.clone();
    rolled.strategy.max_surge = Amount::Count(5000);
    let rollout = RolloutRequest {
        cluster: cluster.clone(),
        canary: Some(rolled.replicas + 1),
        pool: rolled,
        history: PoolHistory::default(),
        rollback: false,
        observe_interval: DEFAULT_OBSERVE_INTERVAL,
        history_limit: DEFAULT_HISTORY_LIMIT,
        resume: None,
        automatic: false,
    };
    let rollout_id = WorkflowId::for_subject(Operation::Rollout, &cluster, &pool.name);
    client
        .start_workflow(RollingUpdateWorkflow::run, rollout, options(&rollout_id))
        .await?;
    refused(
        stack,
        &rollout_id,
        &["pool.strategy.max_surge", "5000", "canary"],
    )
    .await?;

    // PoolController with every knob and count beyond its bound.
    let mut controlled = pool.clone();
    controlled.replicas = MAX_REPLICAS + 1;
    controlled.health.max_in_flight = 0;
    let controller = ControllerRequest {
        cluster: cluster.clone(),
        pool: controlled,
        paused: false,
        observe_interval: Duration::from_secs(86_400),
        history_limit: 0,
        carried: None,
    };
    let controller_id = WorkflowId::for_subject(Operation::Pool, &cluster, &pool.name);
    client
        .start_workflow(
            PoolControllerWorkflow::run,
            controller,
            options(&controller_id),
        )
        .await?;
    refused(
        stack,
        &controller_id,
        &[
            "pool.replicas",
            "1001",
            "observeInterval",
            "historyLimit",
            "pool.health.maxInFlight",
        ],
    )
    .await?;

    // PoolController of a pool whose name breaks the name rule (its workflow ID agreeing).
    let mut misnamed = pool.clone();
    misnamed.name = format!("{pool_name}_Pool");
    let misnamed_id = WorkflowId::for_subject(Operation::Pool, &cluster, &misnamed.name);
    let controller = ControllerRequest {
        cluster: cluster.clone(),
        pool: misnamed,
        paused: false,
        observe_interval: DEFAULT_OBSERVE_INTERVAL,
        history_limit: DEFAULT_HISTORY_LIMIT,
        carried: None,
    };
    client
        .start_workflow(
            PoolControllerWorkflow::run,
            controller,
            options(&misnamed_id),
        )
        .await?;
    refused(
        stack,
        &misnamed_id,
        &["pool.name", "_Pool", "lowercase letters"],
    )
    .await?;
    let arm = stack.arm_client()?;
    let tagged = |tags: &std::collections::BTreeMap<String, String>| {
        tags.get(TAG_CLUSTER) == Some(&stack.cluster)
            && tags.get(TAG_POOL).is_some_and(|p| p.starts_with(pool_name))
    };
    let vms = arm
        .list_vms()
        .await?
        .into_iter()
        .filter(|vm| tagged(&vm.tags))
        .count();
    let nics = arm
        .list_nics()
        .await?
        .into_iter()
        .filter(|nic| tagged(&nic.tags))
        .count();
    ensure!(
        vms == 0 && nics == 0,
        "a refused controller created {vms} VM(s) and {nics} NIC(s) of pool {pool_name}"
    );

    // Nothing changed in the world.
    let left = Sandbox::new(stack)?.machine_resources(machine).await?;
    ensure!(
        left.is_empty(),
        "nothing of {machine} in the sandbox: VMs {}, NICs {}, disks {}",
        Value::from(left.vms.clone()),
        Value::from(left.nics.clone()),
        Value::from(left.disks.clone())
    );
    let kube = stack.kube_client().await?;
    let node_after = nodewright_tests::machines::node(&kube, machine)
        .await?
        .with_context(|| format!("Node {machine} is still there"))?;
    let (before, after) = (nodewright_view(node_before), nodewright_view(&node_after));
    ensure!(
        before == after,
        "Node {machine} untouched: before {before}, after {after}"
    );
    Ok(())
}

/// Waits for the run `workflow_id` to end, and checks it failed as a refused input: type
/// `InvalidInput`, non-retryable, its message holding every one of `fragments`; and that its
/// history has no activity scheduled and no child started.
async fn refused(stack: &Stack, workflow_id: &WorkflowId, fragments: &[&str]) -> Result<()> {
    let client = stack.temporal_client().await?;
    let handle = client.get_workflow_handle::<CreateMachineWorkflow>(workflow_id.to_string());
    let ended = tokio::time::timeout(
        Duration::from_secs(60),
        handle.get_result(WorkflowGetResultOptions::default()),
    )
    .await
    .with_context(|| format!("{workflow_id} did not end within 60 s"))?;
    ensure!(ended.is_err(), "{workflow_id} failed");
    let history = history_json(stack, workflow_id.as_str()).await?;
    let text = history.to_string();
    for forbidden in [
        "activityTaskScheduledEventAttributes",
        "startChildWorkflowExecutionInitiatedEventAttributes",
        "timerStartedEventAttributes",
    ] {
        ensure!(
            !text.contains(forbidden),
            "{workflow_id}: no {forbidden} in its history: {text}"
        );
    }
    let failure = find(&history, "workflowExecutionFailedEventAttributes")
        .map(|attributes| attributes["failure"].clone())
        .with_context(|| format!("{workflow_id} has no failed event: {text}"))?;
    let info = &failure["applicationFailureInfo"];
    ensure!(
        info["type"] == "InvalidInput" && info["nonRetryable"] == true,
        "{workflow_id}: a non-retryable InvalidInput failure: {failure}"
    );
    let message = failure["message"].as_str().unwrap_or_default();
    for fragment in fragments {
        ensure!(
            message.contains(fragment),
            "{workflow_id}: {fragment} missing from the failure: {message}"
        );
    }
    ensure!(
        message.contains("nothing was changed"),
        "{workflow_id}: the failure says nothing was changed: {message}"
    );
    Ok(())
}

/// What nodewright could have changed on a Node: cordon, taints and its labels and annotations
/// under nodewright.io (the node controllers add and remove `node.kubernetes.io/` taints, and
/// kwok labels and annotations, of their own).
fn nodewright_view(node: &Node) -> Value {
    let ours = |map: &Option<std::collections::BTreeMap<String, String>>| -> Value {
        map.iter()
            .flatten()
            .filter(|(key, _)| key.contains("nodewright.io"))
            .map(|(key, value)| (key.clone(), Value::String(value.clone())))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let spec = node.spec.clone().unwrap_or_default();
    let taints: Vec<Value> = spec
        .taints
        .iter()
        .flatten()
        .filter(|taint| !taint.key.starts_with("node.kubernetes.io/"))
        .map(|taint| serde_json::json!([taint.key, taint.value, taint.effect]))
        .collect();
    serde_json::json!({
        "unschedulable": spec.unschedulable.unwrap_or(false),
        "taints": taints,
        "labels": ours(&node.metadata.labels),
        "annotations": ours(&node.metadata.annotations),
    })
}

/// The first object under the key `key`, anywhere in `value`.
fn find<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    match value {
        Value::Object(map) => map
            .get(key)
            .or_else(|| map.values().find_map(|inner| find(inner, key))),
        Value::Array(items) => items.iter().find_map(|item| find(item, key)),
        _ => None,
    }
}
