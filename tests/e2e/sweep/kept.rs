//! A machine kept by a failed create (`machine create --keep-on-failure`) stays kept: its VM,
//! NIC and OS disk carry the `nodewright.io-kept` marker, the sweep reports them `kept` and
//! deletes nothing of the machine; once the marker is removed, the next sweep removes it (after
//! an approval: with no Node for the cluster's only VM, the plausibility brake holds it). A
//! `--grace` shorter than the creation timeout the machine's pool recorded is refused.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_activities::azure::ArmClient;
use nodewright_model::arm::poll_schedule::OperationKind;
use nodewright_model::ownership::{TAG_CREATION_DEADLINE, TAG_CREATION_ENDED, TAG_KEPT};
use nodewright_model::sweep::SweepPhase;
use nodewright_tests::Stack;
use nodewright_tests::documents::shown;
use nodewright_tests::machines::{create_machine, write_pool_file};
use serde_json::json;

use super::common::{
    SweepCluster, await_phase, kept_rule, outcome, outcome_reason, own_removals,
    sweep_in_background,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_kept_by_a_failed_create_stays_until_its_marker_is_removed() -> Result<()> {
    let stack = Stack::load()?;
    let sweep = SweepCluster::start(&stack, None)?;
    let machine = sweep.machine("keptm");
    // The VM boots but its Node never joins: the create fails at its creation timeout.
    let fault = sweep
        .sandbox
        .add_fault(json!({ "kind": "never_joins", "vm": machine }))
        .await?;
    let result = kept(&sweep, &machine).await;
    sweep.sandbox.remove_fault(fault).await?;
    sweep.clean_up().await?;
    result
}

async fn kept(sweep: &SweepCluster, machine: &str) -> Result<()> {
    let pool_file = write_pool_file(&sweep.stack, &sweep.pool, "20s")?;
    let created = create_machine(
        &sweep.stack,
        &sweep.task_queue,
        &pool_file,
        machine,
        &["--wait", "--keep-on-failure"],
    )?;
    created.expect_code(3)?;
    ensure!(
        created
            .stderr
            .contains("kept the VM, NIC, disk and Node for debugging")
            && created.stderr.contains(TAG_KEPT),
        "the failure says what it kept and how: {}",
        created.stderr
    );
    let (nic, disk) = (format!("{machine}-nic"), format!("{machine}-osdisk"));
    let arm = sweep.stack.arm_client()?;
    let vm = arm.get_vm(machine).await?;
    let marker = vm.tags.get(TAG_KEPT).cloned().unwrap_or_default();
    ensure!(
        marker.contains("create failed at step register-node"),
        "the VM's marker names the step: {:?}",
        vm.tags
    );
    ensure!(
        vm.tags.contains_key(TAG_CREATION_ENDED) && vm.tags.contains_key(TAG_CREATION_DEADLINE),
        "the VM records its create's deadline and end: {:?}",
        vm.tags
    );
    ensure!(arm.get_nic(&nic).await?.tags.contains_key(TAG_KEPT));
    ensure!(arm.get_disk(&disk).await?.tags.contains_key(TAG_KEPT));

    // A grace shorter than the creation timeout its pool recorded (20s) is refused, naming
    // both; nothing is deleted.
    let (code, audit) = sweep.sweep(&["--grace", "10s"]).await?;
    let reason = outcome_reason(&audit).unwrap_or_default();
    ensure!(
        code == Some(2)
            && outcome(&audit) == "refused"
            && reason.contains("--grace 10s")
            && reason.contains("20s")
            && reason.contains(&sweep.pool),
        "a grace below the floor: exit {code:?}: {audit}"
    );
    for (kind, name) in [("vm", machine), ("nic", &nic), ("disk", &disk)] {
        ensure!(sweep.exists(kind, name).await?, "{kind} {name} was deleted");
    }
    // Ages count from the create's end: past the grace after it, nothing is young.
    let ended = vm.tags.get(TAG_CREATION_ENDED).cloned().unwrap_or_default();
    let ended = chrono::DateTime::parse_from_rfc3339(&ended).context("the end tag")?;
    let past_grace = ended.with_timezone(&chrono::Utc) + chrono::Duration::seconds(22);
    if let Ok(wait) = (past_grace - chrono::Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    }

    // Past the grace, the kept machine is reported kept and nothing of it is removed.
    let grace = ["--grace", "20s"];
    let (code, audit) = sweep.sweep(&grace).await?;
    ensure!(code == Some(0), "sweep exit {code:?}: {audit}");
    ensure!(
        outcome(&audit) == "completed",
        "outcome: {}",
        shown(&audit.outcome)
    );
    let removals = own_removals(&audit, &sweep.pool);
    ensure!(removals.is_empty(), "removed a kept machine: {removals:?}");
    ensure!(
        kept_rule(&audit, "vm", machine).as_deref() == Some("kept"),
        "the VM's rule: {audit}"
    );
    for (kind, name) in [("vm", machine), ("nic", &nic), ("disk", &disk)] {
        ensure!(sweep.exists(kind, name).await?, "{kind} {name} was deleted");
    }

    // The marker removed from the VM, NIC and disk, the next sweep removes the machine — once
    // approved: this cluster's only VM has no Node, so the plausibility brake holds the plan.
    release(&arm, machine).await?;
    let running = sweep_in_background(sweep, &grace);
    await_phase(sweep, SweepPhase::Braked).await?;
    sweep.cli(&["sweep", "approve"]).await?.expect_code(0)?;
    let (code, audit) = running.await??;
    ensure!(code == Some(0), "sweep exit {code:?}: {audit}");
    let removals = own_removals(&audit, &sweep.pool);
    let vm_removal = removals.get(&("vm".to_owned(), machine.to_owned()));
    ensure!(
        vm_removal == Some(&("orphan-vm".to_owned(), "deleted".to_owned())),
        "released, the VM is an orphan: {removals:?}"
    );
    for (kind, name) in [("vm", machine), ("nic", &nic), ("disk", &disk)] {
        ensure!(!sweep.exists(kind, name).await?, "{kind} {name} is left");
    }
    Ok(())
}

/// Removes the kept marker from the machine's VM, NIC and OS disk, as a person would (`az tag
/// update --operation Delete`): each body written back without the tag, its operation awaited.
async fn release(arm: &ArmClient, machine: &str) -> Result<()> {
    let wait = Duration::from_secs(60);
    let mut vm = arm.get_vm(machine).await?;
    vm.tags.remove(TAG_KEPT);
    let submitted = arm.put_vm(machine, &vm).await?;
    if let Some(operation) = &submitted.operation {
        arm.wait(operation, OperationKind::VmUpdate, wait)
            .await
            .context("VM tag removal")?;
    }
    let nic_name = format!("{machine}-nic");
    let mut nic = arm.get_nic(&nic_name).await?;
    nic.tags.remove(TAG_KEPT);
    let submitted = arm.put_nic(&nic_name, &nic).await?;
    if let Some(operation) = &submitted.operation {
        arm.wait(operation, OperationKind::Nic, wait)
            .await
            .context("NIC tag removal")?;
    }
    let disk_name = format!("{machine}-osdisk");
    let mut disk = arm.get_disk(&disk_name).await?;
    disk.tags.remove(TAG_KEPT);
    let submitted = arm.put_disk(&disk_name, &disk).await?;
    if let Some(operation) = &submitted.operation {
        arm.wait(operation, OperationKind::Disk, wait)
            .await
            .context("disk tag removal")?;
    }
    Ok(())
}
