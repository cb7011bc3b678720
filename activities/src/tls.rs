//! The process-wide TLS crypto provider.
//!
//! nodewright links rustls with one crypto back end, `aws-lc-rs`: reqwest (the ARM client,
//! `azure_identity`, Key Vault), kube and the Temporal client are all built with it (the
//! workspace's Cargo.toml turns their `ring` defaults off; `tests/tidy` keeps `ring` out of
//! Cargo.lock). A client that asks rustls for the process default still needs one installed, so
//! every client constructor in this crate calls [`install_crypto_provider`] first.

/// Installs aws-lc-rs as the process's default rustls crypto provider, once.
///
/// Safe to call any number of times and from any thread: when a provider is already installed
/// (by us or by the embedding binary) it is kept.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is then installed either way.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}
