//! The cluster identity of the Kubernetes API (see `nodewright_model::identity`): read it,
//! record it on a worker's first start, and verify it (at start and in every orphan sweep's
//! `kube.api_health`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use nodewright_model::identity::{
    ExpectedIdentity, IDENTITY_CONFIG_MAP, IdentityCheck, KEY_CLUSTER, KEY_KUBE_SYSTEM_UID,
    RecordedIdentity, check_identity,
};
use nodewright_model::text::quoted;

/// Why the identity could not be established or is not the configured one. None of these is
/// retryable by the caller's loop: the worker stops at start, a sweep freezes.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// Reading the `kube-system` Namespace failed (its uid tells apiservers apart).
    #[error("reading the kube-system Namespace (its uid identifies this Kubernetes API) failed")]
    GetKubeSystem(#[source] kube::Error),
    /// The `kube-system` Namespace has no uid.
    #[error("the kube-system Namespace has no uid")]
    KubeSystemWithoutUid,
    /// Reading the identity ConfigMap failed.
    #[error("reading the ConfigMap {config_map} failed")]
    GetConfigMap {
        /// `<namespace>/nodewright-cluster`.
        config_map: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The identity namespace does not exist, so the identity cannot be recorded.
    #[error(
        "the namespace {} of the identity ConfigMap {config_map} does not exist (kubernetes.identity_namespace, NODEWRIGHT_IDENTITY_NAMESPACE): create it (deploy/namespace.yaml) or name an existing one",
        quoted(namespace)
    )]
    NoNamespace {
        /// The namespace.
        namespace: String,
        /// `<namespace>/nodewright-cluster`.
        config_map: String,
    },
    /// Creating the identity ConfigMap failed.
    #[error("recording the cluster identity in the ConfigMap {config_map} failed")]
    CreateConfigMap {
        /// `<namespace>/nodewright-cluster`.
        config_map: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The API carries no identity (only a sweep reports this; a start records one).
    #[error(
        "this Kubernetes API carries no cluster identity (no ConfigMap {config_map}); start the worker of cluster {} once to record it",
        quoted(cluster)
    )]
    Absent {
        /// `<namespace>/nodewright-cluster`.
        config_map: String,
        /// The configured cluster.
        cluster: String,
    },
    /// The API is another cluster; the message names the setting and both values.
    #[error("{0}")]
    Mismatch(String),
}

impl IdentityError {
    /// Whether the API did not answer (a transport error, a timeout, a 5xx or a 429) at any step
    /// of the check, rather than answering that it is not this cluster: worth checking again
    /// later, and nothing can act on such an API in the meantime either. A create whose answer
    /// was lost is found on the next check (its 409 leads to a verify).
    pub fn is_unreachable(&self) -> bool {
        match self {
            Self::GetKubeSystem(source)
            | Self::GetConfigMap { source, .. }
            | Self::CreateConfigMap { source, .. } => is_transient(source),
            Self::KubeSystemWithoutUid
            | Self::NoNamespace { .. }
            | Self::Absent { .. }
            | Self::Mismatch(_) => false,
        }
    }
}

/// A failure that says nothing about which cluster the API is: no answer, or a server error.
fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        _ => true,
    }
}

/// What a worker's start found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Established {
    /// The identity was already there and is this cluster's.
    Verified {
        /// The uid of the `kube-system` Namespace.
        kube_system_uid: String,
    },
    /// There was none: this start recorded it.
    Recorded {
        /// The uid of the `kube-system` Namespace.
        kube_system_uid: String,
    },
}

/// Checks the identity, recording it when the API carries none yet (a worker's first start).
/// Two workers starting together both end up verifying the one that was created first.
pub async fn establish(
    client: &kube::Client,
    expected: &ExpectedIdentity,
) -> Result<Established, IdentityError> {
    let kube_system_uid = kube_system_uid(client).await?;
    match check(client, expected, &kube_system_uid).await? {
        IdentityCheck::Matches => return Ok(Established::Verified { kube_system_uid }),
        IdentityCheck::Mismatch { message } => return Err(IdentityError::Mismatch(message)),
        IdentityCheck::Absent => {}
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &expected.namespace);
    let data = BTreeMap::from([
        (KEY_CLUSTER.to_owned(), expected.cluster.to_string()),
        (KEY_KUBE_SYSTEM_UID.to_owned(), kube_system_uid.clone()),
    ]);
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(IDENTITY_CONFIG_MAP.to_owned()),
            namespace: Some(expected.namespace.clone()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_owned(),
                "nodewright".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    };
    match config_maps
        .create(&PostParams::default(), &config_map)
        .await
    {
        Ok(_) => Ok(Established::Recorded { kube_system_uid }),
        // Another worker recorded it between the read and the create: verify theirs.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            match check(client, expected, &kube_system_uid).await? {
                IdentityCheck::Matches => Ok(Established::Verified { kube_system_uid }),
                IdentityCheck::Mismatch { message } => Err(IdentityError::Mismatch(message)),
                IdentityCheck::Absent => Err(absent(expected)),
            }
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Err(IdentityError::NoNamespace {
            namespace: expected.namespace.clone(),
            config_map: expected.config_map(),
        }),
        Err(source) => Err(IdentityError::CreateConfigMap {
            config_map: expected.config_map(),
            source,
        }),
    }
}

/// Checks the identity without recording one: `Ok` only when the API carries this cluster's.
pub async fn verify(
    client: &kube::Client,
    expected: &ExpectedIdentity,
) -> Result<(), IdentityError> {
    let kube_system_uid = kube_system_uid(client).await?;
    match check(client, expected, &kube_system_uid).await? {
        IdentityCheck::Matches => Ok(()),
        IdentityCheck::Absent => Err(absent(expected)),
        IdentityCheck::Mismatch { message } => Err(IdentityError::Mismatch(message)),
    }
}

fn absent(expected: &ExpectedIdentity) -> IdentityError {
    IdentityError::Absent {
        config_map: expected.config_map(),
        cluster: expected.cluster.to_string(),
    }
}

/// Reads the ConfigMap and compares it.
async fn check(
    client: &kube::Client,
    expected: &ExpectedIdentity,
    kube_system_uid: &str,
) -> Result<IdentityCheck, IdentityError> {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &expected.namespace);
    let found = config_maps
        .get_opt(IDENTITY_CONFIG_MAP)
        .await
        .map_err(|source| IdentityError::GetConfigMap {
            config_map: expected.config_map(),
            source,
        })?;
    let recorded = found.map(|config_map| {
        let data = config_map.data.unwrap_or_default();
        RecordedIdentity {
            cluster: data.get(KEY_CLUSTER).cloned(),
            kube_system_uid: data.get(KEY_KUBE_SYSTEM_UID).cloned(),
        }
    });
    Ok(check_identity(expected, kube_system_uid, recorded.as_ref()))
}

/// The uid of this API's `kube-system` Namespace.
async fn kube_system_uid(client: &kube::Client) -> Result<String, IdentityError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let kube_system = namespaces
        .get("kube-system")
        .await
        .map_err(IdentityError::GetKubeSystem)?;
    kube_system
        .metadata
        .uid
        .filter(|uid| !uid.is_empty())
        .ok_or(IdentityError::KubeSystemWithoutUid)
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::IdentityError;

    fn answered(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("answer", "Reason").with_code(code).boxed())
    }

    fn no_answer() -> kube::Error {
        kube::Error::Service("connection refused".into())
    }

    #[test]
    fn no_answer_or_a_server_error_at_any_step_is_unreachable() {
        let config_map = || "nodewright/nodewright-cluster".to_owned();
        let cases = [
            (IdentityError::GetKubeSystem(no_answer()), true),
            (IdentityError::GetKubeSystem(answered(503)), true),
            (IdentityError::GetKubeSystem(answered(429)), true),
            (IdentityError::GetKubeSystem(answered(403)), false),
            (
                IdentityError::GetConfigMap {
                    config_map: config_map(),
                    source: no_answer(),
                },
                true,
            ),
            (
                IdentityError::GetConfigMap {
                    config_map: config_map(),
                    source: answered(403),
                },
                false,
            ),
            (
                IdentityError::CreateConfigMap {
                    config_map: config_map(),
                    source: no_answer(),
                },
                true,
            ),
            (
                IdentityError::CreateConfigMap {
                    config_map: config_map(),
                    source: answered(422),
                },
                false,
            ),
            (IdentityError::KubeSystemWithoutUid, false),
            (IdentityError::Mismatch("another cluster".to_owned()), false),
            (
                IdentityError::Absent {
                    config_map: config_map(),
                    cluster: "local".to_owned(),
                },
                false,
            ),
        ];
        for (error, unreachable) in cases {
            assert_eq!(error.is_unreachable(), unreachable, "{error:?}");
        }
    }
}
