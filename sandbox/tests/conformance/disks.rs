//! Managed disks: create, patch, delete, list, attach/detach through the VM, diskState and
//! managedBy, and the refusal to delete an attached disk.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn creating_a_disk_returns_202_with_location_and_the_location_gives_the_final_body()
-> TestResult {
    let sb = Sandbox::start().await?;
    let body = json!({"location": "westeurope", "sku": {"name": "Premium_LRS"}, "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 32, "customThing": 1}});
    let resp = sb.put(&disk("d1"), &body).await?;
    assert_eq!(resp.status, 202);
    let location = resp.header("location").ok_or("no Location")?.to_owned();
    let result = sb.get(&location).await?;
    assert_eq!(result.status, 200);
    assert_eq!(result.body["name"], "d1");
    assert_eq!(result.state(), "Succeeded");
    assert_eq!(result.body["properties"]["diskState"], "Unattached");
    assert_eq!(result.body["properties"]["customThing"], 1);
    assert!(result.body["properties"]["timeCreated"].is_string());
    assert!(result.body["properties"]["uniqueId"].is_string());
    Ok(())
}

#[tokio::test]
async fn patching_a_disk_merges_tags_and_keeps_server_fields() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("d2").await?;
    let before = sb.get(&disk("d2")).await?.body;
    let resp = sb
        .patch(
            &disk("d2"),
            &json!({"tags": {"owner": "me"}, "properties": {"uniqueId": null}}),
        )
        .await?;
    assert_eq!(resp.status, 202);
    sb.finish(&resp).await?;
    let after = sb.get(&disk("d2")).await?.body;
    assert_eq!(after["tags"]["owner"], "me");
    assert_eq!(
        after["properties"]["uniqueId"],
        before["properties"]["uniqueId"]
    );
    assert_eq!(after["properties"]["diskSizeGB"], 64);
    Ok(())
}

#[tokio::test]
async fn deleting_a_disk_returns_202_then_404_and_an_absent_disk_204() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("d3").await?;
    let resp = sb.delete(&disk("d3")).await?;
    assert_eq!(resp.status, 202);
    assert!(resp.header("location").is_some());
    sb.finish(&resp).await?;
    assert_eq!(sb.get(&disk("d3")).await?.status, 404);
    assert_eq!(sb.delete(&disk("d3")).await?.status, 204);
    Ok(())
}

#[tokio::test]
async fn disks_are_listed_by_resource_group() -> TestResult {
    let sb = Sandbox::start().await?;
    for name in ["l1", "l2", "l3"] {
        sb.create_disk(name).await?;
    }
    let list = sb.get(&format!("/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/disks?api-version={DISK_API}")).await?;
    assert_eq!(list.status, 200);
    assert_eq!(list.body["value"].as_array().ok_or("no value")?.len(), 3);
    assert!(list.body.get("nextLink").is_none());
    Ok(())
}

// The contract page says "typically 409; confirm against real Azure".
#[tokio::test]
async fn deleting_an_attached_disk_is_refused_with_409_operation_not_allowed_typically()
-> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("att").await?;
    sb.create_vm("holder", &vm_body(None, &["att"])).await?;
    let resp = sb.delete(&disk("att")).await?;
    assert_eq!(resp.status, 409);
    assert_eq!(resp.code(), "OperationNotAllowed");
    let message = resp.body["error"]["message"].as_str().ok_or("no message")?;
    assert!(
        message.contains("att") && message.contains(&vm_id("holder")),
        "{message}"
    );
    Ok(())
}

#[tokio::test]
async fn attaching_by_put_makes_the_disk_attached_and_omitting_it_detaches_it() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("data").await?;
    sb.create_vm("host", &vm_body(None, &[])).await?;
    let mut body = sb.get(&vm("host")).await?.body;
    body["properties"]["storageProfile"]["dataDisks"] = json!([{"lun": 0, "createOption": "Attach", "managedDisk": {"id": disk_id("data")}, "deleteOption": "Detach"}]);
    let resp = sb.put(&vm("host"), &body).await?;
    assert_eq!(resp.status, 200);
    sb.finish(&resp).await?;
    let attached = sb.get(&disk("data")).await?.body;
    assert_eq!(attached["properties"]["diskState"], "Attached");
    assert_eq!(attached["managedBy"], vm_id("host"));

    let mut body = sb.get(&vm("host")).await?.body;
    body["properties"]["storageProfile"]["dataDisks"] = json!([]);
    let resp = sb.put(&vm("host"), &body).await?;
    sb.finish(&resp).await?;
    let detached = sb.get(&disk("data")).await?.body;
    assert_eq!(detached["properties"]["diskState"], "Unattached");
    assert!(detached.get("managedBy").is_none());
    let listed = sb.get(&vm("host")).await?.body;
    assert_eq!(
        listed["properties"]["storageProfile"]["dataDisks"],
        json!([])
    );
    Ok(())
}

#[tokio::test]
async fn patching_to_be_detached_with_force_detach_detaches_the_last_disk() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("last").await?;
    sb.create_vm("h2", &vm_body(None, &["last"])).await?;
    let patch = json!({"properties": {"storageProfile": {"dataDisks": [
        {"lun": 0, "createOption": "Attach", "managedDisk": {"id": disk_id("last")}, "toBeDetached": true, "detachOption": "ForceDetach"}
    ]}}});
    let resp = sb.patch(&vm("h2"), &patch).await?;
    assert_eq!(resp.status, 200, "{resp:?}");
    sb.finish(&resp).await?;
    assert_eq!(
        sb.get(&disk("last")).await?.body["properties"]["diskState"],
        "Unattached"
    );
    assert_eq!(
        sb.get(&vm("h2")).await?.body["properties"]["storageProfile"]["dataDisks"],
        json!([])
    );
    Ok(())
}

#[tokio::test]
async fn attach_detach_data_disks_returns_202_with_location_and_moves_both_disks() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("in").await?;
    sb.create_disk("out").await?;
    sb.create_vm("h3", &vm_body(None, &["out"])).await?;
    let body = json!({
        "dataDisksToAttach": [{"diskId": disk_id("in"), "lun": 5}],
        "dataDisksToDetach": [{"diskId": disk_id("out"), "detachOption": "ForceDetach"}],
    });
    let resp = sb
        .post(
            &format!("{}/attachDetachDataDisks?api-version={VM_API}", vm_id("h3")),
            &body,
        )
        .await?;
    assert_eq!(resp.status, 202, "{resp:?}");
    let location = resp.header("location").ok_or("no Location")?.to_owned();
    let result = sb.get(&location).await?;
    assert_eq!(result.status, 200);
    let luns: Vec<u64> = result.body["dataDisks"]
        .as_array()
        .ok_or("storage profile result")?
        .iter()
        .filter_map(|d| d["lun"].as_u64())
        .collect();
    assert_eq!(luns, [5]);
    assert_eq!(
        sb.get(&disk("in")).await?.body["properties"]["diskState"],
        "Attached"
    );
    assert_eq!(
        sb.get(&disk("out")).await?.body["properties"]["diskState"],
        "Unattached"
    );
    Ok(())
}

#[tokio::test]
async fn attaching_a_disk_attached_to_another_vm_is_refused_with_409() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("shared").await?;
    sb.create_vm("first", &vm_body(None, &["shared"])).await?;
    let resp = sb.put(&vm("second"), &vm_body(None, &["shared"])).await?;
    assert_eq!(resp.status, 409);
    assert_eq!(resp.code(), "OperationNotAllowed");
    assert_eq!(
        sb.get(&vm("second")).await?.status,
        404,
        "the refused create left nothing behind"
    );
    Ok(())
}

#[tokio::test]
async fn a_deallocated_vms_disks_are_reserved_and_attached_again_after_start() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("r").await?;
    sb.create_vm("sleepy", &vm_body(None, &["r"])).await?;
    let resp = sb
        .post(
            &format!("{}/deallocate?api-version={VM_API}", vm_id("sleepy")),
            &json!({}),
        )
        .await?;
    sb.finish(&resp).await?;
    assert_eq!(
        sb.get(&disk("r")).await?.body["properties"]["diskState"],
        "Reserved"
    );
    let resp = sb
        .post(
            &format!("{}/start?api-version={VM_API}", vm_id("sleepy")),
            &json!({}),
        )
        .await?;
    sb.finish(&resp).await?;
    assert_eq!(
        sb.get(&disk("r")).await?.body["properties"]["diskState"],
        "Attached"
    );
    Ok(())
}
