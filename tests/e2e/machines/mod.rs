//! CreateMachine and DeleteMachine end to end: the `nodewright` CLI starts them on a
//! `nodewright-worker` process (one per test, on its own task queue), and the tests check the
//! world afterwards: VMs, NICs and disks in the sandbox; Nodes in Kubernetes.

mod azure_failures;
mod crashes;
mod create_delete;
mod create_retry;
mod failures;
mod foreign;
mod hooks;
mod invalid_pools;
mod name_taken;
mod registered_taints;
mod throttling;

use anyhow::{Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{MachineResources, Sandbox, node};

/// A pool name no other test or run uses: `t<8 hex>`.
fn unique_pool(prefix: &str) -> String {
    format!("{prefix}{}", unique_suffix())
}

/// Fails unless nothing of `machine` is left: no VM, NIC, disk or Node.
pub(crate) async fn assert_nothing_left(
    stack: &Stack,
    sandbox: &Sandbox,
    machine: &str,
) -> Result<()> {
    let left: MachineResources = sandbox.machine_resources(machine).await?;
    ensure!(left.is_empty(), "{machine} leaked in Azure: {left:#?}");
    let kube = stack.kube_client().await?;
    ensure!(
        node(&kube, machine).await?.is_none(),
        "{machine} leaked its Node"
    );
    Ok(())
}
