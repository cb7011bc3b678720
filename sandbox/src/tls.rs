//! The process-wide TLS crypto provider.
//!
//! The workspace links rustls with two crypto back ends (`ring` through kube, `aws-lc-rs` through
//! reqwest); with both compiled in, rustls will not pick one and kube's client panics. Call
//! [`install_crypto_provider`] before building a Kubernetes client.

/// Installs aws-lc-rs as the process's default rustls crypto provider, unless one is installed.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}
