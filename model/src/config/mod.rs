//! The cluster's configuration, shared by the worker and the CLI: one TOML file plus
//! `NODEWRIGHT_*` environment variables (the environment wins over the file; the binaries' flags
//! win over both by standing in for the variables).
//!
//! Pure: the caller reads the file and hands over its text and an environment lookup, so tests
//! are tables of (file, environment) → config or error. Every error names the TOML key, the
//! environment variable and the fix.
//!
//! - [`ClusterConfig::load`]: everything the worker needs; Azure settings are required.
//! - [`ClientConfig::load`]: what the CLI needs (the cluster and Temporal); the same file works.
//! - [`ENV_VARS`]: every environment variable, the key it sets and what it means.
//!
//! `nodewright.example.toml` at the repository's root documents every key.

mod env;
mod error;
mod layer;
mod secret;
mod transport;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::ClusterName;
use layer::{AuthLayer, AuthMode, AzureLayer, Layer, Sourced, TemporalLayer, WorkerLayer};

pub use env::{ENV_VARS, EnvVar, env_var};
pub use error::{ConfigError, Result};
pub use secret::Secret;
pub use transport::{TemporalTransport, address_host, is_loopback_address, is_loopback_host};

/// The public Azure cloud's Resource Manager endpoint.
pub const DEFAULT_ARM_ENDPOINT: &str = "https://management.azure.com";
/// The token scope of the public Azure cloud's Resource Manager.
pub const DEFAULT_TOKEN_SCOPE: &str = "https://management.azure.com/.default";
/// ARM writes per second for the whole deployment, enforced by the Temporal server on the ARM
/// write task queue (architecture §5). Well under ARM's per-subscription write budget.
pub const DEFAULT_ARM_WRITES_PER_SECOND: f64 = 5.0;
/// The Temporal frontend of the local stack (the Temporal CLI's default too).
pub const DEFAULT_TEMPORAL_ADDRESS: &str = "127.0.0.1:7233";
/// The Temporal namespace used unless configured.
pub const DEFAULT_TEMPORAL_NAMESPACE: &str = "default";
/// The Temporal Web UI of the local stack.
pub const DEFAULT_TEMPORAL_UI: &str = "http://127.0.0.1:8233";
/// Where the worker serves Prometheus metrics unless configured: loopback only (a pod sets
/// `0.0.0.0:9464` explicitly, next to a NetworkPolicy).
pub const DEFAULT_METRICS_ADDRESS: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9464));
/// Where the worker serves `/healthz` and `/readyz` unless configured: loopback only (a pod sets
/// `0.0.0.0:8080` explicitly, for the kubelet's probes).
pub const DEFAULT_HEALTH_ADDRESS: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));
/// How long running activities may take to finish after a shutdown signal.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// Everything the worker needs to manage one cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// The cluster's name: part of workflow IDs, Azure tags and node labels.
    pub cluster: ClusterName,
    /// Where the cluster's machines live in Azure and how to authenticate.
    pub azure: AzureConfig,
    /// How to reach the cluster's apiserver.
    pub kubernetes: KubernetesConfig,
    /// How to reach Temporal.
    pub temporal: TemporalConfig,
    /// The worker process's own endpoints and behaviour.
    pub worker: WorkerConfig,
}

/// What the CLI needs: the cluster's name and how to reach Temporal. Loaded from the same file
/// as [`ClusterConfig`]; the Azure and worker settings may be absent.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// The cluster's name.
    pub cluster: ClusterName,
    /// How to reach Temporal.
    pub temporal: TemporalConfig,
}

/// `[azure]`: the subscription, resource group and region of the cluster's machines.
#[derive(Debug, Clone, PartialEq)]
pub struct AzureConfig {
    /// The subscription id.
    pub subscription_id: String,
    /// The resource group every machine, NIC and disk is created in.
    pub resource_group: String,
    /// The region, e.g. `westeurope`.
    pub location: String,
    /// The ARM endpoint: an `http(s)://` base URL.
    pub arm_endpoint: String,
    /// Where Key Vault secrets are read instead of their vault's own host (the sandbox, a
    /// private endpoint): `https://<vault>.<suffix>/secrets/...` is requested at
    /// `<endpoint>/<vault>/secrets/...`. `None`: at the vault's host.
    pub key_vault_endpoint: Option<String>,
    /// The scope ARM tokens are requested for.
    pub token_scope: String,
    /// Where ARM tokens come from (and Key Vault tokens, for the vault's scope).
    pub auth: AzureAuth,
    /// With `mode = "static"`: the token sent to Key Vault, when not the ARM token.
    pub key_vault_token: Option<Secret>,
    /// The server-enforced rate limit of the ARM write task queue, for all workers together.
    pub arm_writes_per_second: f64,
    /// `azure.sandbox = true`: the endpoints are a stand-in for Azure (nodewright-sandbox), so an
    /// `http://` endpoint or a static token at a non-loopback address is accepted.
    pub sandbox: bool,
}

/// `[azure.auth]`: where the worker's ARM bearer tokens come from.
#[derive(Debug, Clone, PartialEq)]
pub enum AzureAuth {
    /// `mode = "static"`: a fixed token, for the sandbox. Chosen when only `NODEWRIGHT_ARM_TOKEN`
    /// is set.
    Static {
        /// The token.
        token: Secret,
    },
    /// `mode = "workload-identity"`: Kubernetes workload identity (`AZURE_TENANT_ID`,
    /// `AZURE_CLIENT_ID` and `AZURE_FEDERATED_TOKEN_FILE` injected by the webhook).
    WorkloadIdentity,
    /// `mode = "managed-identity"`: the managed identity of the VM the worker runs on.
    ManagedIdentity {
        /// The client id of a user-assigned identity; `None` for the system-assigned one.
        client_id: Option<String>,
    },
    /// `mode = "azure-cli"`: the account `az login` signed in (developer machines).
    AzureCli,
    /// `mode = "client-secret"`: a service principal and its secret.
    ClientSecret {
        /// The Entra tenant id.
        tenant_id: String,
        /// The application (client) id.
        client_id: String,
        /// The client secret.
        client_secret: Secret,
    },
}

/// `[kubernetes]`: the cluster's apiserver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesConfig {
    /// A kubeconfig file (`KUBECONFIG` may list several, separated like `PATH`); `None` means the
    /// in-cluster configuration, or `~/.kube/config` outside a pod.
    pub kubeconfig: Option<PathBuf>,
    /// The context to use instead of the kubeconfig's current one.
    pub context: Option<String>,
    /// The namespace of the cluster's identity ConfigMap (`nodewright-cluster`, see
    /// [`crate::identity`]).
    pub identity_namespace: String,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            context: None,
            identity_namespace: crate::identity::DEFAULT_IDENTITY_NAMESPACE.to_owned(),
        }
    }
}

/// `[temporal]`: the Temporal frontend, namespace and task queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemporalConfig {
    /// `host:port` or a URL.
    pub address: String,
    /// The namespace.
    pub namespace: String,
    /// The task queue the workers poll: `nodewright-<cluster>` unless configured.
    pub task_queue: String,
    /// An API key (Temporal Cloud); implies TLS.
    pub api_key: Option<Secret>,
    /// A file holding the API key (a mounted Secret), re-read when it changes; implies TLS.
    /// Exclusive with `api_key`.
    pub api_key_file: Option<PathBuf>,
    /// The Web UI's base URL, for links to runs.
    pub ui_url: String,
    /// TLS settings; `Some` whenever the connection uses TLS (also for an API key alone).
    /// `None` is plain text: only to a loopback address, or with `temporal.tls.enabled = false`
    /// (see [`TemporalConfig::transport`]).
    pub tls: Option<TemporalTls>,
    /// The keys that encrypt payloads, when payload encryption is on.
    pub encryption_keys: Option<EncryptionKeys>,
}

/// Where the payload encryption keys come from: one `<key id>=<base64 of 32 bytes>` per line,
/// the first the key to encrypt with (see `nodewright_connect::codec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncryptionKeys {
    /// A file (`temporal.encryption_keys_file`, e.g. a mounted Secret).
    File(PathBuf),
    /// The text itself (`NODEWRIGHT_ENCRYPTION_KEYS`, e.g. from a Secret's `secretKeyRef`).
    Inline(Secret),
}

/// `[temporal.tls]`: how to verify the server and, for mTLS, who the client is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemporalTls {
    /// PEM file of the CA that signed the server's certificate; `None` trusts the system's roots.
    pub server_ca_cert: Option<PathBuf>,
    /// The client certificate and key, for mTLS.
    pub client_certificate: Option<ClientCertificate>,
    /// The name the server's certificate must carry, when not the address's host.
    pub server_name: Option<String>,
}

/// The client side of mTLS: both files are PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate {
    /// The certificate (chain).
    pub cert: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

/// `[worker]`: the worker process's endpoints, logs and shutdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Where Prometheus metrics are served (`GET /metrics`).
    pub metrics_address: SocketAddr,
    /// Where `GET /healthz` and `GET /readyz` are served.
    pub health_address: SocketAddr,
    /// The log format.
    pub log_format: LogFormat,
    /// How long running activities may take to finish after a shutdown signal.
    pub shutdown_grace: Duration,
}

/// How the worker writes its logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Parses the file (when there is one), then lays the environment over it.
fn read_layer(
    file_text: Option<&str>,
    file_name: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Layer> {
    let mut layer = Layer::parse(file_text, file_name)?;
    env::apply(&mut layer, env)?;
    Ok(layer)
}

impl ClusterConfig {
    /// Reads the configuration from `file_text` (the config file's contents, `None` when there is
    /// none; `file_name` names it in messages) and the environment (`env` looks a variable up).
    /// Every required setting must be present, the Azure ones included.
    pub fn load(
        file_text: Option<&str>,
        file_name: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let layer = read_layer(file_text, file_name, &env)?;
        let resolve = Resolve::new(file_text.map(|_| file_name));
        let cluster = resolve.cluster(&layer)?;
        Ok(Self {
            azure: resolve.azure(&layer.azure)?,
            kubernetes: resolve.kubernetes(&layer)?,
            temporal: resolve.temporal(&layer.temporal, &cluster)?,
            worker: resolve.worker(&layer.worker),
            cluster,
        })
    }
}

impl ClientConfig {
    /// Like [`ClusterConfig::load`], but only the cluster and the Temporal settings are resolved:
    /// the CLI runs where no Azure credentials are configured. The whole file is still parsed,
    /// so a misspelt key anywhere is refused.
    pub fn load(
        file_text: Option<&str>,
        file_name: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let layer = read_layer(file_text, file_name, &env)?;
        let resolve = Resolve::new(file_text.map(|_| file_name));
        let cluster = resolve.cluster(&layer)?;
        Ok(Self {
            temporal: resolve.temporal(&layer.temporal, &cluster)?,
            cluster,
        })
    }
}

impl TemporalConfig {
    /// Whether the connection uses TLS.
    pub fn uses_tls(&self) -> bool {
        self.tls.is_some()
    }
}

/// Turns a [`Layer`] into validated settings, naming the file in errors.
struct Resolve<'a> {
    /// The config file's name, when one was read.
    file: Option<&'a str>,
}

impl<'a> Resolve<'a> {
    fn new(file: Option<&'a str>) -> Self {
        Self { file }
    }

    fn file_label(&self) -> &str {
        self.file.unwrap_or("the config file")
    }

    fn missing(&self, key: &'static str) -> ConfigError {
        ConfigError::Missing {
            key,
            env: env::env_name(key),
            file: self.file.map(str::to_owned),
        }
    }

    /// How an error names where `value` came from.
    fn setting<T>(&self, value: &Sourced<T>, key: &str) -> String {
        value.setting(key, self.file_label())
    }

    /// A required, non-empty text setting.
    fn required(&self, value: &Option<Sourced<String>>, key: &'static str) -> Result<String> {
        match value {
            None => Err(self.missing(key)),
            Some(value) => self.non_empty(value, key),
        }
    }

    /// An optional text setting with a default; an empty value in the file is refused.
    fn or_default(
        &self,
        value: &Option<Sourced<String>>,
        key: &'static str,
        default: &str,
    ) -> Result<String> {
        match value {
            None => Ok(default.to_owned()),
            Some(value) => self.non_empty(value, key),
        }
    }

    /// An optional text setting without a default.
    fn optional(
        &self,
        value: &Option<Sourced<String>>,
        key: &'static str,
    ) -> Result<Option<String>> {
        value
            .as_ref()
            .map(|value| self.non_empty(value, key))
            .transpose()
    }

    fn non_empty(&self, value: &Sourced<String>, key: &'static str) -> Result<String> {
        let text = value.value.trim();
        if text.is_empty() {
            return Err(value.invalid(
                key,
                self.file_label(),
                format!(
                    "is empty; give it a value, here or in {}",
                    env::env_name(key)
                ),
            ));
        }
        Ok(text.to_owned())
    }

    fn http_url(
        &self,
        value: &Option<Sourced<String>>,
        key: &'static str,
        default: &str,
    ) -> Result<String> {
        let url = self.or_default(value, key, default)?;
        match value {
            Some(value) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                Err(value.invalid(
                    key,
                    self.file_label(),
                    format!("is not an http(s) URL; write e.g. {default}"),
                ))
            }
            _ => Ok(url),
        }
    }

    /// An optional `http(s)://` URL without a default.
    fn optional_http_url(
        &self,
        value: &Option<Sourced<String>>,
        key: &'static str,
        example: &str,
    ) -> Result<Option<String>> {
        let Some(sourced) = value else {
            return Ok(None);
        };
        let url = self.non_empty(sourced, key)?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(sourced.invalid(
                key,
                self.file_label(),
                format!("is not an http(s) URL; write e.g. {example}"),
            ));
        }
        Ok(Some(url))
    }

    fn cluster(&self, layer: &Layer) -> Result<ClusterName> {
        let value = layer
            .cluster
            .as_ref()
            .ok_or_else(|| self.missing("cluster"))?;
        Ok(ClusterName::parse(
            &self.setting(value, "cluster"),
            value.value.trim(),
        )?)
    }

    fn azure(&self, azure: &AzureLayer) -> Result<AzureConfig> {
        let arm_writes_per_second = match &azure.arm_writes_per_second {
            None => DEFAULT_ARM_WRITES_PER_SECOND,
            Some(rate) if rate.value.is_finite() && rate.value > 0.0 => rate.value,
            Some(rate) => {
                return Err(rate.invalid(
                    "azure.arm_writes_per_second",
                    self.file_label(),
                    "must be a number above 0, e.g. 5",
                ));
            }
        };
        let config = AzureConfig {
            subscription_id: self.required(&azure.subscription_id, "azure.subscription_id")?,
            resource_group: self.required(&azure.resource_group, "azure.resource_group")?,
            location: self.required(&azure.location, "azure.location")?,
            arm_endpoint: self.http_url(
                &azure.arm_endpoint,
                "azure.arm_endpoint",
                DEFAULT_ARM_ENDPOINT,
            )?,
            key_vault_endpoint: self.optional_http_url(
                &azure.key_vault_endpoint,
                "azure.key_vault_endpoint",
                "http://127.0.0.1:8443/keyvault",
            )?,
            token_scope: self.or_default(
                &azure.token_scope,
                "azure.token_scope",
                DEFAULT_TOKEN_SCOPE,
            )?,
            auth: self.auth(&azure.auth)?,
            key_vault_token: azure
                .auth
                .key_vault_token
                .as_ref()
                .map(|_| self.secret(&azure.auth.key_vault_token, "azure.auth.key_vault_token"))
                .transpose()?,
            arm_writes_per_second,
            sandbox: azure.sandbox.as_ref().is_some_and(|sandbox| sandbox.value),
        };
        self.refuse_unsafe_azure(azure, &config)?;
        Ok(config)
    }

    /// Outside a sandbox, ARM and Key Vault are spoken to over TLS and with tokens from Entra ID:
    /// an `http://` endpoint or a static token is refused unless the endpoint is loopback or
    /// `azure.sandbox = true` says it is a stand-in.
    fn refuse_unsafe_azure(&self, azure: &AzureLayer, config: &AzureConfig) -> Result<()> {
        if config.sandbox {
            return Ok(());
        }
        let fix = format!(
            "use an https:// endpoint, or set `azure.sandbox = true` ({}) if it is nodewright-sandbox or another stand-in for Azure",
            env::env_name("azure.sandbox")
        );
        let http = |key: &'static str, value: &Option<Sourced<String>>, url: &str| -> Result<()> {
            match value {
                Some(value) if url.starts_with("http://") && !is_loopback_address(url) => {
                    Err(value.invalid(
                        key,
                        self.file_label(),
                        format!("is plain http:// to a non-loopback host, which would send the bearer token in clear: {fix}"),
                    ))
                }
                _ => Ok(()),
            }
        };
        http(
            "azure.arm_endpoint",
            &azure.arm_endpoint,
            &config.arm_endpoint,
        )?;
        if let Some(endpoint) = &config.key_vault_endpoint {
            http(
                "azure.key_vault_endpoint",
                &azure.key_vault_endpoint,
                endpoint,
            )?;
        }
        if matches!(config.auth, AzureAuth::Static { .. })
            && !is_loopback_address(&config.arm_endpoint)
        {
            return Err(ConfigError::Inconsistent(format!(
                "azure.auth.mode = \"static\" (a fixed token, {}) is only for nodewright-sandbox, but azure.arm_endpoint {} is not a loopback address: choose another azure.auth.mode (workload-identity, managed-identity, client-secret, azure-cli) for Azure, or set `azure.sandbox = true` ({}) if the endpoint is a sandbox",
                env::env_name("azure.auth.token"),
                crate::text::quoted(&config.arm_endpoint),
                env::env_name("azure.sandbox"),
            )));
        }
        Ok(())
    }

    fn auth(&self, auth: &AuthLayer) -> Result<AzureAuth> {
        let mode = match (&auth.mode, &auth.token) {
            (Some(mode), _) => mode.value,
            // A token alone (the local stack's environment) means the static mode.
            (None, Some(_)) => AuthMode::Static,
            (None, None) => return Err(self.missing("azure.auth.mode")),
        };
        let used: &[&str] = match mode {
            AuthMode::Static => &["token", "key_vault_token"],
            AuthMode::WorkloadIdentity | AuthMode::AzureCli => &[],
            AuthMode::ManagedIdentity => &["client_id"],
            AuthMode::ClientSecret => &["tenant_id", "client_id", "client_secret"],
        };
        self.refuse_unused(auth, mode, used)?;
        Ok(match mode {
            AuthMode::Static => AzureAuth::Static {
                token: self.secret(&auth.token, "azure.auth.token")?,
            },
            AuthMode::WorkloadIdentity => AzureAuth::WorkloadIdentity,
            AuthMode::ManagedIdentity => AzureAuth::ManagedIdentity {
                client_id: self.optional(&auth.client_id, "azure.auth.client_id")?,
            },
            AuthMode::AzureCli => AzureAuth::AzureCli,
            AuthMode::ClientSecret => AzureAuth::ClientSecret {
                tenant_id: self.required(&auth.tenant_id, "azure.auth.tenant_id")?,
                client_id: self.required(&auth.client_id, "azure.auth.client_id")?,
                client_secret: self.secret(&auth.client_secret, "azure.auth.client_secret")?,
            },
        })
    }

    /// A setting the chosen mode does not use is a mistake (a leftover token, a secret for the
    /// wrong mode): refuse it instead of silently ignoring it.
    fn refuse_unused(&self, auth: &AuthLayer, mode: AuthMode, used: &[&str]) -> Result<()> {
        let present: [(&str, &'static str, Option<String>); 5] = [
            (
                "token",
                "azure.auth.token",
                auth.token
                    .as_ref()
                    .map(|v| self.setting(v, "azure.auth.token")),
            ),
            (
                "key_vault_token",
                "azure.auth.key_vault_token",
                auth.key_vault_token
                    .as_ref()
                    .map(|v| self.setting(v, "azure.auth.key_vault_token")),
            ),
            (
                "tenant_id",
                "azure.auth.tenant_id",
                auth.tenant_id
                    .as_ref()
                    .map(|v| self.setting(v, "azure.auth.tenant_id")),
            ),
            (
                "client_id",
                "azure.auth.client_id",
                auth.client_id
                    .as_ref()
                    .map(|v| self.setting(v, "azure.auth.client_id")),
            ),
            (
                "client_secret",
                "azure.auth.client_secret",
                auth.client_secret
                    .as_ref()
                    .map(|v| self.setting(v, "azure.auth.client_secret")),
            ),
        ];
        for (name, key, origin) in present {
            if let Some(origin) = origin
                && !used.contains(&name)
            {
                let mode_origin = auth.mode.as_ref().map_or_else(String::new, |m| {
                    format!(" ({})", self.setting(m, "azure.auth.mode"))
                });
                return Err(ConfigError::Inconsistent(format!(
                    "`{key}` ({origin}) is not used with azure.auth.mode = \"{}\"{mode_origin}: remove it, or choose the mode that uses it",
                    mode.name()
                )));
            }
        }
        Ok(())
    }

    fn secret(&self, value: &Option<Sourced<Secret>>, key: &'static str) -> Result<Secret> {
        match value {
            None => Err(self.missing(key)),
            Some(secret) if secret.value.expose().trim().is_empty() => Err(ConfigError::Invalid {
                setting: self.setting(secret, key),
                value: None,
                problem: "is empty".to_owned(),
            }),
            Some(secret) => Ok(Secret::new(secret.value.expose().trim())),
        }
    }

    fn kubernetes(&self, layer: &Layer) -> Result<KubernetesConfig> {
        let kubernetes = &layer.kubernetes;
        let identity_namespace = self.or_default(
            &kubernetes.identity_namespace,
            "kubernetes.identity_namespace",
            crate::identity::DEFAULT_IDENTITY_NAMESPACE,
        )?;
        if let (Some(value), Some(problem)) = (
            &kubernetes.identity_namespace,
            crate::cluster::label_problem(&identity_namespace, 63, "is longer than 63 characters"),
        ) {
            return Err(value.invalid(
                "kubernetes.identity_namespace",
                self.file_label(),
                format!("{problem}; write a namespace name, e.g. nodewright"),
            ));
        }
        let text = |value: &Option<Sourced<String>>| {
            value
                .as_ref()
                .map(|value| value.value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        Ok(KubernetesConfig {
            kubeconfig: text(&kubernetes.kubeconfig).map(PathBuf::from),
            context: text(&kubernetes.context),
            identity_namespace,
        })
    }

    fn temporal(&self, temporal: &TemporalLayer, cluster: &ClusterName) -> Result<TemporalConfig> {
        let address = self.or_default(
            &temporal.address,
            "temporal.address",
            DEFAULT_TEMPORAL_ADDRESS,
        )?;
        let api_key = match &temporal.api_key {
            None => None,
            Some(_) => Some(self.secret(&temporal.api_key, "temporal.api_key")?),
        };
        let api_key_file = self
            .optional(&temporal.api_key_file, "temporal.api_key_file")?
            .map(PathBuf::from);
        if let (Some(file), Some(_)) = (&temporal.api_key_file, &api_key) {
            return Err(ConfigError::Invalid {
                setting: self.setting(file, "temporal.api_key_file"),
                value: None,
                problem: format!(
                    "is set together with temporal.api_key ({}); set one of the two",
                    env::env_name("temporal.api_key")
                ),
            });
        }
        let tls = self.tls(temporal, &address)?;
        let encryption_keys = match (&temporal.encryption_keys_file, &temporal.encryption_keys) {
            (None, None) => None,
            (Some(file), Some(_)) => {
                return Err(ConfigError::Invalid {
                    setting: self.setting(file, "temporal.encryption_keys_file"),
                    value: None,
                    problem: "is set together with temporal.encryption_keys (NODEWRIGHT_ENCRYPTION_KEYS); set one of the two".to_owned(),
                });
            }
            (Some(_), None) => self
                .optional(
                    &temporal.encryption_keys_file,
                    "temporal.encryption_keys_file",
                )?
                .map(|path| EncryptionKeys::File(PathBuf::from(path))),
            (None, Some(_)) => Some(EncryptionKeys::Inline(
                self.secret(&temporal.encryption_keys, "temporal.encryption_keys")?,
            )),
        };
        Ok(TemporalConfig {
            namespace: self.or_default(
                &temporal.namespace,
                "temporal.namespace",
                DEFAULT_TEMPORAL_NAMESPACE,
            )?,
            task_queue: self.or_default(
                &temporal.task_queue,
                "temporal.task_queue",
                &crate::names::default_task_queue(cluster),
            )?,
            ui_url: self.http_url(&temporal.ui_url, "temporal.ui_url", DEFAULT_TEMPORAL_UI)?,
            address,
            api_key,
            api_key_file,
            tls,
            encryption_keys,
        })
    }

    fn tls(&self, temporal: &TemporalLayer, address: &str) -> Result<Option<TemporalTls>> {
        let tls = &temporal.tls;
        let path = |value: &Option<Sourced<String>>, key| -> Result<Option<PathBuf>> {
            Ok(self.optional(value, key)?.map(PathBuf::from))
        };
        let server_ca_cert = path(&tls.server_ca_cert, "temporal.tls.server_ca_cert")?;
        let cert = path(&tls.client_cert, "temporal.tls.client_cert")?;
        let key = path(&tls.client_key, "temporal.tls.client_key")?;
        let server_name = self.optional(&tls.server_name, "temporal.tls.server_name")?;
        let client_certificate = match (cert, key) {
            (Some(cert), Some(key)) => Some(ClientCertificate { cert, key }),
            (None, None) => None,
            (cert, _) => {
                let (set, unset) = if cert.is_some() {
                    ("temporal.tls.client_cert", "temporal.tls.client_key")
                } else {
                    ("temporal.tls.client_key", "temporal.tls.client_cert")
                };
                return Err(ConfigError::Inconsistent(format!(
                    "`{set}` is set but `{unset}` is not: mTLS needs both `temporal.tls.client_cert` and `temporal.tls.client_key` ({} and {}), or neither",
                    env::env_name("temporal.tls.client_cert"),
                    env::env_name("temporal.tls.client_key"),
                )));
            }
        };
        let mut implied_by = Vec::new();
        if server_ca_cert.is_some() {
            implied_by.push("temporal.tls.server_ca_cert");
        }
        if client_certificate.is_some() {
            implied_by.push("temporal.tls.client_cert/client_key");
        }
        if server_name.is_some() {
            implied_by.push("temporal.tls.server_name");
        }
        if temporal.api_key.is_some() {
            implied_by.push("temporal.api_key");
        }
        if temporal.api_key_file.is_some() {
            implied_by.push("temporal.api_key_file");
        }
        if address.starts_with("https://") {
            implied_by.push("an https:// temporal.address");
        }
        let enabled = match &tls.enabled {
            Some(enabled) if !enabled.value && !implied_by.is_empty() => {
                return Err(ConfigError::Inconsistent(format!(
                    "TLS is turned off ({}) but {} needs it: remove one of them",
                    self.setting(enabled, "temporal.tls.enabled"),
                    implied_by.join(", ")
                )));
            }
            Some(enabled) => enabled.value,
            None if implied_by.is_empty() && !is_loopback_address(address) => {
                return Err(ConfigError::Inconsistent(format!(
                    "temporal.address {} is not a loopback address and nothing turns TLS on: nodewright does not send its commands to Temporal in plain text over a network unless told to. Use mTLS (temporal.tls.client_cert, temporal.tls.client_key and temporal.tls.server_ca_cert: {}, {}, {}), or an API key (temporal.api_key_file or temporal.api_key: {}, {}), or set temporal.tls.enabled = false ({}=false) to use plain text on purpose",
                    crate::text::quoted(address),
                    env::env_name("temporal.tls.client_cert"),
                    env::env_name("temporal.tls.client_key"),
                    env::env_name("temporal.tls.server_ca_cert"),
                    env::env_name("temporal.api_key_file"),
                    env::env_name("temporal.api_key"),
                    env::env_name("temporal.tls.enabled"),
                )));
            }
            None => !implied_by.is_empty(),
        };
        if enabled && address.starts_with("http://") {
            return Err(ConfigError::Inconsistent(format!(
                "temporal.address {} says http:// but TLS is on: write the address as host:port or https://",
                crate::text::quoted(address)
            )));
        }
        Ok(enabled.then_some(TemporalTls {
            server_ca_cert,
            client_certificate,
            server_name,
        }))
    }

    fn worker(&self, worker: &WorkerLayer) -> WorkerConfig {
        WorkerConfig {
            metrics_address: worker
                .metrics_address
                .as_ref()
                .map_or(DEFAULT_METRICS_ADDRESS, |v| v.value),
            health_address: worker
                .health_address
                .as_ref()
                .map_or(DEFAULT_HEALTH_ADDRESS, |v| v.value),
            log_format: worker
                .log_format
                .as_ref()
                .map_or(LogFormat::Text, |v| v.value),
            shutdown_grace: worker
                .shutdown_grace
                .as_ref()
                .map_or(DEFAULT_SHUTDOWN_GRACE, |v| v.value.0),
        }
    }
}

#[cfg(test)]
mod tests;
