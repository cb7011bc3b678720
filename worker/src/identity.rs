//! The start-up check that the Kubernetes API is the configured cluster: its identity ConfigMap
//! (`kubernetes.identity_namespace`/`nodewright-cluster`) is recorded on the first start and
//! must name this `cluster` and this API's kube-system uid on every later one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nodewright_activities::kube::identity::{self, Established};
use nodewright_model::config::ClusterConfig;
use nodewright_model::identity::ExpectedIdentity;
use nodewright_model::text::error_chain;
use tracing::{info, warn};

/// The identity this worker's API must carry.
pub fn expected(config: &ClusterConfig) -> ExpectedIdentity {
    ExpectedIdentity {
        cluster: config.cluster.clone(),
        namespace: config.kubernetes.identity_namespace.clone(),
    }
}

/// How long an unreachable API waits between two identity checks.
const RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// Verifies the API's identity, recording it when there is none yet; an error is one line
/// naming the setting and both values. An API that does not answer at all (it cannot be acted
/// on either) does not stop the start: the check goes on in the background every few seconds,
/// and the process exits with that one line if the API, once it answers, is another cluster.
/// Every orphan sweep checks the identity again before it deletes anything.
pub async fn establish(
    client: &kube::Client,
    expected: &ExpectedIdentity,
    established: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    match check(client, expected).await {
        Err(Checked::Unreachable(reason)) => {
            warn!(
                cluster = %expected.cluster,
                "the Kubernetes API does not answer ({reason}); its cluster identity is checked again every 5s"
            );
            let (client, expected) = (client.clone(), expected.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(RETRY).await;
                    match check(&client, &expected).await {
                        Ok(()) => {
                            established.store(true, Ordering::SeqCst);
                            return;
                        }
                        Err(Checked::Unreachable(_)) => {}
                        Err(Checked::Refused(error)) => {
                            eprintln!("error: {error}");
                            std::process::exit(1);
                        }
                    }
                }
            });
            Ok(())
        }
        Err(Checked::Refused(error)) => Err(error),
        Ok(()) => {
            established.store(true, Ordering::SeqCst);
            Ok(())
        }
    }
}

/// Why a check did not verify the identity.
enum Checked {
    /// The API did not answer (transport error): nothing can act on it either.
    Unreachable(String),
    /// The API answered, and is not (or cannot be shown to be) the configured cluster.
    Refused(anyhow::Error),
}

async fn check(client: &kube::Client, expected: &ExpectedIdentity) -> Result<(), Checked> {
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
        Err(error) if error.is_unreachable() => Err(Checked::Unreachable(error_chain(&error))),
        Err(error) => Err(Checked::Refused(anyhow::anyhow!("{}", error_chain(&error)))),
    }
}
