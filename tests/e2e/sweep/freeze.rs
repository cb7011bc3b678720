//! The freeze: the worker's Kubernetes API stops answering (its kubeconfig points at a proxy the
//! test stops, so the other tests keep their apiserver). The sweep deletes nothing and says it
//! froze; with the API back, the same orphans are deleted. A worker started while its API does
//! not answer keeps running and checks its cluster identity once the API is back.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::api_proxy::ApiProxy;
use nodewright_tests::documents::shown;
use nodewright_tests::identity::await_identity_recorded;
use serde_json::json;

use super::common::{OLD, SweepCluster, outcome, outcome_reason, own_removals};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_kubernetes_api_down_a_sweep_deletes_nothing_and_says_it_froze() -> Result<()> {
    let stack = Stack::load()?;
    let (proxy, kubeconfig) = ApiProxy::for_stack(&stack).await?;
    let sweep = SweepCluster::start(&stack, Some(kubeconfig))?;
    // The API goes away while the worker runs, after its start-up check (a start without the
    // API is the next test).
    let result = match await_identity_recorded(&sweep.cluster).await {
        Ok(()) => freeze(&sweep, &proxy).await,
        Err(e) => Err(e.context(sweep.worker_log())),
    };
    proxy.stop();
    sweep.clean_up().await?;
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_with_its_api_down_checks_the_identity_once_it_answers() -> Result<()> {
    let stack = Stack::load()?;
    let (proxy, kubeconfig) = ApiProxy::for_stack(&stack).await?;
    proxy.stop();
    let mut sweep = SweepCluster::start(&stack, Some(kubeconfig))?;
    let result = start_without_api(&mut sweep, &proxy).await;
    proxy.stop();
    sweep.clean_up().await?;
    result
}

/// The worker keeps running without its API (nothing can act on it), records its identity once
/// the API answers, and then sweeps.
async fn start_without_api(sweep: &mut SweepCluster, proxy: &ApiProxy) -> Result<()> {
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure!(
        sweep.worker_running(),
        "the worker stopped while its API did not answer:\n{}",
        sweep.worker_log()
    );
    let (code, audit) = sweep.sweep(&[]).await?;
    ensure!(
        code == Some(3),
        "sweep without the API exit {code:?}: {audit}"
    );
    ensure!(
        outcome(&audit) == "frozen",
        "outcome {}",
        shown(&audit.outcome)
    );

    proxy.resume().await?;
    await_identity_recorded(&sweep.cluster)
        .await
        .with_context(|| sweep.worker_log())?;
    let (code, audit) = sweep.sweep(&[]).await?;
    ensure!(code == Some(0), "sweep exit {code:?}: {audit}");
    ensure!(
        outcome(&audit) == "completed",
        "outcome {}",
        shown(&audit.outcome)
    );
    Ok(())
}

async fn freeze(sweep: &SweepCluster, proxy: &ApiProxy) -> Result<()> {
    let nics = [
        format!("{}-nic", sweep.machine("frza1")),
        format!("{}-nic", sweep.machine("frzb2")),
    ];
    let resources = nics
        .iter()
        .map(|nic| json!({ "type": "nic", "name": nic, "tags": sweep.ours(nic.trim_end_matches("-nic"), OLD) }))
        .collect();
    sweep.seed(resources).await?;

    proxy.stop();
    let (code, audit) = sweep.sweep(&[]).await?;
    ensure!(code == Some(3), "frozen sweep exit {code:?}: {audit}");
    ensure!(
        outcome(&audit) == "frozen",
        "outcome {}",
        shown(&audit.outcome)
    );
    let reason =
        outcome_reason(&audit).with_context(|| format!("a frozen sweep's reason: {audit}"))?;
    ensure!(reason.contains("Kubernetes API"), "reason {reason:?}");
    ensure!(
        audit.entries.is_empty(),
        "entries {}",
        shown(&audit.entries)
    );
    for nic in &nics {
        ensure!(
            sweep.exists("nic", nic).await?,
            "NIC {nic} deleted while frozen"
        );
    }

    proxy.resume().await?;
    let (code, audit) = sweep.sweep(&[]).await?;
    ensure!(code == Some(0), "sweep exit {code:?}: {audit}");
    let own = own_removals(&audit, &sweep.pool);
    ensure!(
        own.len() == 2 && own.values().all(|(_, r)| r == "deleted"),
        "{own:?}"
    );
    for nic in &nics {
        ensure!(!sweep.exists("nic", nic).await?, "NIC {nic} still exists");
    }
    Ok(())
}
