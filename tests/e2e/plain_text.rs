//! Plain text only on purpose: `nodewright-worker` and `nodewright` refuse plain text to a
//! non-loopback Temporal before connecting, naming the address and the fixes; with
//! `temporal.tls.enabled = false` they go on and say so. The worker refuses an `http://` ARM
//! endpoint at a non-loopback host without `azure.sandbox`. Needs the local stack (for the
//! CLI's loopback case and the stack's settings).

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;
use nodewright_tests::Stack;
use nodewright_tests::binaries::{binary, output_within};
use nodewright_tests::machines::cli_with_env;
use nodewright_tests::temporal_worker::unique_task_queue;

/// An address no one answers at (TEST-NET-1, RFC 5737). The worker logs "Temporal: ..." right
/// before it connects: a refusal without that line stopped before connecting.
const NON_LOOPBACK: &str = "192.0.2.1:7233";

/// Runs `nodewright-worker` configured only by the stack's environment plus `env`.
fn worker(stack: &Stack, env: &[(&str, &str)]) -> Result<(Output, Duration)> {
    let mut command = Command::new(binary("nodewright-worker")?);
    for var in nodewright_model::config::ENV_VARS {
        command.env_remove(var.name());
    }
    command
        .env_remove("NODEWRIGHT_CONFIG")
        .env("NODEWRIGHT_CLUSTER", &stack.cluster)
        .env("NODEWRIGHT_ARM_ENDPOINT", &stack.arm.endpoint)
        .env("NODEWRIGHT_ARM_TOKEN", &stack.arm.token)
        .env(
            "NODEWRIGHT_AZURE_SUBSCRIPTION_ID",
            &stack.arm.subscription_id,
        )
        .env("NODEWRIGHT_AZURE_RESOURCE_GROUP", &stack.arm.resource_group)
        .env("NODEWRIGHT_AZURE_LOCATION", &stack.arm.location)
        .env("NODEWRIGHT_HEALTH_ADDRESS", "127.0.0.1:0")
        .env("NODEWRIGHT_METRICS_ADDRESS", "127.0.0.1:0")
        .env("NODEWRIGHT_TASK_QUEUE", unique_task_queue("plain-text"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let output = output_within(command, Duration::from_secs(60))?;
    Ok((output, started.elapsed()))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn the_worker_refuses_plain_text_to_a_non_loopback_temporal_before_connecting() -> Result<()>
{
    let stack = Stack::load()?;
    let (output, took) = tokio::task::spawn_blocking({
        let stack = stack.clone();
        move || worker(&stack, &[("NODEWRIGHT_TEMPORAL_ADDRESS", NON_LOOPBACK)])
    })
    .await??;
    let stderr = text(&output.stderr);
    assert!(
        !output.status.success(),
        "exit status {}: {stderr}",
        output.status
    );
    assert!(
        took < Duration::from_secs(5),
        "took {took:?}: it tried to connect"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines.len() == 1 && lines[0].starts_with("error: "),
        "{stderr}"
    );
    let stdout = text(&output.stdout);
    assert!(
        !stdout.contains("Temporal:"),
        "it got to connecting: {stdout}"
    );
    for fragment in [
        "temporal.address \"192.0.2.1:7233\" is not a loopback address",
        "temporal.tls.client_cert",
        "temporal.api_key_file",
        "temporal.tls.enabled = false (NODEWRIGHT_TEMPORAL_TLS=false)",
    ] {
        assert!(
            stderr.contains(fragment),
            "{fragment} missing from: {stderr}"
        );
    }

    // On purpose: it says so, then tries to connect (and finds no one there).
    let (output, _) = tokio::task::spawn_blocking({
        let stack = stack.clone();
        move || {
            worker(
                &stack,
                &[
                    ("NODEWRIGHT_TEMPORAL_ADDRESS", NON_LOOPBACK),
                    ("NODEWRIGHT_TEMPORAL_TLS", "false"),
                ],
            )
        }
    })
    .await??;
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stdout.contains("Temporal: PLAIN TEXT to 192.0.2.1:7233 (temporal.tls.enabled = false)"),
        "{stdout}"
    );
    assert!(
        stderr.contains("could not reach Temporal at 192.0.2.1:7233"),
        "{stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn the_worker_refuses_an_http_arm_endpoint_at_a_non_loopback_host_without_the_sandbox_flag()
-> Result<()> {
    let stack = Stack::load()?;
    let (output, took) = tokio::task::spawn_blocking({
        let stack = stack.clone();
        move || {
            worker(
                &stack,
                &[("NODEWRIGHT_ARM_ENDPOINT", "http://sandbox.invalid:8443")],
            )
        }
    })
    .await??;
    let stderr = text(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    for fragment in [
        "NODEWRIGHT_ARM_ENDPOINT",
        "\"http://sandbox.invalid:8443\"",
        "plain http:// to a non-loopback host",
        "NODEWRIGHT_AZURE_SANDBOX",
    ] {
        assert!(
            stderr.contains(fragment),
            "{fragment} missing from: {stderr}"
        );
    }
    assert!(
        !stderr.contains(&stack.arm.token),
        "the token leaked: {stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn the_cli_refuses_plain_text_to_a_non_loopback_temporal_and_says_how_it_connects_when_asked()
-> Result<()> {
    let stack = Stack::load()?;
    let queue = unique_task_queue("plain-text-cli");
    let started = Instant::now();
    let refused = cli_with_env(
        &stack,
        &queue,
        &["runs"],
        &[("NODEWRIGHT_TEMPORAL_ADDRESS", NON_LOOPBACK)],
    )
    .await?;
    refused.expect_code(2)?;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "it tried to connect"
    );
    assert!(
        refused
            .stderr
            .contains("\"192.0.2.1:7233\" is not a loopback address")
            && refused.stderr.contains("temporal.tls.enabled = false"),
        "{}",
        refused.stderr
    );

    let quiet = cli_with_env(&stack, &queue, &["runs"], &[]).await?;
    quiet.expect_code(0)?;
    assert!(!quiet.stderr.contains("Temporal:"), "{}", quiet.stderr);
    let verbose = cli_with_env(&stack, &queue, &["--verbose", "runs"], &[]).await?;
    verbose.expect_code(0)?;
    assert!(
        verbose.stderr.contains(&format!(
            "Temporal: PLAIN TEXT to {} (loopback)",
            stack.temporal_address
        )),
        "{}",
        verbose.stderr
    );

    let on_purpose = cli_with_env(
        &stack,
        &queue,
        &["runs"],
        &[
            ("NODEWRIGHT_TEMPORAL_ADDRESS", NON_LOOPBACK),
            ("NODEWRIGHT_TEMPORAL_TLS", "false"),
        ],
    )
    .await?;
    assert!(
        on_purpose.stderr.contains(
            "warning: Temporal: PLAIN TEXT to 192.0.2.1:7233 (temporal.tls.enabled = false)"
        ),
        "{}",
        on_purpose.stderr
    );
    Ok(())
}
