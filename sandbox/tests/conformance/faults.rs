//! Fault injection through the admin endpoint and the config file: throttling, 5xx, 409,
//! operations that end Failed, detaches that hang.

use std::time::Duration;

use nodewright_sandbox::arm::EmulatorConfig;
use serde_json::json;

use crate::support::*;

async fn add_rule(sb: &Sandbox, rule: serde_json::Value) -> Res<u64> {
    let resp = sb.post("/sandbox/faults", &rule).await?;
    assert_eq!(resp.status, 201, "{resp:?}");
    Ok(resp.body["id"].as_u64().ok_or("no id")?)
}

#[tokio::test]
async fn a_throttle_rule_answers_429_with_retry_after_rate_limit_headers_and_too_many_requests()
-> TestResult {
    let sb = Sandbox::start().await?;
    add_rule(
        &sb,
        json!({"kind": "throttle", "operation": "vm.get", "retry_after": 7, "count": 1}),
    )
    .await?;
    let resp = sb.get(&vm("t")).await?;
    assert_eq!(resp.status, 429);
    assert_eq!(resp.header("retry-after"), Some("7"));
    assert_eq!(
        resp.header("x-ms-ratelimit-remaining-resource"),
        Some("Microsoft.Compute/HighCostGet;0")
    );
    assert_eq!(
        resp.header("x-ms-ratelimit-remaining-subscription-reads"),
        Some("0")
    );
    assert_eq!(resp.code(), "OperationNotAllowed");
    assert_eq!(resp.body["error"]["details"][0]["code"], "TooManyRequests");
    assert_eq!(
        sb.get(&vm("t")).await?.status,
        404,
        "count 1: the next request passes"
    );
    Ok(())
}

#[tokio::test]
async fn the_network_provider_throttles_with_retryable_error_due_to_another_operation() -> TestResult
{
    let sb = Sandbox::start().await?;
    add_rule(&sb, json!({"kind": "throttle", "operation": "nic.*"})).await?;
    let resp = sb
        .put(&nic("n"), &json!({"location": "westeurope"}))
        .await?;
    assert_eq!(resp.status, 429);
    assert_eq!(resp.code(), "RetryableErrorDueToAnotherOperation");
    Ok(())
}

#[tokio::test]
async fn a_server_error_rule_answers_its_status_as_many_times_as_its_count() -> TestResult {
    let sb = Sandbox::start().await?;
    add_rule(&sb, json!({"kind": "server_error", "status": 503, "code": "ServiceUnavailable", "method": "PUT", "path": "*/disks/*", "count": 2})).await?;
    let body = json!({"location": "westeurope", "properties": {"diskSizeGB": 4}});
    assert_eq!(sb.put(&disk("s"), &body).await?.status, 503);
    let second = sb.put(&disk("s"), &body).await?;
    assert_eq!(second.status, 503);
    assert_eq!(second.code(), "ServiceUnavailable");
    assert_eq!(sb.put(&disk("s"), &body).await?.status, 202);
    Ok(())
}

#[tokio::test]
async fn a_conflict_rule_answers_409_for_matching_vm_names_only() -> TestResult {
    let sb = Sandbox::start().await?;
    add_rule(&sb, json!({"kind": "conflict", "vm": "pool-a-*"})).await?;
    let resp = sb.put(&vm("pool-a-1"), &vm_body(None, &[])).await?;
    assert_eq!(resp.status, 409);
    assert_eq!(resp.code(), "Conflict");
    assert_eq!(
        sb.put(&vm("pool-b-1"), &vm_body(None, &[])).await?.status,
        201
    );
    Ok(())
}

#[tokio::test]
async fn a_rule_on_a_vm_also_holds_the_polls_of_that_vms_operations() -> TestResult {
    let sb = Sandbox::start().await?;
    let ours = sb.put(&vm("held-1"), &vm_body(None, &[])).await?;
    let other = sb.put(&vm("free-1"), &vm_body(None, &[])).await?;
    add_rule(
        &sb,
        json!({"kind": "throttle", "operation": "operation.status", "vm": "held-*", "retry_after": 3}),
    )
    .await?;
    let poll = |resp: &Resp| {
        resp.header("azure-asyncoperation")
            .map(str::to_owned)
            .ok_or("no Azure-AsyncOperation")
    };
    let held = sb.get(&poll(&ours)?).await?;
    assert_eq!(held.status, 429, "the poll of held-1's operation: {held:?}");
    assert_eq!(held.header("retry-after"), Some("3"));
    let free = sb.get(&poll(&other)?).await?;
    assert_eq!(
        free.status, 200,
        "another VM's operation is not held: {free:?}"
    );
    Ok(())
}

#[tokio::test]
async fn fail_operation_ends_the_operation_failed_with_its_code_and_provisioning_state_failed()
-> TestResult {
    let sb = Sandbox::start().await?;
    add_rule(&sb, json!({"kind": "fail_operation", "operation": "vm.put", "code": "AllocationFailed", "message": "no capacity"})).await?;
    let resp = sb.put(&vm("unlucky"), &vm_body(None, &[])).await?;
    assert_eq!(resp.status, 201);
    let done = sb.finish(&resp).await?;
    assert_eq!(done["status"], "Failed");
    assert_eq!(done["error"]["code"], "AllocationFailed");
    assert_eq!(done["error"]["message"], "no capacity");
    let got = sb
        .get(&format!("{}&$expand=instanceView", vm("unlucky")))
        .await?;
    assert_eq!(got.state(), "Failed");
    assert_eq!(
        got.body["properties"]["instanceView"]["statuses"][0]["code"],
        "ProvisioningState/failed/AllocationFailed"
    );
    Ok(())
}

#[tokio::test]
async fn a_failed_location_operation_answers_its_error_on_the_location_url() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("q").await?;
    add_rule(&sb, json!({"kind": "fail_operation", "operation": "disk.delete", "code": "InternalDiskError", "status": 500})).await?;
    let resp = sb.delete(&disk("q")).await?;
    let location = resp.header("location").ok_or("no Location")?.to_owned();
    let result = sb.get(&location).await?;
    assert_eq!(result.status, 500);
    assert_eq!(result.code(), "InternalDiskError");
    assert_eq!(sb.get(&disk("q")).await?.state(), "Failed");
    Ok(())
}

#[tokio::test]
async fn hang_detach_keeps_a_detach_in_progress_until_the_rule_is_removed() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_disk("stuck").await?;
    sb.create_vm("hv", &vm_body(None, &["stuck"])).await?;
    let rule = add_rule(&sb, json!({"kind": "hang_detach"})).await?;
    let body = json!({"dataDisksToDetach": [{"diskId": disk_id("stuck")}]});
    let resp = sb
        .post(
            &format!("{}/attachDetachDataDisks?api-version={VM_API}", vm_id("hv")),
            &body,
        )
        .await?;
    assert_eq!(resp.status, 202);
    let location = resp.header("location").ok_or("no Location")?.to_owned();
    for _ in 0..5 {
        assert_eq!(sb.get(&location).await?.status, 202);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sb.get(&disk("stuck")).await?.body["managedBy"], vm_id("hv"));
    let removed = sb.delete(&format!("/sandbox/faults/{rule}")).await?;
    assert_eq!(removed.status, 204);
    assert_eq!(sb.get(&location).await?.status, 200);
    assert_eq!(
        sb.get(&disk("stuck")).await?.body["properties"]["diskState"],
        "Unattached"
    );
    Ok(())
}

#[tokio::test]
async fn fault_rules_load_from_the_toml_config_and_are_listed_by_the_admin_endpoint() -> TestResult
{
    let mut config = EmulatorConfig::from_toml(
        r#"
        latency = "instant"
        page_size = 2
        [[faults]]
        kind = "server_error"
        operation = "disk.get"
        status = 502
        "#,
    )?;
    config.token = None;
    let sb = Sandbox::start_with(config).await?;
    assert_eq!(sb.get(&disk("any")).await?.status, 502);
    let rules = sb.get("/sandbox/faults").await?;
    assert_eq!(rules.body["rules"][0]["kind"], "server_error");
    assert_eq!(rules.body["rules"][0]["fired"], 1);
    let replaced = sb.put("/sandbox/faults", &json!({"rules": []})).await?;
    assert_eq!(replaced.status, 200);
    assert_eq!(sb.get(&disk("any")).await?.status, 404);
    Ok(())
}

#[tokio::test]
async fn a_repeat_next_link_rule_makes_a_list_page_link_back_to_itself_in_its_resource_group_only()
-> TestResult {
    let mut config = instant();
    config.page_size = 2;
    let sb = Sandbox::start_with(config).await?;
    for name in ["r-1", "r-2", "r-3"] {
        sb.create_nic(name).await?;
    }
    let other = format!(
        "/subscriptions/{SUB}/resourceGroups/rg-other/providers/Microsoft.Network/networkInterfaces"
    );
    let resp = sb
        .put(
            &format!("{other}/o-1?api-version={NIC_API}"),
            &json!({"location": "westeurope", "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {"subnet": {"id": "/subscriptions/x/subnets/s"}}}]}}),
        )
        .await?;
    sb.finish(&resp).await?;
    add_rule(
        &sb,
        json!({"kind": "repeat_next_link", "operation": "nic.list", "path": format!("*/resourceGroups/{RG}/*")}),
    )
    .await?;
    let first = format!(
        "{}/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/networkInterfaces?api-version={NIC_API}",
        sb.base
    );
    let names = |resp: &Resp| -> Vec<String> {
        resp.body["value"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item["name"].as_str().map(str::to_owned))
            .collect()
    };
    // The first page links back to the first page, again and again.
    let page = sb.get(&first).await?;
    assert_eq!(page.status, 200);
    assert_eq!(names(&page), ["r-1", "r-2"]);
    assert_eq!(page.body["nextLink"], first.as_str(), "{:?}", page.body);
    let again = sb.get(&first).await?;
    assert_eq!(names(&again), ["r-1", "r-2"]);
    assert_eq!(again.body["nextLink"], first.as_str());
    // A later page (a skip token the emulator issued) links back to itself too.
    let resp = sb.put("/sandbox/faults", &json!({"rules": []})).await?;
    assert_eq!(resp.status, 200);
    let second = sb.get(&first).await?.body["nextLink"]
        .as_str()
        .ok_or("no nextLink without the rule")?
        .to_owned();
    add_rule(
        &sb,
        json!({"kind": "repeat_next_link", "operation": "nic.list", "path": format!("*/resourceGroups/{RG}/*")}),
    )
    .await?;
    let page = sb.get(&second).await?;
    assert_eq!(names(&page), ["r-3"]);
    assert_eq!(page.body["nextLink"], second.as_str());
    // Another resource group's list is not touched.
    let elsewhere = sb.get(&format!("{other}?api-version={NIC_API}")).await?;
    assert_eq!(names(&elsewhere), ["o-1"]);
    assert!(
        elsewhere.body.get("nextLink").is_none(),
        "{:?}",
        elsewhere.body
    );
    Ok(())
}
