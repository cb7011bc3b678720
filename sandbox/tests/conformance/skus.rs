//! Resource SKUs (`GET /subscriptions/{sub}/providers/Microsoft.Compute/skus`): Azure's
//! `ResourceSkusResult` for the VM sizes the sandbox knows, filtered by location, paged with
//! `nextLink`, with the configured restrictions as `Location`/`Zone` entries.

use std::collections::BTreeSet;

use nodewright_sandbox::arm::{EmulatorConfig, QuotaConfig, Restriction};
use serde_json::{Value, json};

use crate::support::*;

fn skus(query: &str) -> String {
    format!("/subscriptions/{SUB}/providers/Microsoft.Compute/skus?api-version=2021-07-01{query}")
}

/// Every entry of the list, following `nextLink`; and how many pages it took.
async fn all(sb: &Sandbox, first: &str) -> Res<(Vec<Value>, usize)> {
    let mut entries = Vec::new();
    let mut next = Some(first.to_owned());
    let mut pages = 0;
    while let Some(url) = next {
        let page = sb.get(&url).await?;
        assert_eq!(page.status, 200, "{page:?}");
        entries.extend(page.body["value"].as_array().cloned().unwrap_or_default());
        next = page.body["nextLink"].as_str().map(str::to_owned);
        pages += 1;
        assert!(pages < 100, "the pages never end");
    }
    Ok((entries, pages))
}

fn capability<'a>(entry: &'a Value, name: &str) -> Option<&'a str> {
    entry["capabilities"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)?["value"]
        .as_str()
}

#[tokio::test]
async fn a_location_filter_lists_each_known_size_once_with_its_capabilities_over_pages()
-> TestResult {
    let sb = Sandbox::start_with(EmulatorConfig {
        page_size: 7,
        quota: QuotaConfig {
            restrictions: vec![
                Restriction {
                    size: "Standard_D2s_v5".into(),
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
        },
        ..instant()
    })
    .await?;
    let filter = "&$filter=location%20eq%20%27westeurope%27&includeExtendedLocations=true";
    let (entries, pages) = all(&sb, &skus(filter)).await?;
    assert!(entries.len() >= 40, "{}", entries.len());
    assert_eq!(pages, entries.len().div_ceil(7));
    let names: BTreeSet<&str> = entries.iter().filter_map(|e| e["name"].as_str()).collect();
    assert_eq!(names.len(), entries.len(), "each size once");
    assert!(
        entries
            .iter()
            .all(|e| e["locations"] == json!(["westeurope"])
                && e["resourceType"] == "virtualMachines")
    );
    let d2s = entries
        .iter()
        .find(|e| e["name"] == "Standard_D2s_v5")
        .ok_or("Standard_D2s_v5 listed")?;
    assert_eq!(d2s["tier"], "Standard");
    assert_eq!(d2s["size"], "D2s_v5");
    assert_eq!(d2s["family"], "standardDSv5Family");
    assert_eq!(d2s["locationInfo"][0]["location"], "westeurope");
    assert_eq!(d2s["locationInfo"][0]["zones"], json!(["1", "2", "3"]));
    assert_eq!(capability(d2s, "vCPUs"), Some("2"));
    assert_eq!(capability(d2s, "MemoryGB"), Some("8"));
    assert_eq!(capability(d2s, "PremiumIO"), Some("True"));
    assert_eq!(capability(d2s, "MaxDataDiskCount"), Some("4"));
    assert_eq!(
        d2s["restrictions"],
        json!([{"type": "Zone", "values": ["westeurope"],
                "restrictionInfo": {"locations": ["westeurope"], "zones": ["2"]},
                "reasonCode": "NotAvailableForSubscription"}])
    );
    let b2s = entries
        .iter()
        .find(|e| e["name"] == "Standard_B2s")
        .ok_or("Standard_B2s listed")?;
    assert_eq!(b2s["restrictions"][0]["type"], "Location");
    assert_eq!(
        b2s["restrictions"][0]["restrictionInfo"]["locations"],
        json!(["westeurope"])
    );
    let d2 = entries
        .iter()
        .find(|e| e["name"] == "Standard_D2_v5")
        .ok_or("Standard_D2_v5 listed")?;
    assert_eq!(capability(d2, "PremiumIO"), Some("False"));
    assert_eq!(d2["restrictions"], json!([]));
    assert_eq!(sb.emulator.stats().count("sku.list", 200) as usize, pages);
    Ok(())
}

#[tokio::test]
async fn without_a_filter_every_known_location_is_listed_and_other_versions_are_refused()
-> TestResult {
    let sb = Sandbox::start().await?;
    let (entries, _) = all(&sb, &skus("")).await?;
    let locations: BTreeSet<&str> = entries
        .iter()
        .filter_map(|e| e["locations"][0].as_str())
        .collect();
    assert!(
        locations.contains("westeurope") && locations.contains("eastus") && locations.len() >= 5,
        "{locations:?}"
    );
    let westeurope = entries
        .iter()
        .filter(|e| e["locations"][0] == "westeurope")
        .count();
    assert_eq!(entries.len(), westeurope * locations.len());

    let refused = sb
        .get(&format!(
            "/subscriptions/{SUB}/providers/Microsoft.Compute/skus?api-version=2026-04-01"
        ))
        .await?;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert_eq!(refused.code(), "InvalidApiVersionParameter");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("'2021-07-01,2019-04-01,2017-09-01'")),
        "{refused:?}"
    );
    let bad_filter = sb
        .get(&skus("&$filter=name%20eq%20%27Standard_D2s_v5%27"))
        .await?;
    assert_eq!(bad_filter.status, 400, "{bad_filter:?}");
    assert_eq!(bad_filter.body["error"]["target"], "$filter");
    let bad_token = sb.get(&skus("&$skiptoken=abc")).await?;
    assert_eq!(bad_token.status, 400, "{bad_token:?}");
    Ok(())
}
