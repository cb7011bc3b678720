//! What Azure holds back after a failed create or a delete, and what a DELETE does to a create in
//! progress: a VM's NICs reserved for it for a window (`NicReservedForAnotherVm`), and a create
//! preempted by a DELETE (`Canceled`, `OperationPreempted`).

use std::time::Duration;

use nodewright_sandbox::arm::{EmulatorConfig, Latency, LatencyProfile};
use serde_json::json;

use crate::support::*;

/// The instant profile with a NIC reservation window of `seconds`.
fn reserving(seconds: u64) -> EmulatorConfig {
    EmulatorConfig {
        nic_reservation_seconds: seconds,
        ..instant()
    }
}

/// A VM body whose NIC `nic` is kept when the VM is deleted (`deleteOption: Detach`).
fn keeping_its_nic(nic: &str) -> serde_json::Value {
    let mut body = vm_body(Some(nic), &[]);
    body["properties"]["networkProfile"]["networkInterfaces"][0]["properties"]["deleteOption"] =
        json!("Detach");
    body
}

/// Deletes VM `name` and waits until the delete succeeded.
async fn delete_vm(sb: &Sandbox, name: &str) -> TestResult {
    let resp = sb.delete(&vm(name)).await?;
    assert_eq!(resp.status, 202, "{resp:?}");
    assert_eq!(sb.finish(&resp).await?["status"], "Succeeded");
    Ok(())
}

#[tokio::test]
async fn after_a_failed_create_the_nic_is_reserved_for_the_window_then_deleted() -> TestResult {
    let sb = Sandbox::start_with(reserving(1)).await?;
    sb.create_nic("quota-nic").await?;
    let rule = json!({"kind": "fail_operation", "operation": "vm.put", "code": "OperationNotAllowed",
        "message": "Operation could not be completed as it results in exceeding approved Total Regional Cores quota."});
    assert_eq!(sb.post("/sandbox/faults", &rule).await?.status, 201);
    let resp = sb
        .put(&vm("quota"), &vm_body(Some("quota-nic"), &[]))
        .await?;
    assert_eq!(resp.status, 201);
    assert_eq!(sb.finish(&resp).await?["status"], "Failed");

    // The failed VM holds the NIC no more, but Azure reserves it for that VM.
    let nic_now = sb.get(&nic("quota-nic")).await?;
    assert!(
        nic_now.body["properties"]["virtualMachine"].is_null(),
        "{nic_now:?}"
    );
    let before = sb.delete(&nic("quota-nic")).await?;
    assert_eq!(before.status, 400, "{before:?}");
    assert_eq!(before.code(), "NicReservedForAnotherVm");
    let message = before.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "Nic(s) in request is reserved for another Virtual Machine for 1 seconds."
        ) && message.ends_with(&format!("Reserved VM: {}", vm_id("quota"))),
        "{message}"
    );

    // Deleting the failed VM does not take the NIC with it (it no longer holds it) and holds it
    // for another window.
    delete_vm(&sb, "quota").await?;
    assert_eq!(
        sb.delete(&nic("quota-nic")).await?.code(),
        "NicReservedForAnotherVm"
    );

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let after = sb.delete(&nic("quota-nic")).await?;
    assert_eq!(after.status, 202, "{after:?}");
    let location = after.header("location").ok_or("no Location")?.to_owned();
    assert_eq!(sb.get(&location).await?.status, 204);
    assert_eq!(sb.get(&nic("quota-nic")).await?.status, 404);
    Ok(())
}

#[tokio::test]
async fn after_a_vm_delete_its_kept_nic_is_refused_to_another_vm_but_not_to_the_same_name()
-> TestResult {
    let sb = Sandbox::start_with(reserving(1)).await?;
    sb.create_nic("kept-nic").await?;
    sb.create_vm("first", &keeping_its_nic("kept-nic")).await?;
    delete_vm(&sb, "first").await?;

    let other = sb.put(&vm("second"), &keeping_its_nic("kept-nic")).await?;
    assert_eq!(other.status, 400, "{other:?}");
    assert_eq!(other.code(), "NicReservedForAnotherVm");
    assert_eq!(sb.get(&vm("second")).await?.status, 404);

    // The VM it is held for may have it back (a create retried under the same name).
    sb.create_vm("first", &keeping_its_nic("kept-nic")).await?;
    delete_vm(&sb, "first").await?;

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    sb.create_vm("second", &keeping_its_nic("kept-nic")).await?;
    Ok(())
}

#[tokio::test]
async fn the_default_window_is_azures_180_seconds_and_a_nic_deleted_with_its_vm_is_simply_gone()
-> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_nic("held-nic").await?;
    sb.create_vm("holder", &keeping_its_nic("held-nic")).await?;
    delete_vm(&sb, "holder").await?;
    let refused = sb.delete(&nic("held-nic")).await?;
    assert_eq!(refused.code(), "NicReservedForAnotherVm");
    let message = refused.body["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("for 180 seconds"), "{message}");

    // deleteOption Delete: the NIC goes with its VM and nothing is left to reserve.
    sb.create_vm_with_nic("plain", &[]).await?;
    delete_vm(&sb, "plain").await?;
    assert_eq!(sb.get(&nic("plain-nic")).await?.status, 404);
    assert_eq!(sb.delete(&nic("plain-nic")).await?.status, 204);
    Ok(())
}

#[tokio::test]
async fn a_delete_preempts_a_create_in_progress_which_ends_canceled_operation_preempted()
-> TestResult {
    // Realistic latency: the create takes at least a minute, so it is surely in progress.
    let sb = Sandbox::start_with(EmulatorConfig {
        latency: LatencyProfile::Realistic,
        ..reserving(1)
    })
    .await?;
    sb.emulator.set_latency(Latency {
        profile: LatencyProfile::Instant,
        scale: 1.0,
    });
    sb.create_nic("racing-nic").await?;
    sb.emulator.set_latency(Latency {
        profile: LatencyProfile::Realistic,
        scale: 1.0,
    });
    let create = sb
        .put(&vm("racing"), &vm_body(Some("racing-nic"), &[]))
        .await?;
    assert_eq!(create.status, 201);
    let create_op = create
        .header("azure-asyncoperation")
        .ok_or("no Azure-AsyncOperation")?
        .to_owned();
    assert_eq!(sb.get(&create_op).await?.body["status"], "InProgress");

    sb.emulator.set_latency(Latency {
        profile: LatencyProfile::Instant,
        scale: 1.0,
    });
    let delete = sb.delete(&vm("racing")).await?;
    assert_eq!(
        delete.status, 202,
        "the DELETE is accepted, not 409: {delete:?}"
    );

    let preempted = sb.get(&create_op).await?.body;
    assert_eq!(preempted["status"], "Canceled", "{preempted}");
    assert_eq!(preempted["error"]["code"], "OperationPreempted");
    assert!(preempted["endTime"].is_string());

    assert_eq!(sb.finish(&delete).await?["status"], "Succeeded");
    assert_eq!(sb.get(&vm("racing")).await?.status, 404);
    let disks = sb
        .get(&format!("/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/disks?api-version={DISK_API}"))
        .await?;
    assert_eq!(
        disks.body["value"],
        json!([]),
        "the OS disk went with the create"
    );
    // The canceled create's NIC is reserved, then free.
    assert_eq!(
        sb.delete(&nic("racing-nic")).await?.code(),
        "NicReservedForAnotherVm"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(sb.delete(&nic("racing-nic")).await?.status, 202);
    Ok(())
}

#[tokio::test]
async fn a_delete_still_gets_409_while_another_operation_than_the_create_runs() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm_with_nic("updating", &[]).await?;
    sb.emulator.set_latency(Latency {
        profile: LatencyProfile::Realistic,
        scale: 1.0,
    });
    let update = sb
        .patch(&vm("updating"), &json!({"tags": {"a": "b"}}))
        .await?;
    assert_eq!(update.status, 200);
    let delete = sb.delete(&vm("updating")).await?;
    assert_eq!(delete.status, 409, "{delete:?}");
    assert_eq!(delete.code(), "AnotherOperationInProgress");
    Ok(())
}
