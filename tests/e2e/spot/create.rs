//! A Spot machine end to end: `machine create` of a pool whose template prefers Spot makes a
//! VM with `priority: Spot`, the template's eviction policy and maximum price and the
//! capacity-type tag; its Node carries `nodewright.io/capacity-type=spot` and AKS's Spot label
//! and taint beside the template's own taint; the delete leaves nothing.

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{CliResult, KillableWorker, Sandbox, create_machine, node};
use nodewright_tests::temporal_worker::unique_task_queue;
use serde_json::json;

use super::spot_pool_file;
use crate::machines::assert_nothing_left;

#[tokio::test]
async fn a_spot_machine_is_made_labelled_and_tainted_as_its_template_says() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let kube = stack.kube_client().await?;
    let task_queue = unique_task_queue("spot");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("s{}", unique_suffix());
    let pool_file = spot_pool_file(
        &stack,
        &pool,
        "5m",
        "    capacityTypes: [spot, on-demand]\n    spot:\n      maxPrice: 0.5\n      evictionPolicy: Deallocate\n      aksLabels: true\n",
    )?;
    let machine = format!("{pool}-sp0t2");

    create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])?
        .expect_code(0)
        .with_context(|| worker.log_tail())?;

    let held = sandbox.machine_resources(&machine).await?;
    let vm = held.vms.first().context("the Spot machine's VM")?;
    let properties = &vm["properties"];
    ensure!(
        properties["priority"] == json!("Spot")
            && properties["evictionPolicy"] == json!("Deallocate")
            && properties["billingProfile"]["maxPrice"] == json!(0.5),
        "the VM is not the template's Spot VM: {properties}"
    );
    ensure!(
        vm["tags"]["nodewright.io-capacity-type"] == json!("spot"),
        "the VM's capacity-type tag: {}",
        vm["tags"]
    );

    let node = node(&kube, &machine)
        .await?
        .with_context(|| format!("Node {machine}"))?;
    let labels = node.metadata.labels.clone().unwrap_or_default();
    for (key, value) in [
        ("nodewright.io/capacity-type", "spot"),
        ("kubernetes.azure.com/scalesetpriority", "spot"),
        ("role", "e2e"),
    ] {
        ensure!(
            labels.get(key).map(String::as_str) == Some(value),
            "Node {machine} lacks {key}={value}: {labels:?}"
        );
    }
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    for (key, value) in [
        ("kubernetes.azure.com/scalesetpriority", "spot"),
        ("dedicated", "e2e"),
    ] {
        ensure!(
            taints.iter().any(|t| t.key == key
                && t.value.as_deref() == Some(value)
                && t.effect == "NoSchedule"),
            "Node {machine} lacks the taint {key}={value}:NoSchedule: {taints:?}"
        );
    }

    CliResult::run(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--wait", "--skip-drain"],
    )?
    .expect_code(0)
    .with_context(|| worker.log_tail())?;
    assert_nothing_left(&stack, &sandbox, &machine).await
}
