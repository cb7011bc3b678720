//! The stats endpoint, the latency admin endpoint and `/healthz`.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn stats_count_arm_requests_by_operation_and_status_and_reset() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.put(&vm("s1"), &vm_body(None, &[])).await?;
    sb.get(&vm("s1")).await?;
    sb.get(&vm("s1")).await?;
    sb.get(&vm("missing")).await?;
    let stats = sb.get("/sandbox/stats").await?.body;
    assert_eq!(stats["total"], 4, "{stats}");
    assert_eq!(stats["by_operation"]["vm.put"]["201"], 1);
    assert_eq!(stats["by_operation"]["vm.get"]["200"], 2);
    assert_eq!(stats["by_operation"]["vm.get"]["404"], 1);
    assert_eq!(stats["by_status"]["200"], 2);
    assert_eq!(
        sb.post("/sandbox/stats/reset", &json!({})).await?.status,
        204
    );
    assert_eq!(sb.get("/sandbox/stats").await?.body["total"], 0);
    sb.get(&vm("s1")).await?;
    assert_eq!(sb.delete("/sandbox/stats").await?.status, 204);
    assert_eq!(sb.get("/sandbox/stats").await?.body["total"], 0);
    Ok(())
}

#[tokio::test]
async fn the_latency_profile_can_be_read_and_changed_through_the_admin_endpoint() -> TestResult {
    let sb = Sandbox::start().await?;
    let current = sb.get("/sandbox/latency").await?.body;
    assert_eq!(current, json!({"profile": "instant", "scale": 1.0}));
    let changed = sb
        .put(
            "/sandbox/latency",
            &json!({"profile": "realistic", "scale": 0.01}),
        )
        .await?;
    assert_eq!(changed.status, 200);
    assert_eq!(changed.body["profile"], "realistic");
    let resp = sb.put(&vm("slow"), &vm_body(None, &[])).await?;
    assert_eq!(
        sb.get(&vm("slow")).await?.state(),
        "Creating",
        "0.6-1.2 s at this scale"
    );
    assert_eq!(sb.finish(&resp).await?["status"], "Succeeded");
    assert_eq!(
        sb.put("/sandbox/latency", &json!({"profile": "warp"}))
            .await?
            .status,
        400
    );
    Ok(())
}

#[tokio::test]
async fn healthz_answers_ok() -> TestResult {
    let sb = Sandbox::start().await?;
    let resp = reqwest::get(format!("{}/healthz", sb.base)).await?;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.text().await?, "ok");
    Ok(())
}
