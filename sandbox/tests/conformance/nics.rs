//! Network interfaces: create, update, delete, list, `virtualMachine.id` while used, `NicInUse`.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn creating_a_nic_returns_201_with_an_async_operation_and_updating_it_200() -> TestResult {
    let sb = Sandbox::start().await?;
    let body =
        json!({"location": "westeurope", "properties": {"ipConfigurations": [{"name": "ip1"}]}});
    let resp = sb.put(&nic("n1"), &body).await?;
    assert_eq!(resp.status, 201);
    assert!(resp.header("azure-asyncoperation").is_some());
    assert_eq!(sb.finish(&resp).await?["status"], "Succeeded");
    let got = sb.get(&nic("n1")).await?;
    assert_eq!(got.state(), "Succeeded");
    assert_eq!(got.body["type"], "Microsoft.Network/networkInterfaces");
    assert_eq!(got.body["properties"]["ipConfigurations"][0]["name"], "ip1");
    let again = sb.put(&nic("n1"), &got.body).await?;
    assert_eq!(again.status, 200);
    Ok(())
}

#[tokio::test]
async fn nics_accept_newer_api_versions_and_list_by_resource_group() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_nic("n2").await?;
    let newer = sb
        .get(&format!("{}?api-version=2024-07-01", nic_id("n2")))
        .await?;
    assert_eq!(newer.status, 200);
    let older = sb
        .get(&format!("{}?api-version=2019-01-01", nic_id("n2")))
        .await?;
    assert_eq!(older.status, 400);
    assert_eq!(older.code(), "InvalidApiVersionParameter");
    let list = sb.get(&format!("/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/networkInterfaces?api-version={NIC_API}")).await?;
    assert_eq!(list.body["value"].as_array().ok_or("no value")?.len(), 1);
    Ok(())
}

#[tokio::test]
async fn a_nic_used_by_a_vm_names_it_and_deleting_it_is_refused_with_400_nic_in_use() -> TestResult
{
    let sb = Sandbox::start().await?;
    sb.create_vm_with_nic("user", &[]).await?;
    let got = sb.get(&nic("user-nic")).await?;
    assert_eq!(
        got.body["properties"]["virtualMachine"]["id"],
        vm_id("user")
    );
    let resp = sb.delete(&nic("user-nic")).await?;
    assert_eq!(resp.status, 400);
    assert_eq!(resp.code(), "NicInUse");
    Ok(())
}

#[tokio::test]
async fn deleting_a_free_nic_returns_202_with_location_then_404_and_then_204() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_nic("n3").await?;
    let resp = sb.delete(&nic("n3")).await?;
    assert_eq!(resp.status, 202);
    let location = resp.header("location").ok_or("no Location")?.to_owned();
    assert_eq!(sb.get(&location).await?.status, 204);
    assert_eq!(sb.get(&nic("n3")).await?.status, 404);
    assert_eq!(sb.delete(&nic("n3")).await?.status, 204);
    Ok(())
}
