//! OrphanSweep cancelled while it waits for approval: 11 orphan NICs, max_deletions 10. `sweep
//! cancel` ends it Canceled; no removal started, every planned one is in its audit as skipped
//! because of the cancellation, `sweep report RUN` prints that audit, and the NICs are all
//! still there.

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use serde_json::json;

use crate::sweep::common::{OLD, SweepCluster, await_approval_wait, outcome, own_removals, report};

const ORPHANS: usize = 11;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_cancelled_before_its_removals_deletes_nothing_and_says_so() -> Result<()> {
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    let result = scenario(&sweep).await;
    sweep.clean_up().await?;
    result
}

async fn scenario(sweep: &SweepCluster) -> Result<()> {
    let prefix = format!("{}-nic", sweep.pool);
    sweep
        .sandbox
        .seed(json!({ "generate": [{
            "type": "nic", "prefix": prefix, "count": ORPHANS,
            "suffix": "-nic", "machineTag": true,
            "tags": sweep.ours(&sweep.machine("nicss"), OLD),
        }]}))
        .await?;
    let names: Vec<String> = (0..ORPHANS)
        .map(|i| format!("{prefix}{i:05}-nic"))
        .collect();

    sweep
        .cli(&["sweep", "run", "--approval-timeout", "10m"])
        .await?
        .expect_code(0)?;
    await_approval_wait(sweep).await?;
    let canceled = sweep.cli(&["sweep", "cancel"]).await?;
    canceled.expect_code(0)?;
    ensure!(
        canceled.stdout.contains("to cancel"),
        "sweep cancel says what it asked: {}",
        canceled.stdout
    );
    let workflow_id = format!("sweep/{}", sweep.cluster);
    let audit = nodewright_tests::poll::eventually(
        "the cancelled sweep's audit",
        std::time::Duration::from_secs(60),
        std::time::Duration::from_millis(500),
        || async { report(sweep, &[&workflow_id]).await },
    )
    .await
    .context("sweep report of the cancelled sweep")?;
    ensure!(
        outcome(&audit) == "canceled",
        "outcome {}",
        shown(&audit.outcome)
    );
    let own = own_removals(&audit, &prefix);
    ensure!(
        own.len() == ORPHANS
            && own
                .values()
                .all(|(rule, result)| rule == "orphan-nic" && result == "skipped"),
        "every planned removal skipped: {own:?}"
    );
    let reasons = shown(&audit.entries);
    ensure!(
        reasons.contains("canceled before it started"),
        "the audit says why they were skipped: {audit}"
    );
    for name in &names {
        ensure!(
            sweep.exists("nic", name).await?,
            "NIC {name} deleted by a cancelled sweep"
        );
    }
    Ok(())
}
