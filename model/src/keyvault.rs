//! Azure Key Vault secrets: the secret URI a pool's `bootstrapKeyVaultSecret` names, read
//! strictly ([`SecretUri::parse`], every problem with its fix), and what a data-plane answer
//! means for a caller that may retry ([`classify`]).
//!
//! A secret URI is `https://<vault>.<suffix>/secrets/<name>[/<version>]`, where `<suffix>` is
//! the Key Vault DNS suffix of one of Azure's clouds ([`CLOUD_SUFFIXES`]). Vault names and secret
//! names compare case-insensitively in Azure; they are kept as written.

use std::fmt;

/// The Key Vault DNS suffixes of Azure's clouds: public, China (21Vianet), US Government.
pub const CLOUD_SUFFIXES: [&str; 3] = [
    "vault.azure.net",
    "vault.azure.cn",
    "vault.usgovcloudapi.net",
];

/// The Key Vault data plane's api-version nodewright speaks (the secrets REST spec's latest
/// stable, as `azure_security_keyvault_secrets` 1.0 uses).
pub const API_VERSION: &str = "2025-07-01";

/// The Azure RBAC role that may read a secret's value.
pub const SECRETS_USER_ROLE: &str = "Key Vault Secrets User";

/// The shortest and longest vault name.
const VAULT_NAME_LEN: std::ops::RangeInclusive<usize> = 3..=24;
/// The longest secret name.
const MAX_SECRET_NAME_LEN: usize = 127;
/// The length of a secret version (32 hex digits).
const VERSION_LEN: usize = 32;

/// A parsed, valid secret URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretUri {
    /// The vault's name, e.g. `contoso-boot`.
    pub vault: String,
    /// The cloud's Key Vault DNS suffix, one of [`CLOUD_SUFFIXES`].
    pub suffix: &'static str,
    /// The secret's name.
    pub name: String,
    /// The secret's version; `None` means the latest at each read.
    pub version: Option<String>,
}

/// One thing wrong with a secret URI, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriProblem {
    /// What is wrong, e.g. `is not https`.
    pub problem: String,
    /// What to write instead.
    pub fix: String,
}

impl UriProblem {
    fn new(problem: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            problem: problem.into(),
            fix: fix.into(),
        }
    }
}

/// The form every fix refers to.
const FORM: &str = "https://<vault>.vault.azure.net/secrets/<name>[/<version>]";

impl SecretUri {
    /// Reads `text` as a secret URI; every problem found, each with its fix, when it is not one.
    pub fn parse(text: &str) -> Result<Self, Vec<UriProblem>> {
        let mut problems = Vec::new();
        let rest = match text.get(..8) {
            Some(scheme) if scheme.eq_ignore_ascii_case("https://") => &text[8..],
            _ => {
                problems.push(UriProblem::new(
                    "is not an https:// URL",
                    format!("write the secret's identifier as Azure shows it: {FORM}"),
                ));
                return Err(problems);
            }
        };
        let rest = match rest.find(['?', '#']) {
            Some(at) => {
                problems.push(UriProblem::new(
                    "has a query or a fragment",
                    "remove everything from '?' or '#' on (pin a version in the path instead)",
                ));
                &rest[..at]
            }
            None => rest,
        };
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let parsed_host = host_of(host, &mut problems);
        let parsed_path = path_of(path, &mut problems);
        match (parsed_host, parsed_path) {
            (Some((vault, suffix)), Some((name, version))) if problems.is_empty() => Ok(Self {
                vault,
                suffix,
                name,
                version,
            }),
            _ => Err(problems),
        }
    }

    /// The vault's base URL, `https://<vault>.<suffix>`.
    pub fn vault_url(&self) -> String {
        format!("https://{}.{}", self.vault, self.suffix)
    }

    /// The OAuth scope of the vault's cloud, e.g. `https://vault.azure.net/.default`.
    pub fn token_scope(&self) -> String {
        token_scope(self.suffix)
    }

    /// The path of the secret under a vault's base URL: `secrets/<name>[/<version>]` as
    /// segments.
    pub fn path_segments(&self) -> Vec<&str> {
        let mut segments = vec!["secrets", self.name.as_str()];
        if let Some(version) = &self.version {
            segments.push(version);
        }
        segments
    }
}

/// The OAuth scope of the cloud whose Key Vault DNS suffix is `suffix`.
pub fn token_scope(suffix: &str) -> String {
    format!("https://{suffix}/.default")
}

impl fmt::Display for SecretUri {
    /// The URI, `https://<vault>.<suffix>/secrets/<name>[/<version>]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/secrets/{}", self.vault_url(), self.name)?;
        if let Some(version) = &self.version {
            write!(f, "/{version}")?;
        }
        Ok(())
    }
}

/// The vault name and cloud suffix of `host`, recording problems.
fn host_of(host: &str, problems: &mut Vec<UriProblem>) -> Option<(String, &'static str)> {
    if host.contains(['@', ':']) {
        problems.push(UriProblem::new(
            "has a port or user information in its host",
            format!("write only <vault>.<suffix> as the host: {FORM}"),
        ));
        return None;
    }
    let lower = host.to_ascii_lowercase();
    let Some((vault, suffix)) = CLOUD_SUFFIXES.iter().find_map(|suffix| {
        lower
            .strip_suffix(suffix)
            .and_then(|vault| vault.strip_suffix('.'))
            .map(|_| (&host[..host.len() - suffix.len() - 1], *suffix))
    }) else {
        problems.push(UriProblem::new(
            "is not on a Key Vault host",
            format!(
                "the host must be <vault>.{}, .{} or .{}: {FORM}",
                CLOUD_SUFFIXES[0], CLOUD_SUFFIXES[1], CLOUD_SUFFIXES[2]
            ),
        ));
        return None;
    };
    if !is_vault_name(vault) {
        problems.push(UriProblem::new(
            "does not name a vault Azure allows",
            "a vault name has 3-24 letters, digits and '-', starts with a letter, ends with a \
             letter or digit and has no \"--\" (e.g. contoso-boot)",
        ));
        return None;
    }
    Some((vault.to_owned(), suffix))
}

/// The secret name and version of `path` (without its leading `/`), recording problems.
fn path_of(path: &str, problems: &mut Vec<UriProblem>) -> Option<(String, Option<String>)> {
    let segments: Vec<&str> = path.split('/').collect();
    let (name, version) = match segments.as_slice() {
        [collection, name] if collection.eq_ignore_ascii_case("secrets") => (*name, None),
        [collection, name, version] if collection.eq_ignore_ascii_case("secrets") => {
            (*name, Some(*version))
        }
        _ => {
            problems.push(UriProblem::new(
                "is not a secret's path",
                format!(
                    "the path is /secrets/<name> or /secrets/<name>/<version>, without a trailing '/': {FORM}"
                ),
            ));
            return None;
        }
    };
    let mut fine = true;
    if !is_secret_name(name) {
        problems.push(UriProblem::new(
            "does not name a secret Azure allows",
            "a secret name has 1-127 letters, digits and '-' (e.g. workers-bootstrap)",
        ));
        fine = false;
    }
    if let Some(version) = version
        && !is_version(version)
    {
        problems.push(UriProblem::new(
            "does not end in a secret version",
            "a version is 32 hex digits, as Azure shows it (e.g. 4387e9f3d6e14c459867679a90fd0f79); \
             leave it out to read the latest",
        ));
        fine = false;
    }
    fine.then(|| (name.to_owned(), version.map(str::to_owned)))
}

fn is_vault_name(name: &str) -> bool {
    VAULT_NAME_LEN.contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !name.contains("--")
}

fn is_secret_name(name: &str) -> bool {
    (1..=MAX_SECRET_NAME_LEN).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn is_version(version: &str) -> bool {
    version.len() == VERSION_LEN && version.bytes().all(|b| b.is_ascii_hexdigit())
}

/// What a Key Vault data-plane answer (not 2xx) means for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 404: no such secret (or version). A person must create it or correct the URI.
    NotFound,
    /// 403: the identity may not read it (no role, a firewall, a disabled secret). A person
    /// must grant access.
    Forbidden,
    /// 401: the vault did not accept the identity's token (wrong tenant, wrong audience).
    Unauthenticated,
    /// 429, 5xx, or any other answer a retry may change.
    Transient,
    /// Any other 4xx: a request the vault refuses as such.
    Rejected,
}

/// What a Key Vault answer with `status` means.
pub fn classify(status: u16) -> Refusal {
    match status {
        404 => Refusal::NotFound,
        403 => Refusal::Forbidden,
        401 => Refusal::Unauthenticated,
        408 | 429 | 500..=599 => Refusal::Transient,
        _ => Refusal::Rejected,
    }
}

/// Why Key Vault answered 403, as far as its error body tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    /// `ForbiddenByRbac`: the identity has no role that may read the secret.
    Rbac,
    /// `AccessDenied`: the vault uses access policies, and none admits the identity.
    AccessPolicy,
    /// `ForbiddenByFirewall`: the vault's network rules refuse the worker's address.
    Firewall,
    /// The secret (or version) is disabled.
    Disabled,
    /// Anything else (treated as a missing role).
    Other,
}

/// The reason of a 403 from its error `code`, `inner` code (`error.innererror.code`) and
/// `message`.
pub fn forbidden(code: Option<&str>, inner: Option<&str>, message: &str) -> Forbidden {
    let codes = [inner, code];
    let is = |wanted: &str| {
        codes
            .iter()
            .flatten()
            .any(|code| code.eq_ignore_ascii_case(wanted))
    };
    if is("ForbiddenByFirewall") {
        Forbidden::Firewall
    } else if is("ForbiddenByRbac") {
        Forbidden::Rbac
    } else if is("AccessDenied") {
        Forbidden::AccessPolicy
    } else if message.to_ascii_lowercase().contains("disabled") {
        Forbidden::Disabled
    } else {
        Forbidden::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERSION: &str = "4387e9f3d6e14c459867679a90fd0f79";

    fn problems(text: &str) -> Vec<String> {
        match SecretUri::parse(text) {
            Ok(_) => Vec::new(),
            Err(problems) => problems.into_iter().map(|p| p.problem).collect(),
        }
    }

    #[test]
    fn secret_uris_of_every_cloud_parse_with_and_without_a_version() {
        let cases = [
            (
                "https://contoso-boot.vault.azure.net/secrets/workers-bootstrap",
                ("contoso-boot", "vault.azure.net", "workers-bootstrap", None),
            ),
            (
                &*format!("https://kv1.vault.azure.cn/secrets/boot/{VERSION}"),
                ("kv1", "vault.azure.cn", "boot", Some(VERSION)),
            ),
            (
                "HTTPS://Gov-Vault.Vault.UsGovCloudApi.Net/Secrets/Boot-2",
                ("Gov-Vault", "vault.usgovcloudapi.net", "Boot-2", None),
            ),
        ];
        for (text, (vault, suffix, name, version)) in cases {
            let uri = SecretUri::parse(text).expect(text);
            assert_eq!(
                (
                    uri.vault.as_str(),
                    uri.suffix,
                    uri.name.as_str(),
                    uri.version.as_deref()
                ),
                (vault, suffix, name, version),
                "{text}"
            );
        }
        let uri = SecretUri::parse(&format!(
            "https://kv1.vault.azure.cn/secrets/boot/{VERSION}"
        ))
        .expect("valid");
        assert_eq!(
            uri.to_string(),
            format!("https://kv1.vault.azure.cn/secrets/boot/{VERSION}")
        );
        assert_eq!(uri.token_scope(), "https://vault.azure.cn/.default");
        assert_eq!(uri.path_segments(), ["secrets", "boot", VERSION]);
    }

    #[test]
    fn each_problem_of_a_secret_uri_is_named() {
        let cases: &[(&str, &[&str])] = &[
            (
                "http://kv1.vault.azure.net/secrets/boot",
                &["is not an https:// URL"],
            ),
            (
                "kv1.vault.azure.net/secrets/boot",
                &["is not an https:// URL"],
            ),
            (
                "https://kv1.vault.azure.net/secrets/boot?api-version=1",
                &["has a query or a fragment"],
            ),
            (
                "https://kv1.vault.azure.net/secrets/boot#x",
                &["has a query or a fragment"],
            ),
            (
                "https://kv1.vault.azure.net:443/secrets/boot",
                &["has a port or user information in its host"],
            ),
            (
                "https://me@kv1.vault.azure.net/secrets/boot",
                &["has a port or user information in its host"],
            ),
            (
                "https://kv1.example.com/secrets/boot",
                &["is not on a Key Vault host"],
            ),
            (
                "https://vault.azure.net/secrets/boot",
                &["is not on a Key Vault host"],
            ),
            (
                "https://kv1.evilvault.azure.net/secrets/boot",
                &["is not on a Key Vault host"],
            ),
            (
                "https://a.b.vault.azure.net/secrets/boot",
                &["does not name a vault Azure allows"],
            ),
            (
                "https://kv.vault.azure.net/secrets/boot",
                &["does not name a vault Azure allows"],
            ),
            (
                "https://1kv.vault.azure.net/secrets/boot",
                &["does not name a vault Azure allows"],
            ),
            (
                "https://kv1-.vault.azure.net/secrets/boot",
                &["does not name a vault Azure allows"],
            ),
            (
                "https://k--v.vault.azure.net/secrets/boot",
                &["does not name a vault Azure allows"],
            ),
            (
                &*format!("https://{}.vault.azure.net/secrets/boot", "k".repeat(25)),
                &["does not name a vault Azure allows"],
            ),
            (
                "https://kv1.vault.azure.net/keys/boot",
                &["is not a secret's path"],
            ),
            (
                "https://kv1.vault.azure.net/secrets/boot/",
                &["does not end in a secret version"],
            ),
            (
                "https://kv1.vault.azure.net/secrets",
                &["is not a secret's path"],
            ),
            (
                "https://kv1.vault.azure.net/secrets/a/b/c",
                &["is not a secret's path"],
            ),
            (
                "https://kv1.vault.azure.net/secrets/boot_strap",
                &["does not name a secret Azure allows"],
            ),
            (
                &*format!("https://kv1.vault.azure.net/secrets/{}", "s".repeat(128)),
                &["does not name a secret Azure allows"],
            ),
            (
                "https://kv1.vault.azure.net/secrets/boot/latest",
                &["does not end in a secret version"],
            ),
            (
                "http://kv1.example.com/keys/x?y",
                &["is not an https:// URL"],
            ),
            (
                "https://kv1.example.com/secrets/a_b/latest?x",
                &[
                    "has a query or a fragment",
                    "is not on a Key Vault host",
                    "does not name a secret Azure allows",
                    "does not end in a secret version",
                ],
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(problems(text), *expected, "{text}");
        }
        assert!(
            problems(&format!(
                "https://{}.vault.azure.net/secrets/{}",
                "k".repeat(24),
                "s".repeat(127)
            ))
            .is_empty()
        );
    }

    #[test]
    fn a_403_says_why_from_its_codes_and_message() {
        let cases = [
            (
                Some("Forbidden"),
                Some("ForbiddenByRbac"),
                "Caller is not authorized",
                Forbidden::Rbac,
            ),
            (
                Some("Forbidden"),
                Some("AccessDenied"),
                "no access policy",
                Forbidden::AccessPolicy,
            ),
            (
                Some("Forbidden"),
                Some("ForbiddenByFirewall"),
                "Client address is not authorized",
                Forbidden::Firewall,
            ),
            (Some("ForbiddenByFirewall"), None, "", Forbidden::Firewall),
            (
                Some("Forbidden"),
                None,
                "Operation get is not allowed on a disabled secret.",
                Forbidden::Disabled,
            ),
            (None, None, "", Forbidden::Other),
        ];
        for (code, inner, message, expected) in cases {
            assert_eq!(
                forbidden(code, inner, message),
                expected,
                "{code:?} {inner:?}"
            );
        }
    }

    #[test]
    fn answers_are_classified_by_status() {
        let cases = [
            (404, Refusal::NotFound),
            (403, Refusal::Forbidden),
            (401, Refusal::Unauthenticated),
            (429, Refusal::Transient),
            (500, Refusal::Transient),
            (503, Refusal::Transient),
            (408, Refusal::Transient),
            (400, Refusal::Rejected),
            (409, Refusal::Rejected),
        ];
        for (status, expected) in cases {
            assert_eq!(classify(status), expected, "{status}");
        }
    }
}
