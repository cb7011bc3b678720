//! The Quickstart's path: the `nodewright-worker` binary serves, the `nodewright` CLI starts a
//! preflight check through Temporal and prints the report; bad input is refused before a start.

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use nodewright_tests::binaries::binary;
use nodewright_tests::documents::PreflightDocument;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::worker_process::{WorkerProcess, free_address, scratch_dir, stack_config};
use nodewright_tests::{Stack, eventually, stack::ensure_eq};

fn cli(stack: &Stack, task_queue: &str) -> Result<Command> {
    let mut command = Command::new(binary("nodewright")?);
    command
        .env("TEMPORAL_ADDRESS", &stack.temporal_address)
        .env("TEMPORAL_NAMESPACE", &stack.temporal_namespace)
        .env("NODEWRIGHT_TASK_QUEUE", task_queue);
    Ok(command)
}

/// Starts the `nodewright-worker` binary of `cluster` on the stack, polling `task_queue`,
/// configured by a file (with free ports for its health and metrics endpoints, so several can run
/// at once). A worker runs only its own cluster's runs, so it is started for the cluster the
/// test's preflight names (with that cluster's own identity namespace).
fn spawn_worker(stack: &Stack, task_queue: &str, cluster: &str) -> Result<WorkerProcess> {
    let (health, metrics) = (free_address()?, free_address()?);
    let mut cluster_stack = stack.clone();
    cluster_stack.cluster = cluster.to_owned();
    let config = stack_config(&cluster_stack, task_queue, health, metrics);
    WorkerProcess::spawn(&scratch_dir("cli-worker")?, &config, health, metrics, &[])
}

/// Runs `nodewright preflight --output json`, requires exit code 0 and returns the document.
fn preflight_json(stack: &Stack, task_queue: &str, cluster: &str) -> Result<PreflightDocument> {
    let output = cli(stack, task_queue)?
        .args([
            "preflight",
            "--cluster",
            cluster,
            "--output",
            "json",
            "--timeout",
            "60",
        ])
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure_eq(
        "nodewright preflight exit code",
        output.status.code(),
        Some(0),
    )
    .with_context(|| format!("stderr: {stderr}"))?;
    serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "not a preflight document: {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

#[tokio::test]
async fn cli_runs_preflight_through_the_worker_binary_which_stops_on_sigterm() -> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("cli");
    let cluster = format!("cli-{}", unique_suffix());
    let mut worker = spawn_worker(&stack, &task_queue, &cluster)?;

    let document = preflight_json(&stack, &task_queue, &cluster)?;
    ensure_eq(
        "reported apiserver version",
        document.report.kubernetes.server_version.as_str(),
        stack.kubernetes_version.as_str(),
    )?;
    ensure_eq(
        "reported cluster",
        document.report.cluster.as_str(),
        cluster.as_str(),
    )?;
    let link = document.ui.as_str();
    assert!(
        link.ends_with(&format!("/workflows/preflight%2F{cluster}")),
        "UI link: {link}"
    );

    // SIGTERM: the worker shuts down gracefully and exits 0.
    let pid = worker.process.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status()?;
    let status = eventually(
        "the worker to exit after SIGTERM",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || {
            let exited = worker.process.0.try_wait();
            async move { Ok(exited?) }
        },
    )
    .await?;
    ensure_eq("worker exit code after SIGTERM", status.code(), Some(0))?;
    Ok(())
}

#[tokio::test]
async fn invalid_cluster_name_is_refused_before_anything_starts() -> Result<()> {
    let stack = Stack::load()?;
    let output = cli(&stack, &unique_task_queue("cli-invalid"))?
        .args(["preflight", "--cluster", "Prod_WEU"])
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure_eq("exit code for invalid input", output.status.code(), Some(2))?;
    assert!(
        stderr.contains("--cluster") && stderr.contains("lowercase"),
        "stderr: {stderr}"
    );
    assert!(
        !stderr.contains("started"),
        "nothing may start on invalid input: {stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn preflight_without_a_worker_times_out_with_a_hint_and_a_later_call_joins_the_run()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("cli-no-worker");
    let cluster = format!("nw-{}", unique_suffix());

    let output = cli(&stack, &task_queue)?
        .args(["preflight", "--cluster", &cluster, "--timeout", "2"])
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure_eq(
        "exit code when no worker answers",
        output.status.code(),
        Some(3),
    )?;
    assert!(
        stderr.contains("is nodewright-worker running on task queue")
            && stderr.contains(&task_queue),
        "stderr: {stderr}"
    );

    // The run waits durably; once a worker polls, a second call joins it and gets the report.
    let _worker = spawn_worker(&stack, &task_queue, &cluster)?;
    let document = preflight_json(&stack, &task_queue, &cluster)?;
    ensure_eq(
        "reported cluster",
        document.report.cluster.as_str(),
        cluster.as_str(),
    )?;

    let client = stack.temporal_client().await?;
    let query = format!("WorkflowId = 'preflight/{cluster}'");
    let runs = nodewright_tests::temporal_worker::wait_for_listed_run(&client, &query, |run| {
        run.status() == temporalio_client::WorkflowExecutionStatus::Completed
    })
    .await?;
    ensure_eq(
        "the joined run's id",
        runs.id(),
        format!("preflight/{cluster}").as_str(),
    )?;
    let count = client
        .count_workflows(query, temporalio_client::WorkflowCountOptions::default())
        .await?
        .count();
    ensure_eq(
        "runs of this preflight (the second call joined the first)",
        count,
        1,
    )?;
    Ok(())
}
