//! A Key Vault data-plane client for one call: read a secret's value
//! (`GET {vault}/secrets/{name}[/{version}]?api-version=2025-07-01`), with the worker's Azure
//! identity asking for the vault cloud's scope (`https://vault.azure.net/.default`).
//!
//! Like the ARM client it never retries (Temporal does), follows no redirect, and **sends its
//! token only to the vault the secret URI names** (or to the configured endpoint that stands in
//! for every vault: the sandbox, or a private endpoint), checked on every request. The value
//! lives only in the caller's memory: it is in no error, no log line and no `Debug` output.

use std::sync::Arc;
use std::time::Duration;

use nodewright_model::keyvault::{self, Forbidden, Refusal, SECRETS_USER_ROLE, SecretUri};
use reqwest::header::ACCEPT;
use reqwest::{StatusCode, Url};

use super::client::{DEFAULT_REQUEST_TIMEOUT, RETRY_AFTER_HEADER};
use super::credential::Credential;
use super::error::Error as ArmError;

/// The largest bootstrap text, in bytes (Azure's customData limit, as for an inline one).
pub const MAX_SECRET_BYTES: usize = 65_535;

/// Reads Key Vault secrets. Cheap to clone.
#[derive(Debug, Clone)]
pub struct KeyVaultClient {
    http: reqwest::Client,
    endpoint: Option<Url>,
    /// One credential per cloud, by Key Vault DNS suffix.
    credentials: Arc<Vec<(&'static str, Credential)>>,
}

/// Why a secret could not be read or used. None of these carries the secret's value.
///
/// Retryable ([`KeyVaultError::is_retryable`]): [`KeyVaultError::Unavailable`] (429, 5xx, a
/// transport failure, honouring `Retry-After`) and [`KeyVaultError::Token`]. The rest needs a
/// person: create the secret, grant the role, fix the identity.
#[derive(Debug, thiserror::Error)]
pub enum KeyVaultError {
    /// The URI is not one Key Vault serves (validation refuses it first).
    #[error(
        "{uri} is not a Key Vault secret URI: {problem}; correct spec.template.bootstrapKeyVaultSecret.secretUri"
    )]
    InvalidUri {
        /// The URI.
        uri: String,
        /// What is wrong.
        problem: String,
    },
    /// 404: no such secret, or no such version.
    #[error(
        "the bootstrap Key Vault secret {uri} does not exist{}: create it (az keyvault secret set --vault-name {vault} --name {name} --file <file>) or correct spec.template.bootstrapKeyVaultSecret.secretUri",
        version_note(.versioned)
    )]
    NotFound {
        /// The URI.
        uri: String,
        /// The vault's name.
        vault: String,
        /// The secret's name.
        name: String,
        /// Whether the URI pins a version.
        versioned: bool,
    },
    /// 403: the identity may not read it.
    #[error(
        "the worker's Azure identity may not read the bootstrap Key Vault secret {uri} (403{}): {}",
        .code.as_deref().map(|code| format!(" {code}")).unwrap_or_default(),
        forbidden_fix(.reason, .vault, .name)
    )]
    Forbidden {
        /// The URI.
        uri: String,
        /// The vault's name.
        vault: String,
        /// The secret's name.
        name: String,
        /// Key Vault's (inner) error code, e.g. `ForbiddenByRbac`.
        code: Option<String>,
        /// Why, as far as the answer tells.
        reason: Forbidden,
    },
    /// 401: the vault did not accept the identity's token.
    #[error(
        "Key Vault did not accept the worker's Azure identity for the bootstrap secret {uri} (401): check azure.auth (a static token: azure.auth.key_vault_token, NODEWRIGHT_KEYVAULT_TOKEN); the identity must belong to the vault's tenant and have the role {} on the vault {vault} or the secret",
        SECRETS_USER_ROLE
    )]
    Unauthenticated {
        /// The URI.
        uri: String,
        /// The vault's name.
        vault: String,
    },
    /// Another 4xx: a request Key Vault refuses as such.
    #[error(
        "Key Vault refused reading the bootstrap secret {uri}: {status}{}",
        detail(.code.as_deref(), .message)
    )]
    Rejected {
        /// The URI.
        uri: String,
        /// The HTTP status.
        status: u16,
        /// Key Vault's error code.
        code: Option<String>,
        /// Key Vault's message.
        message: String,
    },
    /// 429, 5xx or a transport failure: worth retrying.
    #[error("reading the bootstrap Key Vault secret {uri} failed: {reason}")]
    Unavailable {
        /// The URI.
        uri: String,
        /// What happened, e.g. `429 Throttled` or the transport error.
        reason: String,
        /// Key Vault's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// No token could be obtained for the vault's scope (an Entra outage or a misconfigured
    /// identity; retried until the activity's policy gives up).
    #[error("getting a Key Vault access token ({scope}) for the bootstrap secret {uri} failed")]
    Token {
        /// The URI.
        uri: String,
        /// The scope asked for.
        scope: String,
        /// Why.
        #[source]
        source: Box<azure_core::Error>,
    },
    /// The secret was read but cannot be a bootstrap: too long, disabled, or the answer is not
    /// a secret.
    #[error("the bootstrap Key Vault secret {uri} {problem}")]
    Unusable {
        /// The URI.
        uri: String,
        /// What is wrong, e.g. `is 70000 bytes, more than Azure's customData holds (65,535)`.
        problem: String,
    },
    /// The request would go to a host other than the vault's (or the endpoint's): refused
    /// before the token is sent.
    #[error("refusing to send a Key Vault token to {url}: it is not the vault of {uri}")]
    ForeignUrl {
        /// The URI.
        uri: String,
        /// Where the request would have gone.
        url: String,
    },
}

impl KeyVaultError {
    /// Whether a retry may succeed: only throttling, outages and token failures.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            KeyVaultError::Unavailable { .. } | KeyVaultError::Token { .. }
        )
    }

    /// Key Vault's `Retry-After`, when it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            KeyVaultError::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// ` (or has no such version)` for a URI that pins one.
fn version_note(versioned: &bool) -> &'static str {
    if *versioned {
        " (or has no such version)"
    } else {
        ""
    }
}

/// The fix for a 403, by its reason.
fn forbidden_fix(reason: &Forbidden, vault: &str, name: &str) -> String {
    let role = format!(
        "assign the worker's identity the role {SECRETS_USER_ROLE} with the scope of the vault {vault} (…/providers/Microsoft.KeyVault/vaults/{vault}) or of the secret (…/vaults/{vault}/secrets/{name})"
    );
    match *reason {
        Forbidden::Rbac | Forbidden::Other => role,
        Forbidden::AccessPolicy => format!(
            "the vault uses access policies: switch it to the Azure RBAC permission model and {role}"
        ),
        Forbidden::Firewall => format!(
            "the vault's firewall refuses the worker's address: allow its network or reach the vault through a private endpoint (azure.key_vault_endpoint); the identity also needs the role {SECRETS_USER_ROLE}"
        ),
        Forbidden::Disabled => format!(
            "the secret is disabled: enable it (az keyvault secret set-attributes --vault-name {vault} --name {name} --enabled true) or pin an enabled version"
        ),
    }
}

/// `: code: message` for a refusal.
fn detail(code: Option<&str>, message: &str) -> String {
    match (code, message.is_empty()) {
        (Some(code), true) => format!(" {code}"),
        (Some(code), false) => format!(" {code}: {message}"),
        (None, false) => format!(": {message}"),
        (None, true) => String::new(),
    }
}

/// The body of a 2xx answer: only the fields nodewright reads. No `Debug`: it holds the value.
#[derive(serde::Deserialize)]
struct SecretBundle {
    value: Option<String>,
}

/// The body of a refusal: `{"error":{"code","message","innererror":{"code"}}}`.
#[derive(Debug, Default, serde::Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: ErrorDetail,
}

#[derive(Debug, Default, serde::Deserialize)]
struct ErrorDetail {
    code: Option<String>,
    #[serde(default)]
    message: String,
    #[serde(default)]
    innererror: Option<Box<ErrorDetail>>,
}

/// The longest Key Vault message kept in an error.
const MAX_MESSAGE_CHARS: usize = 300;

impl KeyVaultClient {
    /// A client asking `credential`'s source for tokens (its scope is replaced by each vault
    /// cloud's), sending every request to the vault a URI names, or to `endpoint` when set
    /// (`<endpoint>/<vault>/secrets/...`: the sandbox, a private endpoint).
    pub fn new(credential: &Credential, endpoint: Option<Url>) -> Result<Self, ArmError> {
        if let Some(endpoint) = &endpoint
            && (endpoint.cannot_be_a_base() || !matches!(endpoint.scheme(), "http" | "https"))
        {
            return Err(ArmError::InvalidEndpoint {
                endpoint: endpoint.to_string(),
            });
        }
        crate::tls::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(DEFAULT_REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .retry(reqwest::retry::never())
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("nodewright/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(ArmError::BuildHttpClient)?;
        let credentials = keyvault::CLOUD_SUFFIXES
            .iter()
            .map(|suffix| (*suffix, credential.for_scope(keyvault::token_scope(suffix))))
            .collect();
        Ok(Self {
            http,
            endpoint,
            credentials: Arc::new(credentials),
        })
    }

    /// The endpoint that stands in for every vault, when configured.
    pub fn endpoint(&self) -> Option<&Url> {
        self.endpoint.as_ref()
    }

    /// Where the secret is requested: `https://<vault>.<suffix>/secrets/<name>[/<version>]`, or
    /// `<endpoint>/<vault>/secrets/...`, with the api-version. Fails when `uri` does not read
    /// back as itself (a vault or name that would leave the vault's host or path).
    pub fn secret_url(&self, uri: &SecretUri) -> Result<Url, KeyVaultError> {
        let text = uri.to_string();
        let invalid = |problem: String| KeyVaultError::InvalidUri {
            uri: text.clone(),
            problem,
        };
        match SecretUri::parse(&text) {
            Ok(again) if again == *uri => {}
            Ok(_) => return Err(invalid("it does not read back as itself".to_owned())),
            Err(problems) => {
                let problems: Vec<String> = problems.into_iter().map(|p| p.problem).collect();
                return Err(invalid(problems.join(", ")));
            }
        }
        let mut url = match &self.endpoint {
            Some(endpoint) => {
                let mut url = endpoint.clone();
                if let Ok(mut path) = url.path_segments_mut() {
                    path.pop_if_empty().push(&uri.vault);
                }
                url
            }
            None => Url::parse(&uri.vault_url()).map_err(|e| invalid(e.to_string()))?,
        };
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(uri.path_segments());
        }
        url.query_pairs_mut()
            .append_pair("api-version", keyvault::API_VERSION);
        Ok(url)
    }

    /// Whether a request to `url` for `uri` stays on the vault's host (or the endpoint).
    fn allowed(&self, uri: &SecretUri, url: &Url) -> bool {
        match &self.endpoint {
            Some(endpoint) => url.origin() == endpoint.origin(),
            None => Url::parse(&uri.vault_url()).is_ok_and(|vault| vault.origin() == url.origin()),
        }
    }

    /// The secret's value, checked to fit a VM's customData.
    pub async fn secret_value(&self, uri: &SecretUri) -> Result<String, KeyVaultError> {
        let shown = uri.to_string();
        let url = self.secret_url(uri)?;
        if !self.allowed(uri, &url) {
            return Err(KeyVaultError::ForeignUrl {
                uri: shown,
                url: url.to_string(),
            });
        }
        let credential = self
            .credentials
            .iter()
            .find(|(suffix, _)| *suffix == uri.suffix)
            .map(|(_, credential)| credential)
            .ok_or_else(|| KeyVaultError::InvalidUri {
                uri: shown.clone(),
                problem: format!("no credential for {}", uri.suffix),
            })?;
        let token = credential
            .token()
            .await
            .map_err(|source| KeyVaultError::Token {
                uri: shown.clone(),
                scope: credential.scope().to_owned(),
                source: Box::new(source),
            })?;
        let unavailable =
            |reason: String, retry_after: Option<Duration>| KeyVaultError::Unavailable {
                uri: shown.clone(),
                reason,
                retry_after,
            };
        let response = self
            .http
            .get(url.clone())
            .bearer_auth(token.secret())
            .header(ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| unavailable(model_chain(&e), None))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER_HEADER)
            .and_then(|value| value.to_str().ok())
            .and_then(nodewright_model::arm::parse_retry_after);
        let body = response
            .bytes()
            .await
            .map_err(|e| unavailable(model_chain(&e), retry_after))?;
        tracing::debug!(%url, status = status.as_u16(), "Key Vault call");
        if status.is_success() {
            return value_of(&shown, &body);
        }
        Err(refusal(uri, status, &body, retry_after))
    }
}

/// An error and its causes as one line.
fn model_chain(error: &(dyn std::error::Error + 'static)) -> String {
    nodewright_model::text::error_chain(error)
}

/// The value of a 2xx answer's SecretBundle, checked.
fn value_of(uri: &str, body: &[u8]) -> Result<String, KeyVaultError> {
    let unusable = |problem: String| KeyVaultError::Unusable {
        uri: uri.to_owned(),
        problem,
    };
    // serde's message is not kept: for a value of the wrong type it would quote it.
    let bundle: SecretBundle = serde_json::from_slice(body).map_err(|_| {
        unusable("was answered with a body that is not a Key Vault SecretBundle".to_owned())
    })?;
    let value = bundle
        .value
        .ok_or_else(|| unusable("was answered without a value".to_owned()))?;
    if value.len() > MAX_SECRET_BYTES {
        return Err(unusable(format!(
            "is {} bytes, more than Azure's customData holds (65,535)",
            value.len()
        )));
    }
    Ok(value)
}

/// The error of a non-2xx answer.
fn refusal(
    uri: &SecretUri,
    status: StatusCode,
    body: &[u8],
    retry_after: Option<Duration>,
) -> KeyVaultError {
    let shown = uri.to_string();
    let error = serde_json::from_slice::<ErrorBody>(body)
        .unwrap_or_default()
        .error;
    let inner = error
        .innererror
        .as_ref()
        .and_then(|inner| inner.code.clone());
    let message: String = error.message.chars().take(MAX_MESSAGE_CHARS).collect();
    match keyvault::classify(status.as_u16()) {
        Refusal::NotFound => KeyVaultError::NotFound {
            uri: shown,
            vault: uri.vault.clone(),
            name: uri.name.clone(),
            versioned: uri.version.is_some(),
        },
        Refusal::Forbidden => KeyVaultError::Forbidden {
            uri: shown,
            vault: uri.vault.clone(),
            name: uri.name.clone(),
            reason: keyvault::forbidden(error.code.as_deref(), inner.as_deref(), &message),
            code: inner.or(error.code),
        },
        Refusal::Unauthenticated => KeyVaultError::Unauthenticated {
            uri: shown,
            vault: uri.vault.clone(),
        },
        Refusal::Transient => KeyVaultError::Unavailable {
            uri: shown,
            reason: format!(
                "{}{}",
                status.as_u16(),
                detail(error.code.as_deref(), &message)
            ),
            retry_after,
        },
        Refusal::Rejected => KeyVaultError::Rejected {
            uri: shown,
            status: status.as_u16(),
            code: error.code,
            message,
        },
    }
}
