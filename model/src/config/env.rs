//! The environment variables, in one table: each one's name, the TOML key it sets, a one-line
//! meaning and its setter. The README's table and the loader both come from [`ENV_VARS`], so
//! they cannot drift apart.

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use super::error::{ConfigError, Result};
use super::layer::{AuthMode, HumanDuration, Layer, Origin, Sourced};
use super::{LogFormat, Secret};

/// One environment variable nodewright reads.
#[derive(Debug)]
pub struct EnvVar {
    name: &'static str,
    key: &'static str,
    meaning: &'static str,
    fallback: bool,
    set: fn(&mut Layer, Sourced<String>) -> Result<()>,
}

impl EnvVar {
    /// The variable's name, e.g. `NODEWRIGHT_AZURE_SUBSCRIPTION_ID`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The TOML key it sets, e.g. `azure.subscription_id`.
    pub fn key(&self) -> &'static str {
        self.key
    }

    /// What it means, in one line.
    pub fn meaning(&self) -> &'static str {
        self.meaning
    }

    /// True for the Temporal CLI's names (`TEMPORAL_ADDRESS`, ...), which are read only when
    /// the `NODEWRIGHT_` variable for the same key is not set.
    pub fn is_fallback(&self) -> bool {
        self.fallback
    }
}

/// A setter that stores the value as text.
macro_rules! text {
    ($($field:ident).+) => {
        |layer: &mut Layer, value: Sourced<String>| {
            layer.$($field).+ = Some(value);
            Ok(())
        }
    };
}

/// A setter that parses the value with `$parse` first.
macro_rules! parsed {
    ($parse:expr, $($field:ident).+) => {
        |layer: &mut Layer, value: Sourced<String>| {
            layer.$($field).+ = Some($parse(value)?);
            Ok(())
        }
    };
}

/// A primary variable.
const fn var(
    name: &'static str,
    key: &'static str,
    meaning: &'static str,
    set: fn(&mut Layer, Sourced<String>) -> Result<()>,
) -> EnvVar {
    EnvVar {
        name,
        key,
        meaning,
        fallback: false,
        set,
    }
}

/// A fallback variable, read only when the primary one for `key` is not set.
const fn fallback(
    name: &'static str,
    key: &'static str,
    meaning: &'static str,
    set: fn(&mut Layer, Sourced<String>) -> Result<()>,
) -> EnvVar {
    EnvVar {
        name,
        key,
        meaning,
        fallback: true,
        set,
    }
}

/// Every environment variable nodewright reads, with the key it overrides. The environment wins
/// over the file; a `NODEWRIGHT_` variable wins over its fallback; an empty value counts as unset.
pub static ENV_VARS: &[EnvVar] = &[
    var(
        "NODEWRIGHT_CLUSTER",
        "cluster",
        "the cluster's name: 1-40 of a-z 0-9 -, starting with a letter",
        text!(cluster),
    ),
    var(
        "NODEWRIGHT_AZURE_SUBSCRIPTION_ID",
        "azure.subscription_id",
        "the Azure subscription the cluster's machines live in",
        text!(azure.subscription_id),
    ),
    var(
        "NODEWRIGHT_AZURE_RESOURCE_GROUP",
        "azure.resource_group",
        "the resource group of the machines, NICs and disks",
        text!(azure.resource_group),
    ),
    var(
        "NODEWRIGHT_AZURE_LOCATION",
        "azure.location",
        "the Azure region, e.g. westeurope",
        text!(azure.location),
    ),
    var(
        "NODEWRIGHT_ARM_ENDPOINT",
        "azure.arm_endpoint",
        "the Azure Resource Manager endpoint (the sandbox's URL on the local stack)",
        text!(azure.arm_endpoint),
    ),
    var(
        "NODEWRIGHT_KEYVAULT_ENDPOINT",
        "azure.key_vault_endpoint",
        "where Key Vault secrets are read instead of their vault's host: <endpoint>/<vault>/secrets/... (the sandbox, a private endpoint)",
        text!(azure.key_vault_endpoint),
    ),
    var(
        "NODEWRIGHT_ARM_TOKEN_SCOPE",
        "azure.token_scope",
        "the scope ARM tokens are requested for (sovereign clouds)",
        text!(azure.token_scope),
    ),
    var(
        "NODEWRIGHT_ARM_WRITES_PER_SECOND",
        "azure.arm_writes_per_second",
        "server-enforced rate of ARM writes for the whole deployment",
        parsed!(number, azure.arm_writes_per_second),
    ),
    var(
        "NODEWRIGHT_AZURE_SANDBOX",
        "azure.sandbox",
        "true when the ARM/Key Vault endpoints are nodewright-sandbox: allows http:// and a static token at a non-loopback address",
        parsed!(boolean, azure.sandbox),
    ),
    var(
        "NODEWRIGHT_AZURE_AUTH",
        "azure.auth.mode",
        "how the worker gets ARM tokens: static, workload-identity, managed-identity, azure-cli, client-secret",
        parsed!(auth_mode, azure.auth.mode),
    ),
    var(
        "NODEWRIGHT_ARM_TOKEN",
        "azure.auth.token",
        "a fixed ARM bearer token; alone, it selects mode static (the sandbox)",
        parsed!(secret, azure.auth.token),
    ),
    var(
        "NODEWRIGHT_KEYVAULT_TOKEN",
        "azure.auth.key_vault_token",
        "a fixed Key Vault bearer token (mode static; default: the ARM token)",
        parsed!(secret, azure.auth.key_vault_token),
    ),
    var(
        "NODEWRIGHT_AZURE_TENANT_ID",
        "azure.auth.tenant_id",
        "the Entra tenant of the service principal (client-secret)",
        text!(azure.auth.tenant_id),
    ),
    var(
        "NODEWRIGHT_AZURE_CLIENT_ID",
        "azure.auth.client_id",
        "the application id (client-secret) or user-assigned identity (managed-identity)",
        text!(azure.auth.client_id),
    ),
    var(
        "NODEWRIGHT_AZURE_CLIENT_SECRET",
        "azure.auth.client_secret",
        "the service principal's secret (client-secret)",
        parsed!(secret, azure.auth.client_secret),
    ),
    var(
        "KUBECONFIG",
        "kubernetes.kubeconfig",
        "the kubeconfig of the cluster the worker manages (default: in-cluster config)",
        text!(kubernetes.kubeconfig),
    ),
    var(
        "NODEWRIGHT_KUBE_CONTEXT",
        "kubernetes.context",
        "the kubeconfig context to use (default: its current context)",
        text!(kubernetes.context),
    ),
    var(
        "NODEWRIGHT_IDENTITY_NAMESPACE",
        "kubernetes.identity_namespace",
        "the namespace of the cluster's identity ConfigMap nodewright-cluster (default: nodewright)",
        text!(kubernetes.identity_namespace),
    ),
    fallback(
        "TEMPORAL_ADDRESS",
        "temporal.address",
        "the Temporal CLI's name for the frontend address",
        text!(temporal.address),
    ),
    var(
        "NODEWRIGHT_TEMPORAL_ADDRESS",
        "temporal.address",
        "Temporal frontend, host:port or URL",
        text!(temporal.address),
    ),
    fallback(
        "TEMPORAL_NAMESPACE",
        "temporal.namespace",
        "the Temporal CLI's name for the namespace",
        text!(temporal.namespace),
    ),
    var(
        "NODEWRIGHT_TEMPORAL_NAMESPACE",
        "temporal.namespace",
        "Temporal namespace",
        text!(temporal.namespace),
    ),
    var(
        "NODEWRIGHT_TASK_QUEUE",
        "temporal.task_queue",
        "task queue the workers poll (default: nodewright-<cluster>)",
        text!(temporal.task_queue),
    ),
    fallback(
        "TEMPORAL_API_KEY",
        "temporal.api_key",
        "the Temporal CLI's name for the API key",
        parsed!(secret, temporal.api_key),
    ),
    var(
        "NODEWRIGHT_TEMPORAL_API_KEY",
        "temporal.api_key",
        "Temporal API key (Temporal Cloud); turns TLS on",
        parsed!(secret, temporal.api_key),
    ),
    var(
        "NODEWRIGHT_TEMPORAL_API_KEY_FILE",
        "temporal.api_key_file",
        "file holding the Temporal API key (a mounted Secret), re-read when it changes; turns TLS on",
        text!(temporal.api_key_file),
    ),
    var(
        "NODEWRIGHT_ENCRYPTION_KEYS_FILE",
        "temporal.encryption_keys_file",
        "file of payload encryption keys (id=base64 per line, the first encrypts); turns encryption on",
        text!(temporal.encryption_keys_file),
    ),
    var(
        "NODEWRIGHT_ENCRYPTION_KEYS",
        "temporal.encryption_keys",
        "payload encryption keys as text (id=base64 per line); turns encryption on",
        parsed!(secret, temporal.encryption_keys),
    ),
    var(
        "NODEWRIGHT_TEMPORAL_UI",
        "temporal.ui_url",
        "Temporal Web UI base URL, for links to runs",
        text!(temporal.ui_url),
    ),
    var(
        "NODEWRIGHT_TEMPORAL_TLS",
        "temporal.tls.enabled",
        "true or false: TLS to the Temporal frontend (default: on when any TLS setting or an API key is set; plain text to a non-loopback address needs false)",
        parsed!(boolean, temporal.tls.enabled),
    ),
    var(
        "NODEWRIGHT_TEMPORAL_TLS_CA",
        "temporal.tls.server_ca_cert",
        "PEM file of the CA that signed the server's certificate (default: system roots)",
        text!(temporal.tls.server_ca_cert),
    ),
    var(
        "NODEWRIGHT_TEMPORAL_TLS_CERT",
        "temporal.tls.client_cert",
        "PEM file of the client certificate (mTLS; needs the key too)",
        text!(temporal.tls.client_cert),
    ),
    var(
        "NODEWRIGHT_TEMPORAL_TLS_KEY",
        "temporal.tls.client_key",
        "PEM file of the client private key (mTLS; needs the certificate too)",
        text!(temporal.tls.client_key),
    ),
    var(
        "NODEWRIGHT_TEMPORAL_TLS_SERVER_NAME",
        "temporal.tls.server_name",
        "the name to verify the server's certificate against (default: the address's host)",
        text!(temporal.tls.server_name),
    ),
    var(
        "NODEWRIGHT_METRICS_ADDRESS",
        "worker.metrics_address",
        "where the worker serves Prometheus metrics (GET /metrics)",
        parsed!(socket_address, worker.metrics_address),
    ),
    var(
        "NODEWRIGHT_HEALTH_ADDRESS",
        "worker.health_address",
        "where the worker serves GET /healthz and GET /readyz",
        parsed!(socket_address, worker.health_address),
    ),
    var(
        "NODEWRIGHT_LOG_FORMAT",
        "worker.log_format",
        "text or json logs (RUST_LOG filters them)",
        parsed!(log_format, worker.log_format),
    ),
    var(
        "NODEWRIGHT_SHUTDOWN_SECONDS",
        "worker.shutdown_grace",
        "seconds running activities may take to finish after SIGTERM",
        parsed!(seconds, worker.shutdown_grace),
    ),
];

/// The variable that sets the TOML `key` (e.g. `temporal.tls.client_cert` →
/// `NODEWRIGHT_TEMPORAL_TLS_CERT`); fallbacks such as `TEMPORAL_ADDRESS` are not returned.
pub fn env_var(key: &str) -> Option<&'static str> {
    ENV_VARS
        .iter()
        .find(|var| var.key == key && !var.fallback)
        .map(|var| var.name)
}

/// [`env_var`] for messages.
pub(crate) fn env_name(key: &str) -> &'static str {
    env_var(key).unwrap_or("(no environment variable)")
}

/// Lays the set, non-empty variables over `layer`: fallbacks first, so primaries win.
pub(crate) fn apply(layer: &mut Layer, env: &dyn Fn(&str) -> Option<String>) -> Result<()> {
    let fallbacks = ENV_VARS.iter().filter(|var| var.fallback);
    let primaries = ENV_VARS.iter().filter(|var| !var.fallback);
    for var in fallbacks.chain(primaries) {
        let Some(value) = env(var.name).filter(|value| !value.trim().is_empty()) else {
            continue;
        };
        let value = Sourced {
            value: value.trim().to_owned(),
            origin: Origin::Env(var.name),
        };
        (var.set)(layer, value)?;
    }
    Ok(())
}

fn invalid(value: &Sourced<String>, problem: &str) -> ConfigError {
    let setting = match value.origin {
        Origin::Env(name) => name.to_owned(),
        Origin::File => "the config file".to_owned(),
    };
    ConfigError::Invalid {
        setting,
        value: Some(value.value.clone()),
        problem: problem.to_owned(),
    }
}

fn with_value<T>(value: &Sourced<String>, parsed: T) -> Sourced<T> {
    Sourced {
        value: parsed,
        origin: value.origin,
    }
}

fn number(value: Sourced<String>) -> Result<Sourced<f64>> {
    match f64::from_str(&value.value) {
        Ok(number) => Ok(with_value(&value, number)),
        Err(_) => Err(invalid(&value, "is not a number; write e.g. 5 or 2.5")),
    }
}

fn boolean(value: Sourced<String>) -> Result<Sourced<bool>> {
    match value.value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(with_value(&value, true)),
        "false" | "0" | "no" | "off" => Ok(with_value(&value, false)),
        _ => Err(invalid(&value, "is not a boolean; write true or false")),
    }
}

fn seconds(value: Sourced<String>) -> Result<Sourced<HumanDuration>> {
    match u64::from_str(&value.value) {
        Ok(seconds) => Ok(with_value(
            &value,
            HumanDuration(Duration::from_secs(seconds)),
        )),
        Err(_) => Err(invalid(
            &value,
            "is not a whole number of seconds; write e.g. 20",
        )),
    }
}

fn socket_address(value: Sourced<String>) -> Result<Sourced<SocketAddr>> {
    match SocketAddr::from_str(&value.value) {
        Ok(address) => Ok(with_value(&value, address)),
        Err(_) => Err(invalid(
            &value,
            "is not an IP:port address; write e.g. 127.0.0.1:9464 or 0.0.0.0:9464",
        )),
    }
}

fn log_format(value: Sourced<String>) -> Result<Sourced<LogFormat>> {
    match value.value.as_str() {
        "text" => Ok(with_value(&value, LogFormat::Text)),
        "json" => Ok(with_value(&value, LogFormat::Json)),
        _ => Err(invalid(&value, "is not a log format; use text or json")),
    }
}

fn auth_mode(value: Sourced<String>) -> Result<Sourced<AuthMode>> {
    match AuthMode::from_str(&value.value) {
        Ok(mode) => Ok(with_value(&value, mode)),
        Err(problem) => Err(invalid(&value, &problem)),
    }
}

fn secret(value: Sourced<String>) -> Result<Sourced<Secret>> {
    Ok(Sourced {
        value: Secret::new(value.value),
        origin: value.origin,
    })
}
