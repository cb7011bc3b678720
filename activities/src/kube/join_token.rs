//! Join tokens minted per machine (`spec.template.bootstrapToken`): the Kubernetes bootstrap
//! token Secret `kube-system/bootstrap-token-<id>` of one machine, created (or found again) inside
//! `azure.begin_vm_create` when the bootstrap text has been read, filled into that text where it
//! says `<<BOOTSTRAP_TOKEN>>`, and deleted by `kube.delete_bootstrap_token` once the Node is Ready
//! or the create is undone.
//!
//! The token's secret part is generated here from a cryptographically secure generator and lives
//! only in this process's memory, in the Secret and in the VM's customData: it is never an
//! activity's input, result, failure or heartbeat, and never logged. Every error names the Secret
//! and the fix, never the token.
//!
//! # Idempotency
//!
//! The token id is derived from the cluster and machine ([`bootstrap_token::token_id`]), so a
//! retried step reads the machine's Secret before it writes and reuses it (refreshing an
//! expiration that has run out or nearly so, see [`bootstrap_token::decide`]). A Secret of that
//! name with another cluster's or machine's labels is never changed or deleted.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams, Preconditions};
use nodewright_model::ClusterName;
use nodewright_model::bootstrap_token::{
    self, NAMESPACE, ObservedToken, PLACEHOLDER, SECRET_TYPE, TOKEN_ALPHABET, TOKEN_SECRET_LEN,
    TokenAction, keys,
};
use nodewright_model::ownership::{LABEL_CLUSTER, LABEL_MACHINE};
use nodewright_model::pool::MachineTemplate;
use rand::Rng;
use serde::{Deserialize, Serialize};
use temporalio_sdk::activities::ActivityError;

use crate::failure::{Failure, Retry};

/// The TTL when the template's does not parse (validation refuses such a pool).
const DEFAULT_TTL: Duration = Duration::from_secs(30 * 60);

/// Mints and deletes machines' join tokens with the worker's Kubernetes client.
#[derive(Clone)]
pub struct JoinTokens {
    client: Option<kube::Client>,
}

/// The input of `kube.delete_bootstrap_token`: only names, never the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteBootstrapToken {
    /// The cluster the machine belongs to.
    pub cluster: ClusterName,
    /// The machine whose token goes.
    pub machine: String,
}

/// What `kube.delete_bootstrap_token` found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TokenDeleted {
    /// The machine's token Secret was deleted.
    Deleted,
    /// There was none (never minted, or deleted already).
    Absent,
    /// A Secret of that name carries another cluster's or machine's labels: left alone.
    NotOurs,
}

impl TokenDeleted {
    /// A few words for the run's status, naming the Secret.
    pub fn summary(&self, secret: &str) -> String {
        match self {
            TokenDeleted::Deleted => format!("join token Secret {secret} deleted"),
            TokenDeleted::Absent => format!("no join token Secret {secret}"),
            TokenDeleted::NotOurs => {
                format!("Secret {secret} is not this machine's join token: left alone")
            }
        }
    }
}

/// Why a machine's join token could not be minted, filled in or deleted. None of these carries
/// the token or the bootstrap text.
///
/// Retryable: [`JoinTokenError::Api`] with a transport error, 409, 429 or 5xx. The rest needs a
/// person (a bootstrap without the placeholder, RBAC, a Secret of someone else), so the create
/// fails and cleans up.
#[derive(Debug, thiserror::Error)]
pub enum JoinTokenError {
    /// The worker has no Kubernetes client to write Secrets with.
    #[error(
        "the template asks for a minted join token (spec.template.bootstrapToken), but this worker writes no Kubernetes Secrets"
    )]
    NoClient,
    /// The template asks for a token but has no bootstrap text to put it into.
    #[error(
        "the template asks for a minted join token but has no bootstrap to put it into: set spec.template.bootstrapSecretRef or bootstrap"
    )]
    NoBootstrap,
    /// The bootstrap text does not say where the token goes.
    #[error(
        "the bootstrap {origin} does not contain the placeholder {PLACEHOLDER}: write it where the join takes its token (e.g. kubeadm join … --token {PLACEHOLDER}), or remove spec.template.bootstrapToken"
    )]
    NoPlaceholder {
        /// Where the text came from, e.g. `Secret nodewright/workers-join, key bootstrap`.
        origin: String,
    },
    /// A Secret of the machine's token name exists and is not this machine's.
    #[error(
        "Secret {NAMESPACE}/{name} exists but is not the join token of machine {machine} ({found}): nodewright does not touch it; delete it if it is stale, or pick another machine name"
    )]
    Foreign {
        /// The Secret's name.
        name: String,
        /// The machine.
        machine: String,
        /// Whose its labels say it is.
        found: String,
    },
    /// The worker may not do `verb` on Secrets in kube-system.
    #[error(
        "the worker may not {verb} Secret {NAMESPACE}/{name}: grant its service account create, get, update and delete on secrets in {NAMESPACE} (deploy/join-tokens.yaml: Role nodewright-join-tokens)"
    )]
    Forbidden {
        /// The Secret's name.
        name: String,
        /// `create`, `get`, `update` or `delete`.
        verb: &'static str,
    },
    /// The API did not answer, or refused the call.
    #[error("{step} Secret {NAMESPACE}/{name} failed: {detail}")]
    Api {
        /// `creating`, `reading`, `updating` or `deleting`.
        step: &'static str,
        /// The Secret's name.
        name: String,
        /// The status code and reason, or the transport error (never a request body).
        detail: String,
        /// Whether a retry may succeed.
        retryable: bool,
    },
}

impl JoinTokenError {
    /// The failure's type in Temporal.
    pub fn type_name(&self) -> &'static str {
        match self {
            JoinTokenError::NoClient => "JoinTokenNoClient",
            JoinTokenError::NoBootstrap | JoinTokenError::NoPlaceholder { .. } => {
                "JoinTokenPlaceholder"
            }
            JoinTokenError::Foreign { .. } => "JoinTokenNotOwned",
            JoinTokenError::Forbidden { .. } => "JoinTokenForbidden",
            JoinTokenError::Api { .. } => "JoinTokenApi",
        }
    }

    /// Whether a retry may find it different: only an API call that did not answer or answered
    /// 409, 429 or 5xx.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            JoinTokenError::Api {
                retryable: true,
                ..
            }
        )
    }

    /// Classifies the error and turns it into the activity's failure.
    pub fn into_activity_error(self) -> ActivityError {
        Failure {
            type_name: self.type_name(),
            retry: if self.is_retryable() {
                Retry::Retryable
            } else {
                Retry::NonRetryable
            },
            retry_after: None,
            error: self,
        }
        .into()
    }
}

/// The error of the API call `step` on the Secret `name` that answered `error`; a 403 names the
/// Role to grant. The apiserver's message is left out for writes (a validation answer may quote
/// what was sent).
fn api_error(
    step: &'static str,
    verb: &'static str,
    name: &str,
    error: kube::Error,
) -> JoinTokenError {
    match error {
        kube::Error::Api(status) if status.code == 403 => JoinTokenError::Forbidden {
            name: name.to_owned(),
            verb,
        },
        kube::Error::Api(status) => JoinTokenError::Api {
            step,
            name: name.to_owned(),
            detail: format!("HTTP {} {}", status.code, status.reason),
            retryable: matches!(status.code, 408 | 409 | 429 | 500..=599),
        },
        other => JoinTokenError::Api {
            step,
            name: name.to_owned(),
            detail: nodewright_model::text::error_chain(&other),
            retryable: true,
        },
    }
}

impl JoinTokens {
    /// Tokens minted with `client`.
    pub fn kubernetes(client: kube::Client) -> Self {
        Self {
            client: Some(client),
        }
    }

    /// No Kubernetes client: a template that asks for a token fails its create.
    pub fn none() -> Self {
        Self { client: None }
    }

    /// The bootstrap text to build the VM with: `text` as it is when the template mints no
    /// token; otherwise `text` with the machine's token (minted now, or the one an earlier
    /// attempt minted) where it says [`PLACEHOLDER`]. `source` names where the text came from,
    /// for the error when the placeholder is missing (checked before anything is written).
    pub async fn fill(
        &self,
        template: &MachineTemplate,
        cluster: &ClusterName,
        machine: &str,
        text: Option<String>,
        source: &str,
    ) -> Result<Option<String>, JoinTokenError> {
        let Some(spec) = &template.bootstrap_token else {
            return Ok(text);
        };
        let Some(text) = text else {
            return Err(JoinTokenError::NoBootstrap);
        };
        if !text.contains(PLACEHOLDER) {
            return Err(JoinTokenError::NoPlaceholder {
                origin: source.to_owned(),
            });
        }
        let Some(client) = &self.client else {
            return Err(JoinTokenError::NoClient);
        };
        let ttl = spec.ttl().unwrap_or(DEFAULT_TTL);
        let token = ensure_token(client, cluster, machine, ttl, &spec.extra_groups).await?;
        Ok(Some(bootstrap_token::fill(&text, &token)))
    }

    /// Deletes the machine's token Secret when its labels say it is this machine's (UID
    /// precondition, so a Secret recreated meanwhile is never hit).
    pub async fn delete(
        &self,
        input: &DeleteBootstrapToken,
    ) -> Result<TokenDeleted, JoinTokenError> {
        let Some(client) = &self.client else {
            return Err(JoinTokenError::NoClient);
        };
        delete_token(client, &input.cluster, &input.machine).await
    }
}

/// The machine's token, `<id>.<secret>`, from its Secret: created, reused or refreshed.
async fn ensure_token(
    client: &kube::Client,
    cluster: &ClusterName,
    machine: &str,
    ttl: Duration,
    extra_groups: &[String],
) -> Result<String, JoinTokenError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let id = bootstrap_token::token_id(cluster, machine);
    let name = bootstrap_token::secret_name(&id);
    let existing = secrets
        .get_opt(&name)
        .await
        .map_err(|e| api_error("reading", "get", &name, e))?;
    let now = Utc::now();
    let observed = existing.as_ref().map(observe);
    let ttl_seconds = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    let expiration = expiration_after(now, ttl);
    match bootstrap_token::decide(
        observed.as_ref(),
        cluster,
        machine,
        now.timestamp(),
        ttl_seconds,
    ) {
        TokenAction::Create => {
            let secret_part = new_secret();
            let secret = token_secret(
                cluster,
                machine,
                &id,
                &secret_part,
                &expiration,
                extra_groups,
            );
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .map_err(|e| api_error("creating", "create", &name, e))?;
            tracing::info!(secret = %name, %machine, %expiration, "join token minted");
            Ok(format!("{id}.{secret_part}"))
        }
        TokenAction::Reuse => {
            let secret_part = existing
                .as_ref()
                .and_then(|secret| value(secret, keys::TOKEN_SECRET))
                .unwrap_or_default();
            tracing::info!(secret = %name, %machine, "join token of an earlier attempt reused");
            Ok(format!("{id}.{secret_part}"))
        }
        TokenAction::Refresh => {
            let Some(mut secret) = existing else {
                // `decide` refreshes only a Secret that exists.
                return Err(JoinTokenError::Api {
                    step: "updating",
                    name,
                    detail: "it vanished while being read".to_owned(),
                    retryable: true,
                });
            };
            let secret_part = value(&secret, keys::TOKEN_SECRET)
                .filter(|s| bootstrap_token::is_token_secret(s))
                .unwrap_or_else(new_secret);
            let fresh = token_secret(
                cluster,
                machine,
                &id,
                &secret_part,
                &expiration,
                extra_groups,
            );
            // Keep the read's metadata (resourceVersion: a concurrent writer makes this a 409).
            secret.data = fresh.data;
            secret.string_data = None;
            secrets
                .replace(&name, &PostParams::default(), &secret)
                .await
                .map_err(|e| api_error("updating", "update", &name, e))?;
            tracing::info!(secret = %name, %machine, %expiration, "join token of an earlier attempt refreshed");
            Ok(format!("{id}.{secret_part}"))
        }
        TokenAction::Foreign { found } => Err(JoinTokenError::Foreign {
            name,
            machine: machine.to_owned(),
            found,
        }),
    }
}

/// Deletes the machine's token Secret if it is this machine's.
async fn delete_token(
    client: &kube::Client,
    cluster: &ClusterName,
    machine: &str,
) -> Result<TokenDeleted, JoinTokenError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let name = bootstrap_token::machine_secret_name(cluster, machine);
    let Some(existing) = secrets
        .get_opt(&name)
        .await
        .map_err(|e| api_error("reading", "get", &name, e))?
    else {
        return Ok(TokenDeleted::Absent);
    };
    let observed = observe(&existing);
    if observed.cluster.as_deref() != Some(cluster.as_str())
        || observed.machine.as_deref() != Some(machine)
    {
        return Ok(TokenDeleted::NotOurs);
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: existing.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match secrets.delete(&name, &params).await {
        Ok(_) => {
            tracing::info!(secret = %name, %machine, "join token deleted");
            Ok(TokenDeleted::Deleted)
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(TokenDeleted::Absent),
        Err(error) => Err(api_error("deleting", "delete", &name, error)),
    }
}

/// What [`bootstrap_token::decide`] needs of an existing Secret.
fn observe(secret: &Secret) -> ObservedToken {
    let labels = secret.metadata.labels.clone().unwrap_or_default();
    ObservedToken {
        cluster: labels.get(LABEL_CLUSTER).cloned(),
        machine: labels.get(LABEL_MACHINE).cloned(),
        expires_at: value(secret, keys::EXPIRATION)
            .and_then(|text| DateTime::parse_from_rfc3339(&text).ok())
            .map(|t| t.timestamp()),
        secret_usable: value(secret, keys::TOKEN_SECRET)
            .is_some_and(|s| bootstrap_token::is_token_secret(&s)),
    }
}

/// The text of `key` in the Secret's data.
fn value(secret: &Secret, key: &str) -> Option<String> {
    secret
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok())
}

/// `now + ttl` as RFC 3339 UTC with seconds, e.g. `2026-11-26T17:00:00Z`.
fn expiration_after(now: DateTime<Utc>, ttl: Duration) -> String {
    let later = chrono::Duration::from_std(ttl)
        .ok()
        .and_then(|ttl| now.checked_add_signed(ttl))
        .unwrap_or(now);
    later.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A new token secret: [`TOKEN_SECRET_LEN`] characters of [`TOKEN_ALPHABET`], each drawn
/// uniformly from the thread's cryptographically secure generator (ChaCha, seeded and reseeded
/// from the operating system).
fn new_secret() -> String {
    let mut rng = rand::rng();
    (0..TOKEN_SECRET_LEN)
        .map(|_| char::from(TOKEN_ALPHABET[rng.random_range(0..TOKEN_ALPHABET.len())]))
        .collect()
}

/// The token Secret of `machine`.
fn token_secret(
    cluster: &ClusterName,
    machine: &str,
    id: &str,
    secret_part: &str,
    expiration: &str,
    extra_groups: &[String],
) -> Secret {
    let mut data = BTreeMap::from([
        (keys::TOKEN_ID, id.to_owned()),
        (keys::TOKEN_SECRET, secret_part.to_owned()),
        (keys::EXPIRATION, expiration.to_owned()),
        (
            keys::DESCRIPTION,
            bootstrap_token::description(cluster, machine),
        ),
        (keys::USAGE_AUTHENTICATION, "true".to_owned()),
        (keys::USAGE_SIGNING, "true".to_owned()),
    ]);
    if !extra_groups.is_empty() {
        data.insert(keys::EXTRA_GROUPS, extra_groups.join(","));
    }
    Secret {
        metadata: ObjectMeta {
            name: Some(bootstrap_token::secret_name(id)),
            namespace: Some(NAMESPACE.to_owned()),
            labels: Some(bootstrap_token::labels(cluster, machine)),
            ..ObjectMeta::default()
        },
        type_: Some(SECRET_TYPE.to_owned()),
        data: Some(
            data.into_iter()
                .map(|(key, value)| (key.to_owned(), ByteString(value.into_bytes())))
                .collect(),
        ),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> ClusterName {
        ClusterName::parse("cluster", "prod").unwrap_or_else(|err| panic!("{err}"))
    }

    #[test]
    fn a_new_secret_is_sixteen_random_token_characters() {
        let first = new_secret();
        assert!(bootstrap_token::is_token_secret(&first), "{first}");
        assert_ne!(first, new_secret());
    }

    #[test]
    fn the_token_secret_has_the_keys_the_apiserver_reads_and_nodewrights_labels() {
        let secret = token_secret(
            &cluster(),
            "workers-b2c4d",
            "abcdef",
            "0123456789abcdef",
            "2026-11-26T17:00:00Z",
            &[
                "system:bootstrappers:a".to_owned(),
                "system:bootstrappers:b".to_owned(),
            ],
        );
        assert_eq!(
            secret.type_.as_deref(),
            Some("bootstrap.kubernetes.io/token")
        );
        assert_eq!(
            secret.metadata.name.as_deref(),
            Some("bootstrap-token-abcdef")
        );
        assert_eq!(secret.metadata.namespace.as_deref(), Some("kube-system"));
        let labels = secret.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("nodewright.io/cluster").map(String::as_str),
            Some("prod")
        );
        assert_eq!(
            labels.get("nodewright.io/machine").map(String::as_str),
            Some("workers-b2c4d")
        );
        for (key, expected) in [
            ("token-id", "abcdef"),
            ("token-secret", "0123456789abcdef"),
            ("expiration", "2026-11-26T17:00:00Z"),
            ("usage-bootstrap-authentication", "true"),
            ("usage-bootstrap-signing", "true"),
            (
                "auth-extra-groups",
                "system:bootstrappers:a,system:bootstrappers:b",
            ),
        ] {
            assert_eq!(value(&secret, key).as_deref(), Some(expected), "{key}");
        }
        assert!(
            value(&secret, "description").is_some_and(|d| d.contains("workers-b2c4d")),
            "the description names the machine"
        );
        let observed = observe(&secret);
        assert_eq!(observed.expires_at, Some(1_795_712_400));
        assert!(observed.secret_usable);
    }

    #[test]
    fn the_expiration_is_rfc3339_utc_in_seconds() {
        let now = DateTime::parse_from_rfc3339("2026-11-26T16:30:00.123Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(
            expiration_after(now, Duration::from_secs(30 * 60)),
            "2026-11-26T17:00:00Z"
        );
    }

    #[tokio::test]
    async fn a_bootstrap_without_the_placeholder_is_refused_before_anything_is_written() {
        let mut template: MachineTemplate = serde_json::from_value(serde_json::json!({
            "vmSize": "Standard_D2s_v5",
            "image": { "id": "/CommunityGalleries/g/Images/i/Versions/1" },
            "subnetId": "/s",
            "bootstrapToken": {},
        }))
        .unwrap_or_else(|err| panic!("{err}"));
        let text = "kubeadm join --token abcdef.0123456789abcdef".to_owned();
        let tokens = JoinTokens::none();
        let refused = tokens
            .fill(
                &template,
                &cluster(),
                "m",
                Some(text.clone()),
                "Secret nodewright/workers-join, key bootstrap",
            )
            .await
            .expect_err("refused");
        assert_eq!(
            refused.to_string(),
            "the bootstrap Secret nodewright/workers-join, key bootstrap does not contain the placeholder <<BOOTSTRAP_TOKEN>>: write it where the join takes its token (e.g. kubeadm join … --token <<BOOTSTRAP_TOKEN>>), or remove spec.template.bootstrapToken"
        );
        assert!(!refused.is_retryable());
        template.bootstrap_token = None;
        let untouched = tokens
            .fill(&template, &cluster(), "m", Some(text.clone()), "")
            .await
            .map_err(|err| err.to_string());
        assert_eq!(untouched, Ok(Some(text)));
    }
}
