//! Activity deadlines kept on the worker: an activity that does not heartbeat and hangs on an
//! ARM request past its start-to-close timeout is stopped in the worker, its request dropped,
//! while the server's retry carries the run on.
//!
//! `machine delete` of a machine with nothing in Azure reads its leftovers (`azure.find_leftovers`,
//! a read of 30 s start-to-close, no heartbeat): a GET of the machine's NIC, then of its OS disk.
//! Sandbox `stall` rules hold the first of each for 25 s — each within the ARM client's 30 s
//! request timeout, together past the activity's deadline. The server times that attempt out
//! at 30 s and the next one finds nothing, so the delete completes; the worker must drop the
//! first attempt at its deadline, in the middle of its disk read: the sandbox records that read
//! given up (499). Without the guard the attempt would go on to the end and its disk read be
//! answered (404) about 20 s after the server gave up on it.

use std::time::Duration;

use anyhow::{Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::poll::eventually;
use serde_json::json;

use crate::sweep::common::SweepCluster;

/// How long each stall holds its GET: below the ARM client's 30 s request timeout, while two of
/// them pass the read's 30 s start-to-close.
const STALL_SECONDS: u64 = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_activity_hanging_past_its_deadline_is_stopped_on_the_worker() -> Result<()> {
    let stack = Stack::load()?;
    let cluster = SweepCluster::start(&stack, None)?;
    let machine = cluster.machine("stall");
    let nic = format!("{machine}-nic");
    let disk = format!("{machine}-osdisk");
    let mut faults = Vec::new();
    for (operation, path) in [
        ("nic.get", format!("*/networkInterfaces/{nic}")),
        ("disk.get", format!("*/disks/{disk}")),
    ] {
        faults.push(
            cluster
                .sandbox
                .add_fault(json!({
                    "kind": "stall", "operation": operation, "path": path,
                    "count": 1, "seconds": STALL_SECONDS,
                }))
                .await?,
        );
    }
    let result = stalled_read(&cluster, &machine, &disk).await;
    for fault in faults {
        cluster.sandbox.remove_fault(fault).await?;
    }
    cluster.clean_up().await?;
    result
}

async fn stalled_read(cluster: &SweepCluster, machine: &str, disk: &str) -> Result<()> {
    let delete = cluster
        .cli(&["machine", "delete", machine, "--skip-drain", "--wait"])
        .await?;
    delete.expect_code(0)?;
    let given_up = eventually(
        "the first attempt's stalled disk read given up by the worker (status 499)",
        Duration::from_secs(60),
        Duration::from_secs(2),
        || async {
            let requests = cluster.sandbox.requests(disk).await?;
            Ok(requests
                .into_iter()
                .find(|r| r["operation"] == "disk.get" && r["status"] == 499))
        },
    )
    .await?;
    let reads = cluster.sandbox.requests(disk).await?;
    ensure!(
        reads
            .iter()
            .any(|r| r["operation"] == "disk.get" && r["status"] == 404),
        "the server's retry never read the disk (found absent): {reads:#?}"
    );
    println!("given up: {given_up}");
    Ok(())
}
