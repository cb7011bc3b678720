//! Error answers: api-version, authentication, not found, bad bodies, and the headers every
//! answer carries.

use reqwest::Method;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_missing_api_version_is_400_missing_api_version_parameter() -> TestResult {
    let sb = Sandbox::start().await?;
    let resp = sb.get(&vm_id("x")).await?;
    assert_eq!(resp.status, 400);
    assert_eq!(resp.code(), "MissingApiVersionParameter");
    assert!(resp.body["error"]["message"].is_string());
    Ok(())
}

#[tokio::test]
async fn an_unsupported_api_version_is_400_invalid_api_version_parameter() -> TestResult {
    let sb = Sandbox::start().await?;
    let resp = sb
        .get(&format!("{}?api-version=2015-01-01", vm_id("x")))
        .await?;
    assert_eq!(resp.status, 400);
    assert_eq!(resp.code(), "InvalidApiVersionParameter");
    let disk = sb
        .get(&format!("{}?api-version={VM_API}", disk_id("x")))
        .await?;
    assert_eq!(
        disk.code(),
        "InvalidApiVersionParameter",
        "disks use 2024-03-02"
    );
    assert_eq!(
        disk.body["error"]["message"],
        "The api-version '2024-07-01' is invalid. The supported versions are '2026-03-02,2025-01-02,2024-03-02,2023-10-02'."
    );
    Ok(())
}

#[tokio::test]
async fn the_api_versions_the_official_sdks_send_by_default_are_served() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_nic("sdk").await?;
    // Python azure-mgmt-network 33 and Go armnetwork v10.
    for version in ["2026-03-01", "2025-07-01"] {
        let nic = sb
            .get(&format!("{}?api-version={version}", nic_id("sdk")))
            .await?;
        assert_eq!(nic.status, 200, "NIC GET with {version}");
    }
    // Python azure-mgmt-compute 39 and Go armcompute v8 (VMs and disks have their own lines).
    for (id, version) in [
        (vm_id("absent"), "2026-04-01"),
        (vm_id("absent"), "2025-04-01"),
        (disk_id("absent"), "2026-03-02"),
        (disk_id("absent"), "2025-01-02"),
    ] {
        let answer = sb.get(&format!("{id}?api-version={version}")).await?;
        assert_eq!(
            (answer.status, answer.code()),
            (404, "ResourceNotFound"),
            "{id} with {version}: served (the resource is absent)"
        );
    }
    Ok(())
}

#[tokio::test]
async fn without_the_configured_token_arm_and_admin_requests_get_401_authentication_failed()
-> TestResult {
    let sb = Sandbox::start_with(nodewright_sandbox::arm::EmulatorConfig {
        token: Some("s3cret".into()),
        ..instant()
    })
    .await?;
    let anonymous = reqwest::Client::new();
    for path in [
        vm("x"),
        "/sandbox/stats".to_owned(),
        "/sandbox/faults".to_owned(),
        "/sandbox/requests".to_owned(),
    ] {
        let resp = anonymous.get(format!("{}{path}", sb.base)).send().await?;
        assert_eq!(resp.status().as_u16(), 401, "{path}");
        let body: serde_json::Value = resp.json().await?;
        assert_eq!(body["error"]["code"], "AuthenticationFailed");
    }
    let wrong = anonymous
        .get(format!("{}{}", sb.base, vm("x")))
        .bearer_auth("nope")
        .send()
        .await?;
    assert_eq!(wrong.status().as_u16(), 401);
    assert_eq!(
        sb.get(&vm("x")).await?.status,
        404,
        "the right token passes"
    );
    let health = anonymous.get(format!("{}/healthz", sb.base)).send().await?;
    assert_eq!(health.status().as_u16(), 200, "/healthz needs no token");
    Ok(())
}

#[tokio::test]
async fn an_unknown_resource_is_404_resource_not_found_with_the_arm_error_body() -> TestResult {
    let sb = Sandbox::start().await?;
    for path in [vm("nope"), disk("nope"), nic("nope")] {
        let resp = sb.get(&path).await?;
        assert_eq!(resp.status, 404, "{path}");
        assert_eq!(resp.code(), "ResourceNotFound");
        assert!(
            resp.body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("nope"))
        );
    }
    Ok(())
}

#[tokio::test]
async fn bad_bodies_are_400_naming_the_field() -> TestResult {
    let sb = Sandbox::start().await?;
    let garbage = sb
        .send_with(
            Method::PUT,
            &vm("bad"),
            None,
            &[("content-type", "application/json")],
        )
        .await?;
    assert_eq!(garbage.status, 400);
    assert_eq!(garbage.code(), "InvalidRequestContent");
    let no_size = sb
        .put(
            &vm("bad"),
            &json!({"location": "westeurope", "properties": {}}),
        )
        .await?;
    assert_eq!(no_size.status, 400);
    assert_eq!(no_size.code(), "InvalidParameter");
    assert_eq!(
        no_size.body["error"]["target"],
        "properties.hardwareProfile.vmSize"
    );
    let no_location = sb
        .put(&disk("bad"), &json!({"properties": {"diskSizeGB": 1}}))
        .await?;
    assert_eq!(no_location.code(), "InvalidParameter");
    assert_eq!(no_location.body["error"]["target"], "location");
    let bad_lun = sb.put(&vm("bad"), &{
        let mut b = vm_body(None, &[]);
        b["properties"]["storageProfile"]["dataDisks"] = json!([{"lun": 99, "createOption": "Attach", "managedDisk": {"id": disk_id("nope")}}]);
        b
    }).await?;
    assert_eq!(bad_lun.status, 404, "an unknown data disk is not found");
    Ok(())
}

#[tokio::test]
async fn every_answer_carries_request_ids_and_rate_limit_headers() -> TestResult {
    let sb = Sandbox::start().await?;
    let mine = sb
        .send_with(
            Method::GET,
            &vm("x"),
            None,
            &[("x-ms-correlation-request-id", "corr-123")],
        )
        .await?;
    assert_eq!(mine.header("x-ms-correlation-request-id"), Some("corr-123"));
    assert!(
        mine.header("x-ms-request-id")
            .is_some_and(|v| !v.is_empty())
    );
    for resp in [
        mine,
        sb.put(&vm("y"), &vm_body(None, &[])).await?,
        sb.get(&vm_id("z")).await?,
    ] {
        assert!(resp.header("x-ms-request-id").is_some());
        assert!(resp.header("x-ms-correlation-request-id").is_some());
        assert!(
            resp.header("x-ms-ratelimit-remaining-subscription-reads")
                .is_some()
        );
        assert!(
            resp.header("x-ms-ratelimit-remaining-subscription-writes")
                .is_some()
        );
    }
    Ok(())
}

#[tokio::test]
async fn tag_names_with_reserved_characters_are_refused_with_400_as_azure_does() -> TestResult {
    let sb = Sandbox::start().await?;
    let mut body = vm_body(None, &[]);
    body["tags"] = serde_json::json!({ "nodewright.io/pool": "web", "fine-name": "x" });
    let resp = sb.put(&vm("tagged"), &body).await?;
    assert_eq!(resp.status, 400);
    assert_eq!(resp.code(), "InvalidTagNameCharacters");
    let message = resp.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("nodewright.io/pool"), "{message}");
    assert!(!message.contains("fine-name"), "{message}");
    assert_eq!(
        sb.get(&vm("tagged")).await?.status,
        404,
        "nothing was created"
    );
    Ok(())
}

#[tokio::test]
async fn a_vm_azure_refuses_is_refused_in_azure_s_words() -> TestResult {
    let sb = Sandbox::start().await?;
    let mut no_key = vm_body(None, &[]);
    no_key["properties"]["osProfile"]["linuxConfiguration"] =
        json!({"disablePasswordAuthentication": true});
    let refused = sb.put(&vm("no-key"), &no_key).await?;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.code(), "InvalidParameter");
    assert_eq!(refused.body["error"]["target"], "linuxConfiguration");
    assert_eq!(
        refused.body["error"]["message"],
        "Authentication using either SSH or by user name and password must be enabled in Linux profile."
    );
    let mut premium = vm_body(None, &[]);
    premium["properties"]["hardwareProfile"]["vmSize"] = json!("Standard_D2_v5");
    premium["properties"]["storageProfile"]["osDisk"]["name"] = json!("slow-osdisk");
    let refused = sb.put(&vm("slow"), &premium).await?;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.code(), "InvalidParameter");
    assert_eq!(
        refused.body["error"]["message"],
        "Requested operation cannot be performed because the VM size Standard_D2_v5 does not support the storage account type Premium_LRS of disk 'slow-osdisk'. Consider updating the VM to a size that supports Premium storage."
    );
    for name in ["no-key", "slow"] {
        assert_eq!(
            sb.get(&vm(name)).await?.status,
            404,
            "{name} was not created"
        );
    }
    Ok(())
}
