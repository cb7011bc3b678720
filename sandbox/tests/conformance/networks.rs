//! Virtual networks and subnets: create, read, list, delete (async as the network provider),
//! Azure's prefix validation, the private IP addresses NICs get in a subnet the sandbox holds,
//! `ipConfigurations` and usages, the refusals of a subnet in use, and the leniency kept for
//! subnets of networks the sandbox does not hold.

use serde_json::{Value, json};

use crate::persistence::state_file;
use crate::support::*;

/// The newest network api-version (Python `azure-mgmt-network` 33's default).
const NET_API: &str = "2026-03-01";

fn vnet_id(name: &str) -> String {
    format!(
        "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/virtualNetworks/{name}"
    )
}
fn vnet(name: &str) -> String {
    format!("{}?api-version={NET_API}", vnet_id(name))
}
fn subnet_id(vnet: &str, name: &str) -> String {
    format!("{}/subnets/{name}", vnet_id(vnet))
}
fn subnet(vnet: &str, name: &str) -> String {
    format!("{}?api-version={NET_API}", subnet_id(vnet, name))
}
fn usages(vnet: &str) -> String {
    format!("{}/usages?api-version={NET_API}", vnet_id(vnet))
}

fn vnet_body(space: &str, subnets: Value) -> Value {
    json!({"location": "westeurope", "properties": {"addressSpace": {"addressPrefixes": [space]}, "subnets": subnets}})
}

/// Creates network `name` (10.0.0.0/16) with subnet `nodes` of `prefix`, and waits for it.
async fn create_vnet(sb: &Sandbox, name: &str, prefix: &str) -> TestResult {
    let body = vnet_body(
        "10.0.0.0/16",
        json!([{"name": "nodes", "properties": {"addressPrefix": prefix}}]),
    );
    let resp = sb.put(&vnet(name), &body).await?;
    assert_eq!(resp.status, 201, "{resp:?}");
    assert_eq!(sb.finish(&resp).await?["status"], "Succeeded");
    Ok(())
}

/// PUTs NIC `name` in `subnet` (static when `ip` is given) and returns the answer.
async fn put_nic(sb: &Sandbox, name: &str, subnet: &str, ip: Option<&str>) -> Res<Resp> {
    let mut props = json!({"subnet": {"id": subnet}});
    if let Some(ip) = ip {
        props["privateIPAllocationMethod"] = json!("Static");
        props["privateIPAddress"] = json!(ip);
    }
    let body = json!({"location": "westeurope", "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": props}]}});
    let resp = sb.put(&nic(name), &body).await?;
    if resp.status == 201 {
        assert_eq!(sb.finish(&resp).await?["status"], "Succeeded");
    }
    Ok(resp)
}

fn private_ip(resp: &Resp) -> &str {
    resp.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_network_is_created_async_with_its_subnets_listed_and_deleted() -> TestResult {
    let sb = Sandbox::start().await?;
    let body = vnet_body(
        "10.0.0.0/16",
        json!([{"name": "nodes", "properties": {"addressPrefix": "10.0.0.0/24"}}]),
    );
    let resp = sb.put(&vnet("v1"), &body).await?;
    assert_eq!(resp.status, 201);
    assert!(resp.header("azure-asyncoperation").is_some());
    assert_eq!(resp.state(), "Updating");
    assert_eq!(sb.finish(&resp).await?["status"], "Succeeded");
    let got = sb.get(&vnet("v1")).await?;
    assert_eq!(got.status, 200);
    assert_eq!(got.state(), "Succeeded");
    assert_eq!(got.body["type"], "Microsoft.Network/virtualNetworks");
    assert_eq!(got.body["id"], vnet_id("v1"));
    let nodes = &got.body["properties"]["subnets"][0];
    assert_eq!(nodes["id"], subnet_id("v1", "nodes"));
    assert_eq!(nodes["type"], "Microsoft.Network/virtualNetworks/subnets");
    assert_eq!(nodes["properties"]["provisioningState"], "Succeeded");
    assert_eq!(nodes["properties"]["addressPrefix"], "10.0.0.0/24");
    // Paths are case-insensitive; an update answers 200.
    let lower = sb
        .get(&format!(
            "/subscriptions/{SUB}/resourcegroups/{RG}/providers/microsoft.network/virtualnetworks/v1?api-version={NET_API}"
        ))
        .await?;
    assert_eq!(lower.status, 200);
    let again = sb.put(&vnet("v1"), &got.body).await?;
    assert_eq!(again.status, 200);
    sb.finish(&again).await?;
    // Lists: the resource group's and the subscription's.
    create_vnet(&sb, "v2", "10.0.1.0/24").await?;
    let group = sb
        .get(&format!(
            "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/virtualNetworks?api-version={NET_API}"
        ))
        .await?;
    assert_eq!(group.body["value"].as_array().ok_or("no value")?.len(), 2);
    let all = sb
        .get(&format!(
            "/subscriptions/{SUB}/providers/Microsoft.Network/virtualNetworks?api-version={NET_API}"
        ))
        .await?;
    assert_eq!(all.body["value"].as_array().ok_or("no value")?.len(), 2);
    let old = sb
        .get(&format!("{}?api-version=2019-01-01", vnet_id("v1")))
        .await?;
    assert_eq!(old.code(), "InvalidApiVersionParameter");
    // Delete: 202 with Location, then gone, then 204.
    let deleted = sb.delete(&vnet("v1")).await?;
    assert_eq!(deleted.status, 202);
    assert!(deleted.header("location").is_some());
    assert_eq!(sb.finish(&deleted).await?["status"], "Succeeded");
    let gone = sb.get(&vnet("v1")).await?;
    assert_eq!(gone.status, 404);
    assert_eq!(gone.code(), "ResourceNotFound");
    assert_eq!(sb.delete(&vnet("v1")).await?.status, 204);
    Ok(())
}

#[tokio::test]
async fn prefixes_are_validated_as_azure_does() -> TestResult {
    let sb = Sandbox::start().await?;
    let cases = [
        ("10.1.0.0/24", "NetcfgSubnetRangeOutsideVnet"),
        ("10.0.0.7/24", "InvalidCIDRNotation"),
        ("10.0.0/24", "InvalidAddressPrefixFormat"),
    ];
    for (prefix, code) in cases {
        let body = vnet_body(
            "10.0.0.0/16",
            json!([{"name": "a", "properties": {"addressPrefix": prefix}}]),
        );
        let resp = sb.put(&vnet("bad"), &body).await?;
        assert_eq!(resp.status, 400, "{prefix}: {resp:?}");
        assert_eq!(resp.code(), code, "{prefix}");
    }
    assert_eq!(sb.get(&vnet("bad")).await?.status, 404);
    create_vnet(&sb, "v", "10.0.0.0/24").await?;
    let overlap = sb
        .put(
            &subnet("v", "other"),
            &json!({"properties": {"addressPrefix": "10.0.0.128/25"}}),
        )
        .await?;
    assert_eq!(overlap.status, 400);
    assert_eq!(overlap.code(), "NetcfgSubnetRangesOverlap");
    assert!(
        overlap.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("'other'") && m.contains("'v'")),
        "{overlap:?}"
    );
    let orphan = sb
        .put(
            &subnet("missing", "a"),
            &json!({"properties": {"addressPrefix": "10.0.0.0/24"}}),
        )
        .await?;
    assert_eq!(orphan.status, 404);
    assert_eq!(orphan.code(), "ResourceNotFound");
    Ok(())
}

#[tokio::test]
async fn subnets_are_created_read_listed_and_deleted_on_their_own() -> TestResult {
    let sb = Sandbox::start().await?;
    create_vnet(&sb, "v", "10.0.0.0/24").await?;
    let put = sb
        .put(
            &subnet("v", "extra"),
            &json!({"properties": {"addressPrefixes": ["10.0.8.0/22"]}}),
        )
        .await?;
    assert_eq!(put.status, 201, "{put:?}");
    assert!(put.header("azure-asyncoperation").is_some());
    assert_eq!(put.body["id"], subnet_id("v", "extra"));
    assert_eq!(sb.finish(&put).await?["status"], "Succeeded");
    let got = sb.get(&subnet("v", "extra")).await?;
    assert_eq!(got.status, 200);
    assert_eq!(got.state(), "Succeeded");
    assert_eq!(got.body["properties"]["addressPrefixes"][0], "10.0.8.0/22");
    let update = sb.put(&subnet("v", "extra"), &got.body).await?;
    assert_eq!(update.status, 200);
    sb.finish(&update).await?;
    let list = sb
        .get(&format!("{}/subnets?api-version={NET_API}", vnet_id("v")))
        .await?;
    let names: Vec<&str> = list.body["value"]
        .as_array()
        .ok_or("no value")?
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["nodes", "extra"]);
    let network = sb.get(&vnet("v")).await?;
    assert_eq!(
        network.body["properties"]["subnets"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    let deleted = sb.delete(&subnet("v", "extra")).await?;
    assert_eq!(deleted.status, 202);
    assert!(deleted.header("location").is_some());
    sb.finish(&deleted).await?;
    let gone = sb.get(&subnet("v", "extra")).await?;
    assert_eq!(gone.status, 404);
    assert_eq!(gone.code(), "NotFound");
    assert_eq!(sb.delete(&subnet("v", "extra")).await?.status, 204);
    let stats = sb.get("/sandbox/stats").await?.body;
    let counted = &stats["by_operation"];
    assert_eq!(counted["subnet.put"]["201"], 1, "{stats}");
    assert_eq!(counted["subnet.put"]["200"], 1, "{stats}");
    assert_eq!(counted["subnet.get"]["404"], 1, "{stats}");
    assert_eq!(counted["subnet.list"]["200"], 1, "{stats}");
    assert_eq!(counted["subnet.delete"]["204"], 1, "{stats}");
    Ok(())
}

#[tokio::test]
async fn nics_get_addresses_until_the_subnet_is_full_and_usages_count_them() -> TestResult {
    let sb = Sandbox::start().await?;
    // A /29: eight addresses, five reserved, three to give out.
    create_vnet(&sb, "v", "10.0.0.0/29").await?;
    let nodes = subnet_id("v", "nodes");
    let mut ips = Vec::new();
    for name in ["a", "b", "c"] {
        let resp = put_nic(&sb, name, &nodes, None).await?;
        assert_eq!(resp.status, 201, "{resp:?}");
        let got = sb.get(&nic(name)).await?;
        assert_eq!(
            got.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAllocationMethod"],
            "Dynamic"
        );
        ips.push(private_ip(&got).to_owned());
    }
    assert_eq!(ips, ["10.0.0.4", "10.0.0.5", "10.0.0.6"]);
    let full = put_nic(&sb, "d", &nodes, None).await?;
    assert_eq!(full.status, 400);
    assert_eq!(full.code(), "SubnetIsFull");
    assert_eq!(sb.get(&nic("d")).await?.status, 404);
    let got = sb.get(&subnet("v", "nodes")).await?;
    let configs: Vec<&str> = got.body["properties"]["ipConfigurations"]
        .as_array()
        .ok_or("no ipConfigurations")?
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(configs.len(), 3);
    assert_eq!(
        configs[0],
        format!("{}/ipConfigurations/ipconfig1", nic_id("a"))
    );
    let usage = sb.get(&usages("v")).await?;
    assert_eq!(usage.status, 200);
    let row = &usage.body["value"][0];
    assert_eq!(row["id"], nodes);
    assert_eq!(row["currentValue"], 3);
    assert_eq!(row["limit"], 3);
    assert_eq!(row["unit"], "Count");
    assert_eq!(row["name"]["value"], "Subnet size and usage");
    // A deleted NIC gives its address back.
    let deleted = sb.delete(&nic("b")).await?;
    sb.finish(&deleted).await?;
    assert_eq!(
        sb.get(&usages("v")).await?.body["value"][0]["currentValue"],
        2
    );
    put_nic(&sb, "d", &nodes, None).await?;
    assert_eq!(private_ip(&sb.get(&nic("d")).await?), "10.0.0.5");
    Ok(())
}

#[tokio::test]
async fn static_addresses_are_checked_and_missing_subnets_refused() -> TestResult {
    let sb = Sandbox::start().await?;
    create_vnet(&sb, "v", "10.0.0.0/24").await?;
    let nodes = subnet_id("v", "nodes");
    let resp = put_nic(&sb, "a", &nodes, Some("10.0.0.50")).await?;
    assert_eq!(resp.status, 201, "{resp:?}");
    assert_eq!(private_ip(&sb.get(&nic("a")).await?), "10.0.0.50");
    let taken = put_nic(&sb, "b", &nodes, Some("10.0.0.50")).await?;
    assert_eq!(taken.status, 400);
    assert_eq!(taken.code(), "PrivateIPAddressIsAllocated");
    let outside = put_nic(&sb, "b", &nodes, Some("10.0.1.9")).await?;
    assert_eq!(outside.code(), "PrivateIPAddressNotInSubnet");
    let reserved = put_nic(&sb, "b", &nodes, Some("10.0.0.1")).await?;
    assert_eq!(reserved.status, 400);
    assert_eq!(reserved.code(), "PrivateIPAddressInReservedRange");
    let missing = put_nic(&sb, "b", &subnet_id("v", "nope"), None).await?;
    assert_eq!(missing.status, 400);
    assert_eq!(missing.code(), "InvalidResourceReference");
    // A subnet of a network the sandbox does not hold: accepted, without an address.
    sb.create_nic("lenient").await?;
    let lenient = put_nic(
        &sb,
        "lenient2",
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/nodes/subnets/nodes",
        None,
    )
    .await?;
    assert_eq!(lenient.status, 201);
    assert_eq!(private_ip(&sb.get(&nic("lenient2")).await?), "");
    Ok(())
}

#[tokio::test]
async fn a_subnet_in_use_cannot_be_deleted_nor_its_network_nor_dropped() -> TestResult {
    let sb = Sandbox::start().await?;
    create_vnet(&sb, "v", "10.0.0.0/24").await?;
    put_nic(&sb, "a", &subnet_id("v", "nodes"), None).await?;
    let refused = sb.delete(&subnet("v", "nodes")).await?;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.code(), "InUseSubnetCannotBeDeleted");
    let message = refused.body["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains(&format!("{}/ipConfigurations/ipconfig1", nic_id("a"))),
        "{message}"
    );
    assert_eq!(
        sb.delete(&vnet("v")).await?.code(),
        "InUseSubnetCannotBeDeleted"
    );
    let dropped = sb
        .put(&vnet("v"), &vnet_body("10.0.0.0/16", json!([])))
        .await?;
    assert_eq!(dropped.status, 400);
    assert_eq!(dropped.code(), "InUseSubnetCannotBeDeleted");
    // Once the NIC is gone, the subnet goes.
    let gone = sb.delete(&nic("a")).await?;
    sb.finish(&gone).await?;
    let deleted = sb.delete(&subnet("v", "nodes")).await?;
    assert_eq!(deleted.status, 202, "{deleted:?}");
    sb.finish(&deleted).await?;
    Ok(())
}

#[tokio::test]
async fn networks_and_their_addresses_survive_a_restart_and_are_counted() -> TestResult {
    let file = state_file()?;
    let config = nodewright_sandbox::arm::EmulatorConfig {
        state_file: Some(file.clone()),
        ..instant()
    };
    {
        let sb = Sandbox::start_with(config.clone()).await?;
        create_vnet(&sb, "kept", "10.0.0.0/29").await?;
        put_nic(&sb, "a", &subnet_id("kept", "nodes"), None).await?;
        sb.get(&usages("kept")).await?;
        let stats = sb.get("/sandbox/stats").await?.body;
        assert_eq!(stats["by_operation"]["vnet.put"]["201"], 1, "{stats}");
        assert_eq!(stats["by_operation"]["vnet.usages"]["200"], 1, "{stats}");
    }
    let again = Sandbox::start_with(config).await?;
    let usage = again.get(&usages("kept")).await?;
    assert_eq!(usage.body["value"][0]["currentValue"], 1);
    put_nic(&again, "b", &subnet_id("kept", "nodes"), None).await?;
    assert_eq!(private_ip(&again.get(&nic("b")).await?), "10.0.0.5");
    let stats = again.get("/sandbox/stats").await?.body;
    assert_eq!(stats["by_operation"]["nic.put"]["201"], 1, "{stats}");
    let _ = std::fs::remove_file(&file);
    Ok(())
}

#[tokio::test]
async fn a_vm_delete_that_deletes_its_nic_frees_the_address() -> TestResult {
    let sb = Sandbox::start().await?;
    create_vnet(&sb, "v", "10.0.0.0/24").await?;
    put_nic(&sb, "web-nic", &subnet_id("v", "nodes"), None).await?;
    sb.create_vm("web", &vm_body(Some("web-nic"), &[])).await?;
    assert_eq!(
        sb.get(&usages("v")).await?.body["value"][0]["currentValue"],
        1
    );
    let deleted = sb.delete(&vm("web")).await?;
    assert_eq!(sb.finish(&deleted).await?["status"], "Succeeded");
    assert_eq!(sb.get(&nic("web-nic")).await?.status, 404);
    assert_eq!(
        sb.get(&usages("v")).await?.body["value"][0]["currentValue"],
        0
    );
    let nodes = sb.get(&subnet("v", "nodes")).await?;
    assert!(
        nodes.body["properties"].get("ipConfigurations").is_none(),
        "{nodes:?}"
    );
    Ok(())
}
