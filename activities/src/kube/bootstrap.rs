//! A machine's bootstrap text, resolved in one place: inline, or read from the Kubernetes Secret
//! or the Azure Key Vault secret its template names, at the moment the VM body is built (inside
//! `azure.begin_vm_create`). The text lives only in that activity's memory and in the PUT it
//! sends to Azure: it is never an activity's input, result or failure, never logged, and every
//! error here names the Secret or secret URI and what is wrong, never its content.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use nodewright_model::keyvault::SecretUri;
use nodewright_model::pool::{BootstrapSecretRef, MachineTemplate};

use crate::azure::keyvault::{KeyVaultClient, KeyVaultError};

/// The largest bootstrap text, in bytes, as the pool file's rule for an inline one (Azure's
/// customData limit).
const MAX_BOOTSTRAP_BYTES: usize = 65_535;

/// Reads bootstrap Secrets with the worker's Kubernetes client, and Key Vault secrets with its
/// Azure identity.
#[derive(Clone)]
pub struct BootstrapSource {
    client: Option<kube::Client>,
    key_vault: Option<KeyVaultClient>,
}

/// Why the bootstrap Secret could not be used. None of these carries the Secret's content.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The worker has no Kubernetes client to read Secrets with.
    #[error(
        "the template names its bootstrap by reference ({reference}), but this worker reads no Kubernetes Secrets"
    )]
    NoClient {
        /// The reference.
        reference: BootstrapSecretRef,
    },
    /// No such Secret.
    #[error(
        "the bootstrap {reference} does not exist: create it (kubectl create secret generic {} -n {} --from-file={}=<file>) or correct spec.template.bootstrapSecretRef",
        .reference.name, .reference.namespace, .reference.key
    )]
    NotFound {
        /// The reference.
        reference: BootstrapSecretRef,
    },
    /// The worker may not read it.
    #[error(
        "the worker may not read the bootstrap {reference}: grant its service account get on secrets in namespace {} (deploy/rbac: Role nodewright-bootstrap-reader)",
        .reference.namespace
    )]
    Forbidden {
        /// The reference.
        reference: BootstrapSecretRef,
    },
    /// The Secret has no such key.
    #[error(
        "the bootstrap {reference} has no such key (its keys: {keys}): correct spec.template.bootstrapSecretRef.key"
    )]
    NoKey {
        /// The reference.
        reference: BootstrapSecretRef,
        /// The keys it has, comma-separated (names only).
        keys: String,
    },
    /// The value is not UTF-8 text, or longer than customData holds.
    #[error("the bootstrap {reference} {problem}")]
    Unusable {
        /// The reference.
        reference: BootstrapSecretRef,
        /// What is wrong, e.g. `is 70000 bytes, more than Azure's customData holds (65,535)`.
        problem: String,
    },
    /// The API did not answer, or failed: worth retrying.
    #[error("reading the bootstrap {reference} failed: {detail}")]
    Unavailable {
        /// The reference.
        reference: BootstrapSecretRef,
        /// The client's error (it never carries a response body of a Secret).
        detail: String,
    },
    /// The worker has no Key Vault client.
    #[error(
        "the template names its bootstrap in Key Vault ({uri}), but this worker reads no Key Vault secrets"
    )]
    NoKeyVault {
        /// The secret URI.
        uri: String,
    },
    /// The Key Vault secret cannot be read or used.
    #[error(transparent)]
    KeyVault(Box<KeyVaultError>),
}

impl From<KeyVaultError> for BootstrapError {
    fn from(error: KeyVaultError) -> Self {
        BootstrapError::KeyVault(Box::new(error))
    }
}

impl BootstrapError {
    /// Whether a retry may find it different: only an API that did not answer. The rest needs a
    /// person (create the Secret, grant RBAC, fix the key), so the create fails and cleans up.
    pub fn is_retryable(&self) -> bool {
        match self {
            BootstrapError::Unavailable { .. } => true,
            BootstrapError::KeyVault(error) => error.is_retryable(),
            _ => false,
        }
    }

    /// The failure's type name in Temporal: `BootstrapKeyVaultSecret` for a Key Vault secret,
    /// `BootstrapSecret` for a Kubernetes Secret.
    pub fn type_name(&self) -> &'static str {
        match self {
            BootstrapError::NoKeyVault { .. } | BootstrapError::KeyVault(_) => {
                "BootstrapKeyVaultSecret"
            }
            _ => "BootstrapSecret",
        }
    }

    /// The outside system's requested wait before a retry, when it gave one.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            BootstrapError::KeyVault(error) => error.retry_after(),
            _ => None,
        }
    }
}

impl BootstrapSource {
    /// Secrets read with `client`.
    pub fn kubernetes(client: kube::Client) -> Self {
        Self {
            client: Some(client),
            key_vault: None,
        }
    }

    /// No Kubernetes or Key Vault client: a template that names its bootstrap by reference
    /// fails.
    pub fn none() -> Self {
        Self {
            client: None,
            key_vault: None,
        }
    }

    /// Also reads Key Vault secrets, with `client`.
    pub fn with_key_vault(mut self, client: KeyVaultClient) -> Self {
        self.key_vault = Some(client);
        self
    }

    /// The template's bootstrap text: the inline one, the Secret's key, the Key Vault secret's
    /// value, or none.
    pub async fn text(&self, template: &MachineTemplate) -> Result<Option<String>, BootstrapError> {
        if let Some(inline) = &template.bootstrap {
            return Ok(Some(inline.clone()));
        }
        if let Some(secret) = &template.bootstrap_key_vault_secret {
            let uri = SecretUri::parse(&secret.secret_uri).map_err(|problems| {
                KeyVaultError::InvalidUri {
                    uri: secret.secret_uri.clone(),
                    problem: problems
                        .into_iter()
                        .map(|p| p.problem)
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            })?;
            let Some(key_vault) = &self.key_vault else {
                return Err(BootstrapError::NoKeyVault {
                    uri: secret.secret_uri.clone(),
                });
            };
            return Ok(Some(key_vault.secret_value(&uri).await?));
        }
        let Some(reference) = &template.bootstrap_secret_ref else {
            return Ok(None);
        };
        let Some(client) = &self.client else {
            return Err(BootstrapError::NoClient {
                reference: reference.clone(),
            });
        };
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &reference.namespace);
        let secret = match secrets.get_opt(&reference.name).await {
            Ok(Some(secret)) => secret,
            Ok(None) => {
                return Err(BootstrapError::NotFound {
                    reference: reference.clone(),
                });
            }
            Err(kube::Error::Api(status)) if status.code == 403 => {
                return Err(BootstrapError::Forbidden {
                    reference: reference.clone(),
                });
            }
            Err(error) => {
                return Err(BootstrapError::Unavailable {
                    reference: reference.clone(),
                    detail: error.to_string(),
                });
            }
        };
        value_of(reference, secret)
    }
}

/// The key's value as text, checked.
fn value_of(
    reference: &BootstrapSecretRef,
    secret: Secret,
) -> Result<Option<String>, BootstrapError> {
    let mut data = secret.data.unwrap_or_default();
    let Some(bytes) = data.remove(&reference.key) else {
        let mut keys: Vec<String> = data.into_keys().collect();
        keys.extend(secret.string_data.unwrap_or_default().into_keys());
        let keys = if keys.is_empty() {
            "none".to_owned()
        } else {
            keys.join(", ")
        };
        return Err(BootstrapError::NoKey {
            reference: reference.clone(),
            keys,
        });
    };
    let unusable = |problem: String| BootstrapError::Unusable {
        reference: reference.clone(),
        problem,
    };
    if bytes.0.len() > MAX_BOOTSTRAP_BYTES {
        return Err(unusable(format!(
            "is {} bytes, more than Azure's customData holds (65,535)",
            bytes.0.len()
        )));
    }
    String::from_utf8(bytes.0)
        .map(Some)
        .map_err(|_| unusable("is not UTF-8 text".to_owned()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn reference() -> BootstrapSecretRef {
        BootstrapSecretRef {
            namespace: "nodewright".to_owned(),
            name: "workers-bootstrap".to_owned(),
            key: "bootstrap".to_owned(),
        }
    }

    fn secret(entries: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(
                entries
                    .iter()
                    .map(|(key, value)| ((*key).to_owned(), ByteString(value.to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    const MARKER: &str = "abcdef.0123456789abcdef";

    fn key_vault_template(uri: &str) -> MachineTemplate {
        let mut template: MachineTemplate = serde_json::from_value(serde_json::json!({
            "vmSize": "Standard_D2s_v5",
            "image": { "publisher": "Canonical", "offer": "o", "sku": "s", "version": "latest" },
            "subnetId": "/subscriptions/s/resourceGroups/r/providers/Microsoft.Network/virtualNetworks/v/subnets/n",
            "bootstrapKeyVaultSecret": { "secretUri": uri },
        }))
        .expect("a template");
        template.bootstrap = None;
        template
    }

    #[tokio::test]
    async fn a_key_vault_bootstrap_needs_a_key_vault_client_and_a_valid_uri() {
        let uri = "https://kv1.vault.azure.net/secrets/workers-bootstrap";
        let error = BootstrapSource::none()
            .text(&key_vault_template(uri))
            .await
            .expect_err("no Key Vault client");
        assert_eq!(
            error.to_string(),
            format!(
                "the template names its bootstrap in Key Vault ({uri}), but this worker reads no Key Vault secrets"
            )
        );
        assert_eq!(error.type_name(), "BootstrapKeyVaultSecret");
        assert!(!error.is_retryable());
        let error = BootstrapSource::none()
            .text(&key_vault_template("https://kv1.example.com/secrets/x"))
            .await
            .expect_err("not a vault");
        assert!(
            error.to_string().contains("is not on a Key Vault host"),
            "{error}"
        );
        assert_eq!(error.type_name(), "BootstrapKeyVaultSecret");
    }

    #[test]
    fn the_keys_text_is_read_and_no_error_carries_a_value() {
        let text = format!("kubeadm join --token {MARKER}");
        assert_eq!(
            value_of(&reference(), secret(&[("bootstrap", text.as_bytes())])).ok(),
            Some(Some(text.clone()))
        );
        let errors = [
            value_of(&reference(), secret(&[("other", text.as_bytes())])),
            value_of(&reference(), secret(&[])),
            value_of(&reference(), secret(&[("bootstrap", &[0xff, 0xfe, b'a'])])),
            value_of(
                &reference(),
                secret(&[(
                    "bootstrap",
                    format!("{MARKER}{}", "x".repeat(70_000)).as_bytes(),
                )]),
            ),
        ];
        let messages: Vec<String> = errors
            .into_iter()
            .map(|result| result.expect_err("refused").to_string())
            .collect();
        assert_eq!(
            messages,
            [
                "the bootstrap Secret nodewright/workers-bootstrap, key bootstrap has no such key (its keys: other): correct spec.template.bootstrapSecretRef.key",
                "the bootstrap Secret nodewright/workers-bootstrap, key bootstrap has no such key (its keys: none): correct spec.template.bootstrapSecretRef.key",
                "the bootstrap Secret nodewright/workers-bootstrap, key bootstrap is not UTF-8 text",
                "the bootstrap Secret nodewright/workers-bootstrap, key bootstrap is 70023 bytes, more than Azure's customData holds (65,535)",
            ]
        );
        assert!(messages.iter().all(|m| !m.contains(MARKER)));
    }
}
