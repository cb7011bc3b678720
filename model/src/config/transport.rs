//! Which addresses are loopback, and how the Temporal connection is described at start.
//!
//! Plain text (to Temporal, to an `http://` ARM or Key Vault endpoint) is allowed without a word
//! only to a loopback address: `127.0.0.0/8`, `::1` (also as `::ffff:127.x.y.z`) or `localhost`.
//! Anything else needs TLS or an explicit setting (`temporal.tls.enabled = false`,
//! `azure.sandbox = true`).

use std::net::IpAddr;

use super::TemporalConfig;

/// The host of `address`: `host:port`, `[v6]:port`, a bare host or IPv6 literal, or a URL
/// (`scheme://[user@]host[:port][/path]`). Brackets are removed from IPv6 literals.
pub fn address_host(address: &str) -> &str {
    let rest = address
        .trim()
        .split_once("://")
        .map_or(address.trim(), |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if let Some(bracketed) = host_port.strip_prefix('[') {
        return bracketed.split(']').next().unwrap_or(bracketed);
    }
    match host_port.matches(':').count() {
        // `host:port`
        1 => host_port.split(':').next().unwrap_or(host_port),
        // a bare host, or an IPv6 literal without brackets
        _ => host_port,
    }
}

/// Whether `host` is a loopback address: `localhost`, an IPv4 address in `127.0.0.0/8`, `::1`,
/// or an IPv4-mapped IPv6 loopback address. Other names are not resolved: a name is loopback only
/// when it is `localhost`.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|ip| ip.is_loopback())
        }
        Err(_) => false,
    }
}

/// Whether `address` (see [`address_host`]) names a loopback host.
pub fn is_loopback_address(address: &str) -> bool {
    is_loopback_host(address_host(address))
}

/// How the worker and the CLI reach Temporal, as decided by the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemporalTransport {
    /// TLS with a client certificate (and maybe an API key too).
    Mtls,
    /// TLS, authenticated by an API key.
    ApiKey,
    /// TLS that authenticates the server only: the client has no certificate nor API key.
    TlsWithoutClientCredentials,
    /// Plain text to a loopback address.
    PlainTextLoopback,
    /// Plain text to another address, because `temporal.tls.enabled = false` says so.
    PlainTextOnPurpose,
}

impl TemporalConfig {
    /// How this configuration connects (the configuration loader has already refused plain text
    /// to a non-loopback address without `temporal.tls.enabled = false`).
    pub fn transport(&self) -> TemporalTransport {
        match &self.tls {
            Some(tls) if tls.client_certificate.is_some() => TemporalTransport::Mtls,
            Some(_) if self.api_key.is_some() || self.api_key_file.is_some() => {
                TemporalTransport::ApiKey
            }
            Some(_) => TemporalTransport::TlsWithoutClientCredentials,
            None if is_loopback_address(&self.address) => TemporalTransport::PlainTextLoopback,
            None => TemporalTransport::PlainTextOnPurpose,
        }
    }

    /// One line for people saying how this configuration connects, e.g. "mTLS to
    /// temporal.internal:7233 (client certificate /tls/tls.crt, CA /tls/ca.crt)". Names files,
    /// never their contents nor the API key.
    pub fn transport_summary(&self) -> String {
        let address = &self.address;
        let ca = || {
            self.tls
                .as_ref()
                .and_then(|tls| tls.server_ca_cert.as_ref())
                .map_or_else(
                    || "the system's CAs".to_owned(),
                    |path| path.display().to_string(),
                )
        };
        let api_key = || match &self.api_key_file {
            Some(path) => format!("API key from {}", path.display()),
            None => "API key from temporal.api_key".to_owned(),
        };
        match self.transport() {
            TemporalTransport::Mtls => {
                let cert = self
                    .tls
                    .as_ref()
                    .and_then(|tls| tls.client_certificate.as_ref())
                    .map_or_else(String::new, |files| files.cert.display().to_string());
                let key = if self.api_key.is_some() || self.api_key_file.is_some() {
                    format!(", {}", api_key())
                } else {
                    String::new()
                };
                format!(
                    "mTLS to {address} (client certificate {cert}, CA {}{key})",
                    ca()
                )
            }
            TemporalTransport::ApiKey => {
                format!("API key over TLS to {address} ({}, CA {})", api_key(), ca())
            }
            TemporalTransport::TlsWithoutClientCredentials => format!(
                "TLS to {address} (CA {}; no client certificate nor API key: the server must authorize by network)",
                ca()
            ),
            TemporalTransport::PlainTextLoopback => format!("PLAIN TEXT to {address} (loopback)"),
            TemporalTransport::PlainTextOnPurpose => {
                format!("PLAIN TEXT to {address} (temporal.tls.enabled = false)")
            }
        }
    }
}
