//! Kubernetes activities, over `kube` and `k8s-openapi`.

mod error;
mod inspect;

use std::sync::Arc;

use nodewright_model::preflight::KubernetesReport;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

pub use error::{Error, Result};

/// The Kubernetes activities. Holds the client only.
pub struct KubeActivities {
    client: ::kube::Client,
}

impl KubeActivities {
    /// Activities that act on the cluster behind `client`.
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
