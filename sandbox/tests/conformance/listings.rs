//! Subscription-level lists (`GET /subscriptions/{sub}/providers/{namespace}/{type}`): every
//! resource group's resources of the type, paged with `nextLink` as the resource-group lists are,
//! case-insensitive paths, and the api-version check of the type.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_subscription_level_list_pages_through_every_resource_group() -> TestResult {
    let sb = Sandbox::start_with(nodewright_sandbox::arm::EmulatorConfig {
        page_size: 2,
        ..instant()
    })
    .await?;
    for name in ["a", "b", "c"] {
        sb.create_nic(name).await?;
    }
    // One more in another resource group.
    let body = json!({"location": "westeurope", "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {"subnet": {"id": "/subscriptions/x/subnets/s"}}}]}});
    let other = format!(
        "/subscriptions/{SUB}/resourceGroups/rg-other/providers/Microsoft.Network/networkInterfaces/d?api-version={NIC_API}"
    );
    let created = sb.put(&other, &body).await?;
    assert_eq!(created.status, 201, "{created:?}");
    sb.finish(&created).await?;
    sb.create_disk("disk-1").await?;

    let mut url = format!(
        "/subscriptions/{SUB}/providers/microsoft.network/networkinterfaces?api-version=2026-03-01"
    );
    let mut names = Vec::new();
    let mut pages = 0;
    loop {
        let page = sb.get(&url).await?;
        assert_eq!(page.status, 200, "{page:?}");
        pages += 1;
        for item in page.body["value"].as_array().ok_or("no value")? {
            names.push(item["name"].as_str().unwrap_or_default().to_owned());
        }
        match page.body["nextLink"].as_str() {
            Some(next) => {
                let at = next
                    .find("/subscriptions/")
                    .ok_or("nextLink names no path")?;
                url = next[at..].to_owned();
            }
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    names.sort();
    assert_eq!(
        names,
        ["a", "b", "c", "d"],
        "every resource group's NICs, once"
    );
    assert_eq!(pages, 2, "pages of 2");

    let vms = sb
        .get(&format!("/subscriptions/{SUB}/providers/Microsoft.Compute/virtualMachines?api-version=2026-04-01"))
        .await?;
    assert_eq!(vms.status, 200);
    assert_eq!(vms.body["value"].as_array().map(Vec::len), Some(0));
    let disks = sb
        .get(&format!(
            "/subscriptions/{SUB}/providers/Microsoft.Compute/disks?api-version={DISK_API}"
        ))
        .await?;
    assert_eq!(disks.body["value"][0]["name"], "disk-1");
    let refused = sb
        .get(&format!(
            "/subscriptions/{SUB}/providers/Microsoft.Compute/disks?api-version={VM_API}"
        ))
        .await?;
    assert_eq!(
        (refused.status, refused.code()),
        (400, "InvalidApiVersionParameter")
    );
    Ok(())
}

#[tokio::test]
async fn status_only_lists_carry_each_vms_instance_view_on_every_page() -> TestResult {
    let sb = Sandbox::start_with(nodewright_sandbox::arm::EmulatorConfig {
        page_size: 1,
        ..instant()
    })
    .await?;
    for name in ["s1", "s2"] {
        sb.create_vm(name, &vm_body(None, &[])).await?;
    }
    let mut url = format!(
        "/subscriptions/{SUB}/providers/Microsoft.Compute/virtualMachines?api-version=2026-04-01&statusOnly=true"
    );
    let mut seen = Vec::new();
    loop {
        let page = sb.get(&url).await?;
        assert_eq!(page.status, 200, "{page:?}");
        for vm in page.body["value"].as_array().ok_or("no value")? {
            let statuses = vm["properties"]["instanceView"]["statuses"]
                .as_array()
                .ok_or("no instance view on a statusOnly list")?;
            assert!(
                statuses.iter().any(|s| s["code"] == "PowerState/running"),
                "{vm}"
            );
            seen.push(vm["name"].as_str().unwrap_or_default().to_owned());
        }
        match page.body["nextLink"].as_str() {
            Some(next) => {
                assert!(next.contains("statusOnly=true"), "{next}");
                let at = next
                    .find("/subscriptions/")
                    .ok_or("nextLink names no path")?;
                url = next[at..].to_owned();
            }
            None => break,
        }
    }
    assert_eq!(seen, ["s1", "s2"]);
    // Without it, no instance view.
    let plain = sb
        .get(&format!(
            "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachines?api-version={VM_API}"
        ))
        .await?;
    assert!(
        plain.body["value"][0]["properties"]
            .get("instanceView")
            .is_none()
    );
    Ok(())
}

#[tokio::test]
async fn a_vm_list_filters_by_scale_set_and_expands_instance_views_only_with_that_filter()
-> TestResult {
    let sb = Sandbox::start_with(nodewright_sandbox::arm::EmulatorConfig {
        page_size: 1,
        ..instant()
    })
    .await?;
    let set = format!(
        "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/pool"
    );
    for name in ["in-1", "in-2", "out"] {
        let mut body = vm_body(None, &[]);
        if name != "out" {
            body["properties"]["virtualMachineScaleSet"] = json!({ "id": set });
        }
        sb.create_vm(name, &body).await?;
    }
    let filter = format!("virtualMachineScaleSet/id eq '{set}'");
    let encoded: String = url_encode(&filter);
    for list in [
        format!(
            "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachines"
        ),
        format!("/subscriptions/{SUB}/providers/Microsoft.Compute/virtualMachines"),
    ] {
        let mut url = format!("{list}?api-version={VM_API}&$filter={encoded}&$expand=instanceView");
        let mut names = Vec::new();
        loop {
            let page = sb.get(&url).await?;
            assert_eq!(page.status, 200, "{page:?}");
            for item in page.body["value"].as_array().ok_or("no value")? {
                assert!(
                    item["properties"]["instanceView"]["statuses"].is_array(),
                    "expanded: {item}"
                );
                names.push(item["name"].as_str().unwrap_or_default().to_owned());
            }
            match page.body["nextLink"].as_str() {
                Some(next) => {
                    assert!(
                        next.contains("%24filter=") || next.contains("$filter="),
                        "{next}"
                    );
                    url = next.to_owned();
                }
                None => break,
            }
        }
        assert_eq!(
            names,
            ["in-1", "in-2"],
            "{list}: the scale set's VMs, one per page"
        );
    }
    let list = format!(
        "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachines?api-version={VM_API}"
    );
    let expand_alone = sb.get(&format!("{list}&$expand=instanceView")).await?;
    assert_eq!(
        (expand_alone.status, expand_alone.code()),
        (400, "BadRequest")
    );
    assert_eq!(
        expand_alone.body["error"]["message"],
        "Expand Instance View is only supported when Virtual Machine Scale Set resource filter is applied"
    );
    let other = sb
        .get(&format!(
            "{list}&$filter={}",
            url_encode("resourceGroup eq 'x'")
        ))
        .await?;
    assert_eq!(
        (other.status, other.code()),
        (400, "InvalidParameter"),
        "{other:?}"
    );
    assert_eq!(other.body["error"]["target"], "$filter");
    Ok(())
}

/// `value` percent-encoded for a query string.
fn url_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
