//! Periodic fault rules (`every`), the `write` method alias, and the validation of rules on the
//! admin endpoint and in the config file.

use std::path::Path;

use nodewright_sandbox::arm::{EmulatorConfig, FaultKind};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

/// The rule the machine-workflow end-to-end tests use: every third ARM write is throttled.
fn every_third_write() -> Value {
    json!({"kind": "throttle", "method": "write", "every": 3, "retry_after": 2})
}

#[tokio::test]
async fn a_periodic_throttle_answers_exactly_every_third_write_and_never_a_read() -> TestResult {
    let sb = Sandbox::start().await?;
    let added = sb.post("/sandbox/faults", &every_third_write()).await?;
    assert_eq!(added.status, 201, "{added:?}");
    let disk_body = json!({"location": "westeurope", "properties": {"diskSizeGB": 4}});
    let nic_body = json!({"location": "westeurope"});
    let power_off = format!("{}/powerOff?api-version={VM_API}", vm_id("p-vm"));
    // (method, path, body, throttled): the writes are numbered; admin requests do not count.
    let script: Vec<(Method, String, Option<Value>, bool)> = vec![
        (Method::PUT, disk("p-1"), Some(disk_body.clone()), false), // write 1
        (Method::GET, disk("p-1"), None, false),
        (Method::PUT, nic("p-nic"), Some(nic_body), false), // write 2
        (Method::PUT, vm("p-vm"), Some(vm_body(None, &[])), true), // write 3
        (Method::GET, vm("p-vm"), None, false),
        (
            Method::POST,
            "/sandbox/stats/reset".into(),
            Some(json!({})),
            false,
        ),
        (
            Method::PATCH,
            disk("p-1"),
            Some(json!({"tags": {"a": "b"}})),
            false,
        ), // write 4
        (Method::GET, disk("p-1"), None, false),
        (Method::DELETE, nic("p-nic"), None, false), // write 5
        (Method::PUT, vm("p-vm"), Some(vm_body(None, &[])), true), // write 6
        (Method::POST, power_off, Some(json!({})), false), // write 7
        (Method::PUT, vm("p-vm"), Some(vm_body(None, &[])), false), // write 8
        (Method::DELETE, disk("p-2"), None, true),   // write 9
        (Method::GET, vm("p-vm"), None, false),
        (Method::GET, vm("p-vm"), None, false),
        (Method::DELETE, vm("p-vm"), None, false), // write 10
    ];
    for (i, (method, path, body, throttled)) in script.into_iter().enumerate() {
        let resp = sb
            .send_with(method.clone(), &path, body.as_ref(), &[])
            .await?;
        let step = format!("step {}: {method} {path} -> {}", i + 1, resp.status);
        if throttled {
            assert_eq!(resp.status, 429, "{step}");
            assert_eq!(resp.header("retry-after"), Some("2"), "{step}");
            assert_eq!(
                resp.header("x-ms-ratelimit-remaining-subscription-writes"),
                Some("0"),
                "{step}"
            );
            assert_eq!(resp.body["error"]["details"][0]["code"], "TooManyRequests");
        } else {
            assert_ne!(resp.status, 429, "{step}");
        }
    }
    let rules = sb.get("/sandbox/faults").await?.body;
    let rule = &rules["rules"][0];
    assert_eq!(
        (&rule["every"], &rule["fired"], &rule["matched"]),
        (&json!(3), &json!(3), &json!(10)),
        "{rules}"
    );

    // The log tells the same story: of the ten writes, the 3rd, 6th and 9th were throttled.
    let log = sb.get("/sandbox/requests").await?.body;
    let writes: Vec<(u64, Option<u64>)> = log["requests"]
        .as_array()
        .ok_or("no requests")?
        .iter()
        .filter(|r| r["method"] != "GET")
        .map(|r| (r["status"].as_u64().unwrap_or(0), r["retry_after"].as_u64()))
        .collect();
    assert_eq!(writes.len(), 10, "{log}");
    let throttled: Vec<usize> = (1..=writes.len())
        .filter(|n| writes[n - 1] == (429, Some(2)))
        .collect();
    assert_eq!(throttled, [3, 6, 9], "{log}");
    Ok(())
}

#[tokio::test]
async fn every_combines_with_count_and_method_lists() -> TestResult {
    let sb = Sandbox::start().await?;
    let rule = json!({"kind": "server_error", "status": 503, "method": "GET|DELETE", "every": 2, "count": 2});
    assert_eq!(sb.post("/sandbox/faults", &rule).await?.status, 201);
    let statuses = [
        sb.get(&disk("c")).await?.status,
        sb.put(&nic("c"), &json!({"location": "westeurope"}))
            .await?
            .status,
        sb.get(&disk("c")).await?.status,
        sb.delete(&disk("c")).await?.status,
        sb.get(&disk("c")).await?.status,
        sb.get(&disk("c")).await?.status,
    ];
    assert_eq!(
        statuses,
        [404, 201, 503, 204, 503, 404],
        "matches 2 and 4 fire, then count is spent"
    );
    let rule = &sb.get("/sandbox/faults").await?.body["rules"][0];
    assert_eq!((&rule["fired"], &rule["matched"]), (&json!(2), &json!(5)));
    Ok(())
}

#[tokio::test]
async fn invalid_rules_are_refused_with_400_naming_the_field_and_change_nothing() -> TestResult {
    let sb = Sandbox::start().await?;
    let kept = sb.post("/sandbox/faults", &every_third_write()).await?;
    assert_eq!(kept.status, 201);
    let cases = [
        (json!({"kind": "throttle", "every": 0}), "every"),
        (
            json!({"kind": "throttle", "every": 3, "probability": 0.5}),
            "every",
        ),
        (json!({"kind": "never_joins", "every": 2}), "every"),
        (json!({"kind": "throttle", "method": "wrtie"}), "method"),
        (
            json!({"kind": "throttle", "method": "PUT||DELETE"}),
            "method",
        ),
    ];
    for (rule, field) in &cases {
        let resp = sb.post("/sandbox/faults", rule).await?;
        assert_eq!(resp.status, 400, "{rule}");
        assert_eq!(resp.code(), "InvalidParameter", "{rule}");
        assert_eq!(resp.body["error"]["target"], *field, "{rule}");
    }
    let replace = json!({"rules": [every_third_write(), cases[1].0]});
    let resp = sb.put("/sandbox/faults", &replace).await?;
    assert_eq!(resp.status, 400);
    assert_eq!(resp.body["error"]["target"], "rules[1].every");
    let rules = sb.get("/sandbox/faults").await?.body;
    assert_eq!(rules["rules"].as_array().map(Vec::len), Some(1), "{rules}");
    assert_eq!(rules["rules"][0]["id"], kept.body["id"]);
    Ok(())
}

#[test]
fn the_config_file_refuses_an_invalid_periodic_rule() {
    let refused = EmulatorConfig::from_toml(
        r#"
        [[faults]]
        kind = "throttle"
        every = 3
        probability = 0.5
        "#,
    );
    let message = refused.map(|_| ()).err().map(|e| e.to_string());
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("[[faults]] #1") && m.contains("every and probability")),
        "{message:?}"
    );
}

#[test]
fn the_commented_periodic_rule_of_the_example_config_parses() -> TestResult {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("sandbox.example.toml");
    let text = std::fs::read_to_string(path)?;
    let block: Vec<&str> = text
        .lines()
        .skip_while(|line| *line != "# [[faults]]")
        .take_while(|line| line.starts_with('#'))
        .map(|line| line.trim_start_matches('#').trim_start())
        .collect();
    assert!(!block.is_empty(), "no commented [[faults]] block");
    let config = EmulatorConfig::from_toml(&block.join("\n"))?;
    assert_eq!(config.faults.len(), 1);
    assert_eq!(config.faults[0].kind, FaultKind::Throttle);
    assert_eq!(config.faults[0].every, Some(3));
    assert_eq!(config.faults[0].method.as_deref(), Some("write"));
    Ok(())
}
