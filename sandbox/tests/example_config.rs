//! The example configuration shipped in `sandbox/sandbox.example.toml` loads, and its rules do
//! what its comments say.

use std::path::Path;

use nodewright_sandbox::arm::{Emulator, EmulatorConfig, FaultKind, LatencyProfile, app};
use nodewright_sandbox::compute::Compute;
use serde_json::json;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn example() -> Result<EmulatorConfig> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("sandbox.example.toml");
    Ok(EmulatorConfig::load(&path)?)
}

#[test]
fn the_example_config_loads_with_its_latency_and_four_rules() -> Result {
    let config = example()?;
    assert_eq!(config.latency, LatencyProfile::Realistic);
    assert_eq!(config.latency_scale, 0.1);
    let kinds: Vec<FaultKind> = config.faults.iter().map(|rule| rule.kind).collect();
    assert_eq!(
        kinds,
        [
            FaultKind::Throttle,
            FaultKind::FailOperation,
            FaultKind::HangDetach,
            FaultKind::NeverJoins
        ]
    );
    Ok(())
}

#[tokio::test]
async fn the_example_never_joins_rule_keeps_only_the_broken_pool_out_of_the_cluster() -> Result {
    let config = EmulatorConfig {
        latency: LatencyProfile::Instant,
        ..example()?
    };
    let emulator = Emulator::new(config)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let router = app(emulator.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });

    let http = reqwest::Client::new();
    for name in ["broken-1", "db-1"] {
        let url = format!(
            "{base}/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{name}?api-version=2024-07-01"
        );
        let body = json!({ "location": "westeurope", "properties": {
            "hardwareProfile": { "vmSize": "Standard_D2s_v5" },
            "osProfile": { "computerName": name, "adminUsername": "example" },
        }});
        let status = http.put(&url).json(&body).send().await?.status();
        assert_eq!(status.as_u16(), 201, "creating {name}");
    }
    let joins: Vec<(String, bool)> = emulator
        .machines()
        .into_iter()
        .map(|machine| (machine.name, machine.joins_cluster))
        .collect();
    assert!(joins.contains(&("broken-1".to_owned(), false)), "{joins:?}");
    assert!(joins.contains(&("db-1".to_owned(), true)), "{joins:?}");
    Ok(())
}

#[test]
fn the_example_quota_section_sets_limits_and_a_zone_restriction() -> Result {
    let quota = example()?.quota;
    assert_eq!(quota.regional_vcpus, 2000);
    assert_eq!(quota.families.get("standardDSv5Family"), Some(&1000));
    assert_eq!(quota.family_vcpus, 100_000, "unset: the default");
    assert_eq!(quota.locations[0].location, "northeurope");
    assert_eq!(quota.locations[0].regional_vcpus, Some(64));
    assert_eq!(quota.restrictions[0].size, "Standard_D16s_v5");
    assert_eq!(quota.restrictions[0].zones, ["3"]);
    Ok(())
}
