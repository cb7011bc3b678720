//! Why a configuration was refused. Every message names the setting (its TOML key and its
//! environment variable) and says how to fix it.

use crate::InvalidName;

/// A configuration that cannot be used. None of these is retryable: the operator fixes the file
/// or the environment and restarts.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is not TOML, has a key nodewright does not know, or a value of the wrong type.
    #[error("{file}{}: {problem}", location.map(|(line, column)| format!(":{line}:{column}")).unwrap_or_default())]
    ParseFile {
        /// The file's name, as given to the loader.
        file: String,
        /// The line and column (1-based) of what was refused, when known.
        location: Option<(usize, usize)>,
        /// What the TOML parser refused, e.g. "unknown field `adress`, expected one of ...".
        problem: String,
    },
    /// A required setting has no value in the file nor in the environment.
    #[error("{}", missing_message(key, env, file.as_deref()))]
    Missing {
        /// The TOML key, e.g. `azure.subscription_id`.
        key: &'static str,
        /// The environment variable that sets it, e.g. `NODEWRIGHT_AZURE_SUBSCRIPTION_ID`.
        env: &'static str,
        /// The config file's name, when one was read.
        file: Option<String>,
    },
    /// A setting has a value nodewright cannot use. Secrets are never quoted.
    #[error("{setting}: {} {problem}", value.as_deref().map_or_else(|| "the value".to_owned(), crate::text::quoted))]
    Invalid {
        /// Where the value came from: `NODEWRIGHT_…`, or `` `key` in <file> ``.
        setting: String,
        /// The value as given (`None` for secrets).
        value: Option<String>,
        /// What is wrong with it and what to do instead.
        problem: String,
    },
    /// Two settings contradict each other, or one needs another that is missing.
    #[error("{0}")]
    Inconsistent(String),
    /// The cluster name is not a valid name.
    #[error(transparent)]
    ClusterName(#[from] InvalidName),
}

/// `Result` with [`ConfigError`].
pub type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// "`azure.subscription_id` is not set: …", pointing at both places it can be set.
fn missing_message(key: &str, env: &str, file: Option<&str>) -> String {
    let (place, name) = match key.rsplit_once('.') {
        Some((section, name)) => (format!("under [{section}] in"), name),
        None => ("at the top of".to_owned(), key),
    };
    match file {
        Some(file) => format!(
            "`{key}` is not set: add `{name} = ...` {place} {file}, or set the environment variable {env}"
        ),
        None => format!(
            "`{key}` is not set: set the environment variable {env}, or add `{name} = ...` {place} a config file given with --config FILE or NODEWRIGHT_CONFIG"
        ),
    }
}
