//! The configuration before validation: every setting optional, each remembering where its value
//! came from (the file or an environment variable), so errors can point at the right place.

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::error::{ConfigError, Result};
use super::{LogFormat, Secret};

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The config file.
    File,
    /// An environment variable (or a command-line flag standing in for it).
    Env(&'static str),
}

/// A value and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Sourced<T> {
    pub(crate) value: T,
    pub(crate) origin: Origin,
}

impl<T> Sourced<T> {
    /// How an error names this setting: the variable, or the key in the file.
    pub(crate) fn setting(&self, key: &str, file: &str) -> String {
        match self.origin {
            Origin::Env(name) => name.to_owned(),
            Origin::File => format!("`{key}` in {file}"),
        }
    }

    /// A [`ConfigError::Invalid`] quoting this value (secrets have no `ToString`, so they never
    /// get here).
    pub(crate) fn invalid(&self, key: &str, file: &str, problem: impl Into<String>) -> ConfigError
    where
        T: ToString,
    {
        ConfigError::Invalid {
            setting: self.setting(key, file),
            value: Some(self.value.to_string()),
            problem: problem.into(),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Sourced<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(|value| Sourced {
            value,
            origin: Origin::File,
        })
    }
}

/// A duration written the humantime way: `"20s"`, `"2m 30s"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HumanDuration(pub(crate) Duration);

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text)
            .map(HumanDuration)
            .map_err(|error| {
                serde::de::Error::custom(format!(
                    "{} is not a duration ({error}); write e.g. \"20s\" or \"2m\"",
                    crate::text::quoted(&text)
                ))
            })
    }
}

/// How the worker gets its ARM tokens, as named in the file and in `NODEWRIGHT_AZURE_AUTH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum AuthMode {
    Static,
    WorkloadIdentity,
    ManagedIdentity,
    AzureCli,
    ClientSecret,
}

impl AuthMode {
    pub(crate) const NAMES: &'static str =
        "static, workload-identity, managed-identity, azure-cli or client-secret";

    pub(crate) fn name(self) -> &'static str {
        match self {
            AuthMode::Static => "static",
            AuthMode::WorkloadIdentity => "workload-identity",
            AuthMode::ManagedIdentity => "managed-identity",
            AuthMode::AzureCli => "azure-cli",
            AuthMode::ClientSecret => "client-secret",
        }
    }
}

impl FromStr for AuthMode {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        [
            AuthMode::Static,
            AuthMode::WorkloadIdentity,
            AuthMode::ManagedIdentity,
            AuthMode::AzureCli,
            AuthMode::ClientSecret,
        ]
        .into_iter()
        .find(|mode| mode.name() == text)
        .ok_or_else(|| format!("is not an auth mode; use one of {}", Self::NAMES))
    }
}

/// The whole file, every key optional. Unknown keys are refused by name.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Layer {
    pub(crate) cluster: Option<Sourced<String>>,
    #[serde(default)]
    pub(crate) azure: AzureLayer,
    #[serde(default)]
    pub(crate) kubernetes: KubernetesLayer,
    #[serde(default)]
    pub(crate) temporal: TemporalLayer,
    #[serde(default)]
    pub(crate) worker: WorkerLayer,
}

/// `[azure]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AzureLayer {
    pub(crate) subscription_id: Option<Sourced<String>>,
    pub(crate) resource_group: Option<Sourced<String>>,
    pub(crate) location: Option<Sourced<String>>,
    pub(crate) arm_endpoint: Option<Sourced<String>>,
    pub(crate) key_vault_endpoint: Option<Sourced<String>>,
    pub(crate) token_scope: Option<Sourced<String>>,
    pub(crate) arm_writes_per_second: Option<Sourced<f64>>,
    pub(crate) sandbox: Option<Sourced<bool>>,
    #[serde(default)]
    pub(crate) auth: AuthLayer,
}

/// `[azure.auth]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuthLayer {
    pub(crate) mode: Option<Sourced<AuthMode>>,
    pub(crate) token: Option<Sourced<Secret>>,
    pub(crate) key_vault_token: Option<Sourced<Secret>>,
    pub(crate) tenant_id: Option<Sourced<String>>,
    pub(crate) client_id: Option<Sourced<String>>,
    pub(crate) client_secret: Option<Sourced<Secret>>,
}

/// `[kubernetes]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KubernetesLayer {
    pub(crate) kubeconfig: Option<Sourced<String>>,
    pub(crate) context: Option<Sourced<String>>,
    pub(crate) identity_namespace: Option<Sourced<String>>,
}

/// `[temporal]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TemporalLayer {
    pub(crate) address: Option<Sourced<String>>,
    pub(crate) namespace: Option<Sourced<String>>,
    pub(crate) task_queue: Option<Sourced<String>>,
    pub(crate) api_key: Option<Sourced<Secret>>,
    pub(crate) api_key_file: Option<Sourced<String>>,
    pub(crate) ui_url: Option<Sourced<String>>,
    pub(crate) encryption_keys_file: Option<Sourced<String>>,
    pub(crate) encryption_keys: Option<Sourced<Secret>>,
    #[serde(default)]
    pub(crate) tls: TlsLayer,
}

/// `[temporal.tls]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TlsLayer {
    pub(crate) enabled: Option<Sourced<bool>>,
    pub(crate) server_ca_cert: Option<Sourced<String>>,
    pub(crate) client_cert: Option<Sourced<String>>,
    pub(crate) client_key: Option<Sourced<String>>,
    pub(crate) server_name: Option<Sourced<String>>,
}

/// `[worker]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkerLayer {
    pub(crate) metrics_address: Option<Sourced<SocketAddr>>,
    pub(crate) health_address: Option<Sourced<SocketAddr>>,
    pub(crate) log_format: Option<Sourced<LogFormat>>,
    pub(crate) shutdown_grace: Option<Sourced<HumanDuration>>,
}

impl Layer {
    /// Parses the file (when there is one; an empty layer otherwise). The environment is laid
    /// over it by `env::apply`.
    pub(crate) fn parse(file_text: Option<&str>, file_name: &str) -> Result<Self> {
        match file_text {
            Some(text) => toml::from_str(text).map_err(|error| ConfigError::ParseFile {
                file: file_name.to_owned(),
                location: error.span().map(|span| line_and_column(text, span.start)),
                problem: error.message().trim().to_owned(),
            }),
            None => Ok(Layer::default()),
        }
    }
}

/// The 1-based line and column of byte `offset` in `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |last| last.chars().count())
        + 1;
    (line, column)
}
