//! The cluster identity a Kubernetes API carries, and whether it is the cluster a worker is
//! configured for.
//!
//! The identity is the ConfigMap [`IDENTITY_CONFIG_MAP`] in the namespace
//! `kubernetes.identity_namespace` (default [`DEFAULT_IDENTITY_NAMESPACE`]), with the data
//! `cluster: <name>` and `kubeSystemUid: <uid of the kube-system Namespace>`. The first worker
//! start records it; every later start, and every orphan sweep, compares it with the worker's
//! `cluster` and with the uid of this API's `kube-system` Namespace ([`check_identity`]). The uid
//! tells a copied ConfigMap (or a kubeconfig pointing at another apiserver that once had
//! nodewright) from the real one.

use crate::ClusterName;
use crate::text::quoted;

/// The name of the identity ConfigMap.
pub const IDENTITY_CONFIG_MAP: &str = "nodewright-cluster";
/// The data key holding the cluster's name.
pub const KEY_CLUSTER: &str = "cluster";
/// The data key holding the uid of the `kube-system` Namespace.
pub const KEY_KUBE_SYSTEM_UID: &str = "kubeSystemUid";
/// The namespace of the identity ConfigMap unless `kubernetes.identity_namespace` says otherwise
/// (the namespace `deploy/` runs the worker in).
pub const DEFAULT_IDENTITY_NAMESPACE: &str = "nodewright";

/// The identity a worker expects its Kubernetes API to carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedIdentity {
    /// The worker's `cluster`.
    pub cluster: ClusterName,
    /// Where the identity ConfigMap lives (`kubernetes.identity_namespace`).
    pub namespace: String,
}

/// The identity ConfigMap's data as found (a key may be missing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedIdentity {
    /// `data.cluster`.
    pub cluster: Option<String>,
    /// `data.kubeSystemUid`.
    pub kube_system_uid: Option<String>,
}

/// What the comparison found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityCheck {
    /// The API is the configured cluster.
    Matches,
    /// The API carries no identity yet: a worker start records one, a sweep refuses to act.
    Absent,
    /// The API is (or claims to be) another cluster; the message names the setting, both values
    /// and the fix, in one line.
    Mismatch {
        /// One line for people.
        message: String,
    },
}

impl ExpectedIdentity {
    /// `<namespace>/nodewright-cluster`, for messages.
    pub fn config_map(&self) -> String {
        format!("{}/{IDENTITY_CONFIG_MAP}", self.namespace)
    }
}

/// Compares the identity `recorded` in the API (`None`: no ConfigMap) with the `expected` one,
/// where `kube_system_uid` is the uid of this API's `kube-system` Namespace.
pub fn check_identity(
    expected: &ExpectedIdentity,
    kube_system_uid: &str,
    recorded: Option<&RecordedIdentity>,
) -> IdentityCheck {
    let Some(recorded) = recorded else {
        return IdentityCheck::Absent;
    };
    let config_map = expected.config_map();
    let wanted = quoted(expected.cluster.as_str());
    let mismatch = |message| IdentityCheck::Mismatch { message };
    match (&recorded.cluster, &recorded.kube_system_uid) {
        (Some(cluster), _) if cluster != expected.cluster.as_str() => mismatch(format!(
            "cluster (NODEWRIGHT_CLUSTER) is {wanted}, but the Kubernetes API this worker reaches is cluster {}, as its ConfigMap {config_map} records: point kubernetes.kubeconfig (KUBECONFIG) or kubernetes.context (NODEWRIGHT_KUBE_CONTEXT) at cluster {wanted}'s apiserver, or set cluster to {} if this is that cluster",
            quoted(cluster),
            quoted(cluster),
        )),
        (Some(_), Some(uid)) if uid != kube_system_uid => mismatch(format!(
            "the ConfigMap {config_map} says cluster {wanted} with kube-system uid {}, but this Kubernetes API's kube-system Namespace has uid {}: it is another apiserver (or the ConfigMap was copied from one); point kubernetes.kubeconfig (KUBECONFIG) at cluster {wanted}'s apiserver, or, if this really is cluster {wanted} rebuilt, delete the ConfigMap so the next start records it again",
            quoted(uid),
            quoted(kube_system_uid),
        )),
        (Some(_), Some(_)) => IdentityCheck::Matches,
        (None, _) | (_, None) => {
            let key = if recorded.cluster.is_none() {
                KEY_CLUSTER
            } else {
                KEY_KUBE_SYSTEM_UID
            };
            mismatch(format!(
                "the ConfigMap {config_map} has no data key {key}, so this Kubernetes API cannot be told to be cluster {wanted} (cluster, NODEWRIGHT_CLUSTER): delete the ConfigMap so the next worker start records it again, or give it {KEY_CLUSTER} and {KEY_KUBE_SYSTEM_UID}"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected() -> ExpectedIdentity {
        ExpectedIdentity {
            cluster: ClusterName::parse("cluster", "local").expect("valid"),
            namespace: "nodewright".to_owned(),
        }
    }

    fn recorded(cluster: Option<&str>, uid: Option<&str>) -> RecordedIdentity {
        RecordedIdentity {
            cluster: cluster.map(str::to_owned),
            kube_system_uid: uid.map(str::to_owned),
        }
    }

    /// `expected_fragments` empty: the check must not be a mismatch.
    fn check(found: Option<RecordedIdentity>, expected_check: &str, expected_fragments: &[&str]) {
        let result = check_identity(&expected(), "uid-1", found.as_ref());
        match (&result, expected_check) {
            (IdentityCheck::Matches, "matches") | (IdentityCheck::Absent, "absent") => {}
            (IdentityCheck::Mismatch { message }, "mismatch") => {
                assert_eq!(message.lines().count(), 1, "{message}");
                for fragment in expected_fragments {
                    assert!(message.contains(fragment), "{fragment} missing: {message}");
                }
            }
            _ => panic!("{found:?}: got {result:?}, expected {expected_check}"),
        }
    }

    #[test]
    fn an_api_is_the_configured_cluster_only_when_name_and_uid_agree() {
        check(Some(recorded(Some("local"), Some("uid-1"))), "matches", &[]);
        check(None, "absent", &[]);
        check(
            Some(recorded(Some("other"), Some("uid-1"))),
            "mismatch",
            &[
                "cluster (NODEWRIGHT_CLUSTER)",
                "\"local\"",
                "\"other\"",
                "nodewright/nodewright-cluster",
                "KUBECONFIG",
            ],
        );
        check(
            Some(recorded(Some("local"), Some("uid-2"))),
            "mismatch",
            &[
                "\"uid-2\"",
                "\"uid-1\"",
                "kube-system",
                "delete the ConfigMap",
            ],
        );
        check(
            Some(recorded(None, Some("uid-1"))),
            "mismatch",
            &["no data key cluster", "\"local\""],
        );
        check(
            Some(recorded(Some("local"), None)),
            "mismatch",
            &["no data key kubeSystemUid"],
        );
    }
}
