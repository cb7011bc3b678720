//! Re-reading Temporal credentials when their files change: the client certificate and key, the
//! server CA and the API key file. The caller (the worker) calls [`CredentialReload::check`]
//! every [`RELOAD_INTERVAL`]; each file's content hash says whether it changed. A file that
//! cannot be read or does not make usable credentials is reported and the credentials in use are
//! kept; its next change is tried again. No outcome carries file contents.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nodewright_model::config::TemporalConfig;

use super::live_tls::{LiveClientCert, LiveServerCa};
use super::{TemporalSettings, read_api_key};

/// How often the worker looks at the credential files.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(30);

/// What one file held when last looked at: a hash of its content, or that it was unreadable.
type Seen = Option<u64>;

/// One watched file.
struct Watched {
    path: PathBuf,
    seen: Seen,
}

impl Watched {
    fn new(path: &Path, read_file: &dyn Fn(&Path) -> std::io::Result<Vec<u8>>) -> Self {
        Self {
            path: path.to_owned(),
            seen: fingerprint(path, read_file),
        }
    }

    /// Whether the file changed since last time (recording what it holds now).
    fn changed(&mut self, read_file: &dyn Fn(&Path) -> std::io::Result<Vec<u8>>) -> bool {
        let now = fingerprint(&self.path, read_file);
        let changed = now != self.seen;
        self.seen = now;
        changed
    }
}

fn fingerprint(path: &Path, read_file: &dyn Fn(&Path) -> std::io::Result<Vec<u8>>) -> Seen {
    read_file(path).ok().map(|bytes| {
        let mut hasher = DefaultHasher::new();
        bytes.hash(&mut hasher);
        hasher.finish()
    })
}

/// What a check did about one credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// New credentials are in use (from the next TLS handshake, or the next call for an API key).
    Reloaded {
        /// Which credential: "client certificate", "server CA" or "API key".
        what: &'static str,
        /// The file(s) it came from.
        files: String,
    },
    /// The changed files are not usable; the credentials in use are kept.
    Refused {
        /// Which credential.
        what: &'static str,
        /// The file(s), their setting and what is wrong, for people (never their contents).
        problem: String,
    },
}

/// Sets the API key on the live connection (`Connection::set_api_key` in the worker).
pub type SetApiKey = Box<dyn Fn(String) + Send + Sync>;

/// The credential files of one connection and the live objects they feed.
pub struct CredentialReload {
    client: Option<(Watched, Watched, Arc<LiveClientCert>)>,
    ca: Option<(Watched, Arc<LiveServerCa>)>,
    api_key: Option<(Watched, SetApiKey)>,
}

impl CredentialReload {
    /// Watches the files `config` names, feeding the live objects of `settings` (made from the
    /// same config) and `set_api_key`. The files' current contents are the baseline.
    pub fn new(
        config: &TemporalConfig,
        settings: &TemporalSettings,
        set_api_key: SetApiKey,
        read_file: &dyn Fn(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Self {
        let tls_files = config.tls.as_ref();
        let tls_live = settings.tls.as_ref();
        let client = tls_files
            .and_then(|tls| tls.client_certificate.as_ref())
            .zip(tls_live.and_then(|tls| tls.client_identity.clone()))
            .map(|(files, live)| {
                (
                    Watched::new(&files.cert, read_file),
                    Watched::new(&files.key, read_file),
                    live,
                )
            });
        let ca = tls_files
            .and_then(|tls| tls.server_ca_cert.as_ref())
            .zip(tls_live.and_then(|tls| tls.server_ca.clone()))
            .map(|(path, live)| (Watched::new(path, read_file), live));
        let api_key = config
            .api_key_file
            .as_ref()
            .map(|path| (Watched::new(path, read_file), set_api_key));
        Self {
            client,
            ca,
            api_key,
        }
    }

    /// Whether any file is watched.
    pub fn is_empty(&self) -> bool {
        self.client.is_none() && self.ca.is_none() && self.api_key.is_none()
    }

    /// The watched files, for the start-up log.
    pub fn files(&self) -> Vec<String> {
        let mut files = Vec::new();
        if let Some((cert, key, _)) = &self.client {
            files.push(cert.path.display().to_string());
            files.push(key.path.display().to_string());
        }
        if let Some((ca, _)) = &self.ca {
            files.push(ca.path.display().to_string());
        }
        if let Some((key, _)) = &self.api_key {
            files.push(key.path.display().to_string());
        }
        files
    }

    /// Looks at every watched file and reloads the credentials whose files changed.
    pub fn check(
        &mut self,
        read_file: &dyn Fn(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Vec<ReloadOutcome> {
        let mut outcomes = Vec::new();
        if let Some((cert, key, live)) = &mut self.client {
            // Both are looked at (no short-circuit), so each records what it holds now.
            let cert_changed = cert.changed(read_file);
            let key_changed = key.changed(read_file);
            if cert_changed || key_changed {
                let what = "client certificate";
                let files = format!(
                    "{} and {} (temporal.tls.client_cert, temporal.tls.client_key)",
                    cert.path.display(),
                    key.path.display()
                );
                let result = read_file(&cert.path)
                    .and_then(|cert| Ok((cert, read_file(&key.path)?)))
                    .map_err(|error| format!("cannot read it: {error}"))
                    .and_then(|(cert, key)| {
                        live.replace(&cert, &key).map_err(|error| error.to_string())
                    });
                outcomes.push(outcome(what, files, result));
            }
        }
        if let Some((ca, live)) = &mut self.ca
            && ca.changed(read_file)
        {
            let files = format!("{} (temporal.tls.server_ca_cert)", ca.path.display());
            let result = read_file(&ca.path)
                .map_err(|error| format!("cannot read it: {error}"))
                .and_then(|pem| live.replace(&pem).map_err(|error| error.to_string()));
            outcomes.push(outcome("server CA", files, result));
        }
        if let Some((file, set_api_key)) = &mut self.api_key
            && file.changed(read_file)
        {
            let files = format!("{} (temporal.api_key_file)", file.path.display());
            let result = read_api_key(&file.path, &read_file)
                .map(set_api_key)
                .map_err(|error| error.to_string());
            outcomes.push(outcome("API key", files, result));
        }
        outcomes
    }
}

fn outcome(what: &'static str, files: String, result: Result<(), String>) -> ReloadOutcome {
    match result {
        Ok(()) => ReloadOutcome::Reloaded { what, files },
        Err(problem) => ReloadOutcome::Refused {
            what,
            problem: format!(
                "{files}: {problem}; the {what} in use is kept until the files are fixed"
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use nodewright_model::config::{ClientCertificate, Secret, TemporalTls};

    use super::*;

    const CA: &[u8] = include_bytes!("../testdata/ca.pem");
    const CA2: &[u8] = include_bytes!("../testdata/ca2.pem");
    const CERT: &[u8] = include_bytes!("../testdata/client.pem");
    const KEY: &[u8] = include_bytes!("../testdata/client.key");
    const CERT2: &[u8] = include_bytes!("../testdata/client2.pem");
    const KEY2: &[u8] = include_bytes!("../testdata/client2.key");

    /// Files in memory that a test rewrites between checks.
    #[derive(Default)]
    struct Disk(Mutex<HashMap<PathBuf, Vec<u8>>>);

    impl Disk {
        fn write(&self, path: &str, bytes: &[u8]) {
            self.0
                .lock()
                .expect("not poisoned")
                .insert(PathBuf::from(path), bytes.to_vec());
        }
        fn remove(&self, path: &str) {
            self.0.lock().expect("not poisoned").remove(Path::new(path));
        }
        fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
            self.0
                .lock()
                .expect("not poisoned")
                .get(path)
                .cloned()
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        }
    }

    fn config() -> TemporalConfig {
        TemporalConfig {
            address: "temporal.internal:7233".to_owned(),
            namespace: "ns".to_owned(),
            task_queue: "nodewright".to_owned(),
            api_key: None,
            api_key_file: Some(PathBuf::from("/keys/api")),
            ui_url: "http://127.0.0.1:8233".to_owned(),
            tls: Some(TemporalTls {
                server_ca_cert: Some(PathBuf::from("/tls/ca.crt")),
                client_certificate: Some(ClientCertificate {
                    cert: PathBuf::from("/tls/tls.crt"),
                    key: PathBuf::from("/tls/tls.key"),
                }),
                server_name: None,
            }),
            encryption_keys: None,
        }
    }

    fn presented(settings: &TemporalSettings) -> Vec<u8> {
        settings
            .tls
            .as_ref()
            .and_then(|tls| tls.client_identity.as_ref())
            .expect("mTLS")
            .certificate_chain()[0]
            .to_vec()
    }

    fn der(pem: &[u8]) -> Vec<u8> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        CertificateDer::from_pem_slice(pem)
            .expect("a certificate")
            .to_vec()
    }

    #[test]
    fn changed_files_are_reloaded_and_broken_ones_keep_the_credentials_in_use() {
        let disk = Disk::default();
        disk.write("/tls/ca.crt", CA);
        disk.write("/tls/tls.crt", CERT);
        disk.write("/tls/tls.key", KEY);
        disk.write("/keys/api", b"key-one\n");
        let read = |path: &Path| disk.read(path);
        let settings = TemporalSettings::from_config(&config(), "w", read).expect("valid");
        assert_eq!(settings.api_key.as_deref(), Some("key-one"));
        let keys = Arc::new(Mutex::new(Vec::new()));
        let set_api_key: SetApiKey = Box::new({
            let keys = Arc::clone(&keys);
            move |key| keys.lock().expect("not poisoned").push(key)
        });
        let mut reload = CredentialReload::new(&config(), &settings, set_api_key, &read);
        assert_eq!(
            reload.files(),
            ["/tls/tls.crt", "/tls/tls.key", "/tls/ca.crt", "/keys/api"]
        );

        assert_eq!(reload.check(&read), [], "nothing changed");

        // A rotation: the key first (a mismatched pair, refused), then the certificate.
        disk.write("/tls/tls.key", KEY2);
        let outcomes = reload.check(&read);
        assert!(
            matches!(&outcomes[..], [ReloadOutcome::Refused { what: "client certificate", problem }]
                if problem.contains("/tls/tls.crt and /tls/tls.key") && problem.contains("does not match") && problem.contains("kept")),
            "{outcomes:?}"
        );
        assert_eq!(presented(&settings), der(CERT), "the old pair is kept");
        disk.write("/tls/tls.crt", CERT2);
        assert_eq!(
            reload.check(&read),
            [ReloadOutcome::Reloaded {
                what: "client certificate",
                files: "/tls/tls.crt and /tls/tls.key (temporal.tls.client_cert, temporal.tls.client_key)".to_owned()
            }]
        );
        assert_eq!(presented(&settings), der(CERT2));

        disk.write("/tls/ca.crt", CA2);
        disk.write("/keys/api", b"key-two");
        let outcomes = reload.check(&read);
        assert_eq!(outcomes.len(), 2, "{outcomes:?}");
        assert!(
            outcomes
                .iter()
                .all(|o| matches!(o, ReloadOutcome::Reloaded { .. })),
            "{outcomes:?}"
        );
        assert_eq!(*keys.lock().expect("not poisoned"), ["key-two"]);

        // A removed or emptied file is reported once and the key in use kept.
        disk.remove("/keys/api");
        let outcomes = reload.check(&read);
        assert!(
            matches!(&outcomes[..], [ReloadOutcome::Refused { what: "API key", problem }] if problem.contains("/keys/api")),
            "{outcomes:?}"
        );
        assert_eq!(reload.check(&read), [], "reported once");
        disk.write("/keys/api", b"  \n");
        let outcomes = reload.check(&read);
        assert!(
            matches!(&outcomes[..], [ReloadOutcome::Refused { problem, .. }] if problem.contains("empty")),
            "{outcomes:?}"
        );
        disk.write("/keys/api", b"key-three");
        assert_eq!(reload.check(&read).len(), 1);
        assert_eq!(
            *keys.lock().expect("not poisoned"),
            ["key-two", "key-three"]
        );
        let shown = format!("{:?}", reload.check(&read));
        assert!(!shown.contains("key-"), "{shown}");
    }

    #[test]
    fn an_inline_api_key_and_plain_text_watch_nothing() {
        let plain = TemporalConfig {
            api_key: Some(Secret::new("k")),
            api_key_file: None,
            tls: None,
            ..config()
        };
        let settings =
            TemporalSettings::from_config(&plain, "w", |_| Ok(Vec::new())).expect("valid");
        let reload =
            CredentialReload::new(&plain, &settings, Box::new(|_| ()), &|_| Ok(Vec::new()));
        assert!(reload.is_empty());
    }
}
