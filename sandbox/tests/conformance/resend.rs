//! A VM create that Azure ended `Failed` is run again by another PUT of the same body, as Azure
//! does: the VM is created again (its OS disk made again) and runs.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_put_to_a_vm_whose_create_failed_creates_it_again() -> TestResult {
    let sb = Sandbox::start().await?;
    let rule = json!({"kind": "fail_operation", "operation": "vm.put", "count": 1,
                      "code": "InternalExecutionError", "message": "Please retry later"});
    let added = sb.post("/sandbox/faults", &rule).await?;
    assert_eq!(added.status, 201, "{added:?}");
    let mut body = vm_body(None, &[]);
    body["properties"]["storageProfile"]["osDisk"]["name"] = json!("again-osdisk");

    let first = sb.put(&vm("again"), &body).await?;
    assert_eq!(first.status, 201);
    assert_eq!(sb.finish(&first).await?["status"], "Failed");
    assert_eq!(sb.get(&vm("again")).await?.state(), "Failed");
    assert_eq!(
        sb.get(&disk("again-osdisk")).await?.status,
        404,
        "the failed create took its OS disk"
    );

    let second = sb.put(&vm("again"), &body).await?;
    assert_eq!(second.status, 201, "created again: {second:?}");
    assert_eq!(sb.finish(&second).await?["status"], "Succeeded");
    assert_eq!(sb.get(&vm("again")).await?.state(), "Succeeded");
    let os_disk = sb.get(&disk("again-osdisk")).await?;
    assert_eq!(os_disk.status, 200, "the OS disk made again");
    assert_eq!(os_disk.body["managedBy"], vm_id("again"));
    Ok(())
}
