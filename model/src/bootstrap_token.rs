//! Join tokens minted per machine (`spec.template.bootstrapToken`): their names, labels and the
//! decision what to do with a token Secret that is already there.
//!
//! A Kubernetes bootstrap token is `<token-id>.<token-secret>` (`[a-z0-9]{6}\.[a-z0-9]{16}`),
//! stored in the Secret `bootstrap-token-<token-id>` in `kube-system`. nodewright derives the
//! token id from the cluster and machine names ([`token_id`]), so that a retried create step finds
//! the machine's token again and reuses it; the secret part is random and generated inside the
//! activity that builds the VM, never here and never in a workflow. It fills the token into the
//! bootstrap text where the text says [`PLACEHOLDER`] (machine-controller-manager's spelling).

use std::collections::BTreeMap;

use crate::cluster::ClusterName;
use crate::ownership::{LABEL_CLUSTER, LABEL_MACHINE};

/// Where the bootstrap text takes the machine's token, `<id>.<secret>`
/// (machine-controller-manager's placeholder), e.g. `kubeadm join … --token <<BOOTSTRAP_TOKEN>>`.
pub const PLACEHOLDER: &str = "<<BOOTSTRAP_TOKEN>>";

/// The namespace of bootstrap token Secrets.
pub const NAMESPACE: &str = "kube-system";

/// The type of a bootstrap token Secret.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";

/// The characters of a token id and a token secret.
pub const TOKEN_ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// The length of a token id.
pub const TOKEN_ID_LEN: usize = 6;

/// The length of a token secret.
pub const TOKEN_SECRET_LEN: usize = 16;

/// The Secret's keys (`k8s.io/cluster-bootstrap/token/api`).
pub mod keys {
    /// The token id.
    pub const TOKEN_ID: &str = "token-id";
    /// The token secret.
    pub const TOKEN_SECRET: &str = "token-secret";
    /// When the token stops working, RFC 3339 UTC.
    pub const EXPIRATION: &str = "expiration";
    /// What the token is for, for people.
    pub const DESCRIPTION: &str = "description";
    /// `"true"`: the token authenticates as `system:bootstrap:<id>`.
    pub const USAGE_AUTHENTICATION: &str = "usage-bootstrap-authentication";
    /// `"true"`: the token signs `kube-public/cluster-info` (kubeadm's discovery).
    pub const USAGE_SIGNING: &str = "usage-bootstrap-signing";
    /// The extra groups, comma-separated.
    pub const EXTRA_GROUPS: &str = "auth-extra-groups";
}

/// The machine's token id: 6 characters of [`TOKEN_ALPHABET`] from a hash (64-bit FNV-1a) of the
/// cluster and machine names. The same machine always gets the same id, so a retried step finds
/// its token; two machines sharing one is refused, never reused (see [`decide`]).
pub fn token_id(cluster: &ClusterName, machine: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in cluster
        .as_str()
        .bytes()
        .chain([b'/'])
        .chain(machine.bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let base = TOKEN_ALPHABET.len() as u64;
    (0..TOKEN_ID_LEN)
        .map(|_| {
            // Below 36: a valid index.
            let digit = TOKEN_ALPHABET[(hash % base) as usize];
            hash /= base;
            char::from(digit)
        })
        .collect()
}

/// The Secret that holds the token with id `id`: `bootstrap-token-<id>`.
pub fn secret_name(id: &str) -> String {
    format!("bootstrap-token-{id}")
}

/// The machine's token Secret name.
pub fn machine_secret_name(cluster: &ClusterName, machine: &str) -> String {
    secret_name(&token_id(cluster, machine))
}

/// The labels of the machine's token Secret: nodewright's cluster and machine.
pub fn labels(cluster: &ClusterName, machine: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_CLUSTER.to_owned(), cluster.to_string()),
        (LABEL_MACHINE.to_owned(), machine.to_owned()),
    ])
}

/// The token Secret's `description`.
pub fn description(cluster: &ClusterName, machine: &str) -> String {
    format!(
        "nodewright join token of machine {machine} (cluster {cluster}); deleted once its Node is Ready or its create is undone"
    )
}

/// Whether `text` is a token secret: [`TOKEN_SECRET_LEN`] characters of [`TOKEN_ALPHABET`].
pub fn is_token_secret(text: &str) -> bool {
    text.len() == TOKEN_SECRET_LEN && text.bytes().all(|b| TOKEN_ALPHABET.contains(&b))
}

/// Whether `group` may be one of a token's extra groups, as the apiserver checks them:
/// `\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z`.
pub fn is_extra_group(group: &str) -> bool {
    let Some(name) = group.strip_prefix("system:bootstrappers:") else {
        return false;
    };
    let Some(last) = name.bytes().last() else {
        return false;
    };
    name.len() <= 256
        && (last.is_ascii_lowercase() || last.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-')
}

/// `text` with every [`PLACEHOLDER`] replaced by `token` (`<id>.<secret>`).
pub fn fill(text: &str, token: &str) -> String {
    text.replace(PLACEHOLDER, token)
}

/// What an existing token Secret of the machine's name says, as far as [`decide`] needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedToken {
    /// Its [`LABEL_CLUSTER`] label.
    pub cluster: Option<String>,
    /// Its [`LABEL_MACHINE`] label.
    pub machine: Option<String>,
    /// Its `expiration` as Unix seconds; `None` when absent or unreadable.
    pub expires_at: Option<i64>,
    /// Whether its `token-secret` is a well-formed secret ([`is_token_secret`]).
    pub secret_usable: bool,
}

/// What to do with the machine's token Secret before the VM is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenAction {
    /// There is none: create it with a new secret.
    Create,
    /// It is this machine's and valid for at least half its TTL more: use its secret as it is.
    Reuse,
    /// It is this machine's but expired, expiring within half its TTL, or unreadable: write a new
    /// expiration (and a new secret when its own is unusable), then use it.
    Refresh,
    /// It carries another cluster's or machine's labels (or none): leave it, fail the create.
    Foreign {
        /// Whose it says it is, for the message, e.g. `cluster "a", machine "b"`.
        found: String,
    },
}

/// Decides on the token Secret `existing` of `machine` of `cluster` at `now` (Unix seconds) for
/// a token of `ttl_seconds`.
pub fn decide(
    existing: Option<&ObservedToken>,
    cluster: &ClusterName,
    machine: &str,
    now: i64,
    ttl_seconds: i64,
) -> TokenAction {
    let Some(existing) = existing else {
        return TokenAction::Create;
    };
    let ours = existing.cluster.as_deref() == Some(cluster.as_str())
        && existing.machine.as_deref() == Some(machine);
    if !ours {
        let shown = |label: &Option<String>| {
            label
                .as_deref()
                .map_or_else(|| "none".to_owned(), crate::text::quoted)
        };
        return TokenAction::Foreign {
            found: format!(
                "its labels say cluster {}, machine {}",
                shown(&existing.cluster),
                shown(&existing.machine)
            ),
        };
    }
    let fresh = existing
        .expires_at
        .is_some_and(|expires| expires >= now.saturating_add(ttl_seconds / 2));
    if fresh && existing.secret_usable {
        TokenAction::Reuse
    } else {
        TokenAction::Refresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str) -> ClusterName {
        ClusterName::parse("cluster", name).unwrap_or_else(|err| panic!("{err}"))
    }

    fn observed(cluster: &str, machine: &str, expires_at: i64, usable: bool) -> ObservedToken {
        ObservedToken {
            cluster: Some(cluster.to_owned()),
            machine: Some(machine.to_owned()),
            expires_at: Some(expires_at),
            secret_usable: usable,
        }
    }

    #[test]
    fn a_machine_always_gets_the_same_token_id_and_others_another() {
        let prod = cluster("prod");
        let id = token_id(&prod, "workers-b2c4d");
        assert_eq!(id, token_id(&prod, "workers-b2c4d"));
        assert_eq!(id.len(), TOKEN_ID_LEN);
        assert!(id.bytes().all(|b| TOKEN_ALPHABET.contains(&b)), "{id}");
        assert_ne!(id, token_id(&prod, "workers-b2c4f"));
        assert_ne!(id, token_id(&cluster("staging"), "workers-b2c4d"));
        // The separator keeps cluster "a" + machine "bc" apart from "ab" + "c".
        assert_ne!(token_id(&cluster("a"), "bc"), token_id(&cluster("ab"), "c"));
        assert_eq!(
            machine_secret_name(&prod, "workers-b2c4d"),
            format!("bootstrap-token-{id}")
        );
    }

    #[test]
    fn extra_groups_are_checked_as_the_apiserver_does() {
        for (group, valid) in [
            ("system:bootstrappers:kubeadm:default-node-token", true),
            ("system:bootstrappers:a", true),
            ("system:bootstrappers:workers-1", true),
            ("system:bootstrappers:", false),
            ("system:bootstrappers:a-", false),
            ("system:bootstrappers:a:", false),
            ("system:bootstrappers:Workers", false),
            ("system:bootstrappers:a,b", false),
            ("system:nodes", false),
            ("system:bootstrappers", false),
        ] {
            assert_eq!(is_extra_group(group), valid, "{group}");
        }
        let longest = format!("system:bootstrappers:{}", "a".repeat(256));
        assert!(is_extra_group(&longest));
        assert!(!is_extra_group(&format!("{longest}a")));
    }

    #[test]
    fn the_token_fills_every_placeholder_and_nothing_else() {
        assert_eq!(
            fill(
                "kubeadm join --token <<BOOTSTRAP_TOKEN>> # <<BOOTSTRAP_TOKEN>> <<MACHINE_NAME>>",
                "abcdef.0123456789abcdef"
            ),
            "kubeadm join --token abcdef.0123456789abcdef # abcdef.0123456789abcdef <<MACHINE_NAME>>"
        );
        assert!(is_token_secret("0123456789abcdef"));
        assert!(!is_token_secret("0123456789ABCDEF"));
        assert!(!is_token_secret("0123456789abcde"));
    }

    #[test]
    fn an_existing_token_is_reused_refreshed_or_refused() {
        let prod = cluster("prod");
        let (now, ttl) = (1_000_000, 1800);
        let cases = [
            ("none: create", None, TokenAction::Create),
            (
                "ours, valid for the whole ttl: reuse",
                Some(observed("prod", "m", now + ttl, true)),
                TokenAction::Reuse,
            ),
            (
                "ours, valid for exactly half the ttl: reuse",
                Some(observed("prod", "m", now + ttl / 2, true)),
                TokenAction::Reuse,
            ),
            (
                "ours, expiring sooner: refresh",
                Some(observed("prod", "m", now + ttl / 2 - 1, true)),
                TokenAction::Refresh,
            ),
            (
                "ours, expired: refresh",
                Some(observed("prod", "m", now - 10, true)),
                TokenAction::Refresh,
            ),
            (
                "ours, no expiration: refresh",
                Some(ObservedToken {
                    expires_at: None,
                    ..observed("prod", "m", 0, true)
                }),
                TokenAction::Refresh,
            ),
            (
                "ours, unusable secret: refresh",
                Some(observed("prod", "m", now + ttl, false)),
                TokenAction::Refresh,
            ),
            (
                "another machine's: refuse",
                Some(observed("prod", "n", now + ttl, true)),
                TokenAction::Foreign {
                    found: "its labels say cluster \"prod\", machine \"n\"".to_owned(),
                },
            ),
            (
                "another cluster's: refuse",
                Some(observed("staging", "m", now + ttl, true)),
                TokenAction::Foreign {
                    found: "its labels say cluster \"staging\", machine \"m\"".to_owned(),
                },
            ),
            (
                "unlabelled (someone's kubeadm token): refuse",
                Some(ObservedToken {
                    cluster: None,
                    machine: None,
                    expires_at: Some(now + ttl),
                    secret_usable: true,
                }),
                TokenAction::Foreign {
                    found: "its labels say cluster none, machine none".to_owned(),
                },
            ),
        ];
        for (case, existing, expected) in cases {
            assert_eq!(
                decide(existing.as_ref(), &prod, "m", now, ttl),
                expected,
                "{case}"
            );
        }
    }
}
