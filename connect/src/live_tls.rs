//! TLS material that can be replaced while the connection lives: the client certificate (mTLS)
//! and the CA that verifies the server. The Temporal client asks for both at every TLS handshake,
//! so after [`LiveClientCert::replace`] or [`LiveServerCa::replace`] every new connection (a
//! reconnect, a new channel) uses the new files; an established connection keeps the session it
//! has, which the server accepted.

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use rustls::client::ResolvesClientCert;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Why PEM text is not usable TLS material. The message never shows key material.
#[derive(Debug, thiserror::Error)]
pub enum TlsMaterialError {
    /// The certificate file holds no certificate, or a broken one.
    #[error("holds no readable PEM certificate ({0})")]
    Certificates(String),
    /// The key file holds no private key, or one of an unsupported type.
    #[error("holds no usable PEM private key (PKCS#8, PKCS#1 or SEC1) ({0})")]
    PrivateKey(String),
    /// The key does not belong to the certificate.
    #[error("the private key does not match the certificate ({0})")]
    KeyMismatch(String),
    /// The CA certificates cannot verify servers.
    #[error("cannot verify servers with these CA certificates ({0})")]
    Roots(String),
}

/// The process's rustls crypto provider (nodewright's binaries install aws-lc-rs), else
/// aws-lc-rs.
fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsMaterialError> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsMaterialError::Certificates(error.to_string()))?;
    if certificates.is_empty() {
        return Err(TlsMaterialError::Certificates(
            "no CERTIFICATE block".to_owned(),
        ));
    }
    Ok(certificates)
}

/// Checks a certificate and key pair and makes the rustls value of it.
fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsMaterialError> {
    let certificates = certificates(cert_pem)?;
    // The PEM parser's errors may quote a byte of what they could not decode: say only which
    // way the key file is wrong.
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|error| {
        TlsMaterialError::PrivateKey(
            match error {
                rustls::pki_types::pem::Error::NoItemsFound => "no PRIVATE KEY block",
                _ => "a PRIVATE KEY block that does not decode",
            }
            .to_owned(),
        )
    })?;
    let signing_key = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|error| TlsMaterialError::PrivateKey(error.to_string()))?;
    let certified = CertifiedKey::new(certificates, signing_key);
    certified
        .keys_match()
        .map_err(|error| TlsMaterialError::KeyMismatch(error.to_string()))?;
    Ok(certified)
}

fn verifier(ca_pem: &[u8]) -> Result<Arc<WebPkiServerVerifier>, TlsMaterialError> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates(ca_pem)? {
        roots
            .add(certificate)
            .map_err(|error| TlsMaterialError::Roots(error.to_string()))?;
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|error| TlsMaterialError::Roots(error.to_string()))
}

/// The client certificate and key of mTLS, replaceable while connections use them.
pub struct LiveClientCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl LiveClientCert {
    /// The pair from PEM text, checked: the key must belong to the certificate.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, TlsMaterialError> {
        Ok(Self {
            current: RwLock::new(Arc::new(certified_key(cert_pem, key_pem)?)),
        })
    }

    /// Replaces the pair for the next TLS handshakes; a broken pair is refused and the current
    /// one kept.
    pub fn replace(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsMaterialError> {
        let certified = Arc::new(certified_key(cert_pem, key_pem)?);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = certified;
        Ok(())
    }

    /// The certificate chain now presented, DER (the first is the client's own).
    pub fn certificate_chain(&self) -> Vec<CertificateDer<'static>> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .cert
            .clone()
    }
}

impl fmt::Debug for LiveClientCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LiveClientCert(<redacted>)")
    }
}

impl ResolvesClientCert for LiveClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.current.read().unwrap_or_else(PoisonError::into_inner),
        ))
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// The CA that verifies the server's certificate, replaceable while connections use it.
pub struct LiveServerCa {
    current: RwLock<Arc<WebPkiServerVerifier>>,
}

impl LiveServerCa {
    /// A verifier trusting the CA certificates in `ca_pem`.
    pub fn from_pem(ca_pem: &[u8]) -> Result<Self, TlsMaterialError> {
        Ok(Self {
            current: RwLock::new(verifier(ca_pem)?),
        })
    }

    /// Trusts the CA certificates in `ca_pem` from the next TLS handshake on; broken text is
    /// refused and the current CA kept.
    pub fn replace(&self, ca_pem: &[u8]) -> Result<(), TlsMaterialError> {
        let verifier = verifier(ca_pem)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = verifier;
        Ok(())
    }

    fn verifier(&self) -> Arc<WebPkiServerVerifier> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }
}

impl fmt::Debug for LiveServerCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LiveServerCa")
    }
}

impl ServerCertVerifier for LiveServerCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier().verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier().supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &[u8] = include_bytes!("../testdata/ca.pem");
    const CA2: &[u8] = include_bytes!("../testdata/ca2.pem");
    const CERT: &[u8] = include_bytes!("../testdata/client.pem");
    const KEY: &[u8] = include_bytes!("../testdata/client.key");
    const CERT2: &[u8] = include_bytes!("../testdata/client2.pem");
    const KEY2: &[u8] = include_bytes!("../testdata/client2.key");

    fn first_der(pem: &[u8]) -> CertificateDer<'static> {
        CertificateDer::pem_slice_iter(pem)
            .next()
            .expect("a certificate")
            .expect("readable")
    }

    #[test]
    fn a_replaced_client_certificate_is_what_the_next_handshake_presents() {
        let live = LiveClientCert::from_pem(CERT, KEY).expect("a valid pair");
        let presented = live.resolve(&[], &[]).expect("a certificate");
        assert_eq!(presented.cert[0], first_der(CERT));
        live.replace(CERT2, KEY2).expect("a valid pair");
        let presented = live.resolve(&[], &[]).expect("a certificate");
        assert_eq!(presented.cert[0], first_der(CERT2));
    }

    #[test]
    fn a_broken_or_mismatched_pair_is_refused_and_the_current_one_kept() {
        let live = LiveClientCert::from_pem(CERT, KEY).expect("a valid pair");
        let table: [(&[u8], &[u8], &str); 4] = [
            (CERT2, KEY, "does not match"),
            (b"", KEY, "no readable PEM certificate"),
            (
                CERT2,
                b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                "private key",
            ),
            (CERT2, CERT2, "no usable PEM private key"),
        ];
        for (cert, key, expected) in table {
            let error = live.replace(cert, key).expect_err("refused");
            assert!(error.to_string().contains(expected), "{error}");
            assert_eq!(live.certificate_chain()[0], first_der(CERT));
        }
        assert!(!format!("{live:?}").contains("PRIVATE"));
    }

    #[test]
    fn a_replaced_ca_is_what_verifies_the_next_server() {
        let live = LiveServerCa::from_pem(CA).expect("a CA");
        // The test certificates (signed by the first CA) also serve as server certificates for
        // the name nodewright-client.
        let name = ServerName::try_from("nodewright-client").expect("a name");
        let verify = |live: &LiveServerCa| {
            live.verify_server_cert(&first_der(CERT), &[], &name, &[], UnixTime::now())
                .map(|_| ())
                .map_err(|error| error.to_string())
        };
        assert_eq!(verify(&live), Ok(()));
        live.replace(CA2).expect("a CA");
        let refused = verify(&live).expect_err("another CA");
        assert!(refused.contains("UnknownIssuer"), "{refused}");
        assert!(live.replace(b"not pem").is_err());
        assert!(verify(&live).is_err(), "the second CA is kept");
        live.replace(CA).expect("a CA");
        assert_eq!(verify(&live), Ok(()));
    }
}
