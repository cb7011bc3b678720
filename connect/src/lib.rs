//! How nodewright's binaries reach Temporal, shared by the worker, the CLI and the tests:
//! plaintext, TLS, mTLS or an API key, and the payload [`codec`] that encrypts what they send.
//!
//! This is network and file I/O, so it lives outside `nodewright-workflows`, whose code must
//! stay deterministic.
//!
//! [`TemporalSettings::from_config`] turns the configured [`TemporalConfig`] into settings,
//! reading the PEM files and the API key file through a function the binary passes in (file
//! reading stays at the binary's edge). [`TemporalSettings::connection_options`] is pure, so the
//! URL and TLS choices are unit-tested without a server.
//!
//! The client certificate and the CA are handed to the Temporal client as [`live_tls`] objects it
//! asks at every handshake, and [`reload::CredentialReload`] re-reads their files (and the API key
//! file) when they change, so rotated credentials are used without a restart.

pub mod codec;
pub mod live_tls;
pub mod reload;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use nodewright_model::config::{EncryptionKeys, TemporalConfig, env_var};
use nodewright_model::text::quoted;
use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions, TlsOptions};
use temporalio_common::data_converters::{
    DataConverter, DefaultFailureConverter, PayloadConverter,
};
use url::Url;

use crate::codec::{EncryptionCodec, KeyRing, KeyRingError};
use live_tls::{LiveClientCert, LiveServerCa, TlsMaterialError};

/// How long establishing the TCP/TLS connection may take before `connect` gives up.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the Temporal frontend is and how to talk to it.
#[derive(Clone)]
pub struct TemporalSettings {
    /// `host:port` (the `TEMPORAL_ADDRESS` convention) or a full URL.
    pub address: String,
    /// The Temporal namespace.
    pub namespace: String,
    /// An API key; when set, the connection uses TLS.
    pub api_key: Option<String>,
    /// The identity the server records for this client or worker.
    pub identity: String,
    /// TLS settings; `None` means plaintext, unless an API key or an `https://` address asks for
    /// TLS (then with the system's roots).
    pub tls: Option<TlsSettings>,
    /// The payload encryption keys; `None` sends payloads as they are.
    pub encryption: Option<Arc<KeyRing>>,
}

/// TLS to the Temporal frontend, with the PEM files already read and checked. The CA and the
/// client certificate are shared with the Temporal client, which asks them at every handshake:
/// replacing their contents (see [`reload`]) changes what new connections use.
#[derive(Clone, Default)]
pub struct TlsSettings {
    /// The CA that signed the server's certificate; `None` trusts the system's roots.
    pub server_ca: Option<Arc<LiveServerCa>>,
    /// The client's certificate and key, for mTLS.
    pub client_identity: Option<Arc<LiveClientCert>>,
    /// The name the server's certificate must carry, when not the address's host.
    pub server_name: Option<String>,
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The address is not `host:port` or a URL.
    #[error(
        "Temporal address {} is not host:port or a URL; set temporal.address (NODEWRIGHT_TEMPORAL_ADDRESS or TEMPORAL_ADDRESS), e.g. 127.0.0.1:7233",
        quoted(address)
    )]
    InvalidAddress {
        /// The address as configured.
        address: String,
        /// Why it does not parse.
        #[source]
        source: url::ParseError,
    },
    /// A configured PEM file could not be read.
    #[error("cannot read {path} given as `{key}` ({env}): fix the path or the file's permissions")]
    ReadPem {
        /// The TOML key, e.g. `temporal.tls.client_cert`.
        key: &'static str,
        /// Its environment variable.
        env: &'static str,
        /// The path as configured.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A configured file is not PEM.
    #[error("{path} given as `{key}` ({env}) is not PEM: expected a \"-----BEGIN ...\" block")]
    NotPem {
        /// The TOML key.
        key: &'static str,
        /// Its environment variable.
        env: &'static str,
        /// The path as configured.
        path: String,
    },
    /// A PEM file is not usable TLS material (no certificate, a key of another certificate).
    #[error("{path} given as `{key}` ({env}): {source}; fix the file")]
    BadTls {
        /// The TOML key.
        key: &'static str,
        /// Its environment variable.
        env: &'static str,
        /// The path(s) as configured.
        path: String,
        /// What is wrong.
        #[source]
        source: TlsMaterialError,
    },
    /// The API key file could not be read, or is empty.
    #[error(
        "cannot use the Temporal API key file {path} given as `temporal.api_key_file` (NODEWRIGHT_TEMPORAL_API_KEY_FILE): {problem}"
    )]
    ApiKeyFile {
        /// The path as configured.
        path: String,
        /// What is wrong (never the key).
        problem: String,
    },
    /// The server did not answer.
    #[error(
        "could not reach Temporal at {address}; is the server running (dev/stack status), and do temporal.address and the TLS settings match it?"
    )]
    Unreachable {
        /// The address tried.
        address: String,
        /// The transport error.
        #[source]
        source: temporalio_client::errors::ClientConnectError,
    },
    /// The configured encryption key file could not be read.
    #[error(
        "cannot read the payload encryption keys {path} given as `temporal.encryption_keys_file` (NODEWRIGHT_ENCRYPTION_KEYS_FILE): fix the path or the file's permissions"
    )]
    ReadKeys {
        /// The path as configured.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The encryption keys are not a key ring (the message never shows a key).
    #[error("{0}")]
    Keys(#[from] KeyRingError),
    /// The client could not be built over the connection.
    #[error(
        "could not create a Temporal client for namespace {}",
        quoted(namespace)
    )]
    Client {
        /// The namespace.
        namespace: String,
        /// The cause.
        #[source]
        source: temporalio_client::errors::ClientNewError,
    },
}

impl TemporalSettings {
    /// Plaintext settings for `address` and `namespace`, as on the local stack.
    pub fn plaintext(
        address: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            address: address.into(),
            namespace: namespace.into(),
            api_key: None,
            identity: identity.into(),
            tls: None,
            encryption: None,
        }
    }

    /// Settings for the configured Temporal, reading each configured PEM file with `read_file`
    /// (`std::fs::read` in the binaries). Errors name the file, its key and its variable.
    pub fn from_config(
        config: &TemporalConfig,
        identity: impl Into<String>,
        read_file: impl Fn(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Result<Self, ConnectError> {
        let read = |path: &PathBuf, key: &'static str| read_pem(path, key, &read_file);
        let tls = match &config.tls {
            None => None,
            Some(tls) => Some(TlsSettings {
                server_ca: tls
                    .server_ca_cert
                    .as_ref()
                    .map(|path| {
                        let key = "temporal.tls.server_ca_cert";
                        LiveServerCa::from_pem(&read(path, key)?)
                            .map(Arc::new)
                            .map_err(|source| bad_tls(key, path.display().to_string(), source))
                    })
                    .transpose()?,
                client_identity: tls
                    .client_certificate
                    .as_ref()
                    .map(|files| {
                        let cert = read(&files.cert, "temporal.tls.client_cert")?;
                        let key = read(&files.key, "temporal.tls.client_key")?;
                        LiveClientCert::from_pem(&cert, &key)
                            .map(Arc::new)
                            .map_err(|source| {
                                bad_tls(
                                    "temporal.tls.client_cert",
                                    format!(
                                        "{} (key {})",
                                        files.cert.display(),
                                        files.key.display()
                                    ),
                                    source,
                                )
                            })
                    })
                    .transpose()?,
                server_name: tls.server_name.clone(),
            }),
        };
        let api_key = match (&config.api_key, &config.api_key_file) {
            (Some(key), _) => Some(key.expose().to_owned()),
            (None, Some(path)) => Some(read_api_key(path, &read_file)?),
            (None, None) => None,
        };
        let encryption = match &config.encryption_keys {
            None => None,
            Some(EncryptionKeys::Inline(text)) => Some(KeyRing::parse(
                text.expose(),
                "NODEWRIGHT_ENCRYPTION_KEYS (temporal.encryption_keys)",
            )?),
            Some(EncryptionKeys::File(path)) => {
                let shown = path.display().to_string();
                let bytes = read_file(path).map_err(|source| ConnectError::ReadKeys {
                    path: shown.clone(),
                    source,
                })?;
                Some(KeyRing::parse(&String::from_utf8_lossy(&bytes), &shown)?)
            }
        };
        Ok(Self {
            address: config.address.clone(),
            namespace: config.namespace.clone(),
            api_key,
            identity: identity.into(),
            tls,
            encryption: encryption.map(Arc::new),
        })
    }

    /// How payloads are converted: JSON, encrypted when keys are configured; without keys an
    /// encrypted payload is refused with a message naming its key and the setting. Failure
    /// messages stay plain (readable in the UI without the key): nodewright never puts a secret
    /// in one.
    pub fn data_converter(&self) -> DataConverter {
        let codec = match &self.encryption {
            None => EncryptionCodec::without_keys(),
            Some(keys) => EncryptionCodec::new(Arc::clone(keys)),
        };
        DataConverter::new(
            PayloadConverter::default(),
            DefaultFailureConverter::default(),
            codec,
        )
    }

    /// Whether the connection uses TLS: TLS settings, an API key or an `https://` address.
    pub fn uses_tls(&self) -> bool {
        self.tls.is_some() || self.api_key.is_some() || self.address.starts_with("https://")
    }

    /// The frontend URL: `address` with `https://` (TLS) or `http://` when it has no scheme.
    pub fn url(&self) -> Result<Url, ConnectError> {
        let with_scheme = if self.address.contains("://") {
            self.address.clone()
        } else if self.uses_tls() {
            format!("https://{}", self.address)
        } else {
            format!("http://{}", self.address)
        };
        Url::from_str(&with_scheme).map_err(|source| ConnectError::InvalidAddress {
            address: self.address.clone(),
            source,
        })
    }

    /// The SDK's TLS options, `None` for plaintext.
    pub fn tls_options(&self) -> Option<TlsOptions> {
        if !self.uses_tls() {
            return None;
        }
        let tls = self.tls.clone().unwrap_or_default();
        Some(
            TlsOptions::builder()
                .maybe_server_cert_verifier(
                    tls.server_ca
                        .map(|ca| -> Arc<dyn rustls::client::danger::ServerCertVerifier> { ca }),
                )
                .maybe_domain(tls.server_name)
                .maybe_client_cert_resolver(
                    tls.client_identity
                        .map(|cert| -> Arc<dyn rustls::client::ResolvesClientCert> { cert }),
                )
                .build(),
        )
    }

    /// The SDK's connection options: URL, identity, API key, TLS and [`CONNECT_TIMEOUT`].
    pub fn connection_options(&self) -> Result<ConnectionOptions, ConnectError> {
        Ok(ConnectionOptions::new(self.url()?)
            .identity(self.identity.clone())
            .maybe_api_key(self.api_key.clone())
            .maybe_tls_options(self.tls_options())
            .connect_timeout(CONNECT_TIMEOUT)
            .build())
    }

    /// Connects and returns a client for the namespace.
    pub async fn connect(&self) -> Result<Client, ConnectError> {
        let connection = Connection::connect(self.connection_options()?)
            .await
            .map_err(|source| ConnectError::Unreachable {
                address: self.address.clone(),
                source,
            })?;
        Client::new(
            connection,
            ClientOptions::new(self.namespace.clone())
                .data_converter(self.data_converter())
                .build(),
        )
        .map_err(|source| ConnectError::Client {
            namespace: self.namespace.clone(),
            source,
        })
    }
}

fn bad_tls(key: &'static str, path: String, source: TlsMaterialError) -> ConnectError {
    ConnectError::BadTls {
        key,
        env: env_var(key).unwrap_or("no variable"),
        path,
        source,
    }
}

/// Reads the API key file: its text without surrounding white space, which must not be empty.
pub(crate) fn read_api_key(
    path: &Path,
    read_file: &impl Fn(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<String, ConnectError> {
    let problem = |problem: String| ConnectError::ApiKeyFile {
        path: path.display().to_string(),
        problem,
    };
    let bytes = read_file(path)
        .map_err(|error| problem(format!("{error}; fix the path or the file's permissions")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| problem("it is not UTF-8 text; write the key alone in it".to_owned()))?;
    let key = text.trim();
    if key.is_empty() {
        return Err(problem("it is empty; write the key in it".to_owned()));
    }
    Ok(key.to_owned())
}

/// Reads one PEM file and checks that it looks like PEM.
fn read_pem(
    path: &Path,
    key: &'static str,
    read_file: &impl Fn(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<Vec<u8>, ConnectError> {
    let env = env_var(key).unwrap_or("no variable");
    let shown = path.display().to_string();
    let bytes = read_file(path).map_err(|source| ConnectError::ReadPem {
        key,
        env,
        path: shown.clone(),
        source,
    })?;
    if !bytes.windows(11).any(|window| window == b"-----BEGIN ") {
        return Err(ConnectError::NotPem {
            key,
            env,
            path: shown,
        });
    }
    Ok(bytes)
}

impl fmt::Debug for TemporalSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TemporalSettings")
            .field("address", &self.address)
            .field("namespace", &self.namespace)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("identity", &self.identity)
            .field("tls", &self.tls)
            .field("encryption", &self.encryption)
            .finish()
    }
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field("server_ca", &self.server_ca)
            .field("client_identity", &self.client_identity)
            .field("server_name", &self.server_name)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use nodewright_model::config::{ClientCertificate, Secret, TemporalTls};

    use super::*;

    const CA: &[u8] = include_bytes!("../testdata/ca.pem");
    const CERT: &[u8] = include_bytes!("../testdata/client.pem");
    const KEY: &[u8] = include_bytes!("../testdata/client.key");

    fn settings(address: &str, api_key: Option<&str>) -> TemporalSettings {
        TemporalSettings {
            api_key: api_key.map(str::to_owned),
            ..TemporalSettings::plaintext(address, "default", "test")
        }
    }

    fn config(address: &str, tls: Option<TemporalTls>, api_key: Option<&str>) -> TemporalConfig {
        TemporalConfig {
            address: address.to_owned(),
            namespace: "ns".to_owned(),
            task_queue: "nodewright".to_owned(),
            api_key: api_key.map(Secret::new),
            api_key_file: None,
            ui_url: "http://127.0.0.1:8233".to_owned(),
            tls,
            encryption_keys: None,
        }
    }

    /// A file system of three PEM files and one that is not PEM.
    fn files(path: &Path) -> std::io::Result<Vec<u8>> {
        let files: HashMap<&str, &[u8]> = HashMap::from([
            ("ca.pem", CA),
            ("client.pem", CERT),
            ("client.key", KEY),
            ("not.pem", b"hello" as &[u8]),
        ]);
        files
            .get(path.to_str().unwrap_or_default())
            .map(|bytes| bytes.to_vec())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }

    fn mtls(cert: &str, key: &str) -> TemporalTls {
        TemporalTls {
            server_ca_cert: Some(PathBuf::from("ca.pem")),
            client_certificate: Some(ClientCertificate {
                cert: PathBuf::from(cert),
                key: PathBuf::from(key),
            }),
            server_name: Some("temporal.internal".to_owned()),
        }
    }

    #[test]
    fn addresses_get_a_scheme_matching_their_security() {
        let table = [
            ("127.0.0.1:7233", None, "http://127.0.0.1:7233/"),
            (
                "ns.tmprl.cloud:7233",
                Some("key"),
                "https://ns.tmprl.cloud:7233/",
            ),
            (
                "https://temporal.example:7233",
                None,
                "https://temporal.example:7233/",
            ),
        ];
        for (address, key, expected) in table {
            let url = settings(address, key).url().expect("valid address");
            assert_eq!(url.as_str(), expected, "{address}");
        }
        let tls_only = TemporalSettings {
            tls: Some(TlsSettings::default()),
            ..settings("temporal.internal:7233", None)
        };
        assert_eq!(
            tls_only.url().expect("valid").as_str(),
            "https://temporal.internal:7233/"
        );
    }

    #[test]
    fn a_bad_address_names_the_variable_to_fix() {
        let err = settings("http://[::1", None).url().expect_err("invalid");
        assert!(err.to_string().contains("TEMPORAL_ADDRESS"), "{err}");
    }

    #[test]
    fn plaintext_has_no_tls_options_and_an_api_key_gets_system_roots() {
        assert!(settings("127.0.0.1:7233", None).tls_options().is_none());
        let options = settings("ns.tmprl.cloud:7233", Some("key"))
            .tls_options()
            .expect("an API key implies TLS");
        assert_eq!(options.server_root_ca_cert, None);
        assert!(options.client_tls_options.is_none());
        assert_eq!(options.domain, None);
        let connection = settings("ns.tmprl.cloud:7233", Some("key"))
            .connection_options()
            .expect("valid");
        assert_eq!(connection.api_key.as_deref(), Some("key"));
        assert!(connection.tls_options.is_some());
        assert_eq!(connection.connect_timeout, Some(CONNECT_TIMEOUT));
    }

    #[test]
    fn mtls_settings_read_every_pem_and_reach_the_sdk_options() {
        let settings = TemporalSettings::from_config(
            &config(
                "temporal.internal:7233",
                Some(mtls("client.pem", "client.key")),
                None,
            ),
            "worker@test",
            files,
        )
        .expect("valid");
        let options = settings.connection_options().expect("valid");
        assert_eq!(options.target.as_str(), "https://temporal.internal:7233/");
        assert_eq!(options.identity, "worker@test");
        let tls = options.tls_options.expect("TLS");
        // The CA and the client certificate go in as objects the client asks at every
        // handshake (so that they reload), not as static PEM.
        assert_eq!(tls.server_root_ca_cert, None);
        assert!(tls.server_cert_verifier.is_some());
        assert_eq!(tls.domain.as_deref(), Some("temporal.internal"));
        assert!(tls.client_tls_options.is_none());
        let resolver = tls.client_cert_resolver.expect("mTLS");
        let presented = resolver.resolve(&[], &[]).expect("a certificate");
        let expected = settings
            .tls
            .as_ref()
            .and_then(|tls| tls.client_identity.as_ref())
            .expect("mTLS")
            .certificate_chain();
        assert_eq!(presented.cert, expected);
        let debug = format!("{settings:?}");
        assert!(
            !debug.contains("PRIVATE KEY") && debug.contains("<redacted>"),
            "{debug}"
        );
    }

    #[test]
    fn plaintext_config_builds_plaintext_settings_and_keeps_the_api_key() {
        let plain =
            TemporalSettings::from_config(&config("127.0.0.1:7233", None, None), "w", files)
                .expect("valid");
        // Settings hold a key ring, which has no equality: compare what they show.
        assert_eq!(
            format!("{plain:?}"),
            format!(
                "{:?}",
                TemporalSettings::plaintext("127.0.0.1:7233", "ns", "w")
            )
        );
        assert!(!plain.uses_tls());
        let keyed = TemporalSettings::from_config(
            &config(
                "ns.tmprl.cloud:7233",
                Some(TemporalTls::default()),
                Some("k"),
            ),
            "w",
            files,
        )
        .expect("valid");
        assert_eq!(keyed.api_key.as_deref(), Some("k"));
        assert!(!format!("{keyed:?}").contains("\"k\""));
    }

    #[test]
    fn unreadable_or_non_pem_files_are_named_with_their_key_and_variable() {
        let table = [
            (
                mtls("missing.pem", "client.key"),
                "cannot read missing.pem given as `temporal.tls.client_cert` (NODEWRIGHT_TEMPORAL_TLS_CERT)",
            ),
            (
                mtls("client.pem", "not.pem"),
                "not.pem given as `temporal.tls.client_key` (NODEWRIGHT_TEMPORAL_TLS_KEY) is not PEM",
            ),
            (
                TemporalTls {
                    server_ca_cert: Some(PathBuf::from("nope/ca.pem")),
                    ..TemporalTls::default()
                },
                "cannot read nope/ca.pem given as `temporal.tls.server_ca_cert` (NODEWRIGHT_TEMPORAL_TLS_CA)",
            ),
        ];
        for (tls, expected) in table {
            let error =
                TemporalSettings::from_config(&config("t:7233", Some(tls), None), "w", files)
                    .expect_err("refused");
            assert!(error.to_string().starts_with(expected), "{error}");
        }
    }

    #[test]
    fn encryption_keys_come_from_the_file_or_the_text_and_a_bad_one_names_its_source() {
        use base64::Engine;
        let key = base64::engine::general_purpose::STANDARD.encode([3_u8; 32]);
        let from_file = TemporalConfig {
            encryption_keys: Some(EncryptionKeys::File(PathBuf::from("/keys/nodewright"))),
            ..config("127.0.0.1:7233", None, None)
        };
        let keys = format!("2026-11={key}\n");
        let settings = TemporalSettings::from_config(&from_file, "test", |path| {
            assert_eq!(path, Path::new("/keys/nodewright"));
            Ok(keys.clone().into_bytes())
        })
        .expect("settings");
        assert_eq!(
            settings.encryption.as_deref().map(KeyRing::current),
            Some("2026-11")
        );
        let inline = TemporalConfig {
            encryption_keys: Some(EncryptionKeys::Inline(Secret::new("k1=AAAA"))),
            ..config("127.0.0.1:7233", None, None)
        };
        let error = TemporalSettings::from_config(&inline, "test", |_| Ok(Vec::new()))
            .expect_err("a 3-byte key");
        assert_eq!(
            error.to_string(),
            "NODEWRIGHT_ENCRYPTION_KEYS (temporal.encryption_keys) line 1: the key of \"k1\" is 3 bytes, not 32; write `<key id>=<base64 of 32 random bytes>`, the id of letters, digits, '.', '_' or '-' (at most 64)"
        );
        let unreadable = TemporalSettings::from_config(&from_file, "test", |_| {
            Err(std::io::Error::from(std::io::ErrorKind::NotFound))
        })
        .expect_err("no file");
        assert!(
            unreadable
                .to_string()
                .starts_with("cannot read the payload encryption keys /keys/nodewright"),
            "{unreadable}"
        );
    }
}
