//! Holding writes at the Kubernetes API server: a validating admission webhook whose endpoint
//! never answers, so that the API server refuses the writes it matches with HTTP 500
//! (`InternalError`, "failed calling webhook"), as a cluster whose admission webhook is down
//! does, until the hold is released.
//!
//! nodewright's Kubernetes activities retry a 500 (with backoff, for up to five minutes), so a
//! workflow step whose write matches waits there: a way to hold a run at a Kubernetes write
//! (label a Node, cordon it, delete it) or at a wait whose condition needs someone else's write
//! (a Node becoming Ready needs kwok's status update).
//!
//! The endpoint is a TCP listener of the test on `127.0.0.1` that accepts each connection and
//! closes it at once, counting them: [`ApiHold::calls`] says whether the API server has refused a
//! matching write yet. The webhook matches only what its CEL `matchConditions` select (one Node
//! by name, or a write that sets one field), so other tests' writes pass. [`ApiHold::start`]
//! returns once the API server enforces it; [`ApiHold::release`] removes it (dropping a hold
//! does not: release it in the test's clean-up).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::eventually;
use crate::kube_objects::unique_suffix;
use crate::workloads::TEST_LABEL;

/// How long the API server may take to enforce a new webhook configuration (its informer).
const ENFORCED_WITHIN: Duration = Duration::from_secs(30);

/// Which writes of Nodes a hold refuses.
#[derive(Debug, Clone)]
pub struct NodeWrites {
    /// Admission operations: `UPDATE` (a patch is an update), `DELETE`.
    pub operations: Vec<String>,
    /// `nodes`, or `nodes/status` for the status subresource.
    pub resource: String,
    /// A CEL expression over `request`, `object` and `oldObject` that selects the writes.
    pub expression: String,
}

impl NodeWrites {
    /// Updates of Nodes (patches included, not of their status) for which `expression` holds,
    /// e.g. `named("pool-x2b4c") + " && has(object.spec.unschedulable)"`.
    pub fn updates(expression: impl Into<String>) -> Self {
        Self::of("UPDATE", "nodes", expression)
    }

    /// Updates of Nodes' status for which `expression` holds.
    pub fn status_updates(expression: impl Into<String>) -> Self {
        Self::of("UPDATE", "nodes/status", expression)
    }

    /// Deletions of Nodes for which `expression` holds.
    pub fn deletions(expression: impl Into<String>) -> Self {
        Self::of("DELETE", "nodes", expression)
    }

    fn of(operation: &str, resource: &str, expression: impl Into<String>) -> Self {
        Self {
            operations: vec![operation.to_owned()],
            resource: resource.to_owned(),
            expression: expression.into(),
        }
    }
}

/// The CEL test that a request concerns the object named `name`.
pub fn named(name: &str) -> String {
    format!("request.name == '{name}'")
}

/// A hold in force: the webhook configuration and its never-answering endpoint.
pub struct ApiHold {
    client: kube::Client,
    name: String,
    calls: Arc<AtomicU64>,
    listener: JoinHandle<()>,
    released: bool,
}

impl Drop for ApiHold {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl ApiHold {
    /// Makes the API server refuse the Node writes `writes` selects, and returns once it does:
    /// a dry-run creation of a probe Node, which the webhook also matches, is refused.
    pub async fn start(client: &kube::Client, label: &str, writes: &NodeWrites) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the hold's endpoint")?;
        let port = listener.local_addr()?.port();
        let calls = Arc::new(AtomicU64::new(0));
        let counted = calls.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        let name = format!("e2e-hold-{label}-{}", unique_suffix());
        let probe = format!("{name}-probe");
        let configuration: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": { "name": name, "labels": { TEST_LABEL.0: TEST_LABEL.1 } },
            "webhooks": [{
                "name": "hold.e2e.nodewright.io",
                "clientConfig": { "url": format!("https://127.0.0.1:{port}/hold") },
                "rules": [
                    {
                        "apiGroups": [""], "apiVersions": ["v1"],
                        "operations": writes.operations, "resources": [writes.resource],
                    },
                    {
                        "apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["nodes"],
                    },
                ],
                "matchConditions": [{
                    "name": "held",
                    "expression": format!(
                        "request.name == '{probe}' || (request.operation != 'CREATE' && ({}))",
                        writes.expression
                    ),
                }],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 2,
            }],
        }))?;
        let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        configurations
            .create(&PostParams::default(), &configuration)
            .await
            .with_context(|| format!("creating ValidatingWebhookConfiguration {name}"))?;
        let mut hold = Self {
            client: client.clone(),
            name,
            calls,
            listener: task,
            released: false,
        };
        if let Err(error) = hold.await_enforced(&probe).await {
            let _ = hold.release().await;
            return Err(error);
        }
        hold.calls.store(0, Ordering::SeqCst);
        Ok(hold)
    }

    async fn await_enforced(&self, probe: &str) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": { "name": probe },
        }))?;
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        eventually(
            &format!("the API server to enforce {}", self.name),
            ENFORCED_WITHIN,
            Duration::from_millis(250),
            || async {
                match nodes.create(&dry_run, &node).await {
                    Err(kube::Error::Api(status)) if status.code >= 500 => Ok(Some(())),
                    Err(error) => bail!("the dry-run probe {probe} failed otherwise: {error}"),
                    Ok(_) => Ok(None),
                }
            },
        )
        .await
    }

    /// How many times the API server called the endpoint since the hold was in force (each is
    /// a refused write, or one attempt of it).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Removes the webhook configuration (idempotent); the held writes pass at their next retry.
    pub async fn release(&mut self) -> Result<()> {
        if self.released {
            return Ok(());
        }
        let configurations: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        match configurations
            .delete(&self.name, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => {
                return Err(error).with_context(|| format!("deleting {}", self.name));
            }
        }
        self.released = true;
        Ok(())
    }
}
