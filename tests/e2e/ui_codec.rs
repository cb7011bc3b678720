//! The Temporal UI pointed at `nodewright codec-server` shows a create run's input decoded, in a
//! real browser: a private Temporal dev server (the shared stack's UI has no codec endpoint)
//! started with `--ui-codec-endpoint`, the codec server with the payload key allowing that UI's
//! origin, a worker and the CLI with the key. A create whose inline bootstrap holds a marker;
//! headless Chromium opens the run's page, which shows the marker from the decoded input (the
//! browser's calls, `Content-Type` and `X-Namespace` after an `OPTIONS` preflight, pass the codec
//! server's CORS; its log shows both). With the codec server stopped, the same page shows the input as stored,
//! `binary/encrypted`, and no marker. Screenshots of both in
//! `target/e2e-screenshots/` (`codec-run-<machine>.png`, `codec-off-run-<machine>.png`).

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::codec::{CodecServer, free_port, key_file};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{CliResult, KillableWorker, write_pool_file};
use nodewright_tests::temporal_server::TemporalServer;
use nodewright_tests::temporal_worker::unique_task_queue;

use crate::ui::{Browser, CreateRunPages, excerpt};

/// `binary/encrypted` in base64: an encrypted payload's encoding as the UI shows it undecoded.
const ENCRYPTED_BASE64: &str = "YmluYXJ5L2VuY3J5cHRlZA==";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_temporal_ui_pointed_at_the_codec_server_shows_a_create_runs_decoded_input()
-> Result<()> {
    let browser = Browser::find()?;
    let shared = Stack::load()?;
    let suffix = unique_suffix();
    let codec_port = free_port()?;
    let server = TemporalServer::start_with_ui_codec(
        &shared,
        "ui-codec",
        &format!("http://127.0.0.1:{codec_port}"),
    )
    .await?;
    let stack = server.stack(&shared);
    let key_id = format!("ui-{suffix}");
    let keys = key_file(&key_id, &suffix)?;
    let keys = keys.to_string_lossy().into_owned();
    let with_keys = [("NODEWRIGHT_ENCRYPTION_KEYS_FILE", keys.as_str())];
    let mut codec =
        CodecServer::start(&stack, codec_port, &with_keys, &server.ui_origins()).await?;
    let task_queue = unique_task_queue("ui-codec");
    let worker = KillableWorker::start_with_env(&stack, &task_queue, &task_queue, &with_keys)?;
    let pool = format!("uc{}", &suffix[..6]);
    let machine = format!("{pool}-c0dec");
    // Only in the run's input (its pool's bootstrap): not in the summary, a search attribute
    // or an id. Letters only: the UI's JSON highlighter splits digits off a word.
    let marker: String = format!("nwmarker{suffix}")
        .chars()
        .map(|c| match c.to_digit(10) {
            Some(digit) => char::from(b'g' + u8::try_from(digit).unwrap_or(0)),
            None => c,
        })
        .collect();

    let result = scenario(
        &browser,
        &stack,
        &server,
        &mut codec,
        &task_queue,
        &pool,
        &machine,
        &marker,
        &with_keys,
    )
    .await;
    if result.is_err() {
        eprintln!("worker log:\n{}", worker.log_tail());
        eprintln!("codec server log:\n{}", codec.log_text());
    }
    let _ = CliResult::run_with_env(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--skip-drain", "--wait"],
        &with_keys,
    );
    result
}

#[allow(clippy::too_many_arguments)]
async fn scenario(
    browser: &Browser,
    stack: &Stack,
    server: &TemporalServer,
    codec: &mut CodecServer,
    task_queue: &str,
    pool: &str,
    machine: &str,
    marker: &str,
    with_keys: &[(&str, &str)],
) -> Result<()> {
    let pool_file = write_pool_file(stack, pool, "60s")?;
    let text = std::fs::read_to_string(&pool_file)?;
    let marked = text.replace(
        "      exec /usr/bin/kubelet --cloud-provider=external <<REGISTER_WITH_TAINTS>>\n",
        &format!("      echo {marker}\n      exec /usr/bin/kubelet --cloud-provider=external <<REGISTER_WITH_TAINTS>>\n"),
    );
    ensure!(marked != text, "the pool file's bootstrap was not replaced");
    std::fs::write(&pool_file, marked)?;
    let path = pool_file.to_string_lossy().into_owned();
    let create = [
        "machine", "create", "--pool", &path, "--name", machine, "--wait",
    ];
    CliResult::run_with_env(stack, task_queue, &create, with_keys)?.expect_code(0)?;

    let query = format!("NodewrightPool=\"{pool}\"");
    let CreateRunPages {
        workflow_id,
        run_url,
        dir,
        ..
    } = CreateRunPages::new(stack, &server.ui_url(), machine, &query).await?;

    // Through the codec server: the decoded input, marker included.
    browser
        .checked_text(
            "the run's page with the codec server",
            &run_url,
            marker,
            &dir.join(format!("codec-run-{machine}.txt")),
            &[&workflow_id, "CreateMachine", "Completed", marker],
        )
        .await?;
    browser
        .save_screenshot(
            &run_url,
            &dir.join(format!("codec-run-{machine}.png")),
            "1600,1400",
        )
        .await?;
    // What the UI sent, as the codec server logged it: the browser's CORS preflight, then the
    // decode call naming the namespace, both from the UI's origin, both answered.
    let log = codec.log_text();
    let origin = server.ui_url();
    let namespace = &stack.temporal_namespace;
    for expected in [
        format!(
            "OPTIONS /decode origin {origin} namespace - preflight for headers content-type,x-namespace: 204 No Content"
        ),
        format!("POST /decode origin {origin} namespace {namespace}: 200 OK"),
    ] {
        ensure!(
            log.contains(&expected),
            "the codec server did not log {expected:?}; its log:\n{log}"
        );
    }

    // The codec server stopped: the same page, rendered in full, shows ciphertext only.
    codec.stop();
    let text = browser
        .text_showing(&run_url, "kube.await_node_ready")
        .await
        .context("the run's page without the codec server")?;
    std::fs::write(dir.join(format!("codec-off-run-{machine}.txt")), &text)?;
    // The input as stored: `binary/encrypted` (base64, as the UI prints payload metadata), and
    // the UI's banner saying why.
    ensure!(
        !text.contains(marker)
            && text.contains(ENCRYPTED_BASE64)
            && text.contains("Codec Server could not connect"),
        "without the codec server, {run_url} does not show the input encrypted: {}",
        excerpt(&text)
    );
    browser
        .save_screenshot(
            &run_url,
            &dir.join(format!("codec-off-run-{machine}.png")),
            "1600,1400",
        )
        .await
}
