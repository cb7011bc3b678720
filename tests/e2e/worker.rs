//! The `nodewright-worker` binary's operational contract on the real stack: configured by a file,
//! it serves `/healthz`, `/readyz` (200 once polling) and the SDK's Prometheus metrics, logs JSON
//! lines when asked, and on SIGTERM turns not-ready and exits 0. A bad configuration stops it at
//! start-up with one line naming the setting to fix.

use std::net::SocketAddr;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::worker_process::{
    WorkerProcess, free_address, http_get, scratch_dir, stack_config,
};
use nodewright_tests::{Stack, eventually, stack::ensure_eq};

/// `worker.shutdown_grace` in [`stack_config`].
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Waits for the worker to exit, for at most `timeout`.
async fn exit_within(worker: &mut WorkerProcess, timeout: Duration) -> Result<ExitStatus> {
    eventually(
        "the worker to exit",
        timeout,
        Duration::from_millis(100),
        || {
            let exited = worker.try_exit();
            async move { exited }
        },
    )
    .await
}

/// Polls `/readyz` from a thread until the worker stops answering; returns every answer.
fn watch_readiness(
    health: SocketAddr,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<Vec<(u16, String)>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let handle = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let mut seen = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                match http_get(health, "/readyz") {
                    Ok(answer) => seen.push(answer),
                    Err(_) => break,
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            seen
        }
    });
    (stop, handle)
}

#[tokio::test]
async fn worker_is_ready_once_polling_exports_temporal_metrics_logs_json_and_stops_on_sigterm()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("worker-binary");
    let (health, metrics) = (free_address()?, free_address()?);
    let dir = scratch_dir("worker")?;
    let config = stack_config(&stack, &task_queue, health, metrics);
    let mut worker =
        WorkerProcess::spawn(&dir, &config, health, metrics, &["--log-format", "json"])?;

    let ready = eventually(
        "GET /readyz to answer 200",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || {
            let exited = worker.try_exit();
            let stderr = worker.stderr();
            async move {
                if let Some(status) = exited? {
                    bail!("the worker exited ({status}) before it was ready: {stderr}");
                }
                Ok(match http_get(health, "/readyz") {
                    Ok((200, body)) => Some(body),
                    _ => None,
                })
            }
        },
    )
    .await?;
    let ready: serde_json::Value = serde_json::from_str(&ready)?;
    ensure_eq(
        "readiness body",
        ready,
        serde_json::json!({ "status": "ready", "taskQueue": task_queue }),
    )?;
    ensure_eq("GET /healthz status", http_get(health, "/healthz")?.0, 200)?;

    // The SDK's own worker metrics, labelled with our task queue.
    let scrape = eventually(
        "temporal_ metrics for the task queue",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || async {
            let (status, body) = http_get(metrics, "/metrics")?;
            let wanted = ["temporal_num_pollers{", "temporal_worker_start{"];
            let for_queue = format!("task_queue=\"{task_queue}\"");
            let has_all = wanted.iter().all(|name| {
                body.lines()
                    .any(|line| line.starts_with(name) && line.contains(&for_queue))
            });
            Ok((status == 200 && has_all).then_some(body))
        },
    )
    .await?;
    assert!(
        scrape
            .lines()
            .any(|line| line.starts_with("temporal_worker_task_slots_available{")),
        "{scrape}"
    );

    // Every stdout line is a JSON object with a level and a message.
    let logs = worker.stdout();
    let mut messages = Vec::new();
    for line in logs.lines().filter(|line| !line.trim().is_empty()) {
        let entry: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("a log line that is not JSON: {line}"))?;
        assert!(entry["level"].is_string(), "{line}");
        messages.push(entry["message"].as_str().unwrap_or_default().to_owned());
    }
    for expected in [
        "nodewright-worker started",
        "ready: Temporal lists this worker among the task queue's pollers",
    ] {
        assert!(
            messages.iter().any(|m| m == expected),
            "{expected:?} not in {messages:?}"
        );
    }

    // SIGTERM: readiness turns 503 while the worker stops, and it exits 0 within the grace.
    let (stop_watching, watcher) = watch_readiness(health);
    std::thread::sleep(Duration::from_millis(50));
    worker.terminate()?;
    let status = exit_within(&mut worker, SHUTDOWN_GRACE + Duration::from_secs(10)).await?;
    stop_watching.store(true, Ordering::SeqCst);
    let seen = watcher
        .join()
        .map_err(|_| anyhow::anyhow!("the readiness watcher panicked"))?;
    ensure_eq("worker exit code after SIGTERM", status.code(), Some(0))?;
    assert!(
        seen.first().is_some_and(|(code, _)| *code == 200),
        "ready before SIGTERM: {seen:?}"
    );
    assert!(
        seen.iter()
            .any(|(code, body)| *code == 503 && body.contains("\"stopping\"")),
        "/readyz never answered 503 stopping after SIGTERM: {seen:?}"
    );
    assert!(
        worker.stdout().contains("shutdown signal received"),
        "{}",
        worker.stdout()
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test]
async fn a_bad_configuration_stops_the_worker_at_start_up_with_one_line_naming_the_setting()
-> Result<()> {
    let stack = Stack::load()?;
    let (health, metrics) = (free_address()?, free_address()?);
    let good = stack_config(&stack, "never-polled", health, metrics);
    let unreachable = free_address()?;
    // (case, config, fragments the one stderr line must contain)
    let table: Vec<(&str, String, Vec<String>)> = vec![
        (
            "missing subscription id",
            good.replace(
                &format!("subscription_id = \"{}\"\n", stack.arm.subscription_id),
                "",
            ),
            vec![
                "azure.subscription_id".to_owned(),
                "NODEWRIGHT_AZURE_SUBSCRIPTION_ID".to_owned(),
            ],
        ),
        (
            "misspelt key",
            good.replace("task_queue =", "taskqueue ="),
            vec!["unknown field `taskqueue`".to_owned()],
        ),
        (
            "unreadable CA file",
            format!("{good}\n[temporal.tls]\nserver_ca_cert = \"/nonexistent/ca.pem\"\n"),
            vec![
                "/nonexistent/ca.pem".to_owned(),
                "temporal.tls.server_ca_cert".to_owned(),
                "NODEWRIGHT_TEMPORAL_TLS_CA".to_owned(),
            ],
        ),
        (
            "Temporal unreachable",
            good.replace(
                &format!("address = \"{}\"", stack.temporal_address),
                &format!("address = \"{unreachable}\""),
            ),
            vec![format!("could not reach Temporal at {unreachable}")],
        ),
    ];
    for (case, config, fragments) in table {
        let dir = scratch_dir("worker-bad-config")?;
        let mut worker = WorkerProcess::spawn(&dir, &config, health, metrics, &[])?;
        let status = exit_within(&mut worker, Duration::from_secs(30))
            .await
            .with_context(|| format!("{case}: the worker did not exit"))?;
        let stderr = worker.stderr();
        assert!(
            !status.success(),
            "{case}: exit status {status}, stderr: {stderr}"
        );
        let lines: Vec<&str> = stderr.lines().collect();
        assert!(
            lines.len() == 1 && lines[0].starts_with("error: "),
            "{case}: one error line expected: {stderr}"
        );
        for fragment in &fragments {
            assert!(
                stderr.contains(fragment.as_str()),
                "{case}: {fragment:?} missing from: {stderr}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
