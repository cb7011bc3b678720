//! The async protocol: operation resources, Location results, absolute URLs from `Host`,
//! `Retry-After`, conflicts on busy resources, and ETag preconditions.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use nodewright_sandbox::arm::{EmulatorConfig, LatencyProfile};

use crate::support::*;

#[tokio::test]
async fn the_operation_resource_answers_200_in_progress_then_succeeded_with_times() -> TestResult {
    let sb = Sandbox::start_with(short(0.5)).await?;
    let resp = sb.put(&vm("op"), &vm_body(None, &[])).await?;
    let url = resp
        .header("azure-asyncoperation")
        .ok_or("no header")?
        .to_owned();
    let first = sb.get(&url).await?;
    assert_eq!(first.status, 200);
    assert_eq!(first.body["status"], "InProgress");
    assert!(first.body["name"].is_string());
    assert!(first.body["startTime"].is_string());
    assert!(first.body.get("endTime").is_none());
    let done = sb.wait_async(&url).await?;
    assert_eq!(done["status"], "Succeeded");
    assert!(done["endTime"].is_string());
    assert!(done.get("error").is_none());
    Ok(())
}

#[tokio::test]
async fn the_location_url_answers_202_empty_while_running_then_204_for_a_delete() -> TestResult {
    let sb = Sandbox::start_with(short(0.5)).await?;
    let create = sb.put(&vm("loc"), &vm_body(None, &[])).await?;
    sb.finish(&create).await?;
    let resp = sb.delete(&vm("loc")).await?;
    let location = resp.header("location").ok_or("no Location")?.to_owned();
    let running = sb.get(&location).await?;
    assert_eq!(running.status, 202);
    assert_eq!(running.body, serde_json::Value::Null);
    assert!(running.header("retry-after").is_some());
    let mut last = running.status;
    for _ in 0..200 {
        last = sb.get(&location).await?.status;
        if last != 202 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(last, 204);
    Ok(())
}

#[tokio::test]
async fn polling_urls_are_absolute_and_built_from_the_request_host() -> TestResult {
    let sb = Sandbox::start().await?;
    let resp = sb.put(&vm("h"), &vm_body(None, &[])).await?;
    let url = resp.header("azure-asyncoperation").ok_or("no header")?;
    assert!(
        url.starts_with(&format!(
            "{}/subscriptions/{SUB}/providers/Microsoft.Compute/locations/westeurope/operations/",
            sb.base
        )),
        "{url}"
    );
    assert!(url.contains("api-version="));
    let other = sb
        .send_with(
            Method::DELETE,
            &vm("h"),
            None,
            &[("host", "arm.example.test:9999")],
        )
        .await?;
    let location = other.header("location").ok_or("no Location")?;
    assert!(
        location.starts_with("http://arm.example.test:9999/subscriptions/"),
        "{location}"
    );
    Ok(())
}

#[tokio::test]
async fn retry_after_is_zero_when_instant_and_one_second_when_short() -> TestResult {
    let instant = Sandbox::start().await?;
    let resp = instant.put(&vm("r"), &vm_body(None, &[])).await?;
    assert_eq!(resp.header("retry-after"), Some("0"));
    let short = Sandbox::start_with(short(1.0)).await?;
    let resp = short.put(&vm("r"), &vm_body(None, &[])).await?;
    assert_eq!(resp.header("retry-after"), Some("1"));
    let url = resp.header("azure-asyncoperation").ok_or("no operation")?;
    let poll = short.get(url).await?;
    assert_eq!(poll.body["status"], "InProgress");
    assert_eq!(poll.header("retry-after"), Some("1"));
    Ok(())
}

/// As Azure: Compute sends no `Retry-After` on a VM create (clients keep their own schedule),
/// the network provider asks for 1 s on the write and 10 s on each poll while it runs.
#[tokio::test]
async fn realistic_retry_after_is_none_from_compute_and_one_then_ten_from_the_network() -> TestResult
{
    let sb = Sandbox::start_with(EmulatorConfig {
        latency: LatencyProfile::Realistic,
        ..EmulatorConfig::default()
    })
    .await?;
    let created = sb.put(&vm("r"), &vm_body(None, &[])).await?;
    assert_eq!(created.status, 201);
    assert_eq!(created.header("retry-after"), None);
    let url = created
        .header("azure-asyncoperation")
        .ok_or("no operation")?;
    let poll = sb.get(url).await?;
    assert_eq!(poll.body["status"], "InProgress");
    assert_eq!(poll.header("retry-after"), None);
    let nic_body =
        json!({"location": "westeurope", "properties": {"ipConfigurations": [{"name": "ip1"}]}});
    let created = sb.put(&nic("n"), &nic_body).await?;
    assert_eq!(created.header("retry-after"), Some("1"));
    let url = created
        .header("azure-asyncoperation")
        .ok_or("no operation")?;
    let poll = sb.get(url).await?;
    assert_eq!(poll.body["status"], "InProgress");
    assert_eq!(poll.header("retry-after"), Some("10"));
    Ok(())
}

#[tokio::test]
async fn a_conflicting_put_during_a_busy_put_gets_409_another_operation_in_progress() -> TestResult
{
    let sb = Sandbox::start_with(short(1.0)).await?;
    sb.put(&vm("busy"), &vm_body(None, &[])).await?;
    let mut other = vm_body(None, &[]);
    other["tags"] = json!({"different": "yes"});
    let resp = sb.put(&vm("busy"), &other).await?;
    assert_eq!(resp.status, 409);
    assert_eq!(resp.code(), "AnotherOperationInProgress");
    let patch = sb.patch(&vm("busy"), &json!({"tags": {}})).await?;
    assert_eq!(patch.status, 409);
    Ok(())
}

/// A DELETE during the create preempts it instead (`reservations.rs`).
#[tokio::test]
async fn a_delete_during_an_update_put_gets_409() -> TestResult {
    let sb = Sandbox::start_with(short(1.0)).await?;
    sb.create_vm("dp", &vm_body(None, &[])).await?;
    let mut update = vm_body(None, &[]);
    update["tags"] = json!({"changed": "yes"});
    assert_eq!(sb.put(&vm("dp"), &update).await?.status, 200);
    let resp = sb.delete(&vm("dp")).await?;
    assert_eq!(resp.status, 409);
    assert_eq!(resp.code(), "AnotherOperationInProgress");
    Ok(())
}

#[tokio::test]
async fn an_identical_repeated_put_during_the_operation_returns_the_same_operation() -> TestResult {
    let sb = Sandbox::start_with(short(1.0)).await?;
    let body = vm_body(None, &[]);
    let first = sb.put(&vm("same"), &body).await?;
    let second = sb.put(&vm("same"), &body).await?;
    assert!(
        second.status == 200 || second.status == 201,
        "{}",
        second.status
    );
    assert_eq!(
        first.header("azure-asyncoperation"),
        second.header("azure-asyncoperation")
    );
    Ok(())
}

#[tokio::test]
async fn if_match_and_if_none_match_mismatches_return_412() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("e", &vm_body(None, &[])).await?;
    let got = sb.get(&vm("e")).await?;
    let etag = got.body["etag"].as_str().ok_or("no etag")?.to_owned();
    assert_eq!(got.header("etag"), Some(etag.as_str()));
    let patch = json!({"tags": {"a": "b"}});
    let stale = sb
        .send_with(
            Method::PATCH,
            &vm("e"),
            Some(&patch),
            &[("if-match", "\"stale\"")],
        )
        .await?;
    assert_eq!(stale.status, 412);
    assert_eq!(stale.code(), "PreconditionFailed");
    let create_only = sb
        .send_with(
            Method::PUT,
            &vm("e"),
            Some(&vm_body(None, &[])),
            &[("if-none-match", "*")],
        )
        .await?;
    assert_eq!(create_only.status, 412);
    let fresh = sb
        .send_with(
            Method::PATCH,
            &vm("e"),
            Some(&patch),
            &[("if-match", &etag)],
        )
        .await?;
    assert_eq!(fresh.status, 200);
    Ok(())
}
