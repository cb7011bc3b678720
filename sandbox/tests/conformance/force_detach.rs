//! `detachOption: ForceDetach`: accepted while a `hang_detach` rule holds the disk's normal
//! detach (the VM is busy), never held itself, and it ends the held detach; the busy VM still
//! refuses everything else with 409.

use std::time::{Duration, Instant};

use nodewright_sandbox::arm::{FaultKind, FaultRule};
use nodewright_sandbox::compute::Compute;
use serde_json::{Value, json};

use crate::support::*;

fn attach_detach(vm_name: &str) -> String {
    format!(
        "{}/attachDetachDataDisks?api-version={VM_API}",
        vm_id(vm_name)
    )
}

/// A data-disk entry for `name` at `lun`, marked for a force detach.
fn force_entry(name: &str, lun: u64) -> Value {
    json!({"lun": lun, "createOption": "Attach", "managedDisk": {"id": disk_id(name)},
           "toBeDetached": true, "detachOption": "ForceDetach"})
}

/// Starts a normal detach of `disks` from `vm_name` by `attachDetachDataDisks`; returns the
/// answer (202 with `Location` and `Azure-AsyncOperation`).
async fn detach(sb: &Sandbox, vm_name: &str, disks: &[&str]) -> Res<Resp> {
    let items: Vec<Value> = disks
        .iter()
        .map(|d| json!({"diskId": disk_id(d)}))
        .collect();
    let resp = sb
        .post(
            &attach_detach(vm_name),
            &json!({"dataDisksToDetach": items}),
        )
        .await?;
    assert_eq!(resp.status, 202, "{resp:?}");
    Ok(resp)
}

async fn status_of(sb: &Sandbox, resp: &Resp) -> Res<Value> {
    let url = resp
        .header("azure-asyncoperation")
        .ok_or("no Azure-AsyncOperation")?;
    Ok(sb.get(url).await?.body["status"].clone())
}

async fn add_hang_rule(sb: &Sandbox, rule: Value) -> Res<u64> {
    let resp = sb.post("/sandbox/faults", &rule).await?;
    assert_eq!(resp.status, 201, "{resp:?}");
    Ok(resp.body["id"].as_u64().ok_or("no id")?)
}

async fn rule(sb: &Sandbox, id: u64) -> Res<Value> {
    let rules = sb.get("/sandbox/faults").await?.body["rules"].clone();
    rules
        .as_array()
        .and_then(|rules| rules.iter().find(|r| r["id"] == id).cloned())
        .ok_or_else(|| format!("no rule {id}").into())
}

async fn assert_unattached(sb: &Sandbox, name: &str) -> TestResult {
    let got = sb.get(&disk(name)).await?.body;
    assert_eq!(got["properties"]["diskState"], "Unattached", "{got}");
    assert!(got.get("managedBy").is_none(), "managedBy is gone: {got}");
    Ok(())
}

fn listed_disks(vm_body: &Value) -> Vec<String> {
    vm_body["properties"]["storageProfile"]["dataDisks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["managedDisk"]["id"].as_str().map(str::to_ascii_lowercase))
        .collect()
}

#[tokio::test]
async fn a_force_detach_patch_is_accepted_while_a_hang_rule_holds_the_normal_detach_and_ends_it()
-> TestResult {
    let sb = Sandbox::start_with(short(0.5)).await?;
    sb.create_disk("stuck").await?;
    sb.create_disk("keep").await?;
    sb.create_vm("fd1", &vm_body(None, &["stuck", "keep"]))
        .await?;
    let rule_id = add_hang_rule(&sb, json!({"kind": "hang_detach", "vm": "fd1"})).await?;
    let held = detach(&sb, "fd1", &["stuck"]).await?;
    let held_location = held.header("location").ok_or("no Location")?.to_owned();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        sb.get(&held_location).await?.status,
        202,
        "the detach hangs"
    );
    assert_eq!(status_of(&sb, &held).await?, "InProgress");
    let refused = sb.patch(&vm("fd1"), &json!({"tags": {"x": "y"}})).await?;
    assert_eq!(refused.status, 409, "the VM is busy: {refused:?}");

    let vm_now = sb.get(&vm("fd1")).await?.body;
    let mut entries = vm_now["properties"]["storageProfile"]["dataDisks"].clone();
    let list = entries.as_array_mut().ok_or("no dataDisks")?;
    for entry in list.iter_mut() {
        if entry["managedDisk"]["id"]
            .as_str()
            .is_some_and(|id| id.eq_ignore_ascii_case(&disk_id("stuck")))
        {
            entry["toBeDetached"] = json!(true);
            entry["detachOption"] = json!("ForceDetach");
        }
    }
    let started = Instant::now();
    let forced = sb
        .patch(
            &vm("fd1"),
            &json!({"properties": {"storageProfile": {"dataDisks": entries}}}),
        )
        .await?;
    assert_eq!(
        forced.status, 200,
        "a force detach of a disk stuck detaching is accepted: {forced:?}"
    );
    assert!(forced.header("azure-asyncoperation").is_some());
    assert_ne!(
        forced.header("azure-asyncoperation"),
        held.header("azure-asyncoperation"),
        "the force detach is an operation of its own"
    );
    let done = sb.finish(&forced).await?;
    assert_eq!(done["status"], "Succeeded", "{done}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the force detach took the detach latency, not forever: {:?}",
        started.elapsed()
    );

    assert_unattached(&sb, "stuck").await?;
    let vm_after = sb.get(&vm("fd1")).await?;
    assert_eq!(
        listed_disks(&vm_after.body),
        vec![disk_id("keep").to_ascii_lowercase()],
        "the VM no longer lists the force-detached disk"
    );
    assert_eq!(vm_after.state(), "Succeeded");
    assert_eq!(
        sb.get(&disk("keep")).await?.body["managedBy"],
        vm_id("fd1"),
        "the other disk stays attached"
    );
    let ended = sb.get(&held_location).await?;
    assert_eq!(ended.status, 200, "the held detach ended: {ended:?}");
    assert_eq!(status_of(&sb, &held).await?, "Succeeded");
    let tagged = sb.patch(&vm("fd1"), &json!({"tags": {"x": "y"}})).await?;
    assert_eq!(tagged.status, 200, "the VM is no longer busy: {tagged:?}");
    sb.finish(&tagged).await?;
    let rule = rule(&sb, rule_id).await?;
    assert_eq!(
        rule["fired"], 1,
        "the rule stays and held only the normal detach: {rule}"
    );
    Ok(())
}

#[tokio::test]
async fn a_force_detach_by_attach_detach_data_disks_releases_a_disk_whose_csi_detach_hangs()
-> TestResult {
    let sb = Sandbox::start_with(short(0.3)).await?;
    sb.create_disk("pvc").await?;
    sb.create_vm("fd2", &vm_body(None, &["pvc"])).await?;
    let mut hang = FaultRule::new(FaultKind::HangDetach);
    hang.operation = Some("csi.detach".into());
    let rule_id = sb.emulator.add_fault(hang).id;
    let detaching = {
        let emulator = sb.emulator.clone();
        tokio::spawn(async move { emulator.detach_disk(&vm_id("fd2"), &disk_id("pvc")).await })
    };
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!detaching.is_finished(), "the CSI detach hangs");
    assert_eq!(sb.get(&disk("pvc")).await?.body["managedBy"], vm_id("fd2"));

    let forced = sb
        .post(
            &attach_detach("fd2"),
            &json!({"dataDisksToDetach": [{"diskId": disk_id("pvc"), "detachOption": "ForceDetach"}]}),
        )
        .await?;
    assert_eq!(forced.status, 202, "{forced:?}");
    let location = forced.header("location").ok_or("no Location")?.to_owned();
    let done = sb.finish(&forced).await?;
    assert_eq!(done["status"], "Succeeded", "{done}");
    let result = sb.get(&location).await?;
    assert_eq!(result.status, 200);
    assert_eq!(result.body["dataDisks"], json!([]), "{result:?}");

    tokio::time::timeout(Duration::from_secs(5), detaching).await???;
    assert_unattached(&sb, "pvc").await?;
    assert_eq!(sb.emulator.disk_managed_by(&disk_id("pvc"))?, None);
    let tagged = sb.patch(&vm("fd2"), &json!({"tags": {"x": "y"}})).await?;
    assert_eq!(tagged.status, 200, "the VM is no longer busy: {tagged:?}");
    assert!(sb.emulator.faults().iter().any(|r| r.id == rule_id));
    Ok(())
}

#[tokio::test]
async fn a_force_detach_is_never_held_by_a_hang_detach_rule() -> TestResult {
    let sb = Sandbox::start().await?;
    for name in ["a", "b", "c"] {
        sb.create_disk(name).await?;
    }
    sb.create_vm("fd3", &vm_body(None, &["a", "b", "c"]))
        .await?;
    let rule_id = add_hang_rule(&sb, json!({"kind": "hang_detach"})).await?;

    let patched = sb
        .patch(
            &vm("fd3"),
            &json!({"properties": {"storageProfile": {"dataDisks": [
                force_entry("a", 0),
                {"lun": 1, "createOption": "Attach", "managedDisk": {"id": disk_id("b")}},
                {"lun": 2, "createOption": "Attach", "managedDisk": {"id": disk_id("c")}},
            ]}}}),
        )
        .await?;
    assert_eq!(patched.status, 200, "{patched:?}");
    assert_eq!(sb.finish(&patched).await?["status"], "Succeeded");
    assert_unattached(&sb, "a").await?;

    let posted = sb
        .post(
            &attach_detach("fd3"),
            &json!({"dataDisksToDetach": [{"diskId": disk_id("b"), "detachOption": "ForceDetach"}]}),
        )
        .await?;
    assert_eq!(posted.status, 202, "{posted:?}");
    assert_eq!(sb.finish(&posted).await?["status"], "Succeeded");
    assert_unattached(&sb, "b").await?;
    assert_eq!(
        rule(&sb, rule_id).await?["matched"],
        0,
        "force detaches are not checked against hang_detach rules"
    );

    let normal = detach(&sb, "fd3", &["c"]).await?;
    let location = normal.header("location").ok_or("no Location")?.to_owned();
    assert_eq!(
        sb.get(&location).await?.status,
        202,
        "a normal detach is still held"
    );
    assert_eq!(rule(&sb, rule_id).await?["fired"], 1);
    Ok(())
}

#[tokio::test]
async fn a_vm_busy_with_a_held_detach_refuses_everything_but_a_force_detach_with_409() -> TestResult
{
    let sb = Sandbox::start_with(short(1.0)).await?;
    for name in ["h", "other", "spare"] {
        sb.create_disk(name).await?;
    }
    sb.create_vm("fd4", &vm_body(None, &["h", "other"])).await?;
    add_hang_rule(
        &sb,
        json!({"kind": "hang_detach", "operation": "vm.attachDetachDataDisks"}),
    )
    .await?;
    detach(&sb, "fd4", &["h"]).await?;

    let normal_too = sb
        .post(
            &attach_detach("fd4"),
            &json!({"dataDisksToDetach": [
                {"diskId": disk_id("h"), "detachOption": "ForceDetach"},
                {"diskId": disk_id("other")},
            ]}),
        )
        .await?;
    assert_eq!(
        normal_too.status, 409,
        "a normal detach too: {normal_too:?}"
    );
    let attach_too = sb
        .post(
            &attach_detach("fd4"),
            &json!({"dataDisksToAttach": [{"diskId": disk_id("spare")}],
                    "dataDisksToDetach": [{"diskId": disk_id("h"), "detachOption": "ForceDetach"}]}),
        )
        .await?;
    assert_eq!(attach_too.status, 409, "an attach too: {attach_too:?}");
    let with_tags = sb
        .patch(
            &vm("fd4"),
            &json!({"tags": {"x": "y"}, "properties": {"storageProfile": {"dataDisks": [
                force_entry("h", 0),
                {"lun": 1, "createOption": "Attach", "managedDisk": {"id": disk_id("other")}},
            ]}}}),
        )
        .await?;
    assert_eq!(with_tags.status, 409, "a tag change too: {with_tags:?}");
    assert_eq!(with_tags.code(), "AnotherOperationInProgress");
    let dropping_other = sb
        .patch(
            &vm("fd4"),
            &json!({"properties": {"storageProfile": {"dataDisks": [force_entry("h", 0)]}}}),
        )
        .await?;
    assert_eq!(
        dropping_other.status, 409,
        "a normal detach of the other disk too: {dropping_other:?}"
    );

    let body = json!({"properties": {"storageProfile": {"dataDisks": [
        force_entry("h", 0),
        {"lun": 1, "createOption": "Attach", "managedDisk": {"id": disk_id("other")}},
    ]}}});
    let forced = sb.patch(&vm("fd4"), &body).await?;
    assert_eq!(forced.status, 200, "{forced:?}");
    let again = sb
        .post(
            &attach_detach("fd4"),
            &json!({"dataDisksToDetach": [{"diskId": disk_id("h"), "detachOption": "ForceDetach"}]}),
        )
        .await?;
    assert_eq!(again.status, 202, "{again:?}");
    assert_eq!(
        again.header("azure-asyncoperation"),
        forced.header("azure-asyncoperation"),
        "a disk being force-detached is not detached twice: the running force detach answers"
    );
    assert_eq!(sb.finish(&forced).await?["status"], "Succeeded");
    assert_unattached(&sb, "h").await?;
    assert_eq!(
        sb.get(&disk("other")).await?.body["properties"]["diskState"],
        "Attached"
    );
    Ok(())
}

#[tokio::test]
async fn a_held_csi_detach_ends_once_its_disk_is_force_detached_though_its_operation_still_hangs()
-> TestResult {
    let sb = Sandbox::start_with(short(0.3)).await?;
    sb.create_disk("d1").await?;
    sb.create_disk("d2").await?;
    sb.create_vm("fd5", &vm_body(None, &["d1", "d2"])).await?;
    let rule_id = add_hang_rule(&sb, json!({"kind": "hang_detach"})).await?;
    // One ARM detach of both disks hangs; a CSI detach of d1 waits for it.
    let held = detach(&sb, "fd5", &["d1", "d2"]).await?;
    let csi = {
        let emulator = sb.emulator.clone();
        tokio::spawn(async move { emulator.detach_disk(&vm_id("fd5"), &disk_id("d1")).await })
    };
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !csi.is_finished(),
        "the CSI detach waits for the held detach"
    );

    let forced = sb
        .post(
            &attach_detach("fd5"),
            &json!({"dataDisksToDetach": [{"diskId": disk_id("d1"), "detachOption": "ForceDetach"}]}),
        )
        .await?;
    assert_eq!(forced.status, 202, "{forced:?}");
    assert_eq!(sb.finish(&forced).await?["status"], "Succeeded");
    tokio::time::timeout(Duration::from_secs(5), csi).await???;
    assert_unattached(&sb, "d1").await?;

    assert_eq!(
        status_of(&sb, &held).await?,
        "InProgress",
        "d2's detach is still held"
    );
    assert_eq!(
        sb.patch(&vm("fd5"), &json!({"tags": {"x": "y"}}))
            .await?
            .status,
        409,
        "so the VM is still busy"
    );
    assert_eq!(
        sb.get(&vm("fd5")).await?.state(),
        "Updating",
        "and still updating"
    );
    assert_eq!(
        sb.delete(&format!("/sandbox/faults/{rule_id}"))
            .await?
            .status,
        204
    );
    assert_eq!(sb.finish(&held).await?["status"], "Succeeded");
    assert_unattached(&sb, "d2").await?;
    assert_eq!(
        listed_disks(&sb.get(&vm("fd5")).await?.body),
        Vec::<String>::new()
    );
    Ok(())
}

#[tokio::test]
async fn a_vm_stuck_detaching_can_be_powered_off_once_a_force_detach_ended_the_held_detach()
-> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("p").await?;
    sb.create_vm("fd6", &vm_body(None, &["p"])).await?;
    add_hang_rule(&sb, json!({"kind": "hang_detach"})).await?;
    let held = detach(&sb, "fd6", &["p"]).await?;
    let power_off = format!(
        "{}/powerOff?api-version={VM_API}&skipShutdown=true",
        vm_id("fd6")
    );
    let refused = sb.post(&power_off, &json!({})).await?;
    assert_eq!(
        refused.status, 409,
        "busy with the held detach: {refused:?}"
    );
    assert_eq!(refused.code(), "AnotherOperationInProgress");

    let forced = sb
        .post(
            &attach_detach("fd6"),
            &json!({"dataDisksToDetach": [{"diskId": disk_id("p"), "detachOption": "ForceDetach"}]}),
        )
        .await?;
    assert_eq!(sb.finish(&forced).await?["status"], "Succeeded");
    assert_eq!(status_of(&sb, &held).await?, "Succeeded");
    let accepted = sb.post(&power_off, &json!({})).await?;
    assert_eq!(accepted.status, 202, "{accepted:?}");
    assert!(accepted.header("location").is_some());
    let down = sb
        .emulator
        .machines()
        .into_iter()
        .find(|m| m.name == "fd6")
        .map(|m| m.guest);
    assert_eq!(
        down,
        Some(nodewright_sandbox::compute::GuestState::Down),
        "the joiner stops the heartbeat of a VM being powered off"
    );
    assert_eq!(sb.finish(&accepted).await?["status"], "Succeeded");
    Ok(())
}
