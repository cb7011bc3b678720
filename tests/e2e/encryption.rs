//! Encrypted payloads: a worker and a CLI given the namespace's key file send every payload
//! encrypted. A create whose pool holds its bootstrap inline (a join token in it) leaves no token
//! and no plain spec in its history as `temporal workflow show` prints it without the key, while
//! the CLI with the key works as usual; a CLI without the key, or with a wrong one, is refused
//! with a message naming the key and the setting. `nodewright codec-server` with the key decodes
//! for the real Temporal CLI (`--codec-endpoint`), and refuses a request without its token.

use std::time::Duration;

use anyhow::{Result, ensure};
use base64::Engine;
use nodewright_tests::binaries::{KillOnDrop, binary};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{CliResult, KillableWorker, write_pool_file};
use nodewright_tests::secrets::json_mentions;
use nodewright_tests::stack::repo_root;
use nodewright_tests::stack::{history_json, history_json_with};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};

/// A key file holding one key `id`, of 32 bytes from `seed`.
fn key_file(id: &str, seed: &str) -> Result<std::path::PathBuf> {
    let dir = repo_root().join("target").join("e2e-keys");
    std::fs::create_dir_all(&dir)?;
    let bytes: Vec<u8> = seed.bytes().cycle().take(32).collect();
    let key = base64::engine::general_purpose::STANDARD.encode(bytes);
    let path = dir.join(format!("{id}-{seed}.keys"));
    std::fs::write(&path, format!("# test key\n{id}={key}\n"))?;
    Ok(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_encryption_on_a_history_holds_no_plain_input_and_a_cli_without_the_key_is_refused()
-> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let pool = format!("en{}", &suffix[..6]);
    let task_queue = unique_task_queue("encryption");
    let key_id = format!("k-{suffix}");
    let keys = key_file(&key_id, &suffix)?;
    let keys = keys.to_string_lossy().into_owned();
    let with_keys = [("NODEWRIGHT_ENCRYPTION_KEYS_FILE", keys.as_str())];
    let _worker = KillableWorker::start_with_env(&stack, &task_queue, &task_queue, &with_keys)?;
    let machine = format!("{pool}-enc");

    let result = scenario(&stack, &task_queue, &pool, &machine, &key_id, &with_keys).await;

    let _ = CliResult::run_with_env(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--skip-drain", "--wait"],
        &with_keys,
    );
    result
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    machine: &str,
    key_id: &str,
    with_keys: &[(&str, &str)],
) -> Result<()> {
    // An inline bootstrap with a join token: the CLI warns, the history holds none of it.
    let token = format!("{}.{}", &key_id[2..8], "0123456789abcdef");
    let pool_file = write_pool_file(stack, pool, "60s")?;
    let text = std::fs::read_to_string(&pool_file)?.replace(
        "      exec /usr/bin/kubelet --cloud-provider=external\n",
        &format!(
            "      kubeadm join 10.0.0.4:6443 --token {token}\n      exec /usr/bin/kubelet --cloud-provider=external\n"
        ),
    );
    std::fs::write(&pool_file, text)?;
    let path = pool_file.to_string_lossy().into_owned();
    let create = [
        "machine", "create", "--pool", &path, "--name", machine, "--wait",
    ];
    let created = CliResult::run_with_env(stack, task_queue, &create, with_keys)?;
    created.expect_code(0)?;
    ensure!(
        created
            .stderr
            .contains("looks like it holds a Kubernetes bootstrap token")
            && !created.stderr.contains(&token),
        "the CLI warns about the inline token without printing it: {}",
        created.stderr
    );

    let id = format!("create/{}/{machine}", stack.cluster);
    let history = history_json(stack, &id).await?;
    for plain in [token.as_str(), "kubeadm join"] {
        let found = json_mentions(&history, plain);
        ensure!(
            found.is_empty(),
            "{id}'s history shows {plain:?} at {found:?}"
        );
    }
    // The spec appears only in the run's UI summary (user metadata, which the SDK sends as it
    // is: pool, machine, VM size), never in an input, result or heartbeat.
    let spec: Vec<String> = json_mentions(&history, "Standard_D2s_v5")
        .into_iter()
        .filter(|path| !path.contains(".userMetadata."))
        .collect();
    ensure!(
        spec.is_empty(),
        "{id}'s history shows the plain spec at {spec:?}"
    );
    ensure!(
        !json_mentions(&history, "binary/encrypted").is_empty()
            && !json_mentions(&history, key_id).is_empty(),
        "{id}'s payloads are not marked encrypted with {key_id}"
    );

    // The CLI with the key reads the run; without it, or with a wrong one, it is refused.
    let status = ["--output", "json", "machine", "status", machine];
    CliResult::run_with_env(stack, task_queue, &status, with_keys)?.expect_code(0)?;
    let without = CliResult::run(stack, task_queue, &status)?;
    ensure!(
        without.code != Some(0)
            && without
                .stderr
                .contains(&format!("a payload is encrypted (key \"{key_id}\")"))
            && without.stderr.contains("NODEWRIGHT_ENCRYPTION_KEYS_FILE"),
        "a CLI without the key: exit {:?}\n{}",
        without.code,
        without.stderr
    );
    // The codec server with the key: the real Temporal CLI, pointed at it, shows the input
    // decoded (the join line is back); a request without its token is refused.
    let decoded = show_through_codec_server(stack, &id, with_keys).await?;
    ensure!(
        !json_mentions(&decoded, "kubeadm join").is_empty(),
        "`temporal workflow show --codec-endpoint` did not decode the input"
    );

    let wrong = key_file(key_id, "wrongwrongwrong")?;
    let wrong = wrong.to_string_lossy().into_owned();
    let with_wrong = [("NODEWRIGHT_ENCRYPTION_KEYS_FILE", wrong.as_str())];
    let refused = CliResult::run_with_env(stack, task_queue, &status, &with_wrong)?;
    ensure!(
        refused.code != Some(0)
            && refused
                .stderr
                .contains(&format!("does not decrypt with key \"{key_id}\"")),
        "a CLI with a wrong key: exit {:?}\n{}",
        refused.code,
        refused.stderr
    );
    Ok(())
}

/// `temporal workflow show --codec-endpoint` through `nodewright codec-server` (with the keys
/// in `env` and a bearer token), after checking that a request without the token is refused.
async fn show_through_codec_server(
    stack: &Stack,
    workflow_id: &str,
    env: &[(&str, &str)],
) -> Result<serde_json::Value> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut command = std::process::Command::new(binary("nodewright")?);
    command
        .args(["codec-server", "--listen", &listen])
        .envs(env.iter().copied())
        .env("NODEWRIGHT_CLUSTER", &stack.cluster)
        .env("NODEWRIGHT_CODEC_TOKEN", "e2e-token")
        .env_remove("NODEWRIGHT_CONFIG");
    let _server = KillOnDrop::spawn(&mut command)?;
    let endpoint = format!("http://{listen}");
    let http = reqwest::Client::new();
    eventually(
        "the codec server to listen",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || async { Ok(http.get(&endpoint).send().await.ok().map(|_| ())) },
    )
    .await?;
    let refused = http
        .post(format!("{endpoint}/decode"))
        .body(r#"{"payloads":[]}"#)
        .send()
        .await?;
    ensure!(
        refused.status() == reqwest::StatusCode::UNAUTHORIZED,
        "a request without the token: {}",
        refused.status()
    );
    history_json_with(
        stack,
        workflow_id,
        &[
            "--codec-endpoint",
            &endpoint,
            "--codec-auth",
            "Bearer e2e-token",
        ],
    )
    .await
}
