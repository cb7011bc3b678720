//! VM actions beyond power: `redeploy`, `reimage`, `simulateEviction`, and the provisioning and
//! power states the instance view passes through during every action (polled during each one
//! with the short latency profile, slow enough to see them).

use std::time::Duration;

use nodewright_sandbox::compute::{Compute, GuestState};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

/// The instance view URL of VM `name`.
fn view(name: &str) -> String {
    format!("{}/instanceView?api-version={VM_API}", vm_id(name))
}

/// An action URL of VM `name`.
fn action(name: &str, action: &str) -> String {
    format!("{}/{action}?api-version={VM_API}", vm_id(name))
}

/// The (provisioning, power) codes of an instance view, `("gone", "gone")` for a 404.
fn codes(resp: &Resp) -> (String, String) {
    if resp.status == 404 {
        return ("gone".into(), "gone".into());
    }
    let code = |i: usize| {
        resp.body["statuses"][i]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    (code(0), code(1))
}

/// Polls VM `name`'s instance view until the operation behind `started` ends (or, without one,
/// until `done` holds); returns the distinct (provisioning, power) states seen, in order.
async fn transitions(
    sb: &Sandbox,
    name: &str,
    operation: Option<&str>,
    done: impl Fn(&(String, String)) -> bool,
) -> Res<Vec<(String, String)>> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for _ in 0..600 {
        let current = codes(&sb.get(&view(name)).await?);
        if seen.last() != Some(&current) {
            seen.push(current.clone());
        }
        let finished = match operation {
            Some(url) => sb.get(url).await?.body["status"] != "InProgress",
            None => done(&current),
        };
        if finished {
            let last = codes(&sb.get(&view(name)).await?);
            if seen.last() != Some(&last) {
                seen.push(last);
            }
            return Ok(seen);
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    Err(format!("{name}: the action never finished; seen {seen:?}").into())
}

fn pair(provisioning: &str, power: &str) -> (String, String) {
    (
        format!("ProvisioningState/{provisioning}"),
        format!("PowerState/{power}"),
    )
}

fn guest_of(sb: &Sandbox, name: &str) -> Option<GuestState> {
    sb.emulator
        .machines()
        .into_iter()
        .find(|m| m.name == name)
        .map(|m| m.guest)
}

async fn wait_running(sb: &Sandbox, name: &str) -> TestResult {
    for _ in 0..200 {
        if guest_of(sb, name) == Some(GuestState::Running) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(format!("{name}'s guest never ran").into())
}

/// Starts `name`'s `act` and returns its `Azure-AsyncOperation` URL.
async fn start_action(sb: &Sandbox, name: &str, act: &str, body: Option<&Value>) -> Res<String> {
    let resp = sb
        .send_with(Method::POST, &action(name, act), body, &[])
        .await?;
    assert_eq!(resp.status, 202, "{act}: {resp:?}");
    assert!(resp.header("location").is_some(), "{act}: no Location");
    assert!(
        resp.header("retry-after").is_some(),
        "{act}: no Retry-After"
    );
    Ok(resp
        .header("azure-asyncoperation")
        .ok_or("no Azure-AsyncOperation")?
        .to_owned())
}

#[tokio::test]
async fn redeploy_stops_and_starts_a_running_vm_and_its_guest_boots_again() -> TestResult {
    let sb = Sandbox::start_with(short(2.0)).await?;
    sb.create_vm("rd", &vm_body(None, &[])).await?;
    wait_running(&sb, "rd").await?;
    let op = start_action(&sb, "rd", "redeploy", None).await?;
    assert_ne!(
        guest_of(&sb, "rd"),
        Some(GuestState::Running),
        "the guest is down"
    );
    let seen = transitions(&sb, "rd", Some(&op), |_| false).await?;
    assert_eq!(
        seen,
        [
            pair("updating", "stopping"),
            pair("updating", "starting"),
            pair("succeeded", "running"),
        ],
        "{seen:?}"
    );
    assert_eq!(sb.get(&op).await?.body["status"], "Succeeded");
    // The guest boots again after the redeploy.
    assert_eq!(guest_of(&sb, "rd"), Some(GuestState::Booting));
    wait_running(&sb, "rd").await?;
    assert_eq!(
        sb.emulator.stats().count("vm.redeploy", 202),
        1,
        "counted in the stats"
    );
    Ok(())
}

#[tokio::test]
async fn redeploying_a_deallocated_vm_starts_it_on_its_new_host() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("rdd", &vm_body(None, &[])).await?;
    let gone = sb.post(&action("rdd", "deallocate"), &json!({})).await?;
    sb.finish(&gone).await?;
    sb.emulator.set_latency(nodewright_sandbox::arm::Latency {
        profile: nodewright_sandbox::arm::LatencyProfile::Short,
        scale: 2.0,
    });
    let op = start_action(&sb, "rdd", "redeploy", Some(&json!({}))).await?;
    let seen = transitions(&sb, "rdd", Some(&op), |_| false).await?;
    assert_eq!(
        seen,
        [pair("updating", "starting"), pair("succeeded", "running")],
        "{seen:?}"
    );
    Ok(())
}

#[tokio::test]
async fn reimage_replaces_the_os_disk_by_its_delete_option_and_reboots_a_running_vm() -> TestResult
{
    let sb = Sandbox::start_with(short(1.0)).await?;
    // vm_body's OS disk has deleteOption Delete: the old disk goes.
    sb.create_vm("ri", &vm_body(None, &[])).await?;
    let before = sb.get(&vm("ri")).await?.body;
    let old_disk = before["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"]
        .as_str()
        .ok_or("no os disk")?
        .to_owned();
    let op = start_action(
        &sb,
        "ri",
        "reimage",
        Some(&json!({"exactVersion": "24.04.202511010", "osProfile": {"adminPassword": "S3cret!pass"}})),
    )
    .await?;
    let seen = transitions(&sb, "ri", Some(&op), |_| false).await?;
    assert_eq!(
        seen,
        [
            pair("updating", "stopping"),
            pair("updating", "starting"),
            pair("succeeded", "running"),
        ],
        "{seen:?}"
    );
    let after = sb.get(&vm("ri")).await?.body;
    let os = &after["properties"]["storageProfile"]["osDisk"];
    let new_disk = os["managedDisk"]["id"].as_str().ok_or("no os disk")?;
    assert_ne!(new_disk, old_disk, "a new OS disk");
    assert!(
        os["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("ri_OsDisk_1_")),
        "{os}"
    );
    assert_ne!(
        os["name"],
        before["properties"]["storageProfile"]["osDisk"]["name"]
    );
    assert_eq!(
        after["properties"]["storageProfile"]["imageReference"]["exactVersion"],
        "24.04.202511010"
    );
    assert!(
        after["properties"]["osProfile"]
            .get("adminPassword")
            .is_none(),
        "write-only"
    );
    let disk_now = sb
        .get(&format!("{new_disk}?api-version={DISK_API}"))
        .await?;
    assert_eq!(disk_now.body["managedBy"], vm_id("ri"));
    assert_eq!(disk_now.body["properties"]["diskState"], "Attached");
    let old = sb
        .get(&format!("{old_disk}?api-version={DISK_API}"))
        .await?;
    assert_eq!(
        old.status, 404,
        "deleteOption Delete: the old OS disk is deleted"
    );
    wait_running(&sb, "ri").await?;

    // deleteOption Detach: the old disk stays, detached.
    let mut body = vm_body(None, &[]);
    body["properties"]["storageProfile"]["osDisk"]["deleteOption"] = json!("Detach");
    sb.create_vm("rk", &body).await?;
    let kept = sb.get(&vm("rk")).await?.body["properties"]["storageProfile"]["osDisk"]
        ["managedDisk"]["id"]
        .as_str()
        .ok_or("no os disk")?
        .to_owned();
    let resp = sb
        .send_with(Method::POST, &action("rk", "reimage"), None, &[])
        .await?;
    assert_eq!(
        resp.status, 202,
        "an empty body is a plain reimage: {resp:?}"
    );
    assert_eq!(sb.finish(&resp).await?["status"], "Succeeded");
    let old = sb.get(&format!("{kept}?api-version={DISK_API}")).await?;
    assert_eq!(old.status, 200);
    assert_eq!(old.body["properties"]["diskState"], "Unattached");
    assert!(old.body.get("managedBy").is_none());
    Ok(())
}

#[tokio::test]
async fn reimage_is_refused_as_azure_refuses_it() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("rr", &vm_body(None, &[])).await?;
    let temp = sb
        .post(&action("rr", "reimage"), &json!({"tempDisk": true}))
        .await?;
    assert_eq!(
        (temp.status, temp.code()),
        (400, "InvalidParameter"),
        "{temp:?}"
    );
    assert_eq!(temp.body["error"]["target"], "tempDisk");
    assert_eq!(
        temp.body["error"]["message"],
        "The value of parameter tempDisk is invalid."
    );
    let other = sb
        .post(
            &action("rr", "reimage"),
            &json!({"osProfile": {"customData": "b3RoZXI="}}),
        )
        .await?;
    assert_eq!(
        (other.status, other.code()),
        (400, "BadRequest"),
        "{other:?}"
    );
    assert_eq!(
        other.body["error"]["message"],
        "Reimage requires the custom data provided should be same as the custom data provided while creating the Virtual Machine."
    );
    // The same custom data is accepted.
    let same = sb
        .post(
            &action("rr", "reimage"),
            &json!({"osProfile": {"customData": "aGVsbG8gd29ybGQ="}}),
        )
        .await?;
    assert_eq!(same.status, 202, "{same:?}");
    sb.finish(&same).await?;
    let missing = sb.post(&action("none", "reimage"), &json!({})).await?;
    assert_eq!((missing.status, missing.code()), (404, "ResourceNotFound"));
    Ok(())
}

#[tokio::test]
async fn simulate_eviction_is_for_spot_vms_only_and_deallocates_them_by_default() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("regular", &vm_body(None, &[])).await?;
    let refused = sb
        .post(&action("regular", "simulateEviction"), &json!({}))
        .await?;
    assert_eq!(
        (refused.status, refused.code()),
        (409, "OperationNotAllowed"),
        "{refused:?}"
    );
    assert_eq!(
        refused.body["error"]["message"],
        "Operation 'simulateEviction' is allowed only for Spot Virtual Machines"
    );

    let mut spot = vm_body(None, &[]);
    spot["properties"]["priority"] = json!("Spot");
    spot["properties"]["evictionPolicy"] = json!("Deallocate");
    spot["properties"]["billingProfile"] = json!({"maxPrice": -1});
    sb.create_vm("spot", &spot).await?;
    // No notice: the eviction starts with the request (`scheduled_events.rs` tests the notice).
    let notice = sb
        .put("/sandbox/eviction-notice", &json!({"seconds": 0}))
        .await?;
    assert_eq!(notice.status, 200, "{notice:?}");
    sb.emulator.set_latency(nodewright_sandbox::arm::Latency {
        profile: nodewright_sandbox::arm::LatencyProfile::Short,
        scale: 2.0,
    });
    let resp = sb
        .send_with(Method::POST, &action("spot", "simulateEviction"), None, &[])
        .await?;
    assert_eq!(resp.status, 204, "{resp:?}");
    assert_eq!(resp.body, Value::Null);
    assert!(resp.header("azure-asyncoperation").is_none());
    assert_eq!(
        guest_of(&sb, "spot"),
        Some(GuestState::Down),
        "the guest stops"
    );
    let busy = sb.post(&action("spot", "start"), &json!({})).await?;
    assert_eq!(busy.status, 409, "the eviction runs");
    let deallocated = pair("succeeded", "deallocated");
    let seen = transitions(&sb, "spot", None, |s| *s == deallocated).await?;
    assert_eq!(
        seen,
        [pair("updating", "deallocating"), deallocated.clone()],
        "{seen:?}"
    );
    assert_eq!(sb.get(&vm("spot")).await?.state(), "Succeeded");
    assert_eq!(sb.emulator.stats().count("vm.simulateEviction", 204), 1);
    assert_eq!(sb.emulator.stats().count("vm.simulateEviction", 409), 1);
    Ok(())
}

#[tokio::test]
async fn a_spot_vm_evicted_with_policy_delete_is_deleted_with_its_cascade() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_nic("sd-nic").await?;
    let mut spot = vm_body(Some("sd-nic"), &[]);
    spot["properties"]["priority"] = json!("Spot");
    spot["properties"]["evictionPolicy"] = json!("Delete");
    sb.create_vm("sd", &spot).await?;
    sb.put("/sandbox/eviction-notice", &json!({"seconds": 0}))
        .await?;
    sb.emulator.set_latency(nodewright_sandbox::arm::Latency {
        profile: nodewright_sandbox::arm::LatencyProfile::Short,
        scale: 2.0,
    });
    let resp = sb
        .post(&action("sd", "simulateEviction"), &json!({}))
        .await?;
    assert_eq!(resp.status, 204, "{resp:?}");
    let gone = ("gone".to_owned(), "gone".to_owned());
    let seen = transitions(&sb, "sd", None, |s| *s == gone).await?;
    assert_eq!(
        seen,
        [pair("deleting", "running"), gone.clone()],
        "{seen:?}"
    );
    assert_eq!(sb.get(&vm("sd")).await?.status, 404);
    assert_eq!(
        sb.get(&nic("sd-nic")).await?.status,
        404,
        "NIC deleteOption Delete"
    );
    Ok(())
}

#[tokio::test]
async fn the_instance_view_passes_through_azures_states_for_every_power_action() -> TestResult {
    let sb = Sandbox::start_with(short(2.0)).await?;
    let created = sb.put(&vm("tv"), &vm_body(None, &[])).await?;
    assert_eq!(created.status, 201);
    let op = created
        .header("azure-asyncoperation")
        .ok_or("no Azure-AsyncOperation")?
        .to_owned();
    let during = sb.get(&view("tv")).await?.body;
    assert_eq!(during["statuses"][0]["code"], "ProvisioningState/creating");
    assert_eq!(during["statuses"][0]["displayStatus"], "Creating");
    assert!(
        during["statuses"][0].get("time").is_none(),
        "no time while transitional"
    );
    let seen = transitions(&sb, "tv", Some(&op), |_| false).await?;
    assert_eq!(
        seen,
        [pair("creating", "starting"), pair("succeeded", "running")],
        "create: {seen:?}"
    );
    let done = sb.get(&view("tv")).await?.body;
    assert_eq!(
        done["statuses"][0]["displayStatus"],
        "Provisioning succeeded"
    );
    assert_eq!(done["statuses"][1]["displayStatus"], "VM running");
    let time = done["statuses"][0]["time"]
        .as_str()
        .ok_or("no time")?
        .to_owned();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        sb.get(&view("tv")).await?.body["statuses"][0]["time"],
        time,
        "the time of the last operation, not of the request"
    );

    for (act, expected) in [
        (
            "powerOff",
            [pair("updating", "stopping"), pair("succeeded", "stopped")],
        ),
        (
            "start",
            [pair("updating", "starting"), pair("succeeded", "running")],
        ),
        (
            "restart",
            [pair("updating", "starting"), pair("succeeded", "running")],
        ),
        (
            "deallocate",
            [
                pair("updating", "deallocating"),
                pair("succeeded", "deallocated"),
            ],
        ),
    ] {
        let op = start_action(&sb, "tv", act, Some(&json!({}))).await?;
        let during = sb.get(&view("tv")).await?.body;
        assert_eq!(during["statuses"][0]["displayStatus"], "Updating", "{act}");
        let seen = transitions(&sb, "tv", Some(&op), |_| false).await?;
        assert_eq!(seen, expected, "{act}");
    }

    let deleted = sb.delete(&vm("tv")).await?;
    assert_eq!(deleted.status, 202);
    let op = deleted
        .header("azure-asyncoperation")
        .ok_or("no Azure-AsyncOperation")?
        .to_owned();
    let seen = transitions(&sb, "tv", Some(&op), |_| false).await?;
    assert_eq!(
        seen,
        [
            pair("deleting", "deallocated"),
            ("gone".into(), "gone".into())
        ],
        "delete: {seen:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_failed_action_shows_provisioning_failed_with_its_code_and_message() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("ff", &vm_body(None, &[])).await?;
    let rule = sb
        .post(
            "/sandbox/faults",
            &json!({"kind": "fail_operation", "operation": "vm.redeploy", "code": "AllocationFailed", "message": "Allocation failed."}),
        )
        .await?;
    assert_eq!(rule.status, 201, "{rule:?}");
    let op = start_action(&sb, "ff", "redeploy", None).await?;
    assert_eq!(sb.wait_async(&op).await?["status"], "Failed");
    let status = &sb.get(&view("ff")).await?.body["statuses"][0];
    assert_eq!(status["code"], "ProvisioningState/failed/AllocationFailed");
    assert_eq!(status["level"], "Error");
    assert_eq!(status["displayStatus"], "Provisioning failed");
    assert_eq!(status["message"], "Allocation failed.");
    assert!(status["time"].is_string());
    Ok(())
}
