//! Helpers of the machine end-to-end tests: a worker process per test on its own task queue,
//! the CLI, pool files, what Azure (the sandbox) and Kubernetes hold for a machine, and the
//! sandbox's fault and request-log admin API.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Node;
use nodewright_model::drain::DrainStatus;
use nodewright_model::machine::MachineStatus;
use nodewright_model::ownership::TAG_MACHINE;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::binaries::{KillOnDrop, binary};
use crate::identity::IdentityNamespace;
use crate::stack::{Stack, repo_root};

/// A `nodewright-worker` process on its own task queue; killed when dropped. Its identity
/// namespace is the stack's shared one for the stack's cluster, its own for any other
/// ([`IdentityNamespace`]).
pub struct KillableWorker {
    child: Option<KillOnDrop>,
    stack: Stack,
    task_queue: String,
    log: PathBuf,
    /// Variables set on top of the stack's.
    env: Vec<(String, String)>,
    /// The identity namespace held for the worker, unless `env` names one.
    identity: Option<IdentityNamespace>,
    /// Whether standard output (the JSON log lines) goes to the log file too, not only stderr.
    full_log: bool,
    /// Where the running process serves `/metrics`.
    metrics: Option<std::net::SocketAddr>,
}

impl KillableWorker {
    /// Starts the worker binary on `task_queue` with the stack's settings, its health and
    /// metrics endpoints on ephemeral ports, its log in `target/e2e-logs/<task_queue>.log`.
    pub fn start(stack: &Stack, task_queue: &str) -> Result<Self> {
        Self::start_logging_to(stack, task_queue, task_queue)
    }

    /// Like [`Self::start`], the log in `target/e2e-logs/<log_name>.log`: for several workers
    /// on one task queue.
    pub fn start_logging_to(stack: &Stack, task_queue: &str, log_name: &str) -> Result<Self> {
        Self::start_with_env(stack, task_queue, log_name, &[])
    }

    /// Like [`Self::start_logging_to`], with the variables `env` set on top of the stack's (e.g.
    /// `NODEWRIGHT_IDENTITY_NAMESPACE`). An empty `task_queue` leaves the task queue to its
    /// default, `nodewright-<cluster>` (an empty variable counts as unset).
    pub fn start_with_env(
        stack: &Stack,
        task_queue: &str,
        log_name: &str,
        env: &[(&str, &str)],
    ) -> Result<Self> {
        let mut worker = Self::prepared(stack, task_queue, log_name, env, false)?;
        worker.restart()?;
        Ok(worker)
    }

    /// Like [`Self::start`], logging at debug level, with every log line (standard output too)
    /// in the log file: for tests that read what the worker logged.
    pub fn start_with_full_log(stack: &Stack, task_queue: &str) -> Result<Self> {
        Self::start_with_full_log_and_env(stack, task_queue, &[])
    }

    /// Like [`Self::start_with_full_log`], with the variables `env` set on top of the stack's
    /// (e.g. the payload encryption keys).
    pub fn start_with_full_log_and_env(
        stack: &Stack,
        task_queue: &str,
        env: &[(&str, &str)],
    ) -> Result<Self> {
        let mut env = env.to_vec();
        env.push(("RUST_LOG", "debug"));
        let mut worker = Self::prepared(stack, task_queue, task_queue, &env, true)?;
        worker.restart()?;
        Ok(worker)
    }

    /// Like [`Self::start_with_env`], with every log line (standard output too) in the log file,
    /// at the level `env`'s `RUST_LOG` sets (the worker's default, `info`, without it): for a
    /// benchmark that counts what the worker logged without paying for debug logging.
    pub fn start_with_full_log_at(
        stack: &Stack,
        task_queue: &str,
        env: &[(&str, &str)],
    ) -> Result<Self> {
        let mut worker = Self::prepared(stack, task_queue, task_queue, env, true)?;
        worker.restart()?;
        Ok(worker)
    }

    /// The worker, not started yet.
    fn prepared(
        stack: &Stack,
        task_queue: &str,
        log_name: &str,
        env: &[(&str, &str)],
        full_log: bool,
    ) -> Result<Self> {
        let dir = repo_root().join("target").join("e2e-logs");
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            child: None,
            stack: stack.clone(),
            task_queue: task_queue.to_owned(),
            log: dir.join(format!("{log_name}.log")),
            env: env
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect(),
            identity: None,
            full_log,
            metrics: None,
        })
    }

    /// Where the log is written: `target/e2e-logs/<log name>.log`.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The whole log file.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Where the running process serves `/metrics` (a free port chosen at each start).
    pub fn metrics_address(&self) -> Result<std::net::SocketAddr> {
        self.metrics.context("the worker has not been started")
    }

    /// The process id, while it runs: the worker's Temporal identity ends with `:<pid>`.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|child| child.0.id())
    }

    /// Starts the process again (after [`Self::kill`]), appending to the same log.
    pub fn restart(&mut self) -> Result<()> {
        let named = self
            .env
            .iter()
            .any(|(name, _)| name == "NODEWRIGHT_IDENTITY_NAMESPACE");
        if !named && self.identity.is_none() {
            self.identity = Some(IdentityNamespace::hold(&self.stack.cluster)?);
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let metrics = crate::worker_process::free_address()?;
        self.metrics = Some(metrics);
        let mut command = Command::new(binary("nodewright-worker")?);
        apply_stack_env(&mut command, &self.stack, &self.task_queue);
        if let Some(identity) = &self.identity {
            command.env("NODEWRIGHT_IDENTITY_NAMESPACE", identity.name());
        }
        command.envs(self.env.iter().map(|(name, value)| (name, value)));
        command
            .env("NODEWRIGHT_HEALTH_ADDRESS", "127.0.0.1:0")
            .env("NODEWRIGHT_METRICS_ADDRESS", metrics.to_string())
            .env("NODEWRIGHT_SHUTDOWN_SECONDS", "2")
            .stdout(if self.full_log {
                Stdio::from(log.try_clone()?)
            } else {
                Stdio::null()
            })
            .stderr(log);
        self.child = Some(KillOnDrop(command.spawn()?));
        Ok(())
    }

    /// Kills the process with SIGKILL (no graceful shutdown) and reaps it.
    pub fn kill(&mut self) {
        self.child = None;
    }

    /// Whether the process still runs (it was started and has not exited).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.0.try_wait(), Ok(None)))
    }

    /// The worker's log so far, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

/// The environment the stack's binaries need: Temporal, Kubernetes, the sandbox's ARM.
fn apply_stack_env(command: &mut Command, stack: &Stack, task_queue: &str) {
    command
        .env("KUBECONFIG", &stack.kubeconfig)
        .env("TEMPORAL_ADDRESS", &stack.temporal_address)
        .env("TEMPORAL_NAMESPACE", &stack.temporal_namespace)
        .env("NODEWRIGHT_TASK_QUEUE", task_queue)
        .env("NODEWRIGHT_CLUSTER", &stack.cluster)
        .env("NODEWRIGHT_ARM_ENDPOINT", &stack.arm.endpoint)
        .env("NODEWRIGHT_ARM_TOKEN", &stack.arm.token)
        .env(
            "NODEWRIGHT_AZURE_SUBSCRIPTION_ID",
            &stack.arm.subscription_id,
        )
        .env("NODEWRIGHT_AZURE_RESOURCE_GROUP", &stack.arm.resource_group)
        .env("NODEWRIGHT_AZURE_LOCATION", &stack.arm.location)
        .env_remove("NODEWRIGHT_CONFIG");
    match &stack.key_vault_endpoint {
        Some(endpoint) => command.env("NODEWRIGHT_KEYVAULT_ENDPOINT", endpoint),
        None => command.env_remove("NODEWRIGHT_KEYVAULT_ENDPOINT"),
    };
}

/// The longest one CLI call may take in a test (the longest `--wait` of a rollout under a loaded
/// CI machine takes a few minutes): past it the CLI is killed and the test fails naming the
/// command, instead of the suite hanging until CI's own limit cuts every result.
pub const CLI_LIMIT: Duration = Duration::from_secs(600);

/// Runs the `nodewright` CLI with the stack's settings on `task_queue`; fails (the process
/// killed, its output so far in the message) when it runs longer than [`CLI_LIMIT`].
pub fn run_cli(stack: &Stack, task_queue: &str, args: &[&str]) -> Result<Output> {
    run_cli_with_env(stack, task_queue, args, &[])
}

/// Like [`run_cli`], with the variables `env` set on top of the stack's.
pub fn run_cli_with_env(
    stack: &Stack,
    task_queue: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<Output> {
    let mut command = Command::new(binary("nodewright")?);
    apply_stack_env(&mut command, stack, task_queue);
    command.envs(env.iter().copied());
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::binaries::output_within(command, CLI_LIMIT)
        .with_context(|| format!("nodewright {}", args.join(" ")))
}

/// Runs the CLI with [`CliResult::run`] off the async threads.
pub async fn cli(stack: &Stack, task_queue: &str, args: &[&str]) -> Result<CliResult> {
    cli_with_env(stack, task_queue, args, &[]).await
}

/// Runs the CLI with [`CliResult::run_with_env`] off the async threads.
pub async fn cli_with_env(
    stack: &Stack,
    task_queue: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<CliResult> {
    let (stack, task_queue) = (stack.clone(), task_queue.to_owned());
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        CliResult::run_with_env(&stack, &task_queue, &args, &env)
    })
    .await?
}

/// The CLI's exit code and output, for assertions and failure messages.
pub struct CliResult {
    /// Exit code.
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl CliResult {
    /// Runs the CLI and captures everything.
    pub fn run(stack: &Stack, task_queue: &str, args: &[&str]) -> Result<Self> {
        Self::run_with_env(stack, task_queue, args, &[])
    }

    /// Like [`Self::run`], with the variables `env` set on top of the stack's.
    pub fn run_with_env(
        stack: &Stack,
        task_queue: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Self> {
        let output = run_cli_with_env(stack, task_queue, args, env)?;
        Ok(Self {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }

    /// Fails unless the exit code is `expected`.
    pub fn expect_code(&self, expected: i32) -> Result<&Self> {
        if self.code != Some(expected) {
            bail!(
                "nodewright exited {:?}, expected {expected}\nstdout: {}\nstderr: {}",
                self.code,
                self.stdout,
                self.stderr
            );
        }
        Ok(self)
    }

    /// Standard output as one JSON document.
    pub fn json(&self) -> Result<Value> {
        serde_json::from_str(&self.stdout)
            .with_context(|| format!("stdout is not JSON: {}", self.stdout))
    }

    /// Standard output as one JSON document of type `T`: a field the type requires that is
    /// missing, renamed or of another type fails here, instead of reading as a default.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(&self.stdout).with_context(|| {
            format!(
                "stdout is not a {}: {}",
                std::any::type_name::<T>(),
                self.stdout
            )
        })
    }
}

/// What `machine status <machine> --output json` prints for a create or a delete: the run's
/// status as the CLI words it, the workflow's `status` query, and a delete's drain.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatusDocument {
    /// `create/<cluster>/<machine>` or `delete/...`.
    pub workflow_id: String,
    /// `running`, `completed`, `failed`, `canceled`, ...
    pub run_status: String,
    /// The workflow's `status` query.
    pub status: MachineStatus,
    /// A delete's drain (its DrainNode child's `status` query), when it drained.
    #[serde(default)]
    pub drain: Option<DrainStatus>,
}

/// Runs `nodewright machine create --pool <pool_file> --name <machine>` plus `extra` (e.g.
/// `--wait`, `--output json`).
pub fn create_machine(
    stack: &Stack,
    task_queue: &str,
    pool_file: &Path,
    machine: &str,
    extra: &[&str],
) -> Result<CliResult> {
    let pool = pool_file.to_string_lossy();
    let mut args = vec!["machine", "create", "--pool", &pool, "--name", machine];
    args.extend_from_slice(extra);
    CliResult::run(stack, task_queue, &args)
}

/// A pool file for the stack's resource group, written to `target/e2e-pools/<pool>.yaml`.
pub fn write_pool_file(stack: &Stack, pool: &str, creation_timeout: &str) -> Result<PathBuf> {
    let dir = repo_root().join("target").join("e2e-pools");
    std::fs::create_dir_all(&dir)?;
    let subnet = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/nodes/subnets/nodes",
        stack.arm.subscription_id, stack.arm.resource_group
    );
    let text = format!(
        r#"apiVersion: nodewright.io/v1alpha1
kind: Pool
metadata:
  name: {pool}
spec:
  replicas: 2
  template:
    vmSize: Standard_D2s_v5
    image:
      publisher: Canonical
      offer: ubuntu-24_04-lts
      sku: server
      version: latest
    osDisk:
      sizeGB: 64
    subnetId: {subnet}
    zones: ["1", "2"]
    labels:
      role: e2e
      nodewright.example/team: platform
    taints:
      - key: dedicated
        value: e2e
        effect: NoSchedule
    tags:
      team: platform
    sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2eTestKeyForNodewrightEndToEndPools00 e2e@nodewright
    bootstrap: |
      #!/bin/bash
      exec /usr/bin/kubelet --cloud-provider=external <<REGISTER_WITH_TAINTS>>
  timeouts:
    creation: {creation_timeout}
"#
    );
    let path = dir.join(format!("{pool}.yaml"));
    std::fs::write(&path, text)?;
    Ok(path)
}

/// A sandbox fault rule: every VM PUT of `pool` fails as ARM fails it when a region is out of
/// capacity (`AllocationFailed`, with ARM's message).
pub fn allocation_failure(pool: &str) -> Value {
    serde_json::json!({
        "kind": "fail_operation", "operation": "vm.put", "vm": format!("{pool}-*"),
        "code": "AllocationFailed",
        "message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this region.",
    })
}

/// A sandbox fault rule: every page of the list `operation` (`vm.list`, `nic.list`,
/// `disk.list`) of resource group `resource_group` links back to itself (its `nextLink` is the
/// page's own URL), so a client following `nextLink` reads the same page without end. Lists of
/// other resource groups are untouched.
pub fn repeating_list(resource_group: &str, operation: &str) -> Value {
    serde_json::json!({
        "kind": "repeat_next_link", "operation": operation,
        "path": format!("*/resourceGroups/{resource_group}/providers/*"),
    })
}

/// The resources Azure (the sandbox) holds for a machine, found by the machine tag or by name.
#[derive(Debug, Default)]
pub struct MachineResources {
    /// VMs named after the machine or tagged with it.
    pub vms: Vec<Value>,
    /// NICs tagged with the machine.
    pub nics: Vec<Value>,
    /// Disks tagged with the machine or named `<machine>-osdisk`.
    pub disks: Vec<Value>,
}

impl MachineResources {
    /// Whether nothing of the machine is left.
    pub fn is_empty(&self) -> bool {
        self.vms.is_empty() && self.nics.is_empty() && self.disks.is_empty()
    }
}

/// The sandbox's admin and ARM API, over plain HTTP with the stack's token.
pub struct Sandbox {
    http: reqwest::Client,
    stack: Stack,
}

impl Sandbox {
    /// The stack's sandbox.
    pub fn new(stack: &Stack) -> Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()?,
            stack: stack.clone(),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.stack.arm.endpoint.trim_end_matches('/'))
    }

    async fn get_json(&self, path: &str) -> Result<Value> {
        let response = self
            .http
            .get(self.url(path))
            .bearer_auth(&self.stack.arm.token)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        if !status.is_success() {
            bail!("GET {path}: {status}: {body}");
        }
        Ok(body)
    }

    /// Sets the Key Vault secret `name` of `vault` to `value` (SetSecret on the sandbox's data
    /// plane at the stack's Key Vault endpoint, with its token); the new version's id, e.g.
    /// `https://<vault>.vault.azure.net/secrets/<name>/<version>`.
    pub async fn set_key_vault_secret(
        &self,
        vault: &str,
        name: &str,
        value: &str,
    ) -> Result<String> {
        self.put_key_vault_secret(vault, name, &serde_json::json!({ "value": value }))
            .await
    }

    /// SetSecret with the whole `body` (`{value, contentType?, attributes?: {enabled}, tags?}`),
    /// e.g. a disabled secret; the new version's id.
    pub async fn put_key_vault_secret(
        &self,
        vault: &str,
        name: &str,
        body: &Value,
    ) -> Result<String> {
        let endpoint = self
            .stack
            .key_vault_endpoint
            .as_deref()
            .context("NODEWRIGHT_KEYVAULT_ENDPOINT is not set: the stack predates Key Vault")?;
        let response = self
            .http
            .put(format!(
                "{}/{vault}/secrets/{name}?api-version=2025-07-01",
                endpoint.trim_end_matches('/')
            ))
            .bearer_auth(&self.stack.arm.token)
            .json(body)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        if !status.is_success() {
            bail!("SetSecret {vault}/{name}: {status}: {}", body["error"]);
        }
        body["id"]
            .as_str()
            .map(str::to_owned)
            .context("SetSecret answered without an id")
    }

    /// Everything Azure holds for `machine`, listed through nodewright's own ARM client (which
    /// follows `nextLink`), as JSON.
    pub async fn machine_resources(&self, machine: &str) -> Result<MachineResources> {
        fn json<T: serde::Serialize>(items: Vec<T>) -> Result<Vec<Value>> {
            items
                .into_iter()
                .map(|item| Ok(serde_json::to_value(item)?))
                .collect()
        }
        let arm = self.stack.arm_client()?;
        let tagged = |item: &Value| item["tags"][TAG_MACHINE].as_str() == Some(machine);
        let named = |item: &Value, name: &str| item["name"].as_str() == Some(name);
        let (nic, os_disk) = (format!("{machine}-nic"), format!("{machine}-osdisk"));
        let keep = |items: Vec<Value>, name: &str| -> Vec<Value> {
            items
                .into_iter()
                .filter(|item| tagged(item) || named(item, name))
                .collect()
        };
        Ok(MachineResources {
            vms: keep(json(arm.list_vms().await?)?, machine),
            nics: keep(json(arm.list_nics().await?)?, &nic),
            disks: keep(json(arm.list_disks().await?)?, &os_disk),
        })
    }

    /// Adds a fault rule; returns its id.
    pub async fn add_fault(&self, rule: Value) -> Result<u64> {
        let response = self
            .http
            .post(self.url("/sandbox/faults"))
            .bearer_auth(&self.stack.arm.token)
            .json(&rule)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        if !status.is_success() {
            bail!("adding fault {rule}: {status}: {body}");
        }
        body["id"]
            .as_u64()
            .with_context(|| format!("no id in {body}"))
    }

    /// The fault rule `id` with its counts (`fired`, `matched`), or `None` when it is gone.
    pub async fn fault(&self, id: u64) -> Result<Option<Value>> {
        let response = self
            .http
            .get(self.url("/sandbox/faults"))
            .bearer_auth(&self.stack.arm.token)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        if !status.is_success() {
            bail!("listing faults: {status}: {body}");
        }
        Ok(body["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|rule| rule["id"].as_u64() == Some(id))
            .cloned())
    }

    /// Seeds resources straight into the sandbox's state (`POST /sandbox/seed`, body
    /// `{"resources":[…],"generate":[…]}`), in the stack's subscription, resource group and
    /// location unless `body` names others; returns how many were seeded.
    pub async fn seed(&self, mut body: Value) -> Result<u64> {
        if let Some(fields) = body.as_object_mut() {
            let arm = &self.stack.arm;
            for (field, value) in [
                ("subscriptionId", &arm.subscription_id),
                ("resourceGroup", &arm.resource_group),
                ("location", &arm.location),
            ] {
                fields
                    .entry(field)
                    .or_insert_with(|| Value::from(value.as_str()));
            }
        }
        let response = self
            .http
            .post(self.url("/sandbox/seed"))
            .bearer_auth(&self.stack.arm.token)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let answer: Value = response.json().await?;
        if !status.is_success() {
            bail!("seeding {body}: {status}: {answer}");
        }
        answer["seeded"]
            .as_u64()
            .with_context(|| format!("no seeded count in {answer}"))
    }

    /// Removes every VM, NIC and disk whose name starts with `prefix` straight from the
    /// sandbox's state (`DELETE /sandbox/seed?prefix=`); returns how many were removed.
    pub async fn remove_seeded(&self, prefix: &str) -> Result<u64> {
        let response = self
            .http
            .delete(self.url("/sandbox/seed"))
            .query(&[("prefix", prefix)])
            .bearer_auth(&self.stack.arm.token)
            .send()
            .await?;
        let status = response.status();
        let answer: Value = response.json().await?;
        if !status.is_success() {
            bail!("removing seeded resources {prefix:?}: {status}: {answer}");
        }
        answer["removed"]
            .as_u64()
            .with_context(|| format!("no removed count in {answer}"))
    }

    /// Removes a fault rule.
    pub async fn remove_fault(&self, id: u64) -> Result<()> {
        self.http
            .delete(self.url(&format!("/sandbox/faults/{id}")))
            .bearer_auth(&self.stack.arm.token)
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }

    /// The emulator's latency profile (`instant`, `short`, `realistic`).
    pub async fn latency(&self) -> Result<String> {
        let body: Value = self
            .http
            .get(self.url("/sandbox/latency"))
            .bearer_auth(&self.stack.arm.token)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        body["profile"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("GET /sandbox/latency answered {body}"))
    }

    /// Sets the emulator's latency profile (`instant`, `short`, `realistic`) for every
    /// operation started from now on.
    pub async fn set_latency(&self, profile: &str) -> Result<()> {
        self.http
            .put(self.url("/sandbox/latency"))
            .bearer_auth(&self.stack.arm.token)
            .json(&serde_json::json!({ "profile": profile, "scale": 1.0 }))
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }

    /// PUTs `body` at the ARM `path` (with its `api-version` query) and waits until the
    /// resource's `provisioningState` is `Succeeded`; returns the resource.
    pub async fn arm_put(&self, path: &str, body: &Value) -> Result<Value> {
        let response = self
            .http
            .put(self.url(path))
            .bearer_auth(&self.stack.arm.token)
            .json(body)
            .send()
            .await?;
        let status = response.status();
        let answer: Value = response.json().await?;
        if !status.is_success() {
            bail!("PUT {path}: {status}: {answer}");
        }
        crate::eventually(
            &format!("{path} provisioned"),
            Duration::from_secs(60),
            Duration::from_millis(200),
            || async {
                let resource = self.get_json(path).await?;
                Ok(
                    (resource["properties"]["provisioningState"] == "Succeeded")
                        .then_some(resource),
                )
            },
        )
        .await
    }

    /// DELETEs the ARM `path` (with its `api-version` query) and waits until a GET answers 404.
    pub async fn arm_delete(&self, path: &str) -> Result<()> {
        let response = self
            .http
            .delete(self.url(path))
            .bearer_auth(&self.stack.arm.token)
            .send()
            .await?;
        let status = response.status();
        if !status.is_success() && status != reqwest::StatusCode::NOT_FOUND {
            bail!("DELETE {path}: {status}: {}", response.text().await?);
        }
        crate::eventually(
            &format!("{path} deleted"),
            Duration::from_secs(60),
            Duration::from_millis(200),
            || async {
                let answer = self
                    .http
                    .get(self.url(path))
                    .bearer_auth(&self.stack.arm.token)
                    .send()
                    .await?;
                Ok((answer.status() == reqwest::StatusCode::NOT_FOUND).then_some(()))
            },
        )
        .await
    }

    /// GETs the ARM `path` (with its `api-version` query).
    pub async fn arm_get(&self, path: &str) -> Result<Value> {
        self.get_json(path).await
    }

    /// The quota limits in force (`GET /sandbox/quota`).
    pub async fn quota(&self) -> Result<Value> {
        self.get_json("/sandbox/quota").await
    }

    /// Replaces the quota limits (`PUT /sandbox/quota`).
    pub async fn set_quota(&self, quota: &Value) -> Result<()> {
        let response = self
            .http
            .put(self.url("/sandbox/quota"))
            .bearer_auth(&self.stack.arm.token)
            .json(quota)
            .send()
            .await?;
        let status = response.status();
        if !status.is_success() {
            bail!(
                "PUT /sandbox/quota {quota}: {status}: {}",
                response.text().await?
            );
        }
        Ok(())
    }

    /// Schedules a Scheduled Event of `event_type` for the stack's VM `vm` in `not_before`
    /// seconds (`POST /sandbox/scheduled-events`); its EventId.
    pub async fn schedule_event(
        &self,
        event_type: &str,
        vm: &str,
        not_before: u64,
    ) -> Result<String> {
        let body = serde_json::json!({
            "eventType": event_type, "resources": [vm],
            "subscription": self.stack.arm.subscription_id,
            "resourceGroup": self.stack.arm.resource_group,
            "notBeforeSeconds": not_before,
        });
        let response = self
            .http
            .post(self.url("/sandbox/scheduled-events"))
            .bearer_auth(&self.stack.arm.token)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let answer: Value = response.json().await?;
        if status.as_u16() != 201 {
            bail!("scheduling {event_type}: {status}: {answer}");
        }
        answer["eventId"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("no eventId in {answer}"))
    }

    /// The Scheduled Event `id` with its history (`GET /sandbox/scheduled-events/{id}`).
    pub async fn scheduled_event(&self, id: &str) -> Result<Value> {
        self.get_json(&format!("/sandbox/scheduled-events/{id}"))
            .await
    }

    /// Cancels the Scheduled Event `id` (`DELETE /sandbox/scheduled-events/{id}`).
    pub async fn cancel_scheduled_event(&self, id: &str) -> Result<()> {
        let response = self
            .http
            .delete(self.url(&format!("/sandbox/scheduled-events/{id}")))
            .bearer_auth(&self.stack.arm.token)
            .send()
            .await?;
        let status = response.status();
        if !status.is_success() {
            bail!("cancelling Scheduled Event {id}: {status}");
        }
        Ok(())
    }

    /// Sets the notice before a Spot eviction (`PUT /sandbox/eviction-notice`).
    pub async fn set_eviction_notice(&self, seconds: u64) -> Result<()> {
        let response = self
            .http
            .put(self.url("/sandbox/eviction-notice"))
            .bearer_auth(&self.stack.arm.token)
            .json(&serde_json::json!({ "seconds": seconds }))
            .send()
            .await?;
        let status = response.status();
        if !status.is_success() {
            bail!(
                "PUT /sandbox/eviction-notice: {status}: {}",
                response.text().await.unwrap_or_default()
            );
        }
        Ok(())
    }

    /// The ARM requests whose path contains `contains` (case-insensitive), oldest first.
    pub async fn requests(&self, contains: &str) -> Result<Vec<Value>> {
        let body = self
            .get_json(&format!("/sandbox/requests?contains={contains}"))
            .await?;
        Ok(body["requests"].as_array().cloned().unwrap_or_default())
    }
}

/// The Node named `name`, if any.
pub async fn node(client: &kube::Client, name: &str) -> Result<Option<Node>> {
    let api: kube::Api<Node> = kube::Api::all(client.clone());
    Ok(api.get_opt(name).await?)
}

/// The Node of `machine`, checked Ready and labelled with its `pool`: the machine has joined.
pub async fn ensure_joined(client: &kube::Client, machine: &str, pool: &str) -> Result<Node> {
    let node_object = node(client, machine)
        .await?
        .with_context(|| format!("no Node {machine}"))?;
    anyhow::ensure!(
        crate::kube_objects::is_node_ready(&node_object),
        "Node {machine} is not Ready"
    );
    let labels = node_object.metadata.labels.clone().unwrap_or_default();
    anyhow::ensure!(
        labels
            .get(nodewright_model::ownership::LABEL_POOL)
            .map(String::as_str)
            == Some(pool),
        "Node {machine} labels {labels:?}"
    );
    Ok(node_object)
}

/// A path relative to the repository.
pub fn repo_path(relative: &str) -> PathBuf {
    repo_root().join(Path::new(relative))
}

/// Runs a VM action through ARM (`POST …/<action>`: `powerOff`, `start`, `restart`,
/// `deallocate`...), as an operator or a host failure would; fails unless ARM accepts it (202).
pub async fn vm_action(stack: &Stack, vm: &str, action: &str) -> Result<()> {
    let url = format!(
        "{}/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines/{vm}/{action}?api-version=2024-07-01",
        stack.arm.endpoint.trim_end_matches('/'),
        stack.arm.subscription_id,
        stack.arm.resource_group,
    );
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(&stack.arm.token)
        .send()
        .await?;
    let status = response.status();
    // 202 and an operation for most actions; 204 for simulateEviction.
    if !matches!(status.as_u16(), 202 | 204) {
        bail!(
            "{action} {vm}: {status}: {}",
            response.text().await.unwrap_or_default()
        );
    }
    Ok(())
}

#[cfg(test)]
mod document_tests {
    use super::*;

    fn cli_result(stdout: &str) -> CliResult {
        CliResult {
            code: Some(0),
            stdout: stdout.to_owned(),
            stderr: String::new(),
        }
    }

    #[test]
    fn a_status_document_without_the_fields_the_type_requires_does_not_parse() {
        let empty_status = r#"{"workflowId":"create/c/m","runStatus":"completed","status":{}}"#;
        assert!(
            cli_result(empty_status)
                .parse::<MachineStatusDocument>()
                .is_err()
        );
        let no_run_status = r#"{"workflowId":"create/c/m","status":null}"#;
        assert!(
            cli_result(no_run_status)
                .parse::<MachineStatusDocument>()
                .is_err()
        );
    }
}
