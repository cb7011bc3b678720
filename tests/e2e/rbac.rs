//! The ClusterRole of `deploy/` is enough, and each of its verbs is needed: a worker whose only
//! Kubernetes credentials are a ServiceAccount token bound to it (read from
//! `deploy/serviceaccount.yaml`, `clusterrole.yaml` and `clusterrolebinding.yaml`, renamed per
//! run so that runs never collide) creates, drains and deletes machines. The Helm chart's
//! rendering (`deploy/helm/nodewright`, `helm template` with its defaults) goes through the same
//! test with its own ServiceAccount, ClusterRole and binding (`nodewright_tests::deploy_objects`).
//!
//! - The role as shipped (by either source): two machines of a fresh pool; on the first, A, a 2-replica Deployment
//!   with a PodDisruptionBudget (`minAvailable: 1`, so one eviction is refused with 429 and the
//!   budget is listed) and a 1-replica StatefulSet on an Azure Disk volume (claims, volumes and
//!   VolumeAttachments read). `machine drain A --wait` moves every pod to B, `machine delete A
//!   --wait` removes A; afterwards nothing of A or B is left.
//! - The role without `create` on `pods/eviction`: `machine drain --wait` fails, and its output
//!   carries the apiserver's 403 message naming the verb and the resource.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube::config::Kubeconfig;
use nodewright_tests::Stack;
use nodewright_tests::deploy_objects::Source;
use nodewright_tests::kube_objects::{create_namespace, unique_suffix};
use nodewright_tests::machines::{CliResult, KillableWorker, Sandbox, cli, node, write_pool_file};
use nodewright_tests::stack::{self, repo_root};
use nodewright_tests::temporal_worker::unique_task_queue;

use crate::drain::common::create_machines;
use nodewright_tests::workloads::{Placement, Workload, Workloads, set_unschedulable};
use serde_json::json;

/// How long any one awaited change may take.
const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_only_the_deploy_cluster_role_creates_drains_and_deletes_machines()
-> Result<()> {
    let stack = Stack::load()?;
    let admin = stack.kube_client().await?;
    let identity = Identity::grant(&stack, &admin, |_| {}).await?;
    let result = full_role(&stack, &identity).await;
    identity.revoke(&admin).await;
    result?;
    identity.ensure_revoked(&admin).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_only_the_charts_cluster_role_creates_drains_and_deletes_machines()
-> Result<()> {
    let stack = Stack::load()?;
    let admin = stack.kube_client().await?;
    let identity = Identity::grant_from(&stack, &admin, Source::Chart, |_| {}).await?;
    let result = full_role(&stack, &identity).await;
    identity.revoke(&admin).await;
    result?;
    identity.ensure_revoked(&admin).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_create_on_pods_eviction_the_drain_fails_naming_the_forbidden_verb() -> Result<()> {
    let stack = Stack::load()?;
    let admin = stack.kube_client().await?;
    let identity = Identity::grant(&stack, &admin, |role| {
        let rules = role.rules.get_or_insert_with(Vec::new);
        for rule in rules.iter_mut() {
            if rule
                .resources
                .as_ref()
                .is_some_and(|r| r.iter().any(|r| r == "pods/eviction"))
            {
                rule.verbs.retain(|verb| verb != "create");
            }
        }
        rules.retain(|rule| !rule.verbs.is_empty());
    })
    .await?;
    let result = missing_eviction(&stack, &identity).await;
    identity.revoke(&admin).await;
    result?;
    identity.ensure_revoked(&admin).await
}

async fn full_role(stack: &Stack, identity: &Identity) -> Result<()> {
    ensure!(
        identity.can_i(&["create", "pods", "--subresource=eviction"])?,
        "the role as shipped allows evictions"
    );
    ensure!(
        !identity.can_i(&["update", "nodes"])? && !identity.can_i(&["create", "namespaces"])?,
        "the ServiceAccount is not an admin"
    );
    let task_queue = unique_task_queue("rbac");
    let worker = KillableWorker::start(&identity.stack(stack), &task_queue)?;
    let pool = format!("rb{}", unique_suffix());
    let pool_file = pool_file(stack, &pool)?;
    let machines = [format!("{pool}-a2c4d"), format!("{pool}-b5g6h")];
    let mut workloads = Workloads::create(stack, "rbac").await?;

    let result = drain_and_delete(
        stack,
        &task_queue,
        &pool,
        &pool_file,
        &machines,
        &mut workloads,
    )
    .await
    .with_context(|| format!("worker log:\n{}", worker.log_tail()));

    let removed = remove(stack, &task_queue, &machines, &workloads).await;
    drop(worker);
    result?;
    removed?;
    for machine in &machines {
        ensure_nothing_left(stack, machine).await?;
    }
    Ok(())
}

async fn drain_and_delete(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    pool_file: &Path,
    machines: &[String; 2],
    workloads: &mut Workloads,
) -> Result<()> {
    let [node_a, node_b] = machines;
    create_machines(stack, task_queue, pool_file, machines).await?;

    // Everything on A: B cordoned while the pods start.
    let kube = workloads.client().clone();
    set_unschedulable(&kube, node_b, true).await?;
    workloads
        .deployment(&Workload::new("web", 2, Placement::pool(pool)))
        .await?;
    workloads
        .stateful_set(&Workload::new("db", 1, Placement::pool(pool)))
        .await?;
    workloads
        .wait_app_running("web", 2, Some(node_a), WAIT)
        .await?;
    workloads
        .wait_app_running("db", 1, Some(node_a), WAIT)
        .await?;
    workloads.pod_disruption_budget("web", "web", 1).await?;
    set_unschedulable(&kube, node_b, false).await?;

    let drained = cli(stack, task_queue, &["machine", "drain", node_a, "--wait"]).await?;
    drained.expect_code(0)?;
    println!("drain:\n{}", drained.stdout);
    workloads
        .wait_app_running("web", 2, Some(node_b), WAIT)
        .await?;
    workloads
        .wait_app_running("db", 1, Some(node_b), WAIT)
        .await?;
    ensure!(
        workloads.pods_on(node_a).await?.is_empty(),
        "no pod left on {node_a}"
    );

    cli(stack, task_queue, &["machine", "delete", node_a, "--wait"])
        .await?
        .expect_code(0)?;
    ensure_nothing_left(stack, node_a).await
}

async fn missing_eviction(stack: &Stack, identity: &Identity) -> Result<()> {
    ensure!(
        !identity.can_i(&["create", "pods", "--subresource=eviction"])?,
        "the role without the verb refuses evictions"
    );
    let task_queue = unique_task_queue("rbac-no-evict");
    let worker = KillableWorker::start(&identity.stack(stack), &task_queue)?;
    let pool = format!("rn{}", unique_suffix());
    let pool_file = pool_file(stack, &pool)?;
    let machines = [format!("{pool}-c7k9m")];
    let workloads = Workloads::create(stack, "rbac-no-evict").await?;

    let result = refused_drain(stack, &task_queue, &pool, &pool_file, &machines, &workloads)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));

    let removed = remove(stack, &task_queue, &machines, &workloads).await;
    drop(worker);
    result?;
    removed?;
    ensure_nothing_left(stack, &machines[0]).await
}

async fn refused_drain(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    pool_file: &Path,
    machines: &[String; 1],
    workloads: &Workloads,
) -> Result<()> {
    let machine = &machines[0];
    create_machines(stack, task_queue, pool_file, machines).await?;
    workloads
        .deployment(&Workload::new("web", 1, Placement::pool(pool)))
        .await?;
    workloads
        .wait_app_running("web", 1, Some(machine), WAIT)
        .await?;

    let drained = cli(stack, task_queue, &["machine", "drain", machine, "--wait"]).await?;
    println!(
        "drain without the verb exited {:?}\nstdout:\n{}\nstderr:\n{}",
        drained.code, drained.stdout, drained.stderr
    );
    ensure!(
        drained.code != Some(0),
        "the drain cannot succeed without evictions"
    );
    let output = format!("{}\n{}", drained.stdout, drained.stderr);
    let wanted = r#"cannot create resource "pods/eviction" in API group """#;
    ensure!(
        output.contains(wanted) && output.contains("forbidden") && output.contains("evict"),
        "the failure names the forbidden verb and resource ({wanted}):\n{output}"
    );
    ensure!(
        workloads.pods_on(machine).await?.len() == 1,
        "the pod stays where it was"
    );
    Ok(())
}

/// A ServiceAccount of a fresh namespace bound to a copy of the ClusterRole of `deploy/`, and a
/// kubeconfig holding a token of it.
pub(crate) struct Identity {
    /// The ServiceAccount's namespace.
    pub(crate) namespace: String,
    account: String,
    role: String,
    kubeconfig: PathBuf,
    /// A token of the ServiceAccount (one hour).
    pub(crate) token: String,
}

impl Identity {
    /// Applies `deploy/serviceaccount.yaml`, `clusterrole.yaml` (changed by `edit`) and
    /// `clusterrolebinding.yaml`, renamed for this run, and writes a kubeconfig with a token of
    /// the ServiceAccount. Whatever was made is removed when a step fails.
    pub(crate) async fn grant(
        stack: &Stack,
        admin: &kube::Client,
        edit: impl FnOnce(&mut ClusterRole),
    ) -> Result<Self> {
        Self::grant_from(stack, admin, Source::Manifests, edit).await
    }

    /// [`Identity::grant`] with the ServiceAccount, ClusterRole and ClusterRoleBinding
    /// `nodewright-worker` of `source`: the plain manifests or the chart's rendering.
    pub(crate) async fn grant_from(
        stack: &Stack,
        admin: &kube::Client,
        source: Source,
        edit: impl FnOnce(&mut ClusterRole),
    ) -> Result<Self> {
        let suffix = unique_suffix();
        let namespace = format!("rbac-sa-{suffix}");
        const NAME: &str = "nodewright-worker";
        let mut account: ServiceAccount = source.object("ServiceAccount", NAME)?;
        let mut role: ClusterRole = source.object("ClusterRole", NAME)?;
        let mut binding: ClusterRoleBinding = source.object("ClusterRoleBinding", NAME)?;
        let account_name = account.metadata.name.clone().context("SA name")?;
        let role_name = format!(
            "{}-{suffix}",
            role.metadata.name.as_deref().context("role name")?
        );
        let mut identity = Self {
            namespace: namespace.clone(),
            account: account_name.clone(),
            role: role_name.clone(),
            kubeconfig: repo_root()
                .join("target")
                .join("e2e-rbac")
                .join(format!("{namespace}.kubeconfig")),
            token: String::new(),
        };
        let made = async {
            create_namespace(admin, &namespace).await?;
            account.metadata.namespace = Some(namespace.clone());
            Api::<ServiceAccount>::namespaced(admin.clone(), &namespace)
                .create(&PostParams::default(), &account)
                .await
                .context("creating the ServiceAccount")?;
            role.metadata.name = Some(role_name.clone());
            edit(&mut role);
            Api::<ClusterRole>::all(admin.clone())
                .create(&PostParams::default(), &role)
                .await
                .context("creating the ClusterRole")?;
            binding.metadata.name = Some(role_name.clone());
            binding.role_ref.name = role_name.clone();
            for subject in binding.subjects.iter_mut().flatten() {
                ensure!(
                    subject.name == account_name,
                    "the binding names {}",
                    subject.name
                );
                subject.namespace = Some(namespace.clone());
            }
            Api::<ClusterRoleBinding>::all(admin.clone())
                .create(&PostParams::default(), &binding)
                .await
                .context("creating the ClusterRoleBinding")?;
            let token = kubectl(
                stack,
                &[
                    "create",
                    "token",
                    &account_name,
                    "--namespace",
                    &namespace,
                    "--duration",
                    "1h",
                ],
            )?;
            write_kubeconfig(
                stack,
                &identity.kubeconfig,
                "nodewright-worker",
                token.trim(),
            )?;
            anyhow::Ok(token.trim().to_owned())
        }
        .await;
        match made {
            Ok(token) => {
                identity.token = token;
                Ok(identity)
            }
            Err(error) => {
                identity.revoke(admin).await;
                Err(error)
            }
        }
    }

    /// The kubeconfig holding the ServiceAccount's token.
    pub(crate) fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The ServiceAccount's user name as the apiserver sees it.
    pub(crate) fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.account)
    }

    /// The stack as this identity sees it: the same, with its kubeconfig.
    fn stack(&self, stack: &Stack) -> Stack {
        let mut limited = stack.clone();
        limited.kubeconfig = self.kubeconfig.clone();
        limited
    }

    /// `kubectl auth can-i <args>` with this identity's kubeconfig.
    fn can_i(&self, args: &[&str]) -> Result<bool> {
        let kubeconfig = self.kubeconfig.to_string_lossy();
        let mut all = vec!["--kubeconfig", &kubeconfig, "auth", "can-i"];
        all.extend_from_slice(args);
        let output = Command::new(stack::kubectl()?).args(&all).output()?;
        let answer = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        match answer.as_str() {
            "yes" => Ok(true),
            "no" => Ok(false),
            _ => bail!(
                "kubectl auth can-i {args:?}: {answer} {}",
                String::from_utf8_lossy(&output.stderr)
            ),
        }
    }

    /// Deletes the binding, the role, the namespace (and its ServiceAccount) and the
    /// kubeconfig; reports problems without failing.
    pub(crate) async fn revoke(&self, admin: &kube::Client) {
        delete_quietly::<ClusterRoleBinding>(admin, &self.role, "the ClusterRoleBinding").await;
        delete_quietly::<ClusterRole>(admin, &self.role, "the ClusterRole").await;
        delete_quietly::<Namespace>(admin, &self.namespace, "the ServiceAccount's namespace").await;
        let _ = std::fs::remove_file(&self.kubeconfig);
    }

    /// Fails unless the binding, the role and the ServiceAccount are gone.
    pub(crate) async fn ensure_revoked(&self, admin: &kube::Client) -> Result<()> {
        ensure!(
            Api::<ClusterRoleBinding>::all(admin.clone())
                .get_opt(&self.role)
                .await?
                .is_none(),
            "ClusterRoleBinding {} left",
            self.role
        );
        ensure!(
            Api::<ClusterRole>::all(admin.clone())
                .get_opt(&self.role)
                .await?
                .is_none(),
            "ClusterRole {} left",
            self.role
        );
        nodewright_tests::eventually(
            &format!("ServiceAccount {}/{} to go", self.namespace, self.account),
            Duration::from_secs(60),
            Duration::from_millis(500),
            || async {
                let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), &self.namespace);
                Ok(accounts
                    .get_opt(&self.account)
                    .await?
                    .is_none()
                    .then_some(()))
            },
        )
        .await
    }
}

/// A manifest of `deploy/`, read through `kubectl create --dry-run=client -o json`.
pub(crate) fn manifest<T: serde::de::DeserializeOwned>(file: &str) -> Result<T> {
    let path = repo_root().join("deploy").join(file);
    let stack = Stack::load()?;
    let text = kubectl(
        &stack,
        &[
            "create",
            "--dry-run=client",
            "--output=json",
            "--filename",
            &path.to_string_lossy(),
        ],
    )?;
    serde_json::from_str(&text).with_context(|| format!("deploy/{file}: {text}"))
}

/// Writes a kubeconfig for the stack's apiserver (server and CA of the admin kubeconfig) that
/// authenticates as `user` with `token` alone.
pub(crate) fn write_kubeconfig(stack: &Stack, path: &Path, user: &str, token: &str) -> Result<()> {
    let admin = Kubeconfig::read_from(&stack.kubeconfig)?;
    let context_name = admin
        .current_context
        .clone()
        .context("the admin kubeconfig has no current context")?;
    let context = admin
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .context("the admin kubeconfig's current context")?;
    let cluster = admin
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .context("the admin kubeconfig's cluster")?;
    let mut entry = json!({ "server": cluster.server });
    if let Some(file) = &cluster.certificate_authority {
        entry["certificate-authority"] = json!(file);
    }
    if let Some(data) = &cluster.certificate_authority_data {
        entry["certificate-authority-data"] = json!(data);
    }
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{ "name": "stack", "cluster": entry }],
        "users": [{ "name": user, "user": { "token": token } }],
        "contexts": [{ "name": user, "context": { "cluster": "stack", "user": user } }],
        "current-context": user,
    });
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(&config)?)?;
    Ok(())
}

/// Runs kubectl with the admin kubeconfig; its stdout, or an error with its stderr.
pub(crate) fn kubectl(stack: &Stack, args: &[&str]) -> Result<String> {
    let output = Command::new(stack::kubectl()?)
        .env("KUBECONFIG", &stack.kubeconfig)
        .args(args)
        .output()?;
    if !output.status.success() {
        bail!(
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// The stack's pool file with drain settings that keep the test short: PDB retries every 2 s.
fn pool_file(stack: &Stack, pool: &str) -> Result<PathBuf> {
    let path = write_pool_file(stack, pool, "5m")?;
    let text = std::fs::read_to_string(&path)?;
    ensure!(
        text.contains("\n  timeouts:\n"),
        "unexpected pool file:\n{text}"
    );
    let drain = "\n  drain:\n    timeout: 2m\n    pdbRetryInterval: 2s\n  timeouts:\n";
    std::fs::write(&path, text.replace("\n  timeouts:\n", drain))?;
    Ok(path)
}

/// Removes the test's namespace, waits for its pods to go (so that none is left behind on a Node
/// deleted under it), then deletes the machines; the namespace must be gone within a minute.
async fn remove(
    stack: &Stack,
    task_queue: &str,
    machines: &[String],
    workloads: &Workloads,
) -> Result<()> {
    workloads.clean_up().await;
    if let Err(error) = workloads
        .wait_pods("the test's pods to go", WAIT, <[_]>::is_empty)
        .await
    {
        eprintln!("cleanup: {error:#}");
    }
    delete_machines(stack, task_queue, machines).await?;
    let namespaces: Api<Namespace> = Api::all(workloads.client().clone());
    nodewright_tests::eventually(
        &format!("namespace {} to go", workloads.namespace()),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let left = namespaces.get_opt(workloads.namespace()).await?;
            Ok(left.is_none().then_some(()))
        },
    )
    .await
}

/// Deletes the machines without draining (their pods are gone with the test's namespace); the
/// first failure is returned after every delete was tried.
async fn delete_machines(stack: &Stack, task_queue: &str, machines: &[String]) -> Result<()> {
    let mut first_error = None;
    for machine in machines {
        let args = ["machine", "delete", machine, "--skip-drain", "--wait"];
        let outcome: Result<CliResult> = cli(stack, task_queue, &args).await;
        if let Err(error) = outcome.and_then(|r| r.expect_code(0).map(|_| ())) {
            eprintln!("cleanup: deleting machine {machine}: {error:#}");
            first_error.get_or_insert(error);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Fails unless nothing of `machine` is left: no VM, NIC, disk or Node.
async fn ensure_nothing_left(stack: &Stack, machine: &str) -> Result<()> {
    let left = Sandbox::new(stack)?.machine_resources(machine).await?;
    ensure!(left.is_empty(), "{machine} leaked in Azure: {left:#?}");
    let kube = stack.kube_client().await?;
    ensure!(
        node(&kube, machine).await?.is_none(),
        "{machine} leaked its Node"
    );
    Ok(())
}

/// Deletes the cluster-scoped `name` of kind `K`; absent is fine, another error is reported.
async fn delete_quietly<K>(admin: &kube::Client, name: &str, what: &str)
where
    K: kube::Resource<Scope = kube::core::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    match Api::<K>::all(admin.clone())
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => eprintln!("cleanup: deleting {what}: {error}"),
    }
}
