//! The container images, run with podman as a Deployment or docker compose would run them (built by
//! `dev/images build`; on this machine from stand-in bases, see that script):
//!
//! - the worker image: its config (non-root user, entrypoint, ports, labels); the worker runs in
//!   it hardened as `deploy/deployment.yaml` runs it (read-only root, no capabilities, no new
//!   privileges) with only environment variables and a mounted kubeconfig, as 65532, and serves
//!   `/readyz`; the CLI of the same image creates a machine on a task queue only that container
//!   polls (its poller is `nodewright-worker@<container host name>:1`) and deletes it: VM, NIC,
//!   disk and Node appear, then nothing is left; SIGTERM stops the worker cleanly (exit 0) within
//!   the Deployment's grace period, and its log is plain text (no colour escapes off a terminal);
//! - the sandbox image serves the ARM contract to nodewright's own ARM client: a NIC is created
//!   through an asynchronous operation, listed and deleted.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use base64::Engine;
use kube::config::Kubeconfig;
use nodewright_activities::azure::{ArmClient, Deletion, Submitted};
use nodewright_model::arm::poll_schedule::OperationKind;
use nodewright_model::machine::CreatedMachine;
use nodewright_tests::documents::ResultDocument;
use nodewright_tests::images::{Container, Images};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{Sandbox, ensure_joined, write_pool_file};
use nodewright_tests::stack::{ArmScope, temporal_cli};
use nodewright_tests::worker_process::{free_address, http_get, scratch_dir};
use nodewright_tests::{Stack, eventually};
use serde_json::{Value, json};

/// How long the worker may take to report ready, and a machine to be created or deleted.
const WAIT: Duration = Duration::from_secs(120);
/// The Deployment's terminationGracePeriodSeconds.
const DEPLOYMENT_GRACE_SECONDS: u32 = 45;
/// The user and group of the images (distroless' `nonroot`).
const NONROOT: (u32, u32) = (65532, 65532);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_image_runs_hardened_as_nonroot_and_with_its_cli_creates_and_deletes_a_machine()
-> Result<()> {
    let stack = Stack::load()?;
    let images = Images::load()?;
    checked_image_config(
        &images,
        &images.worker,
        "/usr/local/bin/nodewright-worker",
        &["8080/tcp", "9464/tcp"],
        "nodewright",
    )?;
    let version = run_to_end(&images, &["run", "--rm", &images.worker, "--version"])?;
    ensure!(version.starts_with("nodewright-worker "), "{version}");
    let cli_version = run_to_end(
        &images,
        &[
            "run",
            "--rm",
            "--entrypoint",
            "nodewright",
            &images.worker,
            "--version",
        ],
    )?;
    ensure!(cli_version.starts_with("nodewright "), "{cli_version}");

    let suffix = unique_suffix();
    let name = format!("nw-image-{suffix}");
    let task_queue = format!("image-{suffix}");
    // The worker records or checks its cluster identity in the default namespace.
    let _identity = nodewright_tests::identity::IdentityNamespace::hold(&stack.cluster)?;
    let dir = scratch_dir("image")?;
    let kubeconfig = write_portable_kubeconfig(&stack.kubeconfig, &dir)?;
    let health = free_address()?;
    let metrics = free_address()?;
    let mut worker_args = vec![
        "--network=host".to_owned(),
        format!("--hostname={name}"),
        "--read-only".to_owned(),
        "--cap-drop=all".to_owned(),
        "--security-opt=no-new-privileges".to_owned(),
        format!("--env=NODEWRIGHT_HEALTH_ADDRESS={health}"),
        format!("--env=NODEWRIGHT_METRICS_ADDRESS={metrics}"),
    ];
    worker_args.extend(stack_env(&stack, &task_queue, &kubeconfig));
    worker_args.push(images.worker.clone());
    let worker = images.start(&name, &worker_args)?;

    let result = drive_worker_container(
        &stack,
        &images,
        &worker,
        &task_queue,
        health,
        &kubeconfig,
        &name,
    )
    .await;
    let result = result.with_context(|| format!("the worker container's log:\n{}", worker.logs()));
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn drive_worker_container(
    stack: &Stack,
    images: &Images,
    worker: &Container,
    task_queue: &str,
    health: SocketAddr,
    kubeconfig: &Path,
    hostname: &str,
) -> Result<()> {
    eventually(
        "the containerised worker to answer /readyz with 200",
        WAIT,
        Duration::from_millis(500),
        || async { Ok(matches!(http_get(health, "/readyz"), Ok((200, _))).then_some(())) },
    )
    .await?;
    ensure!(
        worker.process_ids()? == NONROOT,
        "the worker runs as {:?}, expected {NONROOT:?}",
        worker.process_ids()?
    );
    let pollers = task_queue_pollers(stack, task_queue)?;
    let identity = format!("nodewright-worker@{hostname}:1");
    ensure!(
        pollers.iter().any(|poller| poller == &identity),
        "the task queue's pollers {pollers:?} do not include {identity}"
    );

    // The CLI of the same image, on the task queue that only the container polls.
    let sandbox = Sandbox::new(stack)?;
    let pool = format!("img{}", unique_suffix());
    let pool_file = write_pool_file(stack, &pool, "5m")?;
    let machine = format!("{pool}-c4f7k");
    let cli = |args: &[&str]| -> Result<String> {
        let mut podman = vec![
            "run".to_owned(),
            "--rm".to_owned(),
            "--network=host".to_owned(),
            "--read-only".to_owned(),
            format!(
                "--volume={}:/etc/nodewright/pool.yaml:ro",
                pool_file.display()
            ),
            "--entrypoint=nodewright".to_owned(),
        ];
        podman.extend(stack_env(stack, task_queue, kubeconfig));
        podman.push(images.worker.clone());
        podman.extend(args.iter().map(|arg| (*arg).to_owned()));
        let podman: Vec<&str> = podman.iter().map(String::as_str).collect();
        run_to_end(images, &podman)
    };
    let created = cli(&[
        "machine",
        "create",
        "--pool",
        "/etc/nodewright/pool.yaml",
        "--name",
        &machine,
        "--wait",
        "--output",
        "json",
    ])?;
    let created: ResultDocument<CreatedMachine> = serde_json::from_str(&created)
        .with_context(|| format!("not a create's result: {created}"))?;
    ensure!(
        created.result.machine == machine && created.result.node == machine,
        "{created}"
    );

    let resources = sandbox.machine_resources(&machine).await?;
    ensure!(
        resources.vms.len() == 1 && resources.nics.len() == 1 && resources.disks.len() == 1,
        "one VM, NIC and OS disk: {resources:#?}"
    );
    ensure_joined(&stack.kube_client().await?, &machine, &pool).await?;

    cli(&["machine", "delete", &machine, "--wait"])?;
    crate::machines::assert_nothing_left(stack, &sandbox, &machine).await?;

    // SIGTERM, as the kubelet sends it: the worker finishes and exits 0 within the grace period.
    let code = worker.stop(DEPLOYMENT_GRACE_SECONDS)?;
    ensure!(code == 0, "the worker exited {code} on SIGTERM");
    let logs = worker.logs();
    ensure!(
        logs.contains("shutdown signal received"),
        "the worker's log does not show the shutdown: {logs}"
    );
    ensure!(
        !logs.contains('\u{1b}'),
        "the worker's log (not a terminal) has colour escapes: {logs:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_image_serves_the_arm_contract_to_nodewrights_client() -> Result<()> {
    let stack = Stack::load()?;
    let images = Images::load()?;
    let config = checked_image_config(
        &images,
        &images.sandbox,
        "/usr/local/bin/nodewright-sandbox",
        &["8443/tcp"],
        "nodewright-sandbox",
    )?;
    let env: Vec<&str> = config["Config"]["Env"]
        .as_array()
        .map(|env| env.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    ensure!(
        env.contains(&"NODEWRIGHT_SANDBOX_LISTEN=0.0.0.0:8443"),
        "the sandbox listens on every interface in its container: {env:?}"
    );

    let suffix = unique_suffix();
    let listen = free_address()?;
    let token = format!("image-{suffix}");
    let container = images.start(
        &format!("nw-sandbox-{suffix}"),
        &[
            "--network=host".to_owned(),
            "--read-only".to_owned(),
            format!("--env=NODEWRIGHT_SANDBOX_LISTEN={listen}"),
            format!("--env=NODEWRIGHT_SANDBOX_TOKEN={token}"),
            "--env=NODEWRIGHT_SANDBOX_LATENCY=short".to_owned(),
            images.sandbox.clone(),
            "--without-kubernetes".to_owned(),
        ],
    )?;
    let result = drive_sandbox_container(&stack, &container, listen, &token).await;
    result.with_context(|| format!("the sandbox container's log:\n{}", container.logs()))
}

async fn drive_sandbox_container(
    stack: &Stack,
    container: &Container,
    listen: SocketAddr,
    token: &str,
) -> Result<()> {
    let mut scope_stack = stack.clone();
    scope_stack.arm = ArmScope {
        endpoint: format!("http://{listen}"),
        token: token.to_owned(),
        ..stack.arm.clone()
    };
    let arm = scope_stack.arm_client()?;
    eventually(
        "the containerised sandbox to answer a NIC list",
        WAIT,
        Duration::from_millis(300),
        || async { Ok(arm.list_nics().await.ok().map(|_| ())) },
    )
    .await?;
    ensure!(
        container.process_ids()? == NONROOT,
        "the sandbox runs as {:?}",
        container.process_ids()?
    );

    let name = format!("image-nic-{}", unique_suffix());
    let nic = serde_json::from_value(json!({
        "location": scope_stack.arm.location,
        "tags": { "purpose": "image-e2e" },
        "properties": { "ipConfigurations": [{ "name": "ipconfig1", "properties": {
            "subnet": { "id": format!(
                "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/nodes/subnets/nodes",
                scope_stack.arm.subscription_id, scope_stack.arm.resource_group) },
            "privateIPAllocationMethod": "Dynamic" } }] }
    }))?;
    let submitted = arm.put_nic(&name, &nic).await?;
    ensure!(
        submitted.operation.is_some(),
        "a NIC PUT answers with an asynchronous operation"
    );
    finish(&arm, submitted).await?;
    let created = arm.get_nic(&name).await?;
    let created = serde_json::to_value(created)?;
    ensure!(
        created["properties"]["provisioningState"] == "Succeeded",
        "{created}"
    );
    let listed = arm.list_nics().await?;
    ensure!(
        listed
            .iter()
            .any(|nic| nic.name.as_deref() == Some(name.as_str())),
        "the list holds {name}"
    );
    match arm.delete_nic(&name).await? {
        Deletion::Started(operation) => {
            arm.wait(&operation, OperationKind::Nic, WAIT).await?;
        }
        Deletion::Deleted | Deletion::AlreadyGone => {}
    }
    let listed = arm.list_nics().await?;
    ensure!(
        !listed
            .iter()
            .any(|nic| nic.name.as_deref() == Some(name.as_str())),
        "{name} is still listed after its deletion"
    );
    let code = container.stop(10)?;
    ensure!(code == 0, "the sandbox exited {code} on SIGTERM");
    Ok(())
}

async fn finish<T>(arm: &ArmClient, submitted: Submitted<T>) -> Result<()> {
    if let Some(operation) = submitted.operation {
        arm.wait(&operation, OperationKind::VmCreate, WAIT).await?;
    }
    Ok(())
}

/// The config of `image` (printed with its size), checked for what every nodewright image
/// shares: distroless' nonroot user, the binary as the entrypoint, the ports, the OCI labels.
fn checked_image_config(
    images: &Images,
    image: &str,
    entrypoint: &str,
    ports: &[&str],
    title: &str,
) -> Result<Value> {
    let config = images.inspect(image)?;
    eprintln!(
        "{image}: {:.1} MB ({} bases)",
        config["Size"].as_f64().unwrap_or_default() / 1e6,
        images.bases
    );
    let image = &config["Config"];
    ensure!(image["User"] == "65532:65532", "User: {}", image["User"]);
    ensure!(
        image["Entrypoint"] == json!([entrypoint]),
        "Entrypoint: {}",
        image["Entrypoint"]
    );
    for port in ports {
        ensure!(
            image["ExposedPorts"].get(port).is_some(),
            "{port} is not exposed: {}",
            image["ExposedPorts"]
        );
    }
    let labels = &image["Labels"];
    ensure!(
        labels["org.opencontainers.image.title"] == title,
        "labels: {labels}"
    );
    ensure!(
        labels["org.opencontainers.image.version"]
            .as_str()
            .is_some_and(|version| !version.is_empty()),
        "labels: {labels}"
    );
    Ok(config)
}

/// `podman args…` to the end: its stdout, or an error with everything it printed.
fn run_to_end(images: &Images, args: &[&str]) -> Result<String> {
    let output = images.podman(args)?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    ensure!(
        output.status.success(),
        "podman {} exited {:?}\nstdout: {stdout}\nstderr: {}",
        args.join(" "),
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(stdout)
}

/// The worker's and the CLI's settings as container environment (the variables
/// docker-compose.yml uses), the kubeconfig mounted where compose mounts it.
fn stack_env(stack: &Stack, task_queue: &str, kubeconfig: &Path) -> Vec<String> {
    let mut args = vec![format!(
        "--volume={}:/etc/nodewright/kubeconfig:ro",
        kubeconfig.display()
    )];
    let env = [
        ("KUBECONFIG", "/etc/nodewright/kubeconfig"),
        ("NODEWRIGHT_CLUSTER", stack.cluster.as_str()),
        (
            "NODEWRIGHT_TEMPORAL_ADDRESS",
            stack.temporal_address.as_str(),
        ),
        (
            "NODEWRIGHT_TEMPORAL_NAMESPACE",
            stack.temporal_namespace.as_str(),
        ),
        ("NODEWRIGHT_TASK_QUEUE", task_queue),
        ("NODEWRIGHT_ARM_ENDPOINT", stack.arm.endpoint.as_str()),
        ("NODEWRIGHT_ARM_TOKEN", stack.arm.token.as_str()),
        (
            "NODEWRIGHT_AZURE_SUBSCRIPTION_ID",
            stack.arm.subscription_id.as_str(),
        ),
        (
            "NODEWRIGHT_AZURE_RESOURCE_GROUP",
            stack.arm.resource_group.as_str(),
        ),
        ("NODEWRIGHT_AZURE_LOCATION", stack.arm.location.as_str()),
    ];
    args.extend(
        env.iter()
            .map(|(name, value)| format!("--env={name}={value}")),
    );
    args
}

/// The stack's kubeconfig with its certificate and key files inlined, readable by the images'
/// non-root user (the stack's key file is root's alone): `<dir>/kubeconfig`, mode 0644.
fn write_portable_kubeconfig(source: &Path, dir: &Path) -> Result<PathBuf> {
    let kubeconfig = Kubeconfig::read_from(source)?;
    let cluster = kubeconfig
        .clusters
        .first()
        .and_then(|named| named.cluster.clone())
        .context("the stack's kubeconfig has no cluster")?;
    let user = kubeconfig
        .auth_infos
        .first()
        .and_then(|named| named.auth_info.clone())
        .context("the stack's kubeconfig has no user")?;
    let inline = |path: Option<&String>| -> Result<String> {
        let path = path.context("the stack's kubeconfig names no file")?;
        let bytes = std::fs::read(path).with_context(|| format!("reading {path}"))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    };
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: nodewright
  user:
    client-certificate-data: {certificate}
    client-key-data: {key}
contexts:
- name: local
  context: {{cluster: local, user: nodewright}}
current-context: local
",
        server = cluster
            .server
            .context("the stack's cluster has no server")?,
        ca = inline(cluster.certificate_authority.as_ref())?,
        certificate = inline(user.client_certificate.as_ref())?,
        key = inline(user.client_key.as_ref())?,
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, text)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// The identities polling `task_queue` (workflow and activity pollers), from `temporal
/// task-queue describe`.
fn task_queue_pollers(stack: &Stack, task_queue: &str) -> Result<Vec<String>> {
    let output = std::process::Command::new(temporal_cli()?)
        .args([
            "task-queue",
            "describe",
            "--address",
            &stack.temporal_address,
            "--namespace",
            &stack.temporal_namespace,
            "--task-queue",
            task_queue,
            "--output",
            "json",
        ])
        .output()?;
    ensure!(
        output.status.success(),
        "temporal task-queue describe: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let document: Value = serde_json::from_slice(&output.stdout)?;
    let mut identities = Vec::new();
    collect_identities(&document, &mut identities);
    Ok(identities)
}

fn collect_identities(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("identity", Value::String(identity)) => into.push(identity.clone()),
                    _ => collect_identities(value, into),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_identities(item, into)),
        _ => {}
    }
}
