//! The process-wide TLS crypto provider.
//!
//! nodewright links rustls with two crypto back ends: `ring` (through kube and the Temporal
//! client) and `aws-lc-rs` (through reqwest, used by the ARM client and `azure_identity`). With
//! both compiled in, rustls refuses to guess, and a client built without an explicit provider
//! panics. Every client constructor in this crate calls [`install_crypto_provider`] first.

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
