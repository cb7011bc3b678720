//! What the drain tests share: pool files with drain settings, the CLI off the async threads,
//! the drain's `status` as a typed document, machines made and removed with the CLI.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail, ensure};
use nodewright_tests::Stack;
use nodewright_tests::documents::DrainStatusDocument;
use nodewright_tests::machines::{create_machine, write_pool_file};

/// How often a drain's status is read while waiting for it.
pub(super) const POLL: Duration = Duration::from_millis(500);

/// A pool file as [`write_pool_file`] writes it, with `spec.drain` set to `settings`.
pub(crate) fn drain_pool_file(
    stack: &Stack,
    pool: &str,
    settings: &[(&str, &str)],
) -> Result<PathBuf> {
    let path = write_pool_file(stack, pool, "5m")?;
    let text = std::fs::read_to_string(&path)?;
    let mut drain = String::from("  drain:\n");
    for (key, value) in settings {
        drain.push_str(&format!("    {key}: {value}\n"));
    }
    ensure!(
        text.contains("\n  timeouts:\n"),
        "unexpected pool file:\n{text}"
    );
    let text = text.replace("\n  timeouts:\n", &format!("\n{drain}  timeouts:\n"));
    std::fs::write(&path, text)?;
    Ok(path)
}

pub(super) use nodewright_tests::machines::cli;

/// `machine status NAME --output json` of a machine whose latest run is its drain, typed: a
/// field the drain's status requires that is missing or renamed fails here.
pub(crate) async fn drain_document(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
) -> Result<DrainStatusDocument> {
    let doc: DrainStatusDocument = cli(
        stack,
        task_queue,
        &["machine", "status", machine, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()?;
    let expected = format!("drain/{}/{machine}", stack.cluster);
    ensure!(doc.workflow_id == expected, "status of {expected}: {doc}");
    Ok(doc)
}

/// Polls [`drain_document`] until `done` holds; the error shows the last answer.
pub(crate) async fn wait_drain(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(&DrainStatusDocument) -> bool,
) -> Result<DrainStatusDocument> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let doc = drain_document(stack, task_queue, machine).await?;
        if done(&doc) {
            return Ok(doc);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}; last status: {doc}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Creates the machines with the CLI, in parallel, and waits for them.
pub(crate) async fn create_machines(
    stack: &Stack,
    task_queue: &str,
    pool_file: &Path,
    machines: &[String],
) -> Result<()> {
    let creates = machines.iter().map(|machine| {
        let (stack, task_queue, pool_file, machine) = (
            stack.clone(),
            task_queue.to_owned(),
            pool_file.to_path_buf(),
            machine.clone(),
        );
        tokio::task::spawn_blocking(move || {
            create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])
        })
    });
    for created in futures::future::join_all(creates).await {
        created??.expect_code(0)?;
    }
    Ok(())
}

/// Deletes the machines without draining, in parallel; reports failures without failing.
pub(crate) async fn delete_machines(stack: &Stack, task_queue: &str, machines: &[String]) {
    let deletes = machines.iter().map(|machine| async move {
        let args = ["machine", "delete", machine, "--skip-drain", "--wait"];
        let outcome = cli(stack, task_queue, &args).await;
        (machine, outcome)
    });
    for (machine, outcome) in futures::future::join_all(deletes).await {
        if let Err(error) = outcome.and_then(|r| r.expect_code(0).map(|_| ())) {
            eprintln!("cleanup: deleting machine {machine}: {error:#}");
        }
    }
}
