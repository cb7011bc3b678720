//! The request log: `GET /sandbox/requests` with its `contains` and `since` filters, and
//! `DELETE /sandbox/requests`.

use serde_json::{Value, json};

use crate::support::*;

/// The logged requests `query` selects (e.g. `?since=3`).
async fn logged(sb: &Sandbox, query: &str) -> Res<Vec<Value>> {
    let resp = sb.get(&format!("/sandbox/requests{query}")).await?;
    assert_eq!(resp.status, 200, "{resp:?}");
    Ok(resp.body["requests"]
        .as_array()
        .ok_or("no requests array")?
        .clone())
}

fn seqs(records: &[Value]) -> Vec<u64> {
    records.iter().filter_map(|r| r["seq"].as_u64()).collect()
}

#[tokio::test]
async fn every_arm_answer_is_logged_with_its_operation_status_retry_after_and_error_code()
-> TestResult {
    let sb = Sandbox::start().await?;
    let rule = json!({"kind": "throttle", "operation": "vm.get", "retry_after": 4, "count": 1});
    assert_eq!(sb.post("/sandbox/faults", &rule).await?.status, 201);
    let created = sb
        .put(
            &disk("log-1"),
            &json!({"location": "westeurope", "properties": {"diskSizeGB": 4}}),
        )
        .await?;
    assert_eq!(created.status, 202);
    sb.get(&vm("log-vm")).await?; // throttled
    sb.get(&vm("log-vm")).await?; // 404
    reqwest::get(format!("{}/healthz", sb.base)).await?;
    sb.get("/sandbox/stats").await?;

    let records = logged(&sb, "").await?;
    assert_eq!(
        seqs(&records),
        [1, 2, 3],
        "admin and /healthz are not logged"
    );
    let time = records[0]["time"].as_str().ok_or("no time")?;
    chrono::DateTime::parse_from_rfc3339(time)?;
    assert!(
        time.len() == "2025-01-01T00:00:00.000Z".len() && time.ends_with('Z'),
        "RFC 3339 with milliseconds: {time}"
    );
    let without_time: Vec<Value> = records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().map(|o| o.remove("time"));
            r
        })
        .collect();
    assert_eq!(
        without_time,
        [
            json!({"seq": 1, "method": "PUT", "path": disk_id("log-1"), "operation": "disk.put", "status": 202, "retry_after": 0}),
            json!({"seq": 2, "method": "GET", "path": vm_id("log-vm"), "operation": "vm.get", "status": 429, "retry_after": 4, "code": "OperationNotAllowed"}),
            json!({"seq": 3, "method": "GET", "path": vm_id("log-vm"), "operation": "vm.get", "status": 404, "code": "ResourceNotFound"}),
        ],
        "the path carries no query; retry_after only when the answer had Retry-After, code only when it had an ARM error code"
    );
    Ok(())
}

#[tokio::test]
async fn the_log_filters_by_path_substring_and_sequence_number() -> TestResult {
    let sb = Sandbox::start().await?;
    for name in ["f-1", "f-2"] {
        sb.get(&vm(name)).await?;
        sb.get(&disk(name)).await?;
    }
    // (query, sequence numbers): 1 vm f-1, 2 disk f-1, 3 vm f-2, 4 disk f-2.
    let cases: [(&str, &[u64]); 7] = [
        ("", &[1, 2, 3, 4]),
        ("?contains=virtualmachines", &[1, 3]),
        ("?contains=VIRTUALMACHINES/F-2", &[3]),
        ("?since=2", &[3, 4]),
        ("?since=2&contains=/disks/", &[4]),
        ("?since=4", &[]),
        ("?contains=networkInterfaces", &[]),
    ];
    for (query, expected) in cases {
        assert_eq!(seqs(&logged(&sb, query).await?), expected, "{query}");
    }
    for query in ["?since=yesterday", "?sinse=2"] {
        let resp = sb.get(&format!("/sandbox/requests{query}")).await?;
        assert_eq!(resp.status, 400, "{query}");
        assert_eq!(resp.code(), "InvalidParameter", "{query}");
    }
    Ok(())
}

#[tokio::test]
async fn clearing_the_log_keeps_the_stats_and_the_sequence_numbers_go_on() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.get(&vm("c-1")).await?;
    sb.get(&vm("c-1")).await?;
    assert_eq!(sb.delete("/sandbox/requests").await?.status, 204);
    assert!(logged(&sb, "").await?.is_empty());
    assert_eq!(sb.get("/sandbox/stats").await?.body["total"], 2);
    sb.get(&vm("c-1")).await?;
    assert_eq!(seqs(&logged(&sb, "").await?), [3]);
    assert_eq!(seqs(&logged(&sb, "?since=2").await?), [3]);
    Ok(())
}
