//! Virtual machines: create, read, update, patch, delete, instance view, power actions, paging,
//! OS disk, deleteOption cascade.

use std::collections::BTreeSet;

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn creating_a_vm_returns_201_creating_with_an_azure_async_operation_then_succeeds()
-> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_nic("a-nic").await?;
    let resp = sb.put(&vm("a"), &vm_body(Some("a-nic"), &[])).await?;
    assert_eq!(resp.status, 201);
    assert_eq!(resp.state(), "Creating");
    assert!(resp.header("azure-asyncoperation").is_some());
    assert!(resp.header("retry-after").is_some());
    assert_eq!(resp.body["id"], vm_id("a"));
    assert_eq!(resp.body["name"], "a");
    assert_eq!(resp.body["type"], "Microsoft.Compute/virtualMachines");
    assert_eq!(resp.body["location"], "westeurope");
    assert!(resp.body["etag"].is_string());
    assert!(resp.body["properties"]["vmId"].is_string());
    assert!(resp.body["properties"]["timeCreated"].is_string());
    assert_eq!(sb.finish(&resp).await?["status"], "Succeeded");
    let got = sb.get(&vm("a")).await?;
    assert_eq!(got.status, 200);
    assert_eq!(got.state(), "Succeeded");
    assert_eq!(got.body["tags"]["nodewright.io-pool"], "pool-a");
    assert!(
        got.body["properties"]["osProfile"]
            .get("customData")
            .is_none(),
        "customData is write-only"
    );
    Ok(())
}

#[tokio::test]
async fn a_get_during_creation_returns_200_with_the_non_terminal_state() -> TestResult {
    let sb = Sandbox::start_with(short(1.0)).await?;
    let resp = sb.put(&vm("slow"), &vm_body(None, &[])).await?;
    assert_eq!(resp.status, 201);
    let during = sb.get(&vm("slow")).await?;
    assert_eq!(during.status, 200);
    assert_eq!(during.state(), "Creating");
    sb.finish(&resp).await?;
    assert_eq!(sb.get(&vm("slow")).await?.state(), "Succeeded");
    Ok(())
}

#[tokio::test]
async fn a_full_put_on_an_existing_vm_returns_200_and_unknown_fields_survive_get_then_put()
-> TestResult {
    let sb = Sandbox::start().await?;
    let mut body = vm_body(None, &[]);
    body["properties"]["futureFeature"] = json!({"enabled": true});
    body["somethingTopLevel"] = json!("kept");
    sb.create_vm("u", &body).await?;
    let mut got = sb.get(&vm("u")).await?.body;
    assert_eq!(got["properties"]["futureFeature"]["enabled"], true);
    assert_eq!(got["somethingTopLevel"], "kept");
    got["tags"]["extra"] = json!("yes");
    let resp = sb.put(&vm("u"), &got).await?;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.state(), "Updating");
    sb.finish(&resp).await?;
    let after = sb.get(&vm("u")).await?.body;
    assert_eq!(after["tags"]["extra"], "yes");
    assert_eq!(after["properties"]["futureFeature"]["enabled"], true);
    assert_eq!(after["properties"]["vmId"], got["properties"]["vmId"]);
    Ok(())
}

#[tokio::test]
async fn patch_returns_200_with_an_async_operation_and_tolerates_null_read_only_fields()
-> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("p", &vm_body(None, &[])).await?;
    let patch = json!({"tags": {"k": "v"}, "properties": {"timeCreated": null, "provisioningState": null, "hardwareProfile": {"vmSize": "Standard_D8s_v5"}}});
    let resp = sb.patch(&vm("p"), &patch).await?;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert!(resp.header("azure-asyncoperation").is_some());
    sb.finish(&resp).await?;
    let got = sb.get(&vm("p")).await?.body;
    assert_eq!(got["tags"]["k"], "v");
    assert_eq!(
        got["properties"]["hardwareProfile"]["vmSize"],
        "Standard_D8s_v5"
    );
    assert!(
        got["properties"]["timeCreated"].is_string(),
        "null did not erase timeCreated"
    );
    Ok(())
}

#[tokio::test]
async fn deleting_a_vm_returns_202_with_location_then_the_vm_is_404() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("d", &vm_body(None, &[])).await?;
    let resp = sb.delete(&vm("d")).await?;
    assert_eq!(resp.status, 202);
    let location = resp.header("location").ok_or("no Location")?.to_owned();
    assert!(resp.header("azure-asyncoperation").is_some());
    let result = sb.get(&location).await?;
    assert_eq!(result.status, 204, "a finished delete has an empty result");
    let gone = sb.get(&vm("d")).await?;
    assert_eq!(gone.status, 404);
    assert_eq!(gone.code(), "ResourceNotFound");
    Ok(())
}

#[tokio::test]
async fn deleting_an_absent_vm_returns_204_and_force_deletion_is_accepted() -> TestResult {
    let sb = Sandbox::start().await?;
    assert_eq!(sb.delete(&vm("never")).await?.status, 204);
    sb.create_vm("f", &vm_body(None, &[])).await?;
    let resp = sb
        .delete(&format!("{}&forceDeletion=true", vm("f")))
        .await?;
    assert_eq!(resp.status, 202);
    sb.finish(&resp).await?;
    assert_eq!(sb.get(&vm("f")).await?.status, 404);
    Ok(())
}

fn statuses(body: &serde_json::Value) -> Vec<String> {
    body["statuses"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|x| x["code"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn instance_view_reports_provisioning_and_power_states() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("iv", &vm_body(None, &[])).await?;
    let expanded = sb
        .get(&format!("{}&$expand=instanceView", vm("iv")))
        .await?;
    let codes = statuses(&expanded.body["properties"]["instanceView"]);
    assert_eq!(codes, ["ProvisioningState/succeeded", "PowerState/running"]);
    let plain = sb.get(&vm("iv")).await?;
    assert!(plain.body["properties"].get("instanceView").is_none());
    let view = sb
        .get(&format!(
            "{}/instanceView?api-version={VM_API}",
            vm_id("iv")
        ))
        .await?;
    assert_eq!(view.status, 200);
    assert_eq!(
        statuses(&view.body),
        ["ProvisioningState/succeeded", "PowerState/running"]
    );
    Ok(())
}

#[tokio::test]
async fn deallocate_power_off_and_start_drive_the_power_state_through_transitions() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("pw", &vm_body(None, &[])).await?;
    let view = format!("{}/instanceView?api-version={VM_API}", vm_id("pw"));
    for (action, after) in [
        ("powerOff", "PowerState/stopped"),
        ("start", "PowerState/running"),
        ("deallocate", "PowerState/deallocated"),
        ("start", "PowerState/running"),
    ] {
        let resp = sb
            .post(
                &format!("{}/{action}?api-version={VM_API}", vm_id("pw")),
                &json!({}),
            )
            .await?;
        assert_eq!(resp.status, 202, "{action}");
        let location = resp.header("location").ok_or("no Location")?.to_owned();
        let result = sb.get(&location).await?;
        assert!(
            result.status == 200 || result.status == 204,
            "{action}: {}",
            result.status
        );
        assert_eq!(statuses(&sb.get(&view).await?.body)[1], after, "{action}");
    }
    Ok(())
}

#[tokio::test]
async fn restart_reboots_a_running_vm_and_is_refused_for_one_that_is_not() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("rs", &vm_body(None, &[])).await?;
    sb.emulator.set_latency(nodewright_sandbox::arm::Latency {
        profile: nodewright_sandbox::arm::LatencyProfile::Short,
        scale: 1.0,
    });
    let restart = format!("{}/restart?api-version=2026-04-01", vm_id("rs"));
    let resp = sb.post(&restart, &json!({})).await?;
    assert_eq!(resp.status, 202);
    assert!(resp.header("azure-asyncoperation").is_some() && resp.header("location").is_some());
    let view = format!("{}/instanceView?api-version={VM_API}", vm_id("rs"));
    assert_eq!(
        statuses(&sb.get(&view).await?.body),
        ["ProvisioningState/updating", "PowerState/starting"],
        "restarting"
    );
    assert_eq!(sb.finish(&resp).await?["status"], "Succeeded");
    assert_eq!(
        statuses(&sb.get(&view).await?.body),
        ["ProvisioningState/succeeded", "PowerState/running"]
    );
    // A deallocated VM is not restarted: Azure refuses it.
    let gone = sb
        .post(
            &format!("{}/deallocate?api-version={VM_API}", vm_id("rs")),
            &json!({}),
        )
        .await?;
    sb.finish(&gone).await?;
    let refused = sb.post(&restart, &json!({})).await?;
    assert_eq!(
        (refused.status, refused.code()),
        (409, "OperationNotAllowed"),
        "{refused:?}"
    );
    assert_eq!(
        refused.body["error"]["message"],
        "The operation requires the VM to be running (or set to run)."
    );
    assert_eq!(
        statuses(&sb.get(&view).await?.body)[1],
        "PowerState/deallocated"
    );
    Ok(())
}

#[tokio::test]
async fn power_actions_show_transitional_states_while_running() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("tr", &vm_body(None, &[])).await?;
    sb.emulator.set_latency(nodewright_sandbox::arm::Latency {
        profile: nodewright_sandbox::arm::LatencyProfile::Short,
        scale: 1.0,
    });
    let resp = sb
        .post(
            &format!("{}/deallocate?api-version={VM_API}", vm_id("tr")),
            &json!({}),
        )
        .await?;
    let view = format!("{}/instanceView?api-version={VM_API}", vm_id("tr"));
    let during = sb.get(&view).await?;
    assert_eq!(
        statuses(&during.body),
        ["ProvisioningState/updating", "PowerState/deallocating"]
    );
    sb.finish(&resp).await?;
    assert_eq!(
        statuses(&sb.get(&view).await?.body)[1],
        "PowerState/deallocated"
    );
    Ok(())
}

#[tokio::test]
async fn listing_120_vms_with_page_size_50_takes_3_pages_with_absolute_next_links() -> TestResult {
    let sb = Sandbox::start().await?;
    for i in 0..120 {
        let resp = sb.put(&vm(&format!("vm-{i:03}")), &json!({"location": "westeurope", "properties": {"hardwareProfile": {"vmSize": "Standard_B2s"}}})).await?;
        assert_eq!(resp.status, 201);
    }
    let mut url = format!(
        "{}/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachines?api-version={VM_API}",
        sb.base
    );
    let mut pages = 0;
    let mut ids = Vec::new();
    loop {
        let page = sb.get(&url).await?;
        assert_eq!(page.status, 200);
        pages += 1;
        for item in page.body["value"].as_array().ok_or("no value")? {
            ids.push(item["id"].as_str().ok_or("no id")?.to_owned());
        }
        match page.body["nextLink"].as_str() {
            Some(next) => {
                assert!(next.starts_with(&sb.base), "nextLink is absolute: {next}");
                url = next.to_owned();
            }
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(ids.len(), 120);
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        120,
        "every id once"
    );
    Ok(())
}

#[tokio::test]
async fn the_os_disk_is_created_from_the_image_and_managed_by_the_vm() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("os", &vm_body(None, &[])).await?;
    let got = sb.get(&vm("os")).await?.body;
    let disk_id = got["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"]
        .as_str()
        .ok_or("no os disk id")?
        .to_owned();
    let name = got["properties"]["storageProfile"]["osDisk"]["name"]
        .as_str()
        .ok_or("no os disk name")?;
    assert!(name.starts_with("os_OsDisk_1_"), "{name}");
    let disk = sb.get(&format!("{disk_id}?api-version={DISK_API}")).await?;
    assert_eq!(disk.status, 200);
    assert_eq!(disk.body["managedBy"], vm_id("os"));
    assert_eq!(disk.body["properties"]["diskState"], "Attached");
    assert!(disk.body["properties"]["timeCreated"].is_string());
    assert!(disk.body["properties"]["uniqueId"].is_string());
    Ok(())
}

#[tokio::test]
async fn deleting_a_vm_deletes_resources_with_delete_option_delete_and_detaches_the_rest()
-> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("keep").await?;
    sb.create_disk("drop").await?;
    sb.create_nic("kept-nic").await?;
    sb.create_nic("c-nic").await?;
    let mut body = vm_body(Some("c-nic"), &["keep", "drop"]);
    body["properties"]["storageProfile"]["dataDisks"][1]["deleteOption"] = json!("Delete");
    body["properties"]["storageProfile"]["osDisk"]["deleteOption"] = json!("Detach");
    body["properties"]["networkProfile"]["networkInterfaces"]
        .as_array_mut()
        .ok_or("no nics")?
        .push(json!({"id": nic_id("kept-nic"), "properties": {"primary": false, "deleteOption": "Detach"}}));
    sb.create_vm("c", &body).await?;
    let os_disk =
        sb.get(&vm("c")).await?.body["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"]
            .as_str()
            .ok_or("no os disk")?
            .to_owned();
    assert_eq!(
        sb.get(&nic("kept-nic")).await?.body["properties"]["virtualMachine"]["id"],
        vm_id("c")
    );
    let resp = sb.delete(&vm("c")).await?;
    sb.finish(&resp).await?;
    assert_eq!(
        sb.get(&nic("c-nic")).await?.status,
        404,
        "NIC with deleteOption Delete"
    );
    let kept_nic = sb.get(&nic("kept-nic")).await?;
    assert_eq!(kept_nic.status, 200);
    assert!(kept_nic.body["properties"].get("virtualMachine").is_none());
    assert_eq!(
        sb.get(&disk("drop")).await?.status,
        404,
        "data disk with deleteOption Delete"
    );
    let keep = sb.get(&disk("keep")).await?;
    assert_eq!(keep.body["properties"]["diskState"], "Unattached");
    assert!(keep.body.get("managedBy").is_none());
    let os = sb.get(&format!("{os_disk}?api-version={DISK_API}")).await?;
    assert_eq!(os.status, 200, "OS disk with deleteOption Detach survives");
    assert_eq!(os.body["properties"]["diskState"], "Unattached");
    Ok(())
}

#[tokio::test]
async fn a_huge_latency_scale_from_the_admin_endpoint_does_not_break_writes() -> TestResult {
    let sb = Sandbox::start().await?;
    let scaled = sb
        .put(
            "/sandbox/latency",
            &json!({"profile": "realistic", "scale": 1e300}),
        )
        .await?;
    assert_eq!(scaled.status, 200, "{scaled:?}");
    let resp = sb.put(&vm("slowest"), &vm_body(None, &[])).await?;
    assert_eq!(resp.status, 201, "{resp:?}");
    let operation = resp
        .header("azure-asyncoperation")
        .ok_or("no Azure-AsyncOperation")?;
    assert_eq!(sb.get(operation).await?.body["status"], "InProgress");
    assert_eq!(sb.get(&vm("slowest")).await?.state(), "Creating");
    Ok(())
}

#[tokio::test]
async fn arm_paths_are_case_insensitive_and_names_keep_their_casing() -> TestResult {
    let sb = Sandbox::start().await?;
    let created = sb.put(&vm("Case-1"), &vm_body(None, &[])).await?;
    assert_eq!(created.status, 201);
    sb.finish(&created).await?;
    let lower = format!(
        "/subscriptions/{SUB}/resourcegroups/{RG}/providers/microsoft.compute/virtualmachines/Case-1?api-version={VM_API}"
    );
    let got = sb.get(&lower).await?;
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(got.body["id"], vm_id("Case-1"));
    assert_eq!(got.body["name"], "Case-1");
    let view = sb
        .get(&lower.replace("/Case-1?", "/case-1/INSTANCEVIEW?"))
        .await?;
    assert_eq!(view.status, 200, "{:?}", view.body);
    Ok(())
}
