//! `GET /subscriptions/{sub}/providers/Microsoft.Compute/skus?api-version=2021-07-01`: the VM
//! sizes of the catalog as Azure's `ResourceSkusResult`, one entry per size and location
//! (`resourceType` `virtualMachines`, `name`, `tier`, `size`, `family`, `locations`,
//! `locationInfo` with the zones, `capabilities` such as `vCPUs`, `MemoryGB`, `PremiumIO`,
//! `MaxDataDiskCount`, and `restrictions` from the quota configuration: `Location` or `Zone`,
//! `NotAvailableForSubscription`), paged with `nextLink` at the configured page size.
//!
//! `$filter=location eq 'westeurope'` lists one location (any name: every location exists);
//! without it, the catalog's [`sizes::LOCATIONS`]. `includeExtendedLocations` is accepted; the
//! emulator has no edge zones, so no entry carries `extendedLocations`. Only virtual machine
//! SKUs are listed (no disks or availability sets).

use axum::Router;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};

use super::emulator::Emulator;
use super::error::ArmError;
use super::http::{Ctx, json_response};
use super::quota::QuotaConfig;
use super::sizes::{self, Size};

const PATH: &str = "/subscriptions/{sub}/providers/Microsoft.Compute/skus";

/// The SKU route.
pub fn routes() -> Router<Emulator> {
    Router::new().route(PATH, get(list))
}

async fn list(
    AxState(em): AxState<Emulator>,
    Path(_sub): Path<String>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let filter = ctx.query.get("$filter");
    let locations: Vec<String> = match filter {
        None => sizes::LOCATIONS.iter().map(|l| (*l).to_owned()).collect(),
        Some(filter) => vec![location_filter(filter)?],
    };
    let skip = match ctx.query.get("$skiptoken") {
        None => 0,
        Some(token) => token
            .parse::<usize>()
            .map_err(|_| ArmError::invalid("$skiptoken", "The skip token is not valid."))?,
    };
    let (quota, page_size) = em.read(|core| (core.quota.clone(), core.page_size.max(1)));
    let all: Vec<(&Size, &String)> = sizes::CATALOG
        .iter()
        .flat_map(|size| locations.iter().map(move |location| (size, location)))
        .collect();
    let value: Vec<Value> = all
        .iter()
        .skip(skip)
        .take(page_size)
        .map(|(size, location)| render(size, location, &quota))
        .collect();
    let mut body = json!({ "value": value });
    let next = skip + page_size;
    if next < all.len() {
        let mut link = format!("{}{}?api-version={}", ctx.base, ctx.path, ctx.api_version);
        if let Some(filter) = filter {
            link.push_str("&$filter=");
            link.extend(url::form_urlencoded::byte_serialize(filter.as_bytes()));
        }
        if let Some(extended) = ctx.query.get("includeextendedlocations") {
            link.push_str("&includeExtendedLocations=");
            link.extend(url::form_urlencoded::byte_serialize(extended.as_bytes()));
        }
        link.push_str(&format!("&$skiptoken={next}"));
        body["nextLink"] = Value::from(link);
    }
    Ok(json_response(StatusCode::OK, body, None))
}

/// The location of a `$filter` (`location eq 'westeurope'`, the only filter Azure supports).
fn location_filter(filter: &str) -> Result<String, ArmError> {
    let refused = || {
        ArmError::invalid(
            "$filter",
            format!(
                "The filter '{filter}' is not supported. Only the location filter is supported: location eq '<location>'."
            ),
        )
    };
    let mut words = filter.split_whitespace();
    let (Some(field), Some(op)) = (words.next(), words.next()) else {
        return Err(refused());
    };
    let rest: Vec<&str> = words.collect();
    let value = rest.join(" ");
    let location = value
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .filter(|v| !v.is_empty() && !v.contains('\''));
    match location {
        Some(location)
            if field.eq_ignore_ascii_case("location") && op.eq_ignore_ascii_case("eq") =>
        {
            // Entries name the location as ARM spells it: `West Europe` is `westeurope`.
            Ok(location
                .chars()
                .filter(|c| !c.is_whitespace())
                .flat_map(char::to_lowercase)
                .collect())
        }
        _ => Err(refused()),
    }
}

/// One SKU entry: `size` in `location`, with the subscription's restrictions there.
fn render(size: &Size, location: &str, quota: &QuotaConfig) -> Value {
    let yes_no = |b: bool| if b { "True" } else { "False" };
    let generations = if size.architecture == "Arm64" {
        "V2"
    } else {
        "V1,V2"
    };
    let capabilities = [
        ("OSVhdSizeMB", "1047552".to_owned()),
        ("vCPUs", size.vcpus.to_string()),
        ("HyperVGenerations", generations.to_owned()),
        ("MemoryGB", size.memory_gb.to_string()),
        ("MaxDataDiskCount", size.max_data_disks.to_string()),
        ("CpuArchitectureType", size.architecture.to_owned()),
        ("LowPriorityCapable", "True".to_owned()),
        ("PremiumIO", yes_no(size.premium_io).to_owned()),
        ("VMDeploymentTypes", "IaaS".to_owned()),
        ("vCPUsAvailable", size.vcpus.to_string()),
    ];
    let capabilities: Vec<Value> = capabilities
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    json!({
        "resourceType": "virtualMachines",
        "name": size.name,
        "tier": "Standard",
        "size": size.short_name(),
        "family": size.family,
        "locations": [location],
        "locationInfo": [{"location": location, "zones": sizes::ZONES, "zoneDetails": []}],
        "capabilities": capabilities,
        "restrictions": restrictions(size, location, quota),
    })
}

/// The restrictions of `size` in `location`, as Azure lists them: one `Location` entry when the
/// whole location is restricted, one `Zone` entry naming the restricted zones.
fn restrictions(size: &Size, location: &str, quota: &QuotaConfig) -> Vec<Value> {
    let mut whole = false;
    let mut zones: Vec<&str> = Vec::new();
    for restriction in quota.restrictions_of(size.name, location) {
        if restriction.zones.is_empty() {
            whole = true;
        }
        zones.extend(restriction.zones.iter().map(String::as_str));
    }
    zones.sort_unstable();
    zones.dedup();
    let mut list = Vec::new();
    if whole {
        list.push(json!({
            "type": "Location",
            "values": [location],
            "restrictionInfo": {"locations": [location]},
            "reasonCode": "NotAvailableForSubscription",
        }));
    }
    if !zones.is_empty() {
        list.push(json!({
            "type": "Zone",
            "values": [location],
            "restrictionInfo": {"locations": [location], "zones": zones},
            "reasonCode": "NotAvailableForSubscription",
        }));
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arm::quota::Restriction;

    #[test]
    fn the_location_filter_is_read_as_azure_reads_it() {
        assert_eq!(
            location_filter("location eq 'westeurope'").ok().as_deref(),
            Some("westeurope")
        );
        assert_eq!(
            location_filter("Location EQ 'West Europe'").ok().as_deref(),
            Some("westeurope")
        );
        for refused in [
            "name eq 'Standard_D2s_v5'",
            "location ne 'westeurope'",
            "location eq westeurope",
            "location eq ''",
            "location",
        ] {
            let error = location_filter(refused).expect_err(refused);
            assert_eq!(error.code(), "InvalidParameter", "{refused}");
        }
    }

    #[test]
    fn an_entry_carries_the_sizes_capabilities_and_its_restrictions() {
        let quota = QuotaConfig {
            restrictions: vec![
                Restriction {
                    size: "Standard_D2s_v5".into(),
                    location: "westeurope".into(),
                    zones: vec!["3".into()],
                },
                Restriction {
                    size: "Standard_D2s_v5".into(),
                    location: "westeurope".into(),
                    zones: vec!["2".into(), "3".into()],
                },
            ],
            ..QuotaConfig::default()
        };
        let size = sizes::find("Standard_D2s_v5").expect("known");
        let entry = render(size, "westeurope", &quota);
        assert_eq!(entry["size"], "D2s_v5");
        assert_eq!(entry["family"], "standardDSv5Family");
        let capability = |name: &str| {
            entry["capabilities"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["name"] == name))
                .map(|c| c["value"].clone())
        };
        assert_eq!(capability("vCPUs"), Some(json!("2")));
        assert_eq!(capability("MemoryGB"), Some(json!("8")));
        assert_eq!(capability("PremiumIO"), Some(json!("True")));
        assert_eq!(
            entry["restrictions"],
            json!([{"type": "Zone", "values": ["westeurope"],
                    "restrictionInfo": {"locations": ["westeurope"], "zones": ["2", "3"]},
                    "reasonCode": "NotAvailableForSubscription"}])
        );
        assert_eq!(
            render(size, "northeurope", &quota)["restrictions"],
            json!([])
        );
        let b1ls = sizes::find("Standard_B1ls").expect("known");
        let half = render(b1ls, "westeurope", &quota);
        assert!(half["capabilities"].to_string().contains("\"0.5\""));
    }
}
