//! The approval gate: 15 orphans with max_deletions 10. Without an approval within the timeout
//! nothing is deleted and every removal is reported skipped; with `sweep approve` all go.

use anyhow::{Context, Result, ensure};
use nodewright_model::sweep::{SweepAudit, SweepOutcome};
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use serde_json::json;

use super::common::{OLD, SweepCluster, await_approval_wait, own_removals};

const ORPHANS: usize = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_orphans_than_max_deletions_wait_for_approval_and_are_skipped_without_it() -> Result<()>
{
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    let result = approval(&sweep).await;
    sweep.clean_up().await?;
    result
}

async fn approval(sweep: &SweepCluster) -> Result<()> {
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

    let (code, audit) = sweep.sweep(&["--approval-timeout", "3s"]).await?;
    ensure!(
        code == Some(3),
        "unapproved sweep exit {code:?}: {}",
        shown(&audit)
    );
    let orphans = u32::try_from(ORPHANS)?;
    ensure!(
        audit.outcome
            == SweepOutcome::NotApproved {
                planned: orphans,
                max_deletions: 10
            },
        "outcome {}",
        shown(&audit.outcome)
    );
    let own = own_removals(&audit, &prefix);
    ensure!(own.len() == ORPHANS, "planned {own:?}");
    ensure!(
        own.values()
            .all(|(rule, result)| rule == "orphan-nic" && result == "skipped"),
        "{own:?}"
    );
    for name in &names {
        ensure!(
            sweep.exists("nic", name).await?,
            "NIC {name} deleted without approval"
        );
    }

    let running = {
        let stack = sweep.stack.clone();
        let task_queue = sweep.task_queue.clone();
        tokio::spawn(async move {
            nodewright_tests::machines::cli(
                &stack,
                &task_queue,
                &["--output", "json", "sweep", "run", "--wait"],
            )
            .await
        })
    };
    await_approval_wait(sweep).await?;
    for name in &names {
        ensure!(
            sweep.exists("nic", name).await?,
            "NIC {name} deleted before the approval"
        );
    }
    sweep.cli(&["sweep", "approve"]).await?.expect_code(0)?;
    let finished = running.await??;
    let audit: SweepAudit = serde_json::from_str(finished.stdout.trim())
        .with_context(|| format!("no audit: {} {}", finished.stdout, finished.stderr))?;
    ensure!(
        finished.code == Some(0),
        "approved sweep exit {:?}: {}",
        finished.code,
        shown(&audit)
    );
    ensure!(
        audit
            .approved_by
            .as_deref()
            .is_some_and(|by| !by.is_empty()),
        "approvedBy {}",
        shown(&audit.approved_by)
    );
    let own = own_removals(&audit, &prefix);
    ensure!(
        own.len() == ORPHANS && own.values().all(|(_, result)| result == "deleted"),
        "{own:?}"
    );
    for name in &names {
        ensure!(!sweep.exists("nic", name).await?, "NIC {name} still exists");
    }
    Ok(())
}
