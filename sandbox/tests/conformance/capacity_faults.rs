//! Capacity errors injected per size, zone and priority: fault rules with `size` and `priority`
//! beside `zone`, as Azure answers a Spot create that finds no capacity (`ZonalAllocationFailed`
//! in the operation, `SkuNotAvailable` at the PUT, `OperationNotAllowed` for the low-priority
//! quota).

use serde_json::{Value, json};

use crate::support::*;

fn body(size: &str, zone: &str, spot: bool) -> Value {
    let mut body = vm_body(None, &[]);
    body["properties"]["hardwareProfile"]["vmSize"] = json!(size);
    body["zones"] = json!([zone]);
    if spot {
        body["properties"]["priority"] = json!("Spot");
    }
    body
}

#[tokio::test]
async fn spot_creates_of_one_size_in_one_zone_fail_in_their_operation() -> TestResult {
    let sb = Sandbox::start().await?;
    let rule = sb
        .post(
            "/sandbox/faults",
            &json!({"kind": "fail_operation", "operation": "vm.put", "size": "Standard_D4s_v5",
                    "zone": "1", "priority": "Spot|Low", "code": "ZonalAllocationFailed",
                    "message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone."}),
        )
        .await?;
    assert_eq!(rule.status, 201, "{rule:?}");
    assert_eq!(rule.body["size"], "Standard_D4s_v5");
    let failed = sb
        .put(&vm("s-d4-z1"), &body("Standard_D4s_v5", "1", true))
        .await?;
    assert_eq!(failed.status, 201, "accepted at the PUT");
    let done = sb.finish(&failed).await?;
    assert_eq!(
        (done["status"].as_str(), done["error"]["code"].as_str()),
        (Some("Failed"), Some("ZonalAllocationFailed"))
    );
    for (name, size, zone, spot) in [
        ("r-d4-z1", "Standard_D4s_v5", "1", false),
        ("s-d4-z2", "Standard_D4s_v5", "2", true),
        ("s-d2-z1", "Standard_D2s_v5", "1", true),
    ] {
        let resp = sb.put(&vm(name), &body(size, zone, spot)).await?;
        assert_eq!(sb.finish(&resp).await?["status"], "Succeeded", "{name}");
    }
    let mut low = body("Standard_D4s_v5", "1", false);
    low["properties"]["priority"] = json!("Low");
    let resp = sb.put(&vm("l-d4-z1"), &low).await?;
    assert_eq!(
        sb.finish(&resp).await?["status"],
        "Failed",
        "Low is Spot's older name"
    );
    Ok(())
}

#[tokio::test]
async fn every_spot_create_gets_sku_not_available_at_the_put() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.post(
        "/sandbox/faults",
        &json!({"kind": "conflict", "operation": "vm.put", "priority": "Spot",
                "code": "SkuNotAvailable",
                "message": "The requested VM size Standard_D4s_v5 is currently not available for Spot in location 'westeurope'."}),
    )
    .await?;
    let refused = sb
        .put(&vm("s1"), &body("Standard_D4s_v5", "2", true))
        .await?;
    assert_eq!((refused.status, refused.code()), (409, "SkuNotAvailable"));
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not available for Spot")),
        "{refused:?}"
    );
    let regular = sb
        .put(&vm("r1"), &body("Standard_D4s_v5", "2", false))
        .await?;
    assert_eq!(regular.status, 201, "Regular when the body has no priority");
    sb.finish(&regular).await?;
    let patch = sb.patch(&vm("r1"), &json!({"tags": {"a": "b"}})).await?;
    assert_eq!(patch.status, 200, "the stored VM is Regular");
    Ok(())
}

#[tokio::test]
async fn a_low_priority_quota_refusal_is_a_conflict_with_its_code_and_message() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.post(
        "/sandbox/faults",
        &json!({"kind": "conflict", "method": "PUT", "priority": "Spot|Low",
                "size": "Standard_D*s_v5", "code": "OperationNotAllowed",
                "message": "Operation could not be completed as it results in exceeding approved LowPriorityCores quota."}),
    )
    .await?;
    let refused = sb
        .put(&vm("q1"), &body("Standard_D8s_v5", "3", true))
        .await?;
    assert_eq!(
        (refused.status, refused.code()),
        (409, "OperationNotAllowed")
    );
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("LowPriorityCores")),
        "{refused:?}"
    );
    let other = sb
        .put(&vm("q2"), &body("Standard_E4s_v5", "3", true))
        .await?;
    assert_eq!(other.status, 201, "another size");
    Ok(())
}
