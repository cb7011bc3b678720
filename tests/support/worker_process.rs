//! The `nodewright-worker` binary as a child process: a config file in a scratch directory, free
//! ports for its health and metrics endpoints, its output captured to files, and plain HTTP GETs
//! against its endpoints.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::binaries::{KillOnDrop, binary};
use crate::identity::IdentityNamespace;
use crate::stack::Stack;

/// A running (or exited) `nodewright-worker`, killed when dropped.
pub struct WorkerProcess {
    /// The process.
    pub process: KillOnDrop,
    /// Where `/healthz` and `/readyz` are served.
    pub health: SocketAddr,
    /// Where `/metrics` is served.
    pub metrics: SocketAddr,
    /// The scratch directory with the config file and the captured output.
    pub dir: PathBuf,
    /// The identity namespace held for the worker, when the config names none.
    _identity: Option<IdentityNamespace>,
}

/// A scratch directory under the system's temp directory, unique to this call.
pub fn scratch_dir(prefix: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "nodewright-{prefix}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_address() -> Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// A complete config file for the local stack: its Kubernetes, Temporal and sandbox, polling
/// `task_queue`, serving health and metrics on `health` and `metrics`.
pub fn stack_config(
    stack: &Stack,
    task_queue: &str,
    health: SocketAddr,
    metrics: SocketAddr,
) -> String {
    format!(
        r#"cluster = "{cluster}"

[azure]
subscription_id = "{subscription}"
resource_group = "{resource_group}"
location = "{location}"
arm_endpoint = "{endpoint}"
{key_vault}
[azure.auth]
mode = "static"
token = "{token}"

[kubernetes]
kubeconfig = "{kubeconfig}"

[temporal]
address = "{address}"
namespace = "{namespace}"
task_queue = "{task_queue}"

[worker]
health_address = "{health}"
metrics_address = "{metrics}"
shutdown_grace = "5s"
"#,
        cluster = stack.cluster,
        subscription = stack.arm.subscription_id,
        resource_group = stack.arm.resource_group,
        location = stack.arm.location,
        endpoint = stack.arm.endpoint,
        key_vault = stack
            .key_vault_endpoint
            .as_ref()
            .map(|endpoint| format!("key_vault_endpoint = \"{endpoint}\"\n"))
            .unwrap_or_default(),
        token = stack.arm.token,
        kubeconfig = stack.kubeconfig.display(),
        address = stack.temporal_address,
        namespace = stack.temporal_namespace,
    )
}

impl WorkerProcess {
    /// Writes `config` to `<dir>/nodewright.toml` and starts the worker with `--config` and
    /// `args`. Every variable nodewright reads is removed from its environment, so only the file
    /// and `args` configure it, except that a config without `kubernetes.identity_namespace`
    /// gets its cluster's test identity namespace ([`IdentityNamespace`], created when missing)
    /// through `NODEWRIGHT_IDENTITY_NAMESPACE`. Its stdout and stderr go to files in `dir`.
    pub fn spawn(
        dir: &Path,
        config: &str,
        health: SocketAddr,
        metrics: SocketAddr,
        args: &[&str],
    ) -> Result<Self> {
        let identity = identity_for(config)?;
        let config_path = dir.join("nodewright.toml");
        std::fs::write(&config_path, config)?;
        let mut command = Command::new(binary("nodewright-worker")?);
        command.arg("--config").arg(&config_path).args(args);
        for var in nodewright_model::config::ENV_VARS {
            command.env_remove(var.name());
        }
        if let Some(identity) = &identity {
            command.env("NODEWRIGHT_IDENTITY_NAMESPACE", identity.name());
        }
        command
            .env_remove("NODEWRIGHT_CONFIG")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("stdout"))?)
            .stderr(std::fs::File::create(dir.join("stderr"))?);
        Ok(Self {
            process: KillOnDrop(command.spawn()?),
            health,
            metrics,
            dir: dir.to_owned(),
            _identity: identity,
        })
    }

    /// What the worker wrote to stdout so far (its logs).
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(self.dir.join("stdout")).unwrap_or_default()
    }

    /// What the worker wrote to stderr so far (its start-up error, if any).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
    }

    /// The exit status, if the worker has exited.
    pub fn try_exit(&mut self) -> Result<Option<ExitStatus>> {
        Ok(self.process.0.try_wait()?)
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) -> Result<()> {
        let status = Command::new("kill")
            .args(["-TERM", &self.process.0.id().to_string()])
            .status()?;
        if !status.success() {
            bail!("kill -TERM {} failed: {status}", self.process.0.id());
        }
        Ok(())
    }
}

/// The identity namespace to hold for a worker configured by `config`: none when the config
/// names one (or names no cluster, which the worker refuses anyway).
fn identity_for(config: &str) -> Result<Option<IdentityNamespace>> {
    let Ok(table) = config.parse::<toml::Table>() else {
        return Ok(None);
    };
    let named = table
        .get("kubernetes")
        .and_then(|kubernetes| kubernetes.get("identity_namespace"))
        .is_some();
    match table.get("cluster").and_then(toml::Value::as_str) {
        Some(cluster) if !named => Ok(Some(IdentityNamespace::hold(cluster)?)),
        _ => Ok(None),
    }
}

/// `GET http://<address><path>` over HTTP/1.1 with `Connection: close`: the status and the
/// body. Fails when nothing listens.
pub fn http_get(address: SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("no HTTP header in {response:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("no HTTP status in {head:?}"))?;
    Ok((status, body.to_owned()))
}
