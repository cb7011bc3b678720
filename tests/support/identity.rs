//! The namespaces of the workers' cluster identity ConfigMaps (`kubernetes.identity_namespace`)
//! on the stack's apiserver. A worker refuses to start when its identity namespace is missing, or
//! when the ConfigMap there names another cluster, so:
//!
//! - every worker of the stack's own cluster shares the default namespace `nodewright` (created
//!   here when missing; `dev/stack up` creates it too) and the identity recorded there;
//! - a worker of any other cluster name a test makes up (`sweep-<suffix>`, `cli-<suffix>`...) gets
//!   the namespace `nw-id-<cluster>`, created for it and deleted when the last worker holding it
//!   goes ([`IdentityNamespace`]).
//!
//! The namespaces are created with kubectl and the stack's admin kubeconfig, so that the
//! synchronous worker helpers can call this, and a worker under test may hold fewer rights.

use std::collections::HashMap;
use std::process::{Command, Output};
use std::sync::{Mutex, PoisonError};

use anyhow::{Result, bail};
use nodewright_model::identity::DEFAULT_IDENTITY_NAMESPACE;

use crate::stack::{Stack, kubectl};

/// How many live [`IdentityNamespace`]s hold each namespace.
static HOLDERS: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);

/// A worker's hold on its identity namespace: the namespace exists while one is held.
#[derive(Debug)]
pub struct IdentityNamespace {
    name: String,
}

impl IdentityNamespace {
    /// The identity namespace of `cluster`'s test workers, created unless it exists.
    pub fn hold(cluster: &str) -> Result<Self> {
        let stack = Stack::load()?;
        let name = namespace_for(&stack, cluster);
        ensure_namespace(&stack, &name)?;
        let mut holders = HOLDERS.lock().unwrap_or_else(PoisonError::into_inner);
        *holders
            .get_or_insert_with(HashMap::new)
            .entry(name.clone())
            .or_insert(0) += 1;
        Ok(Self { name })
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for IdentityNamespace {
    fn drop(&mut self) {
        let mut holders = HOLDERS.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(count) = holders.get_or_insert_with(HashMap::new).get_mut(&self.name) else {
            return;
        };
        *count = count.saturating_sub(1);
        if *count > 0 || self.name == DEFAULT_IDENTITY_NAMESPACE {
            return;
        }
        if let Ok(stack) = Stack::load() {
            let _ = delete_namespace(&stack, &self.name);
        }
    }
}

/// `nodewright` for the stack's own cluster, `nw-id-<cluster>` for any other.
pub fn namespace_for(stack: &Stack, cluster: &str) -> String {
    if cluster == stack.cluster {
        DEFAULT_IDENTITY_NAMESPACE.to_owned()
    } else {
        format!("nw-id-{cluster}")
    }
}

/// Creates the namespace `name` on the stack's apiserver unless it exists.
pub fn ensure_namespace(stack: &Stack, name: &str) -> Result<()> {
    if kubectl_run(stack, &["get", "namespace", name])?
        .status
        .success()
    {
        return Ok(());
    }
    let created = kubectl_run(stack, &["create", "namespace", name])?;
    let stderr = String::from_utf8_lossy(&created.stderr);
    if created.status.success() || stderr.contains("AlreadyExists") {
        return Ok(());
    }
    bail!("creating the namespace {name} failed: {stderr}")
}

/// Deletes the namespace `name` (and its identity ConfigMap) without waiting for it to go.
pub fn delete_namespace(stack: &Stack, name: &str) -> Result<()> {
    let deleted = kubectl_run(
        stack,
        &[
            "delete",
            "namespace",
            name,
            "--wait=false",
            "--ignore-not-found",
        ],
    )?;
    if !deleted.status.success() {
        bail!(
            "deleting the namespace {name} failed: {}",
            String::from_utf8_lossy(&deleted.stderr)
        );
    }
    Ok(())
}

fn kubectl_run(stack: &Stack, args: &[&str]) -> Result<Output> {
    Ok(Command::new(kubectl()?)
        .arg("--kubeconfig")
        .arg(&stack.kubeconfig)
        .args(args)
        .output()?)
}

/// Waits (up to a minute) until a worker of `cluster` has recorded its identity ConfigMap on
/// the stack's apiserver (read with the admin kubeconfig): from then on the worker has checked
/// its API once, and a test may take that API away.
pub async fn await_identity_recorded(cluster: &str) -> Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use nodewright_model::identity::IDENTITY_CONFIG_MAP;

    let stack = Stack::load()?;
    let namespace = namespace_for(&stack, cluster);
    let config_maps: kube::Api<ConfigMap> =
        kube::Api::namespaced(stack.kube_client().await?, &namespace);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if config_maps.get_opt(IDENTITY_CONFIG_MAP).await?.is_some() {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            bail!(
                "no worker of cluster {cluster} recorded {namespace}/{IDENTITY_CONFIG_MAP} within 60s"
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
