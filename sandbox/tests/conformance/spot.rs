//! Spot VM creates as Azure checks them (`billingProfile.maxPrice`, `evictionPolicy`, sizes
//! without Spot, ephemeral OS disks, the Spot price), the defaults Azure writes, and the Spot
//! prices of the admin API (a raised price evicts the VMs it prices out).

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

fn spot(properties: Value) -> Value {
    let mut body = vm_body(None, &[]);
    body["properties"]["priority"] = json!("Spot");
    merge(&mut body["properties"], properties);
    body
}

fn merge(target: &mut Value, patch: Value) {
    if let (Some(t), Value::Object(p)) = (target.as_object_mut(), patch) {
        for (k, v) in p {
            t.insert(k, v);
        }
    }
}

#[tokio::test]
async fn spot_creates_are_refused_as_azure_refuses_them() -> TestResult {
    let sb = Sandbox::start().await?;
    let cases = [
        (
            spot(json!({"billingProfile": {"maxPrice": 0}})),
            400,
            "MaxPriceValueInvalid",
        ),
        (
            spot(json!({"billingProfile": {"maxPrice": 0.123456}})),
            400,
            "MaxPriceValueInvalid",
        ),
        (
            {
                let mut b = vm_body(None, &[]);
                b["properties"]["billingProfile"] = json!({"maxPrice": -1});
                b
            },
            400,
            "InvalidParameter",
        ),
        (
            {
                let mut b = vm_body(None, &[]);
                b["properties"]["evictionPolicy"] = json!("Delete");
                b
            },
            400,
            "InvalidParameter",
        ),
        (
            {
                let mut b = spot(json!({}));
                b["properties"]["hardwareProfile"]["vmSize"] = json!("Standard_B2s");
                b
            },
            400,
            "AzureSpotIsNotSupportedForThisVMSize",
        ),
        (
            {
                let mut b = spot(json!({}));
                b["properties"]["storageProfile"]["osDisk"]["diffDiskSettings"] =
                    json!({"option": "Local"});
                b
            },
            400,
            "InvalidParameter",
        ),
        (
            spot(json!({"billingProfile": {"maxPrice": 0.001}})),
            409,
            "SpotPriceGreaterThanProvidedMaxPrice",
        ),
    ];
    for (i, (body, status, code)) in cases.into_iter().enumerate() {
        let resp = sb.put(&vm(&format!("refused-{i}")), &body).await?;
        assert_eq!(
            (resp.status, resp.code()),
            (status, code),
            "case {i}: {resp:?}"
        );
        assert_eq!(sb.get(&vm(&format!("refused-{i}"))).await?.status, 404);
    }
    let bad = sb
        .put(
            &vm("bad"),
            &spot(json!({"billingProfile": {"maxPrice": -3}})),
        )
        .await?;
    assert!(
        bad.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("'-3'")),
        "{bad:?}"
    );
    let low = sb
        .put(
            &vm("low"),
            &spot(json!({"billingProfile": {"maxPrice": 0.001}})),
        )
        .await?;
    assert!(
        low.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("'0.0384 USD'") && m.contains("Standard_D4s_v5")),
        "{low:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_spot_vm_gets_azures_defaults_and_a_sufficient_max_price_is_accepted() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("dflt", &spot(json!({}))).await?;
    let got = sb.get(&vm("dflt")).await?;
    assert_eq!(got.body["properties"]["evictionPolicy"], "Deallocate");
    assert_eq!(got.body["properties"]["billingProfile"]["maxPrice"], -1);
    sb.create_vm(
        "priced",
        &spot(json!({"billingProfile": {"maxPrice": 0.05}})),
    )
    .await?;
    let mut ephemeral = spot(json!({"evictionPolicy": "Delete"}));
    ephemeral["properties"]["storageProfile"]["osDisk"]["diffDiskSettings"] =
        json!({"option": "Local"});
    sb.create_vm("eph", &ephemeral).await?;
    let regular = sb.get(&vm("eph")).await?;
    assert_eq!(regular.status, 200);
    Ok(())
}

#[tokio::test]
async fn spot_prices_are_read_and_raised_through_the_admin_api() -> TestResult {
    let sb = Sandbox::start().await?;
    let prices = sb.get("/sandbox/spot-prices").await?;
    let d4 = prices.body["prices"]
        .as_array()
        .and_then(|p| p.iter().find(|s| s["size"] == "Standard_D4s_v5"))
        .cloned()
        .ok_or("no D4s_v5")?;
    assert_eq!(
        d4,
        json!({"size": "Standard_D4s_v5", "spotSupported": true, "spotPrice": 0.0384, "onDemandPrice": 0.192})
    );
    sb.create_vm(
        "cheap",
        &spot(json!({"billingProfile": {"maxPrice": 0.05}})),
    )
    .await?;
    sb.create_vm("any", &spot(json!({}))).await?;
    let raised = sb
        .send_with(
            Method::PUT,
            "/sandbox/spot-prices",
            Some(&json!({"prices": {"standard_d4s_v5": 0.06}})),
            &[],
        )
        .await?;
    assert_eq!(raised.status, 200, "{raised:?}");
    assert_eq!(raised.body["evicted"], 1, "only the VM priced out");
    let events = sb.get("/sandbox/scheduled-events").await?;
    let listed = events.body["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["eventType"], "Preempt");
    assert_eq!(listed[0]["resources"], json!([vm_id("cheap")]));
    let refused = sb
        .put(
            &vm("late"),
            &spot(json!({"billingProfile": {"maxPrice": 0.05}})),
        )
        .await?;
    assert_eq!(refused.code(), "SpotPriceGreaterThanProvidedMaxPrice");
    let unknown = sb
        .put(
            "/sandbox/spot-prices",
            &json!({"prices": {"Standard_B2s": 1.0}}),
        )
        .await?;
    assert_eq!(
        (unknown.status, unknown.body["error"]["target"].as_str()),
        (400, Some("prices.Standard_B2s"))
    );
    let reset = sb.delete("/sandbox/spot-prices").await?;
    assert_eq!(reset.status, 200);
    sb.create_vm("late", &spot(json!({"billingProfile": {"maxPrice": 0.05}})))
        .await?;
    Ok(())
}
