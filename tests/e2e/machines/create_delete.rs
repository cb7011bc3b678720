//! The happy path: create a machine with the CLI and find it everywhere with its ownership;
//! delete it and find nothing; delete again quietly.

use anyhow::{Context, Result, ensure};
use nodewright_model::machine::{CreatedMachine, DeletedMachine, Outcome, StepState};
use nodewright_model::ownership::{
    LABEL_MACHINE, LABEL_POOL, LABEL_TEMPLATE, TAG_CLUSTER, TAG_CREATED, TAG_MACHINE, TAG_POOL,
    TAG_TEMPLATE, provider_id,
};
use nodewright_tests::Stack;
use nodewright_tests::documents::{ResultDocument, RunRow, shown};
use nodewright_tests::machines::{
    CliResult, KillableWorker, MachineStatusDocument, Sandbox, create_machine, node,
    write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::{assert_nothing_left, unique_pool};

#[tokio::test]
async fn create_makes_a_tagged_vm_and_a_ready_labelled_node_and_delete_removes_everything()
-> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("machines");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("t");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-b2c4d");

    let created = create_machine(
        &stack,
        &task_queue,
        &pool_file,
        &machine,
        &["--wait", "--output", "json"],
    )?;
    created.expect_code(0).with_context(|| worker.log_tail())?;
    let document: ResultDocument<CreatedMachine> = created.parse()?;
    let result = &document.result;
    let expected_provider_id = provider_id(
        &stack.arm.subscription_id,
        &stack.arm.resource_group,
        &machine,
    );
    ensure!(result.machine == machine, "{document}");
    ensure!(
        result
            .provider_id
            .eq_ignore_ascii_case(&expected_provider_id),
        "providerId in {document}"
    );
    let template = result.template_hash.clone();
    ensure!(template.len() == 10, "template hash in {document}");

    // Azure: VM, NIC and OS disk, each with every ownership tag.
    let resources = sandbox.machine_resources(&machine).await?;
    ensure!(resources.vms.len() == 1, "one VM: {resources:#?}");
    ensure!(resources.nics.len() == 1, "one NIC: {resources:#?}");
    ensure!(resources.disks.len() == 1, "one OS disk: {resources:#?}");
    for resource in resources
        .vms
        .iter()
        .chain(&resources.nics)
        .chain(&resources.disks)
    {
        let tags = &resource["tags"];
        ensure!(tags[TAG_CLUSTER] == stack.cluster.as_str(), "{resource}");
        ensure!(tags[TAG_POOL] == pool.as_str(), "{resource}");
        ensure!(tags[TAG_MACHINE] == machine.as_str(), "{resource}");
        ensure!(tags[TAG_TEMPLATE] == template.as_str(), "{resource}");
        ensure!(tags[TAG_CREATED].as_str().is_some(), "{resource}");
        ensure!(tags["team"] == "platform", "user tag on {resource}");
    }
    let vm = &resources.vms[0];
    ensure!(vm["properties"]["provisioningState"] == "Succeeded", "{vm}");
    ensure!(
        vm["properties"]["hardwareProfile"]["vmSize"] == "Standard_D2s_v5",
        "{vm}"
    );

    // Kubernetes: the Node is Ready with the pool's labels and taints and the right providerID.
    let kube = stack.kube_client().await?;
    let node_object = node(&kube, &machine)
        .await?
        .with_context(|| format!("no Node {machine}"))?;
    let labels = node_object.metadata.labels.clone().unwrap_or_default();
    for (key, value) in [
        (LABEL_POOL, pool.as_str()),
        (LABEL_MACHINE, machine.as_str()),
        (LABEL_TEMPLATE, template.as_str()),
        ("role", "e2e"),
        ("nodewright.example/team", "platform"),
    ] {
        ensure!(
            labels.get(key).map(String::as_str) == Some(value),
            "label {key}={value} on {labels:?}"
        );
    }
    let spec = node_object.spec.clone().unwrap_or_default();
    ensure!(
        spec.provider_id
            .as_deref()
            .is_some_and(|id| id.eq_ignore_ascii_case(&expected_provider_id)),
        "providerID {:?}",
        spec.provider_id
    );
    let taints = spec.taints.unwrap_or_default();
    ensure!(
        taints.iter().any(|t| t.key == "dedicated"
            && t.value.as_deref() == Some("e2e")
            && t.effect == "NoSchedule"),
        "taint dedicated=e2e:NoSchedule in {taints:?}"
    );
    ensure!(
        nodewright_tests::kube_objects::is_node_ready(&node_object),
        "Node {machine} is not Ready"
    );

    // The status query says the same.
    let status = CliResult::run(
        &stack,
        &task_queue,
        &["machine", "status", &machine, "--output", "json"],
    )?;
    let status: MachineStatusDocument = status.expect_code(0)?.parse()?;
    ensure!(status.run_status == "completed", "{status:?}");
    ensure!(status.status.outcome == Outcome::Succeeded, "{status:?}");
    let steps = &status.status.steps;
    ensure!(
        steps.len() == 6 && steps.iter().all(|s| s.state == StepState::Done),
        "every create step done: {status:?}"
    );

    // A second create of the same name while nothing runs would be a new run; while one runs
    // it is refused — covered by the crash test. Delete now.
    let deleted = CliResult::run(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--wait", "--output", "json"],
    )?;
    let deleted: ResultDocument<DeletedMachine> = deleted
        .expect_code(0)
        .with_context(|| worker.log_tail())?
        .parse()?;
    ensure!(deleted.result.vm_deleted, "{deleted}");
    ensure!(deleted.result.node_deleted, "{deleted}");
    ensure!(deleted.result.cordoned, "{deleted}");
    assert_nothing_left(&stack, &sandbox, &machine).await?;

    // A second delete of the same machine succeeds quietly.
    let again = CliResult::run(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--wait"],
    )?;
    again.expect_code(0)?;
    ensure!(
        again.stdout.contains("already gone"),
        "second delete says it was already gone: {}",
        again.stdout
    );

    // And the runs are listed by pool.
    let runs = CliResult::run(
        &stack,
        &task_queue,
        &["runs", "--pool", &pool, "--output", "json"],
    )?;
    let runs: Vec<RunRow> = runs.expect_code(0)?.parse()?;
    let create = format!("create/{}/{machine}", stack.cluster);
    ensure!(
        runs.iter().any(|run| run.workflow_id == create
            && run.status == "completed"
            && run.pool.as_deref() == Some(pool.as_str())),
        "the completed create run is listed with its pool: {}",
        shown(&runs)
    );
    drop(worker);
    Ok(())
}
