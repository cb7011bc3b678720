//! The `Compute` seam: the machines view (GuestState, joins_cluster), change notifications, and
//! disk attach/detach with latency, busy VMs and faults.

use std::time::Duration;

use nodewright_sandbox::arm::{FaultKind, FaultRule};
use nodewright_sandbox::compute::{Compute, ComputeError, GuestState};
use serde_json::json;

use crate::support::*;

async fn guest_of(sb: &Sandbox, name: &str) -> Res<GuestState> {
    sb.emulator
        .machines()
        .into_iter()
        .find(|m| m.name == name)
        .map(|m| m.guest)
        .ok_or_else(|| format!("no machine {name}").into())
}

async fn wait_for_guest(sb: &Sandbox, name: &str, want: GuestState) -> TestResult {
    let mut changes = sb.emulator.changes();
    for _ in 0..100 {
        if guest_of(sb, name).await? == want {
            return Ok(());
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), changes.changed()).await;
    }
    Err(format!("{name} never became {want:?}").into())
}

#[tokio::test]
async fn the_machines_view_boots_then_runs_and_is_down_when_deallocated() -> TestResult {
    let sb = Sandbox::start_with(short(0.2)).await?;
    sb.create_vm("m", &vm_body(None, &[])).await?;
    let machine = sb
        .emulator
        .machines()
        .into_iter()
        .find(|m| m.name == "m")
        .ok_or("no machine")?;
    assert_eq!(machine.id, vm_id("m"));
    assert_eq!(machine.computer_name, "node-a");
    assert_eq!(machine.location, "westeurope");
    assert_eq!(machine.zone.as_deref(), Some("2"));
    assert_eq!(machine.vm_size, "Standard_D4s_v5");
    assert_eq!(machine.tags["nodewright.io-pool"], "pool-a");
    assert_eq!(machine.custom_data.as_deref(), Some("hello world"));
    assert!(machine.joins_cluster);
    wait_for_guest(&sb, "m", GuestState::Running).await?;
    let resp = sb
        .post(
            &format!("{}/deallocate?api-version={VM_API}", vm_id("m")),
            &json!({}),
        )
        .await?;
    assert_eq!(guest_of(&sb, "m").await?, GuestState::Down);
    sb.finish(&resp).await?;
    assert_eq!(guest_of(&sb, "m").await?, GuestState::Down);
    let resp = sb
        .post(
            &format!("{}/start?api-version={VM_API}", vm_id("m")),
            &json!({}),
        )
        .await?;
    assert_eq!(guest_of(&sb, "m").await?, GuestState::Booting);
    sb.finish(&resp).await?;
    wait_for_guest(&sb, "m", GuestState::Running).await?;
    Ok(())
}

#[tokio::test]
async fn changes_fire_when_a_time_based_transition_completes_without_any_request() -> TestResult {
    let sb = Sandbox::start_with(short(0.2)).await?;
    let mut changes = sb.emulator.changes();
    sb.put(&vm("w"), &vm_body(None, &[])).await?;
    changes.borrow_and_update();
    // No further requests: only the background task can complete the create and the boot.
    tokio::time::timeout(Duration::from_secs(5), changes.changed()).await??;
    wait_for_guest(&sb, "w", GuestState::Running).await
}

#[tokio::test]
async fn changes_fire_when_a_created_vm_finishes_booting_without_any_request() -> TestResult {
    let sb = Sandbox::start_with(short(0.5)).await?;
    sb.create_vm("b", &vm_body(None, &[])).await?;
    let mut changes = sb.emulator.changes();
    changes.borrow_and_update();
    if guest_of(&sb, "b").await? == GuestState::Booting {
        // No further requests: only the background task can announce the finished boot.
        tokio::time::timeout(Duration::from_secs(5), changes.changed()).await??;
        assert_eq!(guest_of(&sb, "b").await?, GuestState::Running);
    }
    Ok(())
}

#[tokio::test]
async fn a_never_joins_rule_marks_matching_machines_as_not_joining() -> TestResult {
    let sb = Sandbox::start().await?;
    let mut rule = FaultRule::new(FaultKind::NeverJoins);
    rule.vm = Some("stuck-*".into());
    sb.emulator.add_fault(rule);
    sb.create_vm("stuck-1", &vm_body(None, &[])).await?;
    sb.create_vm("fine-1", &vm_body(None, &[])).await?;
    let machines = sb.emulator.machines();
    let joins = |name: &str| {
        machines
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.joins_cluster)
    };
    assert_eq!(joins("stuck-1"), Some(false));
    assert_eq!(joins("fine-1"), Some(true));
    Ok(())
}

#[tokio::test]
async fn compute_attach_then_detach_moves_the_disk_and_makes_the_vm_busy_meanwhile() -> TestResult {
    let sb = Sandbox::start_with(short(0.5)).await?;
    sb.create_disk("pv").await?;
    sb.create_vm("node", &vm_body(None, &[])).await?;
    let (vm_ref, disk_ref) = (vm_id("node"), disk_id("pv"));
    let attaching = {
        let emulator = sb.emulator.clone();
        let (v, d) = (vm_ref.clone(), disk_ref.clone());
        tokio::spawn(async move { emulator.attach_disk(&v, &d).await })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    let busy = sb.patch(&vm("node"), &json!({"tags": {"x": "y"}})).await?;
    assert_eq!(
        busy.status, 409,
        "a client's PATCH during a CSI attach gets 409"
    );
    attaching.await??;
    assert_eq!(
        sb.emulator.disk_managed_by(&disk_ref)?,
        Some(vm_ref.clone())
    );
    let got = sb.get(&disk("pv")).await?;
    assert_eq!(got.body["properties"]["diskState"], "Attached");
    sb.emulator.attach_disk(&vm_ref, &disk_ref).await?;
    sb.emulator.detach_disk(&vm_ref, &disk_ref).await?;
    assert_eq!(sb.emulator.disk_managed_by(&disk_ref)?, None);
    assert_eq!(
        sb.get(&disk("pv")).await?.body["properties"]["diskState"],
        "Unattached"
    );
    sb.emulator.detach_disk(&vm_ref, &disk_ref).await?;
    Ok(())
}

#[tokio::test]
async fn compute_refuses_unknown_ids_and_a_disk_attached_elsewhere() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("taken").await?;
    sb.create_vm("owner", &vm_body(None, &["taken"])).await?;
    sb.create_vm("thief", &vm_body(None, &[])).await?;
    let err = sb
        .emulator
        .attach_disk(&vm_id("thief"), &disk_id("taken"))
        .await;
    assert_eq!(
        err,
        Err(ComputeError::AttachedElsewhere {
            disk: disk_id("taken"),
            managed_by: vm_id("owner")
        })
    );
    let missing_vm = sb
        .emulator
        .attach_disk(&vm_id("ghost"), &disk_id("taken"))
        .await;
    assert!(matches!(missing_vm, Err(ComputeError::VmNotFound(_))));
    let missing_disk = sb
        .emulator
        .attach_disk(&vm_id("thief"), &disk_id("ghost"))
        .await;
    assert!(matches!(missing_disk, Err(ComputeError::DiskNotFound(_))));
    assert!(matches!(
        sb.emulator.disk_managed_by(&disk_id("ghost")),
        Err(ComputeError::DiskNotFound(_))
    ));
    Ok(())
}

#[tokio::test]
async fn compute_detach_hangs_while_a_hang_detach_rule_exists() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("h").await?;
    sb.create_vm("hn", &vm_body(None, &["h"])).await?;
    let mut rule = FaultRule::new(FaultKind::HangDetach);
    rule.operation = Some("csi.detach".into());
    let id = sb.emulator.add_fault(rule).id;
    let hung = tokio::time::timeout(
        Duration::from_millis(300),
        sb.emulator.detach_disk(&vm_id("hn"), &disk_id("h")),
    )
    .await;
    assert!(hung.is_err(), "the detach did not complete");
    assert!(sb.emulator.remove_fault(id));
    tokio::time::timeout(
        Duration::from_secs(5),
        sb.emulator.detach_disk(&vm_id("hn"), &disk_id("h")),
    )
    .await??;
    assert_eq!(sb.emulator.disk_managed_by(&disk_id("h"))?, None);
    Ok(())
}

#[tokio::test]
async fn a_fail_operation_rule_fails_a_compute_attach_with_its_code() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("f").await?;
    sb.create_vm("fn", &vm_body(None, &[])).await?;
    let mut rule = FaultRule::new(FaultKind::FailOperation);
    rule.operation = Some("csi.attach".into());
    rule.code = Some("AttachDiskWhileBeingDetached".into());
    sb.emulator.add_fault(rule);
    let result = sb.emulator.attach_disk(&vm_id("fn"), &disk_id("f")).await;
    assert!(
        matches!(result, Err(ComputeError::Failed { ref code, .. }) if code == "AttachDiskWhileBeingDetached"),
        "{result:?}"
    );
    assert_eq!(
        sb.emulator.disk_managed_by(&disk_id("f"))?,
        None,
        "a failed attach releases the disk"
    );
    Ok(())
}
