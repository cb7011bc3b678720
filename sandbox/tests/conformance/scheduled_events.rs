//! Scheduled Events: a Spot eviction's `Preempt` notice, each VM's metadata service
//! (`/imds/…/metadata/scheduledevents`), acknowledgements, and the events the admin API
//! schedules (Reboot, Redeploy, Terminate, Freeze), cancels and lists with their history.

use std::time::Duration;

use nodewright_sandbox::arm::EmulatorConfig;
use nodewright_sandbox::compute::{Compute, GuestState};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

/// The Scheduled Events URL of VM `name`'s metadata service.
fn imds(name: &str) -> String {
    format!(
        "/imds/subscriptions/{SUB}/resourceGroups/{RG}/virtualMachines/{name}/metadata/scheduledevents?api-version=2020-07-01"
    )
}

/// VM `name`'s Scheduled Events document.
async fn document(sb: &Sandbox, name: &str) -> Res<Value> {
    let resp = sb
        .send_with(Method::GET, &imds(name), None, &[("Metadata", "true")])
        .await?;
    if resp.status != 200 {
        return Err(format!("IMDS answered {}: {}", resp.status, resp.body).into());
    }
    Ok(resp.body)
}

/// Approves `event` through VM `name`'s metadata service.
async fn acknowledge(sb: &Sandbox, name: &str, event: &str) -> Res<Resp> {
    let body = json!({"StartRequests": [{"EventId": event}]});
    sb.send_with(
        Method::POST,
        &imds(name),
        Some(&body),
        &[("Metadata", "true")],
    )
    .await
}

/// The admin record of event `id`.
async fn history(sb: &Sandbox, id: &str) -> Res<Value> {
    Ok(sb
        .get(&format!("/sandbox/scheduled-events/{id}"))
        .await?
        .body)
}

fn spot_body() -> Value {
    let mut body = vm_body(None, &[]);
    body["properties"]["priority"] = json!("Spot");
    body
}

fn action(name: &str, action: &str) -> String {
    format!("{}/{action}?api-version={VM_API}", vm_id(name))
}

fn guest_of(sb: &Sandbox, name: &str) -> Option<GuestState> {
    sb.emulator
        .machines()
        .into_iter()
        .find(|m| m.name == name)
        .map(|m| m.guest)
}

fn power(view: &Value) -> String {
    view["statuses"][1]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Polls VM `name`'s document until it has no event; returns the statuses seen.
async fn until_no_event(sb: &Sandbox, name: &str) -> Res<Vec<String>> {
    let mut seen: Vec<String> = Vec::new();
    for _ in 0..500 {
        let doc = document(sb, name).await?;
        let Some(event) = doc["Events"].get(0) else {
            return Ok(seen);
        };
        let status = format!("{}/{}", event["EventStatus"], event["NotBefore"]);
        if seen.last() != Some(&status) {
            seen.push(status);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("{name}: the event never ended; seen {seen:?}").into())
}

#[tokio::test]
async fn an_eviction_is_announced_by_a_preempt_event_and_starts_at_not_before() -> TestResult {
    let sb = Sandbox::start_with(EmulatorConfig {
        eviction_notice_seconds: 1,
        ..short(2.0)
    })
    .await?;
    sb.create_vm("sp", &spot_body()).await?;
    let before = document(&sb, "sp").await?;
    assert_eq!(before, json!({"DocumentIncarnation": 0, "Events": []}));
    let asked = chrono::Utc::now();
    let resp = sb
        .post(&action("sp", "simulateEviction"), &json!({}))
        .await?;
    assert_eq!(resp.status, 204, "{resp:?}");
    let doc = document(&sb, "sp").await?;
    let event = &doc["Events"][0];
    assert_eq!(doc["DocumentIncarnation"], 1);
    assert_eq!(event["EventType"], "Preempt");
    assert_eq!(event["EventStatus"], "Scheduled");
    assert_eq!(event["ResourceType"], "VirtualMachine");
    assert_eq!(event["Resources"], json!(["sp"]));
    assert_eq!(event["EventSource"], "Platform");
    assert_eq!(event["DurationInSeconds"], -1);
    let not_before =
        chrono::DateTime::parse_from_rfc2822(event["NotBefore"].as_str().ok_or("no NotBefore")?)?;
    assert!(
        event["NotBefore"]
            .as_str()
            .is_some_and(|t| t.ends_with(" GMT")),
        "{event}"
    );
    let notice = not_before.with_timezone(&chrono::Utc) - asked;
    assert!(
        (0..=2).contains(&notice.num_seconds()),
        "NotBefore is the notice from now: {notice}"
    );
    assert_ne!(
        guest_of(&sb, "sp"),
        Some(GuestState::Down),
        "the guest runs on"
    );
    assert_eq!(
        sb.get(&vm("sp")).await?.state(),
        "Succeeded",
        "not busy yet"
    );
    let again = sb
        .post(&action("sp", "simulateEviction"), &json!({}))
        .await?;
    assert_eq!(again.status, 204);
    assert_eq!(
        document(&sb, "sp").await?["Events"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "one announcement"
    );
    let id = event["EventId"].as_str().ok_or("no EventId")?.to_owned();

    let seen = until_no_event(&sb, "sp").await?;
    assert!(
        seen.iter().any(|s| s == "\"Started\"/\"\""),
        "Started with an empty NotBefore while the eviction runs: {seen:?}"
    );
    let view = sb
        .get(&format!(
            "{}/instanceView?api-version={VM_API}",
            vm_id("sp")
        ))
        .await?;
    assert_eq!(power(&view.body), "PowerState/deallocated");
    assert_eq!(guest_of(&sb, "sp"), Some(GuestState::Down));
    let record = history(&sb, &id).await?;
    assert_eq!(record["status"], "Ended");
    assert_eq!(record["history"]["startedBy"], "notBefore");
    assert_eq!(record["history"]["endedBy"], "completed");
    assert!(record["history"]["acknowledgedBy"].is_null());
    let started = chrono::DateTime::parse_from_rfc3339(
        record["history"]["startedAt"]
            .as_str()
            .ok_or("no startedAt")?,
    )?;
    assert!(started >= not_before - chrono::Duration::milliseconds(1));
    assert!(record["history"]["endedAt"].is_string());
    assert_eq!(record["operations"].as_array().map(Vec::len), Some(1));
    let last = document(&sb, "sp").await?;
    assert_eq!(last["DocumentIncarnation"], 3, "scheduled, started, ended");
    Ok(())
}

#[tokio::test]
async fn an_acknowledged_preempt_starts_the_eviction_at_once() -> TestResult {
    let sb = Sandbox::start().await?;
    let mut body = spot_body();
    body["properties"]["evictionPolicy"] = json!("Delete");
    sb.create_vm("ack", &body).await?;
    let resp = sb
        .post(&action("ack", "simulateEviction"), &json!({}))
        .await?;
    assert_eq!(resp.status, 204);
    let doc = document(&sb, "ack").await?;
    let id = doc["Events"][0]["EventId"]
        .as_str()
        .ok_or("no event")?
        .to_owned();
    assert_eq!(sb.get(&vm("ack")).await?.status, 200, "30 s of notice");
    let ack = acknowledge(&sb, "ack", &id).await?;
    assert_eq!(ack.status, 200, "{ack:?}");
    assert_eq!(sb.get(&vm("ack")).await?.status, 404, "evicted by deletion");
    let record = history(&sb, &id).await?;
    assert_eq!(record["history"]["startedBy"], "acknowledged");
    assert_eq!(record["history"]["acknowledgedBy"], "ack");
    assert_eq!(record["status"], "Ended");
    Ok(())
}

#[tokio::test]
async fn imds_answers_as_imds_and_is_no_arm_request() -> TestResult {
    let sb = Sandbox::start_with(EmulatorConfig {
        token: Some("arm-token".into()),
        ..instant()
    })
    .await?;
    sb.create_vm("md", &vm_body(None, &[])).await?;
    sb.post("/sandbox/faults", &json!({"kind": "throttle"}))
        .await?;
    sb.emulator.reset_stats();
    let plain = reqwest::Client::new();
    let url = format!("{}{}", sb.base, imds("md"));
    let no_header = plain.get(&url).send().await?;
    assert_eq!(no_header.status(), 400);
    assert_eq!(
        no_header.json::<Value>().await?,
        json!({"error": "Bad request. Required metadata header not specified"})
    );
    let ok = plain.get(&url).header("Metadata", "true").send().await?;
    assert_eq!(ok.status(), 200, "no bearer token, no ARM fault");
    assert_eq!(
        ok.json::<Value>().await?,
        json!({"DocumentIncarnation": 0, "Events": []})
    );
    let old = url.replace("2020-07-01", "2015-01-01");
    let refused = plain.get(&old).header("Metadata", "true").send().await?;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await?;
    assert!(body["newest-versions"].is_array(), "{body}");
    let missing = url.replace("?api-version=2020-07-01", "");
    let refused = plain
        .get(&missing)
        .header("Metadata", "true")
        .send()
        .await?;
    assert_eq!(refused.status(), 400);
    let unknown = url.replace("/md/", "/nobody/");
    let gone = plain
        .get(&unknown)
        .header("Metadata", "true")
        .send()
        .await?;
    assert_eq!(gone.status(), 404);
    let malformed = plain
        .post(&url)
        .header("Metadata", "true")
        .body("{\"StartRequests\": 3}")
        .send()
        .await?;
    assert_eq!(malformed.status(), 400);
    let unknown_event = plain
        .post(&url)
        .header("Metadata", "true")
        .json(&json!({"StartRequests": [{"EventId": "00000000-0000-0000-0000-000000000000"}]}))
        .send()
        .await?;
    assert_eq!(unknown_event.status(), 200);
    let stats = sb.emulator.stats();
    assert_eq!(stats.count("imds.get", 200), 1);
    assert_eq!(stats.count("imds.get", 400), 3);
    assert_eq!(stats.count("imds.post", 200), 1);
    assert_eq!(
        stats
            .by_operation
            .keys()
            .filter(|k| !k.starts_with("imds."))
            .count(),
        0,
        "{stats:?}"
    );
    Ok(())
}

#[tokio::test]
async fn admin_events_reboot_redeploy_and_terminate_vms_and_end() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("rb", &vm_body(None, &[])).await?;
    sb.create_vm_with_nic("tm", &[]).await?;
    let reboot = sb
        .post(
            "/sandbox/scheduled-events",
            &json!({"eventType": "Reboot", "resources": ["rb"], "subscription": SUB,
                    "resourceGroup": RG, "notBeforeSeconds": 0, "eventSource": "User"}),
        )
        .await?;
    assert_eq!(reboot.status, 201, "{reboot:?}");
    assert_eq!(reboot.body["history"]["startedBy"], "notBefore");
    assert_eq!(reboot.body["eventSource"], "User");
    let id = reboot.body["eventId"].as_str().ok_or("no id")?.to_owned();
    assert!(uuid_like(&id), "{id}");
    until_no_event(&sb, "rb").await?;
    let record = history(&sb, &id).await?;
    assert_eq!(record["status"], "Ended", "{record}");
    assert_eq!(
        sb.emulator.stats().count("vm.restart", 202),
        0,
        "no ARM request"
    );

    let terminate = sb
        .post(
            "/sandbox/scheduled-events",
            &json!({"eventType": "Terminate", "resources": [vm_id("tm")], "notBeforeSeconds": 300}),
        )
        .await?;
    assert_eq!(terminate.status, 201, "{terminate:?}");
    let id = terminate.body["eventId"]
        .as_str()
        .ok_or("no id")?
        .to_owned();
    let doc = document(&sb, "tm").await?;
    assert_eq!(doc["Events"][0]["EventType"], "Terminate");
    acknowledge(&sb, "tm", &id).await?;
    assert_eq!(sb.get(&vm("tm")).await?.status, 404, "deleted");
    assert_eq!(
        sb.get(&nic("tm-nic")).await?.status,
        404,
        "with its cascade"
    );
    assert_eq!(history(&sb, &id).await?["status"], "Ended");

    let refused = sb
        .post(
            "/sandbox/scheduled-events",
            &json!({"eventType": "Reboot", "resources": ["rb"]}),
        )
        .await?;
    assert_eq!((refused.status, refused.code()), (400, "InvalidParameter"));
    let refused = sb
        .post(
            "/sandbox/scheduled-events",
            &json!({"eventType": "Reboot", "resources": [vm_id("nobody")]}),
        )
        .await?;
    assert_eq!(refused.body["error"]["target"], "resources[0]");
    Ok(())
}

#[tokio::test]
async fn a_freeze_stays_started_for_its_duration_and_unknown_types_do_nothing() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("fz", &vm_body(None, &[])).await?;
    let freeze = sb
        .post(
            "/sandbox/scheduled-events",
            &json!({"eventType": "Freeze", "resources": [vm_id("fz")], "notBeforeSeconds": 0,
                    "durationInSeconds": 1}),
        )
        .await?;
    assert_eq!(freeze.status, 201);
    let doc = document(&sb, "fz").await?;
    assert_eq!(doc["Events"][0]["EventStatus"], "Started");
    assert_eq!(doc["Events"][0]["DurationInSeconds"], 1);
    assert_eq!(doc["Events"][0]["NotBefore"], "");
    until_no_event(&sb, "fz").await?;
    let power = sb
        .get(&format!(
            "{}/instanceView?api-version={VM_API}",
            vm_id("fz")
        ))
        .await?;
    assert_eq!(
        self::power(&power.body),
        "PowerState/running",
        "nothing visible"
    );

    let other = sb
        .post(
            "/sandbox/scheduled-events",
            &json!({"eventType": "SpotRebalanceRecommendation", "resources": [vm_id("fz")],
                    "notBeforeSeconds": 60}),
        )
        .await?;
    let doc = document(&sb, "fz").await?;
    assert_eq!(doc["Events"][0]["EventType"], "SpotRebalanceRecommendation");
    let id = other.body["eventId"].as_str().ok_or("no id")?;
    let ack = acknowledge(&sb, "fz", id).await?;
    assert_eq!(ack.status, 200);
    assert_eq!(document(&sb, "fz").await?["Events"], json!([]));
    Ok(())
}

#[tokio::test]
async fn a_cancelled_event_vanishes_and_a_deleted_vm_ends_its_event() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("cx", &vm_body(None, &[])).await?;
    let redeploy = sb
        .post(
            "/sandbox/scheduled-events",
            &json!({"eventType": "Redeploy", "resources": [vm_id("cx")]}),
        )
        .await?;
    let id = redeploy.body["eventId"].as_str().ok_or("no id")?.to_owned();
    let not_before = chrono::DateTime::parse_from_rfc3339(
        redeploy.body["notBefore"].as_str().ok_or("no notBefore")?,
    )?;
    assert!(
        not_before.with_timezone(&chrono::Utc) - chrono::Utc::now() > chrono::Duration::minutes(9),
        "Azure's 10 minutes of notice by default"
    );
    let cancel = sb
        .delete(&format!("/sandbox/scheduled-events/{id}"))
        .await?;
    assert_eq!(cancel.status, 204);
    let doc = document(&sb, "cx").await?;
    assert_eq!(doc, json!({"DocumentIncarnation": 2, "Events": []}));
    let record = history(&sb, &id).await?;
    assert_eq!(
        (
            record["status"].as_str(),
            record["history"]["endedBy"].as_str()
        ),
        (Some("Canceled"), Some("canceled"))
    );
    let again = sb
        .delete(&format!("/sandbox/scheduled-events/{id}"))
        .await?;
    assert_eq!(again.status, 409);
    let missing = sb.delete("/sandbox/scheduled-events/nope").await?;
    assert_eq!(missing.status, 404);

    let reboot = sb
        .post(
            "/sandbox/scheduled-events",
            &json!({"eventType": "Reboot", "resources": [vm_id("cx")]}),
        )
        .await?;
    let id = reboot.body["eventId"].as_str().ok_or("no id")?.to_owned();
    let deleted = sb.delete(&vm("cx")).await?;
    sb.finish(&deleted).await?;
    let record = history(&sb, &id).await?;
    assert_eq!(record["history"]["endedBy"], "vmDeleted", "{record}");
    let listed = sb.get("/sandbox/scheduled-events").await?;
    assert_eq!(listed.body["events"].as_array().map(Vec::len), Some(2));
    Ok(())
}

#[tokio::test]
async fn scheduled_events_survive_a_restart() -> TestResult {
    let file = crate::persistence::state_file()?;
    let config = EmulatorConfig {
        state_file: Some(file.clone()),
        ..instant()
    };
    let id = {
        let sb = Sandbox::start_with(config.clone()).await?;
        sb.create_vm("kept", &spot_body()).await?;
        sb.post(&action("kept", "simulateEviction"), &json!({}))
            .await?;
        let doc = document(&sb, "kept").await?;
        doc["Events"][0]["EventId"]
            .as_str()
            .ok_or("no event")?
            .to_owned()
    };
    let again = Sandbox::start_with(config).await?;
    let doc = document(&again, "kept").await?;
    assert_eq!(doc["Events"][0]["EventId"], id.as_str());
    assert_eq!(doc["DocumentIncarnation"], 1);
    let _ = std::fs::remove_file(&file);
    Ok(())
}

fn uuid_like(id: &str) -> bool {
    id.len() == 36 && id.chars().filter(|c| *c == '-').count() == 4
}
