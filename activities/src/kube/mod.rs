//! Kubernetes activities, over `kube` and `k8s-openapi`.

mod error;
mod inspect;

use std::sync::Arc;

use nodewright_model::preflight::KubernetesReport;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

pub use error::{Error, Result};

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
}
