//! Kubernetes activities, over `kube` and `k8s-openapi`.

mod error;
mod inspect;
pub mod nodes;

use std::sync::Arc;

use nodewright_model::preflight::KubernetesReport;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

pub use error::{Error, Result};
pub use nodes::{AwaitNode, MachineNode, NodeChange, NodeMetadata, NodeTaint, NodeWait};

use std::result::Result as StdResult;

/// The Kubernetes activities. Holds the client only.
pub struct KubeActivities {
    client: ::kube::Client,
}

/// Builds the Kubernetes client nodewright uses from `config`, with kube's own retries off.
///
/// kube retries 429, 503 and 504 answers by default with backoff. For nodewright that is wrong
/// twice: a 429 on an eviction means a PodDisruptionBudget blocks it and must be seen at once, and
/// retries belong to Temporal, which records them in the run's history.
pub fn client_from_config(mut config: ::kube::Config) -> StdResult<::kube::Client, ::kube::Error> {
    crate::tls::install_crypto_provider();
    config.default_retry = false;
    ::kube::Client::try_from(config)
}

impl KubeActivities {
    /// Activities that act on the cluster behind `client` (build it with [`client_from_config`]).
    pub fn new(client: ::kube::Client) -> Self {
        Self { client }
    }
}

#[activities]
impl KubeActivities {
    /// Reads the apiserver's version and counts the nodes and the Ready ones.
    ///
    /// # Idempotency
    /// Read-only: a rerun reads again.
    #[activity(name = "inspect_kubernetes")]
    pub async fn inspect_kubernetes(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _input: (),
    ) -> Result<KubernetesReport, ActivityError> {
        inspect::inspect_cluster(&self.client)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Waits until the machine's Node registers with the VM's providerID, or the deadline.
    ///
    /// # Idempotency
    /// Read-only; a rerun waits again.
    #[activity(name = "kube.await_node_registered")]
    pub async fn await_node_registered(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AwaitNode,
    ) -> Result<NodeWait, ActivityError> {
        nodes::await_node(&self.client, &ctx, &input, false)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Waits until the machine's Node is Ready, or the deadline.
    ///
    /// # Idempotency
    /// Read-only; a rerun waits again.
    #[activity(name = "kube.await_node_ready")]
    pub async fn await_node_ready(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AwaitNode,
    ) -> Result<NodeWait, ActivityError> {
        nodes::await_node(&self.client, &ctx, &input, true)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Applies the pool's and nodewright's labels and taints to the Node (server-side apply,
    /// field manager `nodewright`).
    ///
    /// # Idempotency
    /// An apply of the same fields is a no-op.
    #[activity(name = "kube.apply_node_metadata")]
    pub async fn apply_node_metadata(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: NodeMetadata,
    ) -> Result<(), ActivityError> {
        nodes::apply_metadata(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Cordons the machine's Node (only when its providerID names the machine's VM).
    ///
    /// # Idempotency
    /// An unschedulable Node is left as it is.
    #[activity(name = "kube.cordon_node")]
    pub async fn cordon_node(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: MachineNode,
    ) -> Result<NodeChange, ActivityError> {
        nodes::cordon(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Deletes the machine's Node object (only when its providerID names the machine's VM).
    ///
    /// # Idempotency
    /// An absent Node is reported as such.
    #[activity(name = "kube.delete_node")]
    pub async fn delete_node(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: MachineNode,
    ) -> Result<NodeChange, ActivityError> {
        nodes::delete(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }
}
