//! One sweep per cluster, whatever started it: while an on-demand sweep waits for approval, a
//! run the schedule starts ends at once as `skipped` ("another sweep runs"), having done
//! nothing.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use nodewright_tests::poll::eventually;
use serde_json::json;

use super::common::{
    OLD, SweepCluster, await_approval_wait, outcome, outcome_reason, report, sweep_in_background,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_run_ends_skipped_while_an_on_demand_sweep_runs() -> Result<()> {
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    let result = overlap(&sweep).await;
    let _ = sweep.cli(&["sweep", "unschedule"]).await;
    let _ = sweep
        .cli(&["sweep", "cancel", &format!("sweep/{}", sweep.cluster)])
        .await;
    sweep.clean_up().await?;
    result
}

async fn overlap(sweep: &SweepCluster) -> Result<()> {
    let nic = format!("{}-nic", sweep.machine("ovrlp"));
    sweep
        .seed(vec![
            json!({ "type": "nic", "name": nic, "tags": sweep.ours(&sweep.machine("ovrlp"), OLD) }),
        ])
        .await?;
    let on_demand = sweep_in_background(
        sweep,
        &["--max-deletions", "0", "--approval-timeout", "60s"],
    );
    await_approval_wait(sweep).await?;
    sweep
        .cli(&["sweep", "schedule", "--every", "2s"])
        .await?
        .expect_code(0)?;
    let skipped = eventually(
        "a scheduled run to end skipped",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let audit = report(sweep, &[]).await?;
            Ok(audit.filter(|a| outcome(a) == "skipped"))
        },
    )
    .await?;
    sweep.cli(&["sweep", "unschedule"]).await?.expect_code(0)?;
    let reason =
        outcome_reason(&skipped).with_context(|| format!("a skipped sweep's reason: {skipped}"))?;
    ensure!(
        reason.starts_with(&format!(
            "another sweep runs: sweep/{} is sweeping cluster {}",
            sweep.cluster, sweep.cluster
        )),
        "reason {reason:?}"
    );
    ensure!(
        skipped.entries.is_empty(),
        "a skipped run planned {}",
        shown(&skipped.entries)
    );
    ensure!(sweep.exists("nic", &nic).await?, "NIC {nic} was deleted");
    let cancel = sweep
        .cli(&["sweep", "cancel", &format!("sweep/{}", sweep.cluster)])
        .await?;
    cancel.expect_code(0)?;
    // The on-demand run ends canceled; how `--wait` reports that is the cancel test's concern.
    let _ = on_demand.await?;
    Ok(())
}
