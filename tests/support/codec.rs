//! Encrypted payloads in tests: key files of test keys, and `nodewright codec-server` as a process
//! of the test's own (free port, killed when dropped).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;
use base64::Engine;

use crate::binaries::{KillOnDrop, binary};
use crate::stack::{Stack, repo_root};

/// A key file holding one key `id`, of 32 bytes from `seed`, in `target/e2e-keys/`: a test key,
/// never a real one.
pub fn key_file(id: &str, seed: &str) -> Result<PathBuf> {
    let dir = repo_root().join("target").join("e2e-keys");
    std::fs::create_dir_all(&dir)?;
    let bytes: Vec<u8> = seed.bytes().cycle().take(32).collect();
    let key = base64::engine::general_purpose::STANDARD.encode(bytes);
    let path = dir.join(format!("{id}-{seed}.keys"));
    std::fs::write(&path, format!("# test key\n{id}={key}\n"))?;
    Ok(path)
}

/// A port of 127.0.0.1 the kernel says is free now.
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A running `nodewright codec-server`; killed when dropped.
pub struct CodecServer {
    child: Option<KillOnDrop>,
    endpoint: String,
    log: PathBuf,
}

impl CodecServer {
    /// Starts `nodewright codec-server --listen 127.0.0.1:<port>` with the variables `env` (the
    /// keys, and `NODEWRIGHT_CODEC_TOKEN` if any), allowing the browser origins `origins` (none:
    /// the server's default), and waits until it answers. Its log is
    /// `target/e2e-logs/codec-server-<port>.log`.
    pub async fn start(
        stack: &Stack,
        port: u16,
        env: &[(&str, &str)],
        origins: &[String],
    ) -> Result<Self> {
        let listen = format!("127.0.0.1:{port}");
        let dir = repo_root().join("target").join("e2e-logs");
        std::fs::create_dir_all(&dir)?;
        let log = dir.join(format!("codec-server-{port}.log"));
        let mut command = Command::new(binary("nodewright")?);
        command
            .args(["codec-server", "--listen", &listen])
            .env_remove("NODEWRIGHT_CODEC_TOKEN")
            .envs(env.iter().copied())
            .env("NODEWRIGHT_CLUSTER", &stack.cluster)
            .env_remove("NODEWRIGHT_CONFIG")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log)?)
            .stderr(std::fs::File::options().append(true).open(&log)?);
        for origin in origins {
            command.args(["--allow-origin", origin]);
        }
        let server = Self {
            child: Some(KillOnDrop(command.spawn()?)),
            endpoint: format!("http://{listen}"),
            log,
        };
        let http = reqwest::Client::new();
        crate::eventually(
            "the codec server to listen",
            Duration::from_secs(30),
            Duration::from_millis(200),
            || async { Ok(http.get(&server.endpoint).send().await.ok().map(|_| ())) },
        )
        .await?;
        Ok(server)
    }

    /// `http://127.0.0.1:<port>`, the endpoint to give the UI or `--codec-endpoint`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// What the server printed.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the server (SIGKILL) and reaps it.
    pub fn stop(&mut self) {
        self.child = None;
    }
}
