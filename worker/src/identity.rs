//! The start-up check that the Kubernetes API is the configured cluster: its identity ConfigMap
//! (`kubernetes.identity_namespace`/`nodewright-cluster`) is recorded on the first start and
//! must name this `cluster` and this API's kube-system uid on every later one.

use nodewright_activities::kube::identity::{self, Established};
use nodewright_model::config::ClusterConfig;
use nodewright_model::identity::ExpectedIdentity;
use nodewright_model::text::error_chain;
use tracing::info;

/// The identity this worker's API must carry.
pub fn expected(config: &ClusterConfig) -> ExpectedIdentity {
    ExpectedIdentity {
        cluster: config.cluster.clone(),
        namespace: config.kubernetes.identity_namespace.clone(),
    }
}

/// Verifies the API's identity, recording it when there is none yet; an error is one line
/// naming the setting and both values.
pub async fn establish(client: &kube::Client, expected: &ExpectedIdentity) -> anyhow::Result<()> {
    match identity::establish(client, expected).await {
        Ok(Established::Verified { kube_system_uid }) => {
            info!(
                cluster = %expected.cluster,
                config_map = %expected.config_map(),
                kube_system_uid,
                "the Kubernetes API is the configured cluster"
            );
            Ok(())
        }
        Ok(Established::Recorded { kube_system_uid }) => {
            info!(
                cluster = %expected.cluster,
                config_map = %expected.config_map(),
                kube_system_uid,
                "first start on this Kubernetes API: recorded its cluster identity"
            );
            Ok(())
        }
        Err(error) => Err(anyhow::anyhow!("{}", error_chain(&error))),
    }
}
