//! A Temporal dev server of a test's own, for tests that kill and restart Temporal: the shared
//! stack's server is never touched (other tests run against it at the same time).
//!
//! It is the stack's Temporal CLI (`temporal server start-dev`) on free ports of 127.0.0.1, its
//! SQLite file in a scratch directory under `target/e2e-temporal/`, every nodewright search
//! attribute registered as `dev/stack` registers them. [`TemporalServer::kill`] SIGKILLs it,
//! [`TemporalServer::restart`] starts it again on the same ports and the same file, and dropping
//! it kills it whatever the test came to. [`TemporalServer::start_with_ui_codec`] points its UI
//! (`--ui-codec-endpoint`) at a codec server, for tests that read decoded payloads in the UI.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nodewright_model::SearchAttribute;

use crate::binaries::KillOnDrop;
use crate::stack::{Stack, repo_root, temporal_cli};

/// How long a (re)started server may take to answer, on a loaded machine.
const READY: Duration = Duration::from_secs(120);

/// The ports a private dev server listens on.
#[derive(Debug, Clone, Copy)]
struct Ports {
    frontend: u16,
    ui: u16,
    http: u16,
    metrics: u16,
}

/// A private `temporal server start-dev`; SIGKILLed when dropped.
pub struct TemporalServer {
    child: Option<KillOnDrop>,
    cli: PathBuf,
    ports: Ports,
    namespace: String,
    dir: PathBuf,
    log: PathBuf,
    /// The codec endpoint the UI calls, if any.
    ui_codec_endpoint: Option<String>,
    /// `--dynamic-config-value KEY=VALUE` pairs (e.g. low history limits).
    dynamic_config: Vec<(String, String)>,
}

impl TemporalServer {
    /// Starts a server for `stack`'s namespace on free ports, its database and log in a fresh
    /// scratch directory `target/e2e-temporal/<name>-<8 hex>/`, and waits until it answers.
    pub async fn start(stack: &Stack, name: &str) -> Result<Self> {
        Self::start_with(stack, name, None).await
    }

    /// Like [`Self::start`], its UI calling the codec server at `endpoint` (`--ui-codec-endpoint`)
    /// from the browser to decode payloads.
    pub async fn start_with_ui_codec(stack: &Stack, name: &str, endpoint: &str) -> Result<Self> {
        Self::start_with(stack, name, Some(endpoint.to_owned())).await
    }

    /// Like [`Self::start`], with the server's dynamic configuration `values` (`KEY`, `VALUE`
    /// as `temporal server start-dev --dynamic-config-value KEY=VALUE` takes them), e.g. low
    /// history limits: `limit.historyCount.suggestContinueAsNew`, `limit.historyCount.error`.
    pub async fn start_with_dynamic_config(
        stack: &Stack,
        name: &str,
        values: &[(&str, &str)],
    ) -> Result<Self> {
        let values = values
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Self::start_with_options(stack, name, None, values).await
    }

    async fn start_with(
        stack: &Stack,
        name: &str,
        ui_codec_endpoint: Option<String>,
    ) -> Result<Self> {
        Self::start_with_options(stack, name, ui_codec_endpoint, Vec::new()).await
    }

    async fn start_with_options(
        stack: &Stack,
        name: &str,
        ui_codec_endpoint: Option<String>,
        dynamic_config: Vec<(String, String)>,
    ) -> Result<Self> {
        let dir = repo_root()
            .join("target")
            .join("e2e-temporal")
            .join(format!("{name}-{}", crate::kube_objects::unique_suffix()));
        std::fs::create_dir_all(&dir)?;
        let mut server = Self {
            child: None,
            cli: temporal_cli()?,
            ports: free_ports()?,
            namespace: stack.temporal_namespace.clone(),
            log: dir.join("temporal.log"),
            dir,
            ui_codec_endpoint,
            dynamic_config,
        };
        server.restart().await?;
        Ok(server)
    }

    /// The frontend's `host:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.ports.frontend)
    }

    /// The UI's base URL, `http://127.0.0.1:<ui port>`: also its origin, as a browser sends it.
    pub fn ui_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.ui)
    }

    /// The origins a browser may load this UI from (for a codec server's `--allow-origin`).
    pub fn ui_origins(&self) -> [String; 2] {
        [self.ui_url(), format!("http://localhost:{}", self.ports.ui)]
    }

    /// The SQLite file the server keeps its state in.
    pub fn db_file(&self) -> PathBuf {
        self.dir.join("temporal.db")
    }

    /// The server's log (stdout and stderr), for failure messages.
    pub fn log_path(&self) -> &std::path::Path {
        &self.log
    }

    /// A copy of `stack` whose workers and CLI talk to this server; Kubernetes and the sandbox
    /// stay the stack's.
    pub fn stack(&self, stack: &Stack) -> Stack {
        let mut private = stack.clone();
        private.temporal_address = self.address();
        private
    }

    /// Whether the process runs (started and not exited).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.0.try_wait(), Ok(None)))
    }

    /// SIGKILLs the server (no graceful shutdown) and reaps it.
    pub fn kill(&mut self) {
        self.child = None;
    }

    /// Starts the server (again) on the same ports and database file, and waits until it
    /// answers; how long that took.
    pub async fn restart(&mut self) -> Result<Duration> {
        self.kill();
        let started = Instant::now();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut command = Command::new(&self.cli);
        command.args([
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            &self.ports.frontend.to_string(),
            "--ui-port",
            &self.ports.ui.to_string(),
            "--http-port",
            &self.ports.http.to_string(),
            "--metrics-port",
            &self.ports.metrics.to_string(),
            "--log-level",
            "warn",
        ]);
        command.arg("--db-filename").arg(self.db_file());
        if let Some(endpoint) = &self.ui_codec_endpoint {
            command.args(["--ui-codec-endpoint", endpoint]);
        }
        for (key, value) in &self.dynamic_config {
            command
                .arg("--dynamic-config-value")
                .arg(format!("{key}={value}"));
        }
        if self.namespace != "default" {
            command.args(["--namespace", &self.namespace]);
        }
        for attribute in SearchAttribute::ALL {
            command
                .arg("--search-attribute")
                .arg(format!("{}=Keyword", attribute.name()));
        }
        command.stdout(Stdio::null()).stderr(log);
        self.child = Some(KillOnDrop(command.spawn().with_context(|| {
            format!("starting {} server start-dev", self.cli.display())
        })?));
        self.wait_ready().await?;
        Ok(started.elapsed())
    }

    /// Waits until the frontend says SERVING, the namespace is there and the last search
    /// attribute is registered; fails early if the process exits.
    async fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + READY;
        let last = SearchAttribute::ALL[SearchAttribute::ALL.len() - 1].name();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.0.try_wait()?
            {
                anyhow::bail!(
                    "temporal server start-dev exited ({status}); its log:\n{}",
                    self.log_tail()
                );
            }
            let health = self
                .run(&["operator", "cluster", "health"])
                .await
                .unwrap_or_default();
            if health.contains("SERVING") {
                let namespace = self
                    .run(&[
                        "operator",
                        "namespace",
                        "describe",
                        "--namespace",
                        &self.namespace,
                    ])
                    .await;
                let attributes = self
                    .run(&[
                        "operator",
                        "search-attribute",
                        "list",
                        "--namespace",
                        &self.namespace,
                    ])
                    .await
                    .unwrap_or_default();
                if namespace.is_some() && attributes.contains(last) {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "the private Temporal server on {} did not answer within {READY:?}; its log:\n{}",
                    self.address(),
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Runs the Temporal CLI against this server; its stdout when it exits 0.
    async fn run(&self, args: &[&str]) -> Option<String> {
        let mut command = Command::new(&self.cli);
        command
            .args(args)
            .args(["--address", &self.address(), "--command-timeout", "5s"]);
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .ok()?
            .ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for TemporalServer {
    fn drop(&mut self) {
        self.kill();
        // The database goes; the log stays for a look after a failure.
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(self.dir.join(format!("temporal.db{suffix}")));
        }
    }
}

/// Four distinct ports the kernel says are free now.
fn free_ports() -> Result<Ports> {
    let listeners = (0..4)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    let ports = listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect::<Result<Vec<u16>>>()?;
    Ok(Ports {
        frontend: ports[0],
        ui: ports[1],
        http: ports[2],
        metrics: ports[3],
    })
}
