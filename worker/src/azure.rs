//! The ARM and Key Vault clients, built at start-up from `[azure]` so a bad Azure configuration
//! stops the worker at once with a message naming the setting.

use anyhow::Context;
use azure_core::credentials::Secret as AzureSecret;
use nodewright_activities::azure::{
    ArmClient, ArmConfig, Credential, CredentialKind, KeyVaultClient,
};
use nodewright_model::config::{AzureAuth, AzureConfig};
use nodewright_model::text::quoted;
use url::Url;

/// An ARM client for the configured subscription and resource group, with the configured
/// credential. No token is requested yet.
pub fn arm_client(config: &AzureConfig) -> anyhow::Result<ArmClient> {
    let endpoint = Url::parse(&config.arm_endpoint).with_context(|| {
        format!(
            "azure.arm_endpoint (NODEWRIGHT_ARM_ENDPOINT) {} is not a URL",
            quoted(&config.arm_endpoint)
        )
    })?;
    let kind = credential_kind(&config.auth);
    let credential = Credential::from_kind(&kind, &config.token_scope).with_context(|| {
        format!(
            "cannot set up Azure credentials for azure.auth.mode = \"{}\" (NODEWRIGHT_AZURE_AUTH)",
            mode_name(&config.auth)
        )
    })?;
    let arm = ArmConfig::new(endpoint, &config.subscription_id, &config.resource_group);
    ArmClient::new(arm, credential).with_context(|| {
        format!(
            "cannot build the ARM client for azure.arm_endpoint (NODEWRIGHT_ARM_ENDPOINT) {}",
            quoted(&config.arm_endpoint)
        )
    })
}

/// A Key Vault client with the configured identity (or `azure.auth.key_vault_token`, else the
/// ARM token, in mode static), reading at `azure.key_vault_endpoint` when set. No token is
/// requested yet.
pub fn key_vault_client(config: &AzureConfig) -> anyhow::Result<KeyVaultClient> {
    let endpoint = config
        .key_vault_endpoint
        .as_deref()
        .map(|endpoint| {
            Url::parse(endpoint).with_context(|| {
                format!(
                    "azure.key_vault_endpoint (NODEWRIGHT_KEYVAULT_ENDPOINT) {} is not a URL",
                    quoted(endpoint)
                )
            })
        })
        .transpose()?;
    let credential = match (&config.auth, &config.key_vault_token) {
        (AzureAuth::Static { .. }, Some(token)) => Credential::fixed(token.expose()),
        (auth, _) => Credential::from_kind(&credential_kind(auth), &config.token_scope)
            .with_context(|| {
                format!(
                    "cannot set up Azure credentials for azure.auth.mode = \"{}\" (NODEWRIGHT_AZURE_AUTH)",
                    mode_name(auth)
                )
            })?,
    };
    KeyVaultClient::new(&credential, endpoint).with_context(|| {
        "cannot build the Key Vault client for azure.key_vault_endpoint (NODEWRIGHT_KEYVAULT_ENDPOINT)"
    })
}

/// The activities crate's credential for the configured auth mode.
fn credential_kind(auth: &AzureAuth) -> CredentialKind {
    match auth {
        AzureAuth::Static { token } => CredentialKind::Static {
            token: AzureSecret::new(token.expose().to_owned()),
        },
        AzureAuth::WorkloadIdentity => CredentialKind::WorkloadIdentity,
        AzureAuth::ManagedIdentity { client_id } => CredentialKind::ManagedIdentity {
            client_id: client_id.clone(),
        },
        AzureAuth::AzureCli => CredentialKind::AzureCli,
        AzureAuth::ClientSecret {
            tenant_id,
            client_id,
            client_secret,
        } => CredentialKind::ClientSecret {
            tenant_id: tenant_id.clone(),
            client_id: client_id.clone(),
            secret: AzureSecret::new(client_secret.expose().to_owned()),
        },
    }
}

/// The mode's name as written in the config file.
fn mode_name(auth: &AzureAuth) -> &'static str {
    match auth {
        AzureAuth::Static { .. } => "static",
        AzureAuth::WorkloadIdentity => "workload-identity",
        AzureAuth::ManagedIdentity { .. } => "managed-identity",
        AzureAuth::AzureCli => "azure-cli",
        AzureAuth::ClientSecret { .. } => "client-secret",
    }
}

#[cfg(test)]
mod tests {
    use nodewright_model::config::{DEFAULT_ARM_ENDPOINT, DEFAULT_TOKEN_SCOPE, Secret};

    use super::*;

    fn azure(auth: AzureAuth) -> AzureConfig {
        AzureConfig {
            subscription_id: "sub".to_owned(),
            resource_group: "rg".to_owned(),
            location: "westeurope".to_owned(),
            arm_endpoint: DEFAULT_ARM_ENDPOINT.to_owned(),
            key_vault_endpoint: None,
            token_scope: DEFAULT_TOKEN_SCOPE.to_owned(),
            auth,
            key_vault_token: None,
            arm_writes_per_second: 5.0,
            sandbox: false,
        }
    }

    #[test]
    fn each_auth_mode_maps_to_its_credential() {
        let table = [
            (
                AzureAuth::Static {
                    token: Secret::new("t"),
                },
                "Static",
            ),
            (AzureAuth::WorkloadIdentity, "WorkloadIdentity"),
            (
                AzureAuth::ManagedIdentity {
                    client_id: Some("c".to_owned()),
                },
                "ManagedIdentity { client_id: Some(\"c\") }",
            ),
            (AzureAuth::AzureCli, "AzureCli"),
            (
                AzureAuth::ClientSecret {
                    tenant_id: "t".to_owned(),
                    client_id: "c".to_owned(),
                    client_secret: Secret::new("hunter2"),
                },
                "ClientSecret { tenant_id: \"t\", client_id: \"c\"",
            ),
        ];
        for (auth, expected) in table {
            let debug = format!("{:?}", credential_kind(&auth));
            assert!(debug.starts_with(expected), "{debug}");
            assert!(!debug.contains("hunter2"), "{debug}");
        }
        if let CredentialKind::Static { token } = credential_kind(&AzureAuth::Static {
            token: Secret::new("t"),
        }) {
            assert_eq!(token.secret(), "t");
        }
    }

    #[test]
    fn the_key_vault_client_reads_at_the_endpoint_and_a_bad_one_is_named() {
        let mut config = azure(AzureAuth::Static {
            token: Secret::new("t"),
        });
        config.key_vault_token = Some(Secret::new("vault-token"));
        let client = key_vault_client(&config).expect("valid without an endpoint");
        assert_eq!(client.endpoint(), None);
        config.key_vault_endpoint = Some("http://127.0.0.1:8443/keyvault".to_owned());
        let client = key_vault_client(&config).expect("valid");
        assert_eq!(
            client.endpoint().map(Url::as_str),
            Some("http://127.0.0.1:8443/keyvault")
        );
        assert!(!format!("{client:?}").contains("vault-token"));
        config.key_vault_endpoint = Some("ftp://vault".to_owned());
        let error = key_vault_client(&config).expect_err("not http");
        assert!(
            format!("{error:#}")
                .contains("azure.key_vault_endpoint (NODEWRIGHT_KEYVAULT_ENDPOINT)"),
            "{error:#}"
        );
    }

    #[test]
    fn the_sandbox_config_builds_a_client_and_a_bad_endpoint_is_named() {
        let mut config = azure(AzureAuth::Static {
            token: Secret::new("t"),
        });
        config.arm_endpoint = "http://127.0.0.1:8443".to_owned();
        let client = arm_client(&config).expect("valid");
        assert_eq!(client.endpoint().as_str(), "http://127.0.0.1:8443/");
        config.arm_endpoint = "http://[::1".to_owned();
        let error = arm_client(&config).expect_err("invalid");
        assert!(
            format!("{error:#}").contains("azure.arm_endpoint (NODEWRIGHT_ARM_ENDPOINT)"),
            "{error:#}"
        );
    }
}
