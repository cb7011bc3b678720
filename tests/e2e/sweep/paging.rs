//! The sweep's ARM paging guard: when a list of the resource group answers with a `nextLink`
//! that links back to the page just read (a sandbox `repeat_next_link` fault, scoped to this
//! test's own resource group so that no other test's list is touched), the sweep freezes with a
//! reason naming the repeat and deletes nothing — for the VM list (a page of VMs) and for the
//! disk list (an empty page) alike; once the lists page normally again, the same sweep deletes
//! the orphans.

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::repeating_list;
use serde_json::json;

use super::common::{
    OLD, SweepCluster, joined_node, outcome, outcome_reason, own_removals, remove_nodes,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_whose_next_link_repeats_freezes_the_sweep_and_deletes_nothing() -> Result<()> {
    let mut stack = Stack::load()?;
    stack.arm.resource_group = format!("nodewright-paging-{}", unique_suffix());
    let sweep = SweepCluster::start(&stack, None)?;
    let mut fault = None;
    let result = paging(&sweep, &mut fault).await;
    if let Some(id) = fault {
        sweep.sandbox.remove_fault(id).await?;
    }
    remove_nodes(&sweep, &[sweep.machine("pghl1")]).await?;
    sweep.clean_up().await?;
    result
}

async fn paging(sweep: &SweepCluster, fault: &mut Option<u64>) -> Result<()> {
    // A machine with its Node (so the brake's "no Node matched" does not hold), two orphan VMs
    // and an orphan NIC, all old; no disk.
    let healthy = sweep.machine("pghl1");
    let orphan_vms = [sweep.machine("pgor1"), sweep.machine("pgor2")];
    let orphan_nic = format!("{}-nic", sweep.machine("pgor3"));
    let mut resources =
        vec![json!({ "type": "vm", "name": healthy, "tags": sweep.ours(&healthy, OLD) })];
    for vm in &orphan_vms {
        resources.push(json!({ "type": "vm", "name": vm, "tags": sweep.ours(vm, OLD) }));
    }
    resources.push(json!({
        "type": "nic", "name": orphan_nic, "tags": sweep.ours(&sweep.machine("pgor3"), OLD),
    }));
    sweep.seed(resources).await?;
    joined_node(sweep, &healthy).await?;
    let everything = || {
        orphan_vms
            .iter()
            .map(|vm| ("vm", vm.clone()))
            .chain([("nic", orphan_nic.clone()), ("vm", healthy.clone())])
    };

    // The VM list's next link repeats, then the (empty) disk list's: each time the sweep
    // freezes, naming the repeat, and deletes nothing.
    for (operation, listing) in [("vm.list", "listing vms"), ("disk.list", "listing disks")] {
        let id = sweep
            .sandbox
            .add_fault(repeating_list(&sweep.stack.arm.resource_group, operation))
            .await?;
        *fault = Some(id);
        let (code, audit) = sweep.sweep(&[]).await?;
        ensure!(code == Some(3), "{operation}: sweep exit {code:?}: {audit}");
        ensure!(
            outcome(&audit) == "frozen",
            "{operation}: outcome {}",
            shown(&audit.outcome)
        );
        let reason = outcome_reason(&audit)
            .with_context(|| format!("{operation}: a frozen sweep's reason: {audit}"))?
            .to_lowercase();
        ensure!(
            reason.contains(&format!("{listing} came back to a page it had read"))
                && reason.contains("next link repeats"),
            "{operation}: reason {reason:?}"
        );
        ensure!(
            own_removals(&audit, &sweep.pool).is_empty(),
            "{operation}: a frozen sweep plans nothing: {audit}"
        );
        let rule = sweep.sandbox.fault(id).await?;
        let fired = rule.as_ref().and_then(|r| r["fired"].as_u64()).unwrap_or(0);
        ensure!(
            fired >= 2,
            "{operation}: the repeating page was served {fired} times: {rule:?}"
        );
        for (kind, name) in everything() {
            ensure!(
                sweep.exists(kind, &name).await?,
                "{kind} {name} deleted by a frozen sweep"
            );
        }
        sweep.sandbox.remove_fault(id).await?;
        *fault = None;
    }

    // The lists page normally again: the orphans go, the machine stays.
    let (code, audit) = sweep.sweep(&[]).await?;
    ensure!(code == Some(0), "sweep exit {code:?}: {audit}");
    ensure!(
        outcome(&audit) == "completed",
        "outcome {}",
        shown(&audit.outcome)
    );
    let removals = own_removals(&audit, &sweep.pool);
    let deleted = |kind: &str, name: &str, rule: &str| {
        removals.get(&(kind.to_owned(), name.to_owned()))
            == Some(&(rule.to_owned(), "deleted".to_owned()))
    };
    ensure!(
        removals.len() == 3
            && orphan_vms.iter().all(|vm| deleted("vm", vm, "orphan-vm"))
            && deleted("nic", &orphan_nic, "orphan-nic"),
        "removals {removals:?}"
    );
    for (kind, name) in everything() {
        let expected = name == healthy;
        ensure!(
            sweep.exists(kind, &name).await? == expected,
            "{kind} {name}: exists should be {expected}"
        );
    }
    Ok(())
}
