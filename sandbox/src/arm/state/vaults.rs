//! Key Vault's stored secrets: every vault's secrets and their versions (served by
//! `key_vault.rs`, persisted with the rest of the state).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The secrets of every vault, by lower-cased vault name, then lower-cased secret name (Key Vault
/// names are case-insensitive).
pub type Vaults = BTreeMap<String, BTreeMap<String, StoredSecret>>;

/// One secret and its versions, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredSecret {
    /// The name as first set.
    pub name: String,
    /// Every version, oldest first; the last is the latest.
    pub versions: Vec<SecretVersion>,
}

/// One version of a secret.
#[derive(Clone, Serialize, Deserialize)]
pub struct SecretVersion {
    /// 32 hex digits.
    pub version: String,
    /// The value.
    pub value: String,
    /// `contentType`, when set.
    #[serde(default)]
    pub content_type: Option<String>,
    /// Whether it may be read.
    pub enabled: bool,
    /// When it was set.
    pub created: DateTime<Utc>,
    /// Tags.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

impl std::fmt::Debug for SecretVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretVersion")
            .field("version", &self.version)
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}
