//! Seeded test fixtures (`POST /sandbox/seed`, `DELETE /sandbox/seed?prefix=`): resources written
//! straight into the state in steady state, served by the ordinary ARM routes (GET, list with
//! paging, PUT, PATCH, DELETE with its operation), never joining the cluster, refused field by
//! field when invalid, removed by name prefix.

use std::collections::BTreeSet;
use std::time::Duration;

use nodewright_sandbox::arm::EmulatorConfig;
use nodewright_sandbox::compute::{Compute, GuestState};
use serde_json::{Value, json};

use crate::support::*;

/// A seed request in the suite's subscription and resource group.
fn seed_body(resources: Value, generate: Value) -> Value {
    json!({"subscriptionId": SUB, "resourceGroup": RG, "resources": resources, "generate": generate})
}

async fn seed(sb: &Sandbox, body: &Value) -> Res<u64> {
    let resp = sb.post("/sandbox/seed", body).await?;
    assert_eq!(resp.status, 200, "{resp:?}");
    Ok(resp.body["seeded"].as_u64().ok_or("no seeded count")?)
}

/// Every item of a list, following `nextLink`; also the number of pages.
async fn list_all(sb: &Sandbox, collection: &str) -> Res<(Vec<Value>, usize)> {
    let mut url = Some(collection.to_owned());
    let (mut items, mut pages) = (Vec::new(), 0);
    while let Some(next) = url {
        let resp = sb.get(&next).await?;
        assert_eq!(resp.status, 200, "{resp:?}");
        items.extend(resp.body["value"].as_array().cloned().unwrap_or_default());
        pages += 1;
        url = resp.body["nextLink"].as_str().map(str::to_owned);
    }
    Ok((items, pages))
}

fn vms() -> String {
    format!(
        "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachines?api-version={VM_API}"
    )
}
fn nics() -> String {
    format!(
        "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/networkInterfaces?api-version={NIC_API}"
    )
}
fn disks() -> String {
    format!(
        "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/disks?api-version={DISK_API}"
    )
}

/// The envelope every seeded resource has, and its ETag header matching the body.
fn assert_envelope(resp: &Resp, id: &str, name: &str, kind: &str, tags: &Value) {
    assert_eq!(resp.status, 200, "{resp:?}");
    let body = &resp.body;
    assert_eq!(body["id"], id);
    assert_eq!(body["name"], name);
    assert_eq!(body["type"], kind);
    assert_eq!(body["location"], "westeurope");
    assert_eq!(&body["tags"], tags);
    assert_eq!(resp.state(), "Succeeded");
    let etag = body["etag"].as_str().unwrap_or_default();
    assert!(etag.starts_with('"') && etag.len() > 2, "{body}");
    assert_eq!(resp.header("etag"), Some(etag));
}

#[tokio::test]
async fn a_seeded_vm_is_a_steady_vm_that_get_and_list_return_and_delete_removes() -> TestResult {
    let sb = Sandbox::start().await?;
    let tags = json!({"nodewright.io-cluster": "c1", "created": "2025-01-01T10:00:00Z"});
    let body = seed_body(
        json!([{"type": "vm", "name": "old-vm", "tags": tags}]),
        json!([]),
    );
    assert_eq!(seed(&sb, &body).await?, 1);

    let got = sb.get(&vm("old-vm")).await?;
    assert_envelope(
        &got,
        &vm_id("old-vm"),
        "old-vm",
        "Microsoft.Compute/virtualMachines",
        &tags,
    );
    let p = &got.body["properties"];
    assert_eq!(p["hardwareProfile"]["vmSize"], "Standard_D2s_v5");
    assert_eq!(p["osProfile"]["computerName"], "old-vm");
    assert!(p["storageProfile"].get("osDisk").is_none(), "{p}");
    assert_eq!(p["storageProfile"]["dataDisks"], json!([]));
    assert_eq!(p["networkProfile"]["networkInterfaces"], json!([]));
    let created = p["timeCreated"].as_str().ok_or("no timeCreated")?;
    let age = chrono::Utc::now()
        - chrono::DateTime::parse_from_rfc3339(created)?.with_timezone(&chrono::Utc);
    assert!(age < chrono::Duration::minutes(1), "{created}");

    let (listed, _) = list_all(&sb, &vms()).await?;
    assert_eq!(listed, vec![got.body.clone()], "list and GET agree");

    let expanded = sb
        .get(&format!("{}&$expand=instanceView", vm("old-vm")))
        .await?;
    let statuses = &expanded.body["properties"]["instanceView"]["statuses"];
    assert_eq!(statuses[0]["code"], "ProvisioningState/succeeded");
    assert_eq!(statuses[1]["code"], "PowerState/running");

    let deleted = sb.delete(&vm("old-vm")).await?;
    assert_eq!(deleted.status, 202, "{deleted:?}");
    assert_eq!(sb.finish(&deleted).await?["status"], "Succeeded");
    assert_eq!(sb.get(&vm("old-vm")).await?.status, 404);
    Ok(())
}

#[tokio::test]
async fn seeded_nics_and_disks_are_steady_and_attached_ones_name_their_vm() -> TestResult {
    let sb = Sandbox::start().await?;
    let body = seed_body(
        json!([
            {"type": "nic", "name": "lone-nic", "tags": {"a": "1"}},
            {"type": "nic", "name": "used-nic", "attachedTo": "some-vm"},
            {"type": "disk", "name": "lone-disk", "tags": {"b": "2"}},
            {"type": "disk", "name": "used-disk", "attachedTo": "some-vm", "diskSizeGB": 128},
        ]),
        json!([]),
    );
    assert_eq!(seed(&sb, &body).await?, 4);

    let lone_nic = sb.get(&nic("lone-nic")).await?;
    assert_envelope(
        &lone_nic,
        &nic_id("lone-nic"),
        "lone-nic",
        "Microsoft.Network/networkInterfaces",
        &json!({"a": "1"}),
    );
    let ip = &lone_nic.body["properties"]["ipConfigurations"][0];
    assert_eq!(ip["name"], "ipconfig1");
    assert_eq!(ip["properties"]["privateIPAllocationMethod"], "Dynamic");
    assert!(
        lone_nic.body["properties"].get("virtualMachine").is_none(),
        "{lone_nic:?}"
    );
    let used_nic = sb.get(&nic("used-nic")).await?;
    assert_eq!(
        used_nic.body["properties"]["virtualMachine"]["id"],
        vm_id("some-vm")
    );

    let lone_disk = sb.get(&disk("lone-disk")).await?;
    assert_envelope(
        &lone_disk,
        &disk_id("lone-disk"),
        "lone-disk",
        "Microsoft.Compute/disks",
        &json!({"b": "2"}),
    );
    let p = &lone_disk.body["properties"];
    assert_eq!(p["diskState"], "Unattached");
    assert_eq!(p["diskSizeGB"], 32);
    assert_eq!(p["creationData"]["createOption"], "Empty");
    assert!(p["timeCreated"].is_string());
    assert!(lone_disk.body.get("managedBy").is_none());
    let used_disk = sb.get(&disk("used-disk")).await?;
    assert_eq!(used_disk.body["properties"]["diskState"], "Attached");
    assert_eq!(used_disk.body["properties"]["diskSizeGB"], 128);
    assert_eq!(used_disk.body["managedBy"], vm_id("some-vm"));

    let (listed_nics, _) = list_all(&sb, &nics()).await?;
    assert_eq!(
        listed_nics,
        vec![lone_nic.body.clone(), used_nic.body.clone()]
    );
    let (listed_disks, _) = list_all(&sb, &disks()).await?;
    assert_eq!(
        listed_disks,
        vec![lone_disk.body.clone(), used_disk.body.clone()]
    );

    // The ordinary rules: a NIC or disk in use cannot be deleted, a free one can.
    assert_eq!(sb.delete(&nic("used-nic")).await?.code(), "NicInUse");
    assert_eq!(sb.delete(&disk("used-disk")).await?.status, 409);
    for path in [nic("lone-nic"), disk("lone-disk")] {
        let deleted = sb.delete(&path).await?;
        assert_eq!(deleted.status, 202, "{deleted:?}");
        let location = deleted.header("location").ok_or("no Location")?.to_owned();
        let mut done = sb.get(&location).await?;
        for _ in 0..100 {
            if done.status != 202 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            done = sb.get(&location).await?;
        }
        assert!(matches!(done.status, 200 | 204), "{done:?}");
        assert_eq!(sb.get(&path).await?.status, 404);
    }
    Ok(())
}

#[tokio::test]
async fn seeded_resources_take_ordinary_updates_and_a_seeded_vm_never_boots() -> TestResult {
    let sb = Sandbox::start_with(short(0.05)).await?;
    let body = seed_body(
        json!([
            {"type": "vm", "name": "idle-vm", "tags": {"k": "v"}},
            {"type": "nic", "name": "idle-nic"},
        ]),
        json!([]),
    );
    seed(&sb, &body).await?;
    let patched = sb
        .patch(&vm("idle-vm"), &json!({"tags": {"k": "w"}}))
        .await?;
    assert_eq!(patched.status, 200, "{patched:?}");
    assert_eq!(sb.finish(&patched).await?["status"], "Succeeded");
    let nic_body = json!({"location": "westeurope", "tags": {"x": "y"}, "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {}}]}});
    let put = sb.put(&nic("idle-nic"), &nic_body).await?;
    assert_eq!(put.status, 200, "{put:?}");
    assert_eq!(sb.finish(&put).await?["status"], "Succeeded");
    assert_eq!(
        sb.get(&nic("idle-nic")).await?.body["tags"],
        json!({"x": "y"})
    );

    // Longer than the (scaled) boot delay of the short profile: it still has not booted.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let got = sb.get(&vm("idle-vm")).await?;
    assert_eq!(got.body["tags"], json!({"k": "w"}));
    let machine = sb
        .emulator
        .machines()
        .into_iter()
        .find(|m| m.name == "idle-vm")
        .ok_or("no machine")?;
    assert_eq!(machine.guest, GuestState::Booting);
    assert!(
        sb.emulator.running_machines().is_empty(),
        "the node joiner registers nothing for it"
    );
    Ok(())
}

#[tokio::test]
async fn generated_names_are_the_prefix_and_a_five_digit_index_and_list_in_pages() -> TestResult {
    let sb = Sandbox::start().await?;
    let body = seed_body(
        json!([]),
        json!([
            {"type": "vm", "prefix": "scale-vm-", "count": 120, "tags": {"k": "v"}},
            {"type": "nic", "prefix": "scale-nic-", "count": 3},
            {"type": "disk", "prefix": "scale-disk-", "count": 2, "diskSizeGB": 8},
        ]),
    );
    assert_eq!(seed(&sb, &body).await?, 125);
    let (listed, pages) = list_all(&sb, &vms()).await?;
    assert_eq!(pages, 3, "page size 50");
    let names: Vec<String> = listed
        .iter()
        .map(|v| v["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    let expected: Vec<String> = (0..120).map(|i| format!("scale-vm-{i:05}")).collect();
    assert_eq!(names, expected);
    assert!(listed.iter().all(|v| v["tags"] == json!({"k": "v"})));
    let single = sb.get(&vm("scale-vm-00042")).await?;
    assert_eq!(single.body, listed[42]);
    let (listed_nics, _) = list_all(&sb, &nics()).await?;
    let nic_names: Vec<&str> = listed_nics
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert_eq!(
        nic_names,
        ["scale-nic-00000", "scale-nic-00001", "scale-nic-00002"]
    );
    assert_eq!(
        sb.get(&disk("scale-disk-00001")).await?.body["properties"]["diskSizeGB"],
        8
    );
    Ok(())
}

#[tokio::test]
async fn seeding_a_name_that_exists_replaces_the_resource() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("taken").await?;
    let before = sb.get(&disk("taken")).await?;
    assert_eq!(before.body["properties"]["diskSizeGB"], 64);
    seed(
        &sb,
        &seed_body(
            json!([
                {"type": "disk", "name": "taken", "tags": {"v": "1"}},
                {"type": "vm", "name": "twice", "tags": {"v": "1"}},
            ]),
            json!([]),
        ),
    )
    .await?;
    let first = sb.get(&vm("twice")).await?;
    seed(
        &sb,
        &seed_body(
            json!([{"type": "vm", "name": "twice", "tags": {"v": "2"}}]),
            json!([]),
        ),
    )
    .await?;
    let replaced = sb.get(&disk("taken")).await?;
    assert_eq!(replaced.body["properties"]["diskSizeGB"], 32);
    assert_eq!(replaced.body["tags"], json!({"v": "1"}));
    assert_ne!(replaced.body["etag"], before.body["etag"]);
    let second = sb.get(&vm("twice")).await?;
    assert_eq!(second.body["tags"], json!({"v": "2"}));
    assert_ne!(second.body["etag"], first.body["etag"]);
    let (listed, _) = list_all(&sb, &vms()).await?;
    assert_eq!(listed.len(), 1, "replaced, not added");
    Ok(())
}

#[tokio::test]
async fn an_invalid_seed_is_refused_naming_the_field_and_seeds_nothing() -> TestResult {
    let sb = Sandbox::start().await?;
    let cases = [
        (
            seed_body(
                json!([{"type": "vm", "name": "ok"}, {"type": "loadBalancer", "name": "x"}]),
                json!([]),
            ),
            "resources[1].type",
        ),
        (
            seed_body(json!([{"type": "nic", "name": ""}]), json!([])),
            "resources[0].name",
        ),
        (
            seed_body(
                json!([{"type": "vm", "name": "ok"}]),
                json!([{"type": "vm", "prefix": "p-", "count": 100_001}]),
            ),
            "generate[0].count",
        ),
        (
            seed_body(
                json!([]),
                json!([{"type": "disk", "prefix": "d-", "count": 1}, {"type": "nic", "prefix": "a/b", "count": 1}]),
            ),
            "generate[1].prefix",
        ),
        (
            seed_body(
                json!([{"type": "vm", "name": "v", "attachedTo": "w"}]),
                json!([]),
            ),
            "resources[0].attachedTo",
        ),
    ];
    for (body, field) in cases {
        let resp = sb.post("/sandbox/seed", &body).await?;
        assert_eq!(resp.status, 400, "{body}: {resp:?}");
        assert_eq!(resp.code(), "InvalidParameter", "{resp:?}");
        assert_eq!(resp.body["error"]["target"], field, "{resp:?}");
        assert!(resp.body["error"]["message"].is_string());
    }
    let unknown = sb
        .post("/sandbox/seed", &json!({"resources": [], "extra": 1}))
        .await?;
    assert_eq!(unknown.status, 400);
    assert_eq!(unknown.code(), "InvalidRequestContent");
    let (listed, _) = list_all(&sb, &vms()).await?;
    assert!(listed.is_empty(), "nothing seeded: {listed:?}");
    Ok(())
}

#[tokio::test]
async fn deleting_by_prefix_removes_every_kind_at_once_without_operations() -> TestResult {
    let sb = Sandbox::start().await?;
    let body = seed_body(
        json!([{"type": "vm", "name": "keep-1"}]),
        json!([
            {"type": "vm", "prefix": "gone-", "count": 3},
            {"type": "nic", "prefix": "gone-", "count": 2},
            {"type": "disk", "prefix": "Gone-", "count": 2},
        ]),
    );
    assert_eq!(seed(&sb, &body).await?, 8);
    let resp = sb.delete("/sandbox/seed?prefix=gone-").await?;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.body, json!({"removed": 7}));
    assert_eq!(sb.get(&vm("gone-00001")).await?.status, 404);
    assert_eq!(sb.get(&nic("gone-00000")).await?.status, 404);
    assert_eq!(sb.get(&disk("Gone-00000")).await?.status, 404);
    assert_eq!(sb.get(&vm("keep-1")).await?.status, 200);
    let (listed, _) = list_all(&sb, &vms()).await?;
    let names: BTreeSet<&str> = listed.iter().filter_map(|v| v["name"].as_str()).collect();
    assert_eq!(names, BTreeSet::from(["keep-1"]));
    assert_eq!(
        sb.delete("/sandbox/seed?prefix=gone-").await?.body,
        json!({"removed": 0})
    );

    for path in ["/sandbox/seed", "/sandbox/seed?prefix="] {
        let refused = sb.delete(path).await?;
        assert_eq!(refused.status, 400, "{path}: {refused:?}");
        assert_eq!(refused.code(), "InvalidParameter");
        assert_eq!(refused.body["error"]["target"], "prefix");
    }
    Ok(())
}

#[tokio::test]
async fn the_seed_routes_need_the_token_and_are_neither_counted_nor_logged() -> TestResult {
    let sb = Sandbox::start_with(EmulatorConfig {
        token: Some("secret".into()),
        ..instant()
    })
    .await?;
    let body = seed_body(json!([{"type": "vm", "name": "a"}]), json!([]));
    let anonymous = reqwest::Client::new()
        .post(format!("{}/sandbox/seed", sb.base))
        .json(&body)
        .send()
        .await?;
    assert_eq!(anonymous.status().as_u16(), 401);
    seed(&sb, &body).await?;
    assert_eq!(sb.delete("/sandbox/seed?prefix=a").await?.status, 200);
    assert_eq!(sb.get("/sandbox/stats").await?.body["total"], 0);
    assert_eq!(
        sb.get("/sandbox/requests").await?.body["requests"],
        json!([])
    );
    Ok(())
}

#[tokio::test]
async fn a_large_seeded_state_is_written_behind_and_flushed() -> TestResult {
    let dir = std::env::temp_dir().join(format!("nodewright-seed-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("state.json");
    let _ = std::fs::remove_file(&file);
    let config = EmulatorConfig {
        state_file: Some(file.clone()),
        ..instant()
    };
    let sb = Sandbox::start_with(config.clone()).await?;
    // About 2 MB of JSON: over the write-behind threshold.
    let body = seed_body(
        json!([]),
        json!([{"type": "disk", "prefix": "big-", "count": 3000}]),
    );
    assert_eq!(seed(&sb, &body).await?, 3000);
    assert!(std::fs::metadata(&file)?.len() > 1 << 20);
    let stored = |name: &str| -> Res<bool> {
        let state: Value = serde_json::from_slice(&std::fs::read(&file)?)?;
        Ok(state["resources"]
            .get(disk_id(name).to_ascii_lowercase())
            .is_some())
    };
    assert!(stored("big-00000")?);
    // Written behind from now on: the background task writes the change a little later.
    assert_eq!(
        sb.delete("/sandbox/seed?prefix=big-000").await?.body,
        json!({"removed": 100})
    );
    let mut written = false;
    for _ in 0..150 {
        if !stored("big-00000")? {
            written = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(written, "the removal never reached the state file");
    // A flush writes what is pending at once.
    assert_eq!(
        sb.delete("/sandbox/seed?prefix=big-001").await?.body,
        json!({"removed": 100})
    );
    sb.emulator.flush();
    assert!(!stored("big-00100")?);
    let again = Sandbox::start_with(config).await?;
    assert_eq!(again.get(&disk("big-00199")).await?.status, 404);
    assert_eq!(again.get(&disk("big-00200")).await?.status, 200);
    let (listed, _) = list_all(&again, &disks()).await?;
    assert_eq!(listed.len(), 2800);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
