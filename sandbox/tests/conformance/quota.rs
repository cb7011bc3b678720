//! Compute quota: the usages API (`…/locations/{location}/usages`) counts every VM by family and
//! in total, and a create or resize beyond a limit is refused at the PUT/PATCH as Azure refuses
//! it (409 `OperationNotAllowed`, naming the quota, limit, usage and what is required); sizes
//! restricted in a zone get 409 `SkuNotAvailable`, unknown sizes 400 `InvalidParameter`.

use nodewright_sandbox::arm::{EmulatorConfig, QuotaConfig, Restriction};
use serde_json::{Value, json};

use crate::support::*;

/// The usages of the conformance subscription in `location` with the version Python compute
/// 39 sends.
fn usages(location: &str) -> String {
    format!(
        "/subscriptions/{SUB}/providers/Microsoft.Compute/locations/{location}/usages?api-version=2026-04-01"
    )
}

/// `(currentValue, limit)` of the usage named `name`.
fn usage(body: &Value, name: &str) -> Option<(u64, u64)> {
    body["value"]
        .as_array()?
        .iter()
        .find(|u| u["name"]["value"] == name)
        .and_then(|u| Some((u["currentValue"].as_u64()?, u["limit"].as_u64()?)))
}

fn with_quota(quota: QuotaConfig) -> EmulatorConfig {
    EmulatorConfig { quota, ..instant() }
}

fn sized(size: &str, zone: &str) -> Value {
    let mut body = vm_body(None, &[]);
    body["properties"]["hardwareProfile"]["vmSize"] = json!(size);
    body["zones"] = json!([zone]);
    body
}

#[tokio::test]
async fn usages_count_every_vm_by_family_and_in_total_until_it_is_deleted() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("a", &sized("Standard_D4s_v5", "1")).await?;
    sb.create_vm("b", &sized("Standard_D4s_v5", "2")).await?;
    sb.create_vm("c", &sized("Standard_B2s", "3")).await?;
    let listed = sb.get(&usages("westeurope")).await?;
    assert_eq!(listed.status, 200, "{listed:?}");
    assert_eq!(usage(&listed.body, "cores"), Some((10, 100_000)));
    assert_eq!(
        usage(&listed.body, "standardDSv5Family"),
        Some((8, 100_000))
    );
    assert_eq!(usage(&listed.body, "standardBSFamily"), Some((2, 100_000)));
    assert_eq!(
        usage(&listed.body, "standardESv5Family"),
        Some((0, 100_000))
    );
    assert_eq!(usage(&listed.body, "virtualMachines"), Some((3, 25_000)));
    let family = listed.body["value"]
        .as_array()
        .and_then(|v| {
            v.iter()
                .find(|u| u["name"]["value"] == "standardDSv5Family")
        })
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        family["name"]["localizedValue"],
        "Standard DSv5 Family vCPUs"
    );
    assert_eq!(family["unit"], "Count");
    let cores = listed.body["value"][1].clone();
    assert_eq!(cores["name"]["localizedValue"], "Total Regional vCPUs");

    // Azure counts a deallocated VM's vCPUs too; only a delete frees them.
    let deallocate = sb
        .post(
            &format!("{}/deallocate?api-version={VM_API}", vm_id("a")),
            &json!({}),
        )
        .await?;
    assert_eq!(sb.finish(&deallocate).await?["status"], "Succeeded");
    let after = sb.get(&usages("westeurope")).await?;
    assert_eq!(usage(&after.body, "cores"), Some((10, 100_000)));
    let deleted = sb.delete(&vm("a")).await?;
    assert_eq!(sb.finish(&deleted).await?["status"], "Succeeded");
    let after = sb.get(&usages("West Europe")).await?;
    assert_eq!(usage(&after.body, "cores"), Some((6, 100_000)));
    assert_eq!(usage(&after.body, "standardDSv5Family"), Some((4, 100_000)));
    let elsewhere = sb.get(&usages("northeurope")).await?;
    assert_eq!(usage(&elsewhere.body, "cores"), Some((0, 100_000)));

    let wrong = sb
        .get(&format!(
            "/subscriptions/{SUB}/providers/Microsoft.Compute/locations/westeurope/usages?api-version=2021-07-01"
        ))
        .await?;
    assert_eq!(wrong.status, 400, "{wrong:?}");
    assert_eq!(wrong.code(), "InvalidApiVersionParameter");
    let lower = sb
        .get(&format!(
            "/subscriptions/{SUB}/providers/microsoft.compute/Locations/westeurope/Usages?api-version=2024-07-01"
        ))
        .await?;
    assert_eq!(lower.status, 200, "paths are case-insensitive: {lower:?}");
    assert_eq!(sb.emulator.stats().count("usage.list", 200), 5);
    Ok(())
}

#[tokio::test]
async fn a_create_beyond_the_family_quota_is_refused_at_the_put_in_azures_words() -> TestResult {
    let quota = QuotaConfig {
        families: [("standardDSv5Family".to_owned(), 8)].into(),
        ..QuotaConfig::default()
    };
    let sb = Sandbox::start_with(with_quota(quota)).await?;
    sb.create_vm("a", &sized("Standard_D4s_v5", "1")).await?;
    sb.create_vm("b", &sized("Standard_D4s_v5", "2")).await?;
    let refused = sb.put(&vm("c"), &sized("Standard_D2s_v5", "2")).await?;
    assert_eq!(refused.status, 409, "{refused:?}");
    assert_eq!(refused.code(), "OperationNotAllowed");
    assert!(refused.header("azure-asyncoperation").is_none());
    let message = refused.body["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.starts_with("Operation could not be completed as it results in exceeding approved standardDSv5Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: westeurope, Current Limit: 8, Current Usage: 8, Additional Required: 2, (Minimum) New Limit Required: 10."),
        "{message}"
    );
    assert_eq!(sb.get(&vm("c")).await?.status, 404, "nothing was made");
    // Another family still has room.
    sb.create_vm("d", &sized("Standard_B2s", "2")).await?;
    Ok(())
}

#[tokio::test]
async fn the_total_regional_quota_holds_across_families() -> TestResult {
    let quota = QuotaConfig {
        regional_vcpus: 6,
        ..QuotaConfig::default()
    };
    let sb = Sandbox::start_with(with_quota(quota)).await?;
    sb.create_vm("a", &sized("Standard_D4s_v5", "1")).await?;
    let refused = sb.put(&vm("b"), &sized("Standard_B4ms", "1")).await?;
    assert_eq!(refused.status, 409, "{refused:?}");
    assert_eq!(
        refused.body["error"]["message"],
        "Operation could not be completed as it results in exceeding approved Total Regional Cores quota. Additional details - Deployment Model: Resource Manager, Location: westeurope, Current Limit: 6, Current Usage: 4, Additional Required: 4, (Minimum) New Limit Required: 8."
    );
    sb.create_vm("c", &sized("Standard_B2s", "1")).await?;
    // Spot VMs count against the low-priority quota, not the regional one.
    let mut spot = sized("Standard_D4s_v5", "1");
    spot["properties"]["priority"] = json!("Spot");
    spot["properties"]["evictionPolicy"] = json!("Delete");
    sb.create_vm("spot", &spot).await?;
    let listed = sb.get(&usages("westeurope")).await?;
    assert_eq!(usage(&listed.body, "cores"), Some((6, 6)));
    assert_eq!(usage(&listed.body, "lowPriorityCores"), Some((4, 100_000)));
    Ok(())
}

#[tokio::test]
async fn a_resize_beyond_the_quota_is_refused_and_one_within_it_passes() -> TestResult {
    let quota = QuotaConfig {
        families: [("standardDSv5Family".to_owned(), 8)].into(),
        ..QuotaConfig::default()
    };
    let sb = Sandbox::start_with(with_quota(quota)).await?;
    sb.create_vm("a", &sized("Standard_D4s_v5", "1")).await?;
    let grow = json!({"properties": {"hardwareProfile": {"vmSize": "Standard_D16s_v5"}}});
    let refused = sb.patch(&vm("a"), &grow).await?;
    assert_eq!(refused.status, 409, "{refused:?}");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Current Limit: 8, Current Usage: 4, Additional Required: 12, (Minimum) New Limit Required: 16.")),
        "{refused:?}"
    );
    let fits = json!({"properties": {"hardwareProfile": {"vmSize": "Standard_D8s_v5"}}});
    let resized = sb.patch(&vm("a"), &fits).await?;
    assert_eq!(resized.status, 200, "{resized:?}");
    assert_eq!(sb.finish(&resized).await?["status"], "Succeeded");
    let listed = sb.get(&usages("westeurope")).await?;
    assert_eq!(usage(&listed.body, "standardDSv5Family"), Some((8, 8)));
    // Updates that leave the size alone are not checked, even at the limit.
    let tags = sb.patch(&vm("a"), &json!({"tags": {"k": "v"}})).await?;
    assert_eq!(tags.status, 200, "{tags:?}");
    assert_eq!(sb.finish(&tags).await?["status"], "Succeeded");
    // A move to another family needs room there only.
    let other = json!({"properties": {"hardwareProfile": {"vmSize": "Standard_E4s_v5"}}});
    let moved = sb.patch(&vm("a"), &other).await?;
    assert_eq!(moved.status, 200, "{moved:?}");
    Ok(())
}

#[tokio::test]
async fn two_creates_racing_for_the_last_vcpus_do_not_both_pass() -> TestResult {
    let quota = QuotaConfig {
        regional_vcpus: 4,
        ..QuotaConfig::default()
    };
    let sb = Sandbox::start_with(EmulatorConfig {
        quota,
        ..short(1.0)
    })
    .await?;
    let body = sized("Standard_D4s_v5", "1");
    let (one, two) = (vm("one"), vm("two"));
    let (first, second) = tokio::join!(sb.put(&one, &body), sb.put(&two, &body));
    let statuses = [first?.status, second?.status];
    assert!(
        statuses == [201, 409] || statuses == [409, 201],
        "exactly one create passes while the other is still being created: {statuses:?}"
    );
    Ok(())
}

#[tokio::test]
async fn the_quota_is_replaced_at_runtime_through_the_admin_endpoint() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("a", &sized("Standard_D2s_v5", "1")).await?;
    let lowered = sb
        .send_with(
            reqwest::Method::PUT,
            "/sandbox/quota",
            Some(&json!({"locations": [{"location": "westeurope", "regional_vcpus": 2}]})),
            &[],
        )
        .await?;
    assert_eq!(lowered.status, 200, "{lowered:?}");
    assert_eq!(lowered.body["regional_vcpus"], 100_000);
    let shown = sb.get("/sandbox/quota").await?;
    assert_eq!(shown.body["locations"][0]["regional_vcpus"], 2);
    let refused = sb.put(&vm("b"), &sized("Standard_D2s_v5", "1")).await?;
    assert_eq!(refused.code(), "OperationNotAllowed", "{refused:?}");
    let listed = sb.get(&usages("westeurope")).await?;
    assert_eq!(usage(&listed.body, "cores"), Some((2, 2)));
    let listed = sb.get(&usages("eastus")).await?;
    assert_eq!(usage(&listed.body, "cores"), Some((0, 100_000)));

    let invalid = sb
        .send_with(
            reqwest::Method::PUT,
            "/sandbox/quota",
            Some(&json!({"restrictions": [{"size": "Standard_Huge", "location": "westeurope"}]})),
            &[],
        )
        .await?;
    assert_eq!(invalid.status, 400, "{invalid:?}");
    assert_eq!(invalid.code(), "InvalidParameter");
    assert_eq!(invalid.body["error"]["target"], "restrictions[0].size");
    let unknown = sb
        .send_with(
            reqwest::Method::PUT,
            "/sandbox/quota",
            Some(&json!({"cores": 3})),
            &[],
        )
        .await?;
    assert_eq!(unknown.status, 400, "{unknown:?}");
    let kept = sb.get("/sandbox/quota").await?;
    assert_eq!(
        kept.body["locations"][0]["regional_vcpus"], 2,
        "a refused PUT changes nothing"
    );
    Ok(())
}

#[tokio::test]
async fn a_size_restricted_in_its_zone_or_location_is_refused_with_sku_not_available() -> TestResult
{
    let quota = QuotaConfig {
        restrictions: vec![
            Restriction {
                size: "Standard_D4s_v5".into(),
                location: "westeurope".into(),
                zones: vec!["2".into()],
            },
            Restriction {
                size: "Standard_B2s".into(),
                location: "westeurope".into(),
                zones: Vec::new(),
            },
        ],
        ..QuotaConfig::default()
    };
    let sb = Sandbox::start_with(with_quota(quota)).await?;
    let refused = sb.put(&vm("z2"), &sized("Standard_D4s_v5", "2")).await?;
    assert_eq!(refused.status, 409, "{refused:?}");
    assert_eq!(refused.code(), "SkuNotAvailable");
    assert_eq!(
        refused.body["error"]["message"],
        format!(
            "The requested size for resource '{}' is currently not available in location 'westeurope' zones '2' for subscription '{SUB}'. Please try another size or deploy to a different location or zones. See https://aka.ms/azureskunotavailable for details.",
            vm_id("z2")
        )
    );
    assert_eq!(sb.get(&vm("z2")).await?.status, 404);
    sb.create_vm("z1", &sized("Standard_D4s_v5", "1")).await?;
    let mut regional = sized("Standard_B2s", "1");
    regional.as_object_mut().map(|b| b.remove("zones"));
    let refused = sb.put(&vm("b"), &regional).await?;
    assert_eq!(refused.code(), "SkuNotAvailable", "{refused:?}");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("in location 'westeurope' zones '' for subscription")),
        "{refused:?}"
    );
    // A resize into the restricted zone's size is refused too.
    let resize = json!({"properties": {"hardwareProfile": {"vmSize": "Standard_B2s"}}});
    assert_eq!(
        sb.patch(&vm("z1"), &resize).await?.code(),
        "SkuNotAvailable"
    );
    Ok(())
}

#[tokio::test]
async fn an_unknown_size_is_refused_as_azure_refuses_it() -> TestResult {
    let sb = Sandbox::start().await?;
    let refused = sb.put(&vm("huge"), &sized("Standard_Huge", "1")).await?;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert_eq!(refused.code(), "InvalidParameter");
    assert_eq!(refused.body["error"]["target"], "vmSize");
    let message = refused.body["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.starts_with("The value Standard_Huge provided for the VM size is not valid. The valid sizes in the current region are: Standard_A2_v2,")
            && message.contains(",Standard_D2s_v5,"),
        "{message}"
    );
    Ok(())
}
