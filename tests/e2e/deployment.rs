//! `deploy/` run as a kubelet would run it, with podman standing in for the kubelet (the local
//! stack's kwok nodes run no containers): the Deployment's pod spec — user and group, read-only
//! root, no capabilities, no privilege escalation, CPU and memory limits, its environment, the
//! ConfigMap mounted where the spec mounts it, the emptyDir `/tmp` — runs the worker image with
//! a token of `deploy/`'s ServiceAccount (bound to its ClusterRole) projected where every pod
//! finds it, and the apiserver named by `KUBERNETES_SERVICE_HOST`/`_PORT`. The ConfigMap's
//! `nodewright.toml` gets the edits its `EDIT` lines ask for (cluster, Azure scope, Temporal),
//! plus the sandbox's endpoint and a static token in place of workload identity; its
//! `[temporal.tls]` (mTLS from the mounted Secret `nodewright-temporal-client`) is checked to
//! read that Secret's files and dropped, since the stack's Temporal dev server speaks plain text
//! on loopback.
//!
//! Checked: the probes answer as the spec's ports and paths say (startup within its budget,
//! then readiness and liveness), the metrics port serves `/metrics`, the worker runs as the
//! spec's user, it creates and deletes a machine with nothing but the ServiceAccount's rights,
//! its log is JSON lines (the ConfigMap's `log_format`), and SIGTERM ends it with exit 0 within
//! `terminationGracePeriodSeconds`. Every ARM request the sandbox logged for that machine needs an
//! action of `deploy/azure-role.json` (`activities::azure::permissions::action_for`).

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container as ContainerSpec, PodSpec, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::config::Kubeconfig;
use nodewright_tests::identity::IdentityNamespace;
use nodewright_tests::images::{Container, Images};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{
    CliResult, Sandbox, create_machine, ensure_joined, write_pool_file,
};
use nodewright_tests::worker_process::{http_get, scratch_dir};
use nodewright_tests::{Stack, eventually};
use serde_json::Value;

use crate::rbac::{Identity, manifest};

/// Where the kubelet projects a pod's ServiceAccount token, CA and namespace.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_manifests_run_the_worker_image_with_its_service_account_and_probes()
-> Result<()> {
    let stack = Stack::load()?;
    let images = Images::load()?;
    let admin = stack.kube_client().await?;
    let identity = Identity::grant(&stack, &admin, |_| {}).await?;
    let dir = scratch_dir("deployment")?;
    let result = run_deployment(&stack, &images, &identity, &dir).await;
    identity.revoke(&admin).await;
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    identity.ensure_revoked(&admin).await
}

async fn run_deployment(
    stack: &Stack,
    images: &Images,
    identity: &Identity,
    dir: &Path,
) -> Result<()> {
    let deployment: Deployment = manifest("deployment.yaml")?;
    let config_map: ConfigMap = manifest("configmap.yaml")?;
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.template.spec.clone())
        .context("the Deployment has no pod spec")?;
    let container = pod
        .containers
        .first()
        .context("the Deployment has no container")?;
    let suffix = unique_suffix();
    let task_queue = format!("deploy-{suffix}");
    // The worker records or checks its cluster identity in the namespace deploy/ runs it in.
    let _identity = IdentityNamespace::hold(&stack.cluster)?;

    let mut args = vec![
        "--network=host".to_owned(),
        format!("--hostname=nodewright-worker-{suffix}"),
    ];
    args.extend(security_args(&pod, container)?);
    args.extend(resource_args(container)?);
    args.extend(env_args(container)?);
    args.extend(volume_args(&pod, container, &config_map, dir, |toml| {
        edit_config(toml, stack, &task_queue)
    })?);
    args.extend(service_account_args(stack, identity, dir)?);
    args.push(images.worker.clone());
    let worker = images.start(&format!("nw-deploy-{suffix}"), &args)?;

    let result = drive(stack, &pod, container, &worker, &task_queue).await;
    result.with_context(|| format!("the worker container's log:\n{}", worker.logs()))
}

async fn drive(
    stack: &Stack,
    pod: &PodSpec,
    container: &ContainerSpec,
    worker: &Container,
    task_queue: &str,
) -> Result<()> {
    // The probes, as the kubelet runs them: startup within its budget, then readiness, liveness.
    let startup = container
        .startup_probe
        .as_ref()
        .context("no startupProbe")?;
    let budget = Duration::from_secs(
        (startup.period_seconds.unwrap_or(10) * startup.failure_threshold.unwrap_or(3)) as u64,
    );
    probe_until_ok("startupProbe", container, startup, budget).await?;
    let readiness = container
        .readiness_probe
        .as_ref()
        .context("no readinessProbe")?;
    probe_until_ok(
        "readinessProbe",
        container,
        readiness,
        Duration::from_secs(60),
    )
    .await?;
    let liveness = container
        .liveness_probe
        .as_ref()
        .context("no livenessProbe")?;
    probe_until_ok(
        "livenessProbe",
        container,
        liveness,
        Duration::from_secs(10),
    )
    .await?;
    let metrics = SocketAddr::from(([127, 0, 0, 1], container_port(container, "metrics")?));
    let (status, body) = http_get(metrics, "/metrics")?;
    ensure!(
        status == 200 && !body.is_empty(),
        "/metrics answered {status}"
    );

    let security = pod
        .security_context
        .as_ref()
        .context("no pod securityContext")?;
    let expected = (
        security.run_as_user.context("no runAsUser")? as u32,
        security.run_as_group.context("no runAsGroup")? as u32,
    );
    ensure!(
        worker.process_ids()? == expected,
        "the worker runs as {:?}, the spec says {expected:?}",
        worker.process_ids()?
    );

    // A machine, created and deleted by a worker with nothing but the ServiceAccount's rights.
    let sandbox = Sandbox::new(stack)?;
    let pool = format!("dep{}", unique_suffix());
    let pool_file = write_pool_file(stack, &pool, "5m")?;
    let machine = format!("{pool}-d3p1y");
    create_machine(stack, task_queue, &pool_file, &machine, &["--wait"])?.expect_code(0)?;
    ensure_joined(&stack.kube_client().await?, &machine, &pool).await?;
    CliResult::run(
        stack,
        task_queue,
        &["machine", "delete", &machine, "--wait"],
    )?
    .expect_code(0)?;
    crate::machines::assert_nothing_left(stack, &sandbox, &machine).await?;
    // Every ARM request of the machine's life (VM, NIC, disks) needs an action the custom role
    // deploy/azure-role.json grants (activities' permission table, kept equal to the role).
    let requests = sandbox.requests(&format!("/{machine}")).await?;
    ensure!(
        requests.len() >= 4,
        "the sandbox logged the machine's requests"
    );
    println!(
        "{} ARM requests for {machine}, each covered by the role",
        requests.len()
    );
    for request in &requests {
        let method = request["method"].as_str().unwrap_or_default();
        let path = request["path"].as_str().unwrap_or_default();
        ensure!(
            nodewright_activities::azure::permissions::action_for(method, path).is_some(),
            "the worker sent {method} {path}, which no row of activities/src/azure/permissions.rs (and so no action of deploy/azure-role.json) covers"
        );
    }

    // SIGTERM with the pod's grace period: exit 0; the log is JSON lines.
    let grace = pod
        .termination_grace_period_seconds
        .context("no terminationGracePeriodSeconds")?;
    let code = worker.stop(u32::try_from(grace)?)?;
    ensure!(code == 0, "the worker exited {code} on SIGTERM");
    let logs = worker.logs();
    let lines: Vec<&str> = logs
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    ensure!(!lines.is_empty(), "the worker logged nothing");
    let mut messages = Vec::new();
    for line in &lines {
        let entry: Value = serde_json::from_str(line)
            .with_context(|| format!("a log line that is not JSON: {line}"))?;
        messages.push(entry["message"].as_str().unwrap_or_default().to_owned());
    }
    for expected in ["nodewright-worker started", "nodewright-worker stopped"] {
        ensure!(
            messages.iter().any(|message| message == expected),
            "no log line {expected:?} in {messages:?}"
        );
    }
    Ok(())
}

/// GETs the probe's path on its port until it answers 200, for at most `within`.
async fn probe_until_ok(
    name: &str,
    container: &ContainerSpec,
    probe: &Probe,
    within: Duration,
) -> Result<()> {
    let get = probe
        .http_get
        .as_ref()
        .with_context(|| format!("{name} is not an httpGet probe"))?;
    let port = match &get.port {
        IntOrString::Int(port) => u16::try_from(*port)?,
        IntOrString::String(name) => container_port(container, name)?,
    };
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let path = get.path.clone().unwrap_or_else(|| "/".to_owned());
    eventually(
        &format!("{name} (GET {path} on port {port}) to answer 200"),
        within,
        Duration::from_millis(500),
        || async { Ok(matches!(http_get(address, &path), Ok((200, _))).then_some(())) },
    )
    .await
}

/// The container port called `name`.
fn container_port(container: &ContainerSpec, name: &str) -> Result<u16> {
    let port = container
        .ports
        .iter()
        .flatten()
        .find(|port| port.name.as_deref() == Some(name))
        .with_context(|| format!("no container port named {name}"))?;
    Ok(u16::try_from(port.container_port)?)
}

/// The pod's and the container's securityContext as podman flags.
fn security_args(pod: &PodSpec, container: &ContainerSpec) -> Result<Vec<String>> {
    let pod_security = pod
        .security_context
        .as_ref()
        .context("no pod securityContext")?;
    let user = pod_security.run_as_user.context("no runAsUser")?;
    let group = pod_security.run_as_group.context("no runAsGroup")?;
    ensure!(
        pod_security.run_as_non_root == Some(true) && user != 0,
        "the pod must run as non-root"
    );
    let security = container
        .security_context
        .as_ref()
        .context("no container securityContext")?;
    let mut args = vec![format!("--user={user}:{group}")];
    if security.read_only_root_filesystem == Some(true) {
        args.push("--read-only".to_owned());
    }
    if security.allow_privilege_escalation == Some(false) {
        args.push("--security-opt=no-new-privileges".to_owned());
    }
    let drops = security
        .capabilities
        .as_ref()
        .and_then(|caps| caps.drop.clone())
        .unwrap_or_default();
    if drops.iter().any(|cap| cap == "ALL") {
        args.push("--cap-drop=all".to_owned());
    }
    Ok(args)
}

/// The container's limits as podman flags (`512Mi` → `--memory=512m`, `1` → `--cpus=1`).
fn resource_args(container: &ContainerSpec) -> Result<Vec<String>> {
    let limits = container
        .resources
        .as_ref()
        .and_then(|resources| resources.limits.clone())
        .context("the container has no resource limits")?;
    let mut args = Vec::new();
    if let Some(memory) = limits.get("memory") {
        let mebibytes = match memory.0.strip_suffix("Mi") {
            Some(mebibytes) => mebibytes.parse::<u64>()?,
            None => match memory.0.strip_suffix("Gi") {
                Some(gibibytes) => gibibytes.parse::<u64>()? * 1024,
                None => bail!("memory limit {:?}: only Mi and Gi are translated", memory.0),
            },
        };
        args.push(format!("--memory={mebibytes}m"));
    }
    if let Some(cpu) = limits.get("cpu") {
        let cpus = match cpu.0.strip_suffix('m') {
            Some(millis) => millis.parse::<f64>()? / 1000.0,
            None => cpu.0.parse::<f64>()?,
        };
        args.push(format!("--cpus={cpus}"));
    }
    Ok(args)
}

/// The container's `env` entries as podman flags: plain values, and an optional Secret key as
/// a kubelet treats it when the Secret does not exist (none exists here): not set.
fn env_args(container: &ContainerSpec) -> Result<Vec<String>> {
    let mut args = Vec::new();
    for var in container.env.iter().flatten() {
        let optional_secret = var
            .value_from
            .as_ref()
            .and_then(|from| from.secret_key_ref.as_ref())
            .is_some_and(|key| key.optional == Some(true));
        match &var.value {
            Some(value) => args.push(format!("--env={}={value}", var.name)),
            None if optional_secret => {}
            None => bail!(
                "env {}: only plain values and optional Secret keys are translated",
                var.name
            ),
        }
    }
    Ok(args)
}

/// The container's volume mounts as podman flags: a ConfigMap volume becomes a directory of its
/// keys (`nodewright.toml` edited by `edit`), an emptyDir a tmpfs.
fn volume_args(
    pod: &PodSpec,
    container: &ContainerSpec,
    config_map: &ConfigMap,
    dir: &Path,
    edit: impl Fn(&str) -> Result<String>,
) -> Result<Vec<String>> {
    let mut args = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|volume| volume.name == mount.name)
            .with_context(|| format!("no volume {}", mount.name))?;
        if let Some(source) = &volume.config_map {
            ensure!(
                Some(&source.name) == config_map.metadata.name.as_ref(),
                "volume {} names ConfigMap {}",
                volume.name,
                source.name
            );
            let files = dir.join(&volume.name);
            std::fs::create_dir_all(&files)?;
            std::fs::set_permissions(&files, std::fs::Permissions::from_mode(0o755))?;
            for (key, value) in config_map.data.iter().flatten() {
                let value = if key == "nodewright.toml" {
                    edit(value)?
                } else {
                    value.clone()
                };
                write_readable(&files.join(key), &value)?;
            }
            let mode = if mount.read_only == Some(true) {
                ":ro"
            } else {
                ""
            };
            args.push(format!(
                "--volume={}:{}{mode}",
                files.display(),
                mount.mount_path
            ));
        } else if volume.empty_dir.is_some() {
            args.push(format!("--tmpfs={}", mount.mount_path));
        } else if let Some(secret) = &volume.secret {
            // The operator's Secret (Temporal's client certificate): the local stack's Temporal
            // speaks plain text, so the edited config does not read it; mounted empty.
            ensure!(
                secret.secret_name.as_deref() == Some(TEMPORAL_TLS_SECRET),
                "volume {} mounts Secret {:?}, not {TEMPORAL_TLS_SECRET}",
                volume.name,
                secret.secret_name
            );
            let files = dir.join(&volume.name);
            std::fs::create_dir_all(&files)?;
            std::fs::set_permissions(&files, std::fs::Permissions::from_mode(0o755))?;
            args.push(format!(
                "--volume={}:{}:ro",
                files.display(),
                mount.mount_path
            ));
        } else {
            bail!(
                "volume {}: only configMap, emptyDir and the Temporal client Secret are translated",
                volume.name
            );
        }
    }
    Ok(args)
}

/// What the kubelet gives every pod of the ServiceAccount: its token, the cluster's CA and the
/// namespace under [`SERVICE_ACCOUNT_DIR`], and the apiserver's address in the environment.
fn service_account_args(stack: &Stack, identity: &Identity, dir: &Path) -> Result<Vec<String>> {
    let kubeconfig = Kubeconfig::read_from(&stack.kubeconfig)?;
    let cluster = kubeconfig
        .clusters
        .first()
        .and_then(|named| named.cluster.clone())
        .context("the stack's kubeconfig has no cluster")?;
    let server = url::Url::parse(cluster.server.as_deref().context("no server")?)?;
    let host = server.host_str().context("the server has no host")?;
    let port = server.port_or_known_default().context("no port")?;
    let ca = cluster
        .certificate_authority
        .context("the stack's kubeconfig names no CA file")?;
    let files = dir.join("serviceaccount");
    std::fs::create_dir_all(&files)?;
    std::fs::set_permissions(&files, std::fs::Permissions::from_mode(0o755))?;
    write_readable(&files.join("token"), &identity.token)?;
    write_readable(&files.join("namespace"), &identity.namespace)?;
    write_readable(&files.join("ca.crt"), &std::fs::read_to_string(&ca)?)?;
    Ok(vec![
        format!("--volume={}:{SERVICE_ACCOUNT_DIR}:ro", files.display()),
        format!("--env=KUBERNETES_SERVICE_HOST={host}"),
        format!("--env=KUBERNETES_SERVICE_PORT={port}"),
    ])
}

/// The Secret `deploy/` mounts for mTLS to Temporal, and where.
const TEMPORAL_TLS_SECRET: &str = "nodewright-temporal-client";
const TEMPORAL_TLS_DIR: &str = "/etc/nodewright-temporal/";

/// The ConfigMap's `nodewright.toml` with its `EDIT` lines filled in for the local stack, the
/// sandbox as the ARM endpoint and a static token in place of workload identity.
fn edit_config(text: &str, stack: &Stack, task_queue: &str) -> Result<String> {
    let mut config: toml::Table = text.parse().context("the ConfigMap's nodewright.toml")?;
    let string = |value: &str| toml::Value::String(value.to_owned());
    config.insert("cluster".to_owned(), string(&stack.cluster));
    let azure = table(&mut config, "azure")?;
    azure.insert(
        "subscription_id".to_owned(),
        string(&stack.arm.subscription_id),
    );
    azure.insert(
        "resource_group".to_owned(),
        string(&stack.arm.resource_group),
    );
    azure.insert("location".to_owned(), string(&stack.arm.location));
    azure.insert("arm_endpoint".to_owned(), string(&stack.arm.endpoint));
    let auth = table(azure, "auth")?;
    auth.clear();
    auth.insert("mode".to_owned(), string("static"));
    auth.insert("token".to_owned(), string(&stack.arm.token));
    let temporal = table(&mut config, "temporal")?;
    // As shipped, the worker reaches Temporal with mTLS from the mounted Secret; the local
    // stack's dev server speaks plain text on loopback.
    let tls = temporal
        .remove("tls")
        .context("the ConfigMap's [temporal.tls] (mTLS) is missing")?;
    for key in ["server_ca_cert", "client_cert", "client_key"] {
        let path = tls
            .get(key)
            .and_then(toml::Value::as_str)
            .unwrap_or_default();
        ensure!(
            path.starts_with(TEMPORAL_TLS_DIR),
            "[temporal.tls] {key} is '{path}', not a file of the mounted Secret ({TEMPORAL_TLS_DIR})"
        );
    }
    temporal.insert("address".to_owned(), string(&stack.temporal_address));
    temporal.insert("namespace".to_owned(), string(&stack.temporal_namespace));
    temporal.insert("task_queue".to_owned(), string(task_queue));
    ensure!(
        !config.contains_key("kubernetes"),
        "the ConfigMap leaves [kubernetes] out, so that the worker uses its ServiceAccount"
    );
    Ok(toml::to_string(&config)?)
}

/// The table `key` of `parent`.
fn table<'a>(parent: &'a mut toml::Table, key: &str) -> Result<&'a mut toml::Table> {
    parent
        .get_mut(key)
        .and_then(toml::Value::as_table_mut)
        .with_context(|| format!("the ConfigMap's nodewright.toml has no [{key}]"))
}

/// Writes `text` to `path`, readable by the container's non-root user.
fn write_readable(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))?;
    Ok(())
}
