//! Fault rules scoped by availability zone: a create's body `zones[0]` or the stored VM's zone.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_zone_rule_fails_the_creates_in_its_zone_only() -> TestResult {
    let sb = Sandbox::start().await?;
    let resp = sb
        .post(
            "/sandbox/faults",
            &json!({"kind": "fail_operation", "operation": "vm.put", "zone": "2",
                    "code": "ZonalAllocationFailed", "message": "no capacity in zone 2"}),
        )
        .await?;
    assert_eq!(resp.status, 201, "{resp:?}");
    let in_two = sb.put(&vm("z2"), &vm_body(None, &[])).await?;
    let done = sb.finish(&in_two).await?;
    assert_eq!(done["status"], "Failed");
    assert_eq!(done["error"]["code"], "ZonalAllocationFailed");
    let mut body = vm_body(None, &[]);
    body["zones"] = json!(["3"]);
    let in_three = sb.put(&vm("z3"), &body).await?;
    assert_eq!(sb.finish(&in_three).await?["status"], "Succeeded");
    Ok(())
}

#[tokio::test]
async fn a_request_rule_with_a_zone_reads_the_put_body_and_the_stored_vm() -> TestResult {
    let sb = Sandbox::start().await?;
    let mut body = vm_body(None, &[]);
    body["zones"] = json!(["1"]);
    sb.create_vm("in-one", &body).await?;
    sb.create_vm("in-two", &vm_body(None, &[])).await?;
    let resp = sb
        .post(
            "/sandbox/faults",
            &json!({"kind": "conflict", "zone": "2", "code": "ZoneBusy"}),
        )
        .await?;
    assert_eq!(resp.status, 201, "{resp:?}");
    let refused = sb.put(&vm("new-two"), &vm_body(None, &[])).await?;
    assert_eq!(refused.code(), "ZoneBusy", "the PUT body names zone 2");
    assert_eq!(sb.get(&vm("in-two")).await?.code(), "ZoneBusy");
    assert_eq!(sb.get(&vm("in-one")).await?.status, 200);
    assert_eq!(sb.put(&vm("new-one"), &body).await?.status, 201);
    assert_eq!(
        sb.get(&vm("missing")).await?.status,
        404,
        "no stored VM: no zone"
    );
    Ok(())
}
