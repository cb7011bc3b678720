//! Where the Azure clients' bearer tokens come from: a static token (the sandbox) or an
//! `azure_identity` credential (real Azure), for a configurable scope (ARM's, or Key Vault's
//! through [`Credential::for_scope`]).
//!
//! Identity tokens are cached here until [`REFRESH_BEFORE_EXPIRY`] before they expire, because
//! not every `azure_identity` credential caches (the Azure CLI credential runs `az` per call).

use std::fmt;
use std::sync::Arc;

use azure_core::credentials::{AccessToken, Secret, TokenCredential};
use azure_core::time::{Duration as TokenDuration, OffsetDateTime};
use azure_identity::{
    AzureCliCredential, ClientSecretCredential, ManagedIdentityCredential,
    ManagedIdentityCredentialOptions, UserAssignedId, WorkloadIdentityCredential,
    WorkloadIdentityCredentialOptions,
};
use serde::Deserialize;
use tokio::sync::Mutex;

/// The token scope of the public Azure cloud's Resource Manager.
pub const DEFAULT_SCOPE: &str = "https://management.azure.com/.default";

/// How long before its expiry a cached identity token is replaced.
pub const REFRESH_BEFORE_EXPIRY: TokenDuration = TokenDuration::minutes(5);

/// Which credential to build, as configured (for example from the worker's config file).
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum CredentialKind {
    /// A fixed bearer token, sent as is: for the sandbox, which accepts any token.
    #[serde(rename_all = "camelCase")]
    Static {
        /// The token.
        token: Secret,
    },
    /// Kubernetes workload identity: `AZURE_TENANT_ID`, `AZURE_CLIENT_ID` and
    /// `AZURE_FEDERATED_TOKEN_FILE` from the environment the webhook injects.
    WorkloadIdentity,
    /// The managed identity of the VM or App Service the worker runs on.
    #[serde(rename_all = "camelCase")]
    ManagedIdentity {
        /// The client id of a user-assigned identity; `None` means the system-assigned one.
        #[serde(default)]
        client_id: Option<String>,
    },
    /// The account `az login` signed in (developer machines).
    AzureCli,
    /// A service principal with a client secret.
    #[serde(rename_all = "camelCase")]
    ClientSecret {
        /// The Entra tenant id.
        tenant_id: String,
        /// The application (client) id.
        client_id: String,
        /// The client secret.
        secret: Secret,
    },
}

/// A source of bearer tokens for one scope. Cheap to share behind an `Arc`.
pub struct Credential {
    source: Source,
    scope: String,
    cache: Mutex<Option<AccessToken>>,
}

#[derive(Clone)]
enum Source {
    Static(Secret),
    Identity(Arc<dyn TokenCredential>),
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Source::Static(_) => "Static",
            Source::Identity(_) => "Identity",
        };
        f.debug_struct("Credential")
            .field("source", &source)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// A credential that always sends `token` (the sandbox).
    pub fn fixed(token: impl Into<String>) -> Self {
        Self {
            source: Source::Static(Secret::new(token.into())),
            scope: DEFAULT_SCOPE.to_owned(),
            cache: Mutex::new(None),
        }
    }

    /// A credential backed by any `azure_identity` credential, asking for `scope`.
    pub fn from_token_credential(
        credential: Arc<dyn TokenCredential>,
        scope: impl Into<String>,
    ) -> Self {
        Self {
            source: Source::Identity(credential),
            scope: scope.into(),
            cache: Mutex::new(None),
        }
    }

    /// Builds the configured credential for `scope` ([`DEFAULT_SCOPE`] for public Azure).
    /// Fails when the configuration is incomplete (for example a missing workload identity
    /// environment variable); no token is requested yet.
    pub fn from_kind(kind: &CredentialKind, scope: &str) -> azure_core::Result<Self> {
        crate::tls::install_crypto_provider();
        let identity: Arc<dyn TokenCredential> = match kind {
            CredentialKind::Static { token } => {
                return Ok(Self::fixed(token.secret().to_owned()));
            }
            CredentialKind::WorkloadIdentity => {
                WorkloadIdentityCredential::new(Some(WorkloadIdentityCredentialOptions::default()))?
            }
            CredentialKind::ManagedIdentity { client_id } => {
                ManagedIdentityCredential::new(Some(ManagedIdentityCredentialOptions {
                    user_assigned_id: client_id.clone().map(UserAssignedId::ClientId),
                    ..ManagedIdentityCredentialOptions::default()
                }))?
            }
            CredentialKind::AzureCli => AzureCliCredential::new(None)?,
            CredentialKind::ClientSecret {
                tenant_id,
                client_id,
                secret,
            } => ClientSecretCredential::new(tenant_id, client_id.clone(), secret.clone(), None)?,
        };
        Ok(Self::from_token_credential(identity, scope))
    }

    /// The same source of tokens (static token or identity) for another `scope`, e.g. Key
    /// Vault's `https://vault.azure.net/.default`, with its own cache.
    pub fn for_scope(&self, scope: impl Into<String>) -> Self {
        Self {
            source: self.source.clone(),
            scope: scope.into(),
            cache: Mutex::new(None),
        }
    }

    /// The scope tokens are requested for.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// A bearer token that is valid for at least [`REFRESH_BEFORE_EXPIRY`] (identity), or the
    /// static token.
    pub async fn token(&self) -> azure_core::Result<Secret> {
        let identity = match &self.source {
            Source::Static(token) => return Ok(token.clone()),
            Source::Identity(identity) => identity,
        };
        let mut cached = self.cache.lock().await;
        if let Some(token) = cached.as_ref()
            && token.expires_on - OffsetDateTime::now_utc() > REFRESH_BEFORE_EXPIRY
        {
            return Ok(token.token.clone());
        }
        let fresh = identity.get_token(&[self.scope.as_str()], None).await?;
        tracing::debug!(scope = %self.scope, expires_on = %fresh.expires_on, "got an Azure access token");
        let secret = fresh.token.clone();
        *cached = Some(fresh);
        Ok(secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug)]
    struct Counting {
        calls: AtomicUsize,
        lifetime: TokenDuration,
    }

    #[async_trait::async_trait]
    impl TokenCredential for Counting {
        async fn get_token(
            &self,
            scopes: &[&str],
            _options: Option<azure_core::credentials::TokenRequestOptions<'_>>,
        ) -> azure_core::Result<AccessToken> {
            let call = self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(AccessToken::new(
                format!("{}#{call}", scopes.join(",")),
                OffsetDateTime::now_utc() + self.lifetime,
            ))
        }
    }

    async fn tokens(lifetime: TokenDuration) -> (Vec<String>, usize) {
        let counting = Arc::new(Counting {
            calls: AtomicUsize::new(0),
            lifetime,
        });
        let credential = Credential::from_token_credential(counting.clone(), "https://x/.default");
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(credential.token().await.expect("token").secret().to_owned());
        }
        (got, counting.calls.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn another_scope_asks_the_same_identity_for_its_own_tokens() {
        let counting = Arc::new(Counting {
            calls: AtomicUsize::new(0),
            lifetime: TokenDuration::hours(1),
        });
        let arm = Credential::from_token_credential(counting.clone(), DEFAULT_SCOPE);
        let vault = arm.for_scope("https://vault.azure.net/.default");
        assert_eq!(vault.scope(), "https://vault.azure.net/.default");
        let token = vault.token().await.expect("token");
        assert_eq!(token.secret(), "https://vault.azure.net/.default#0");
        let token = arm.token().await.expect("token");
        assert_eq!(token.secret(), "https://management.azure.com/.default#1");
        let fixed = Credential::fixed("t").for_scope("https://vault.azure.net/.default");
        assert_eq!(fixed.token().await.expect("static").secret(), "t");
    }

    #[tokio::test]
    async fn identity_tokens_are_cached_until_near_expiry() {
        let (got, calls) = tokens(TokenDuration::hours(1)).await;
        assert_eq!(calls, 1);
        assert!(got.iter().all(|t| t == "https://x/.default#0"), "{got:?}");
        let (got, calls) = tokens(TokenDuration::minutes(2)).await;
        assert_eq!(calls, 3, "{got:?}");
    }

    #[test]
    fn kinds_parse_from_config_and_static_tokens_stay_out_of_debug_output() {
        let kind: CredentialKind = serde_json::from_value(serde_json::json!({
            "kind": "clientSecret", "tenantId": "t", "clientId": "c", "secret": "hunter2"
        }))
        .expect("parses");
        assert!(!format!("{kind:?}").contains("hunter2"));
        let kind: CredentialKind =
            serde_json::from_value(serde_json::json!({"kind": "managedIdentity"})).expect("parses");
        assert!(matches!(
            kind,
            CredentialKind::ManagedIdentity { client_id: None }
        ));
        let fixed = Credential::from_kind(
            &CredentialKind::Static {
                token: Secret::new("fake-token"),
            },
            DEFAULT_SCOPE,
        )
        .expect("static needs nothing");
        assert!(!format!("{fixed:?}").contains("fake-token"));
    }
}
