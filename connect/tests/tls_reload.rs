//! The Temporal client really asks the live client certificate at each TLS handshake: a TLS
//! listener that requires a client certificate from the test CA records the one each connection
//! presents; after `LiveClientCert::replace` the next connection presents the new one. (The
//! listener speaks no gRPC, so each connect fails after the handshake; the handshake is what is
//! tested.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodewright_connect::TemporalSettings;
use nodewright_connect::TlsSettings;
use nodewright_connect::live_tls::{LiveClientCert, LiveServerCa};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use temporalio_client::Connection;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

const CA: &[u8] = include_bytes!("../testdata/ca.pem");
const CERT: &[u8] = include_bytes!("../testdata/client.pem");
const KEY: &[u8] = include_bytes!("../testdata/client.key");
const CERT2: &[u8] = include_bytes!("../testdata/client2.pem");
const KEY2: &[u8] = include_bytes!("../testdata/client2.key");

fn der(pem: &[u8]) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem).expect("a certificate")
}

/// A listener on 127.0.0.1 serving the test certificate (its name is nodewright-client),
/// requiring a client certificate of the test CA, and recording each one presented.
async fn listener() -> (
    std::net::SocketAddr,
    Arc<Mutex<Vec<CertificateDer<'static>>>>,
) {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = RootCertStore::empty();
    roots.add(der(CA)).expect("the CA");
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .expect("a client verifier");
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![der(CERT)],
            PrivateKeyDer::from_pem_slice(KEY).expect("a key"),
        )
        .expect("a server certificate");
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let tcp = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = tcp.local_addr().expect("an address");
    let seen = Arc::new(Mutex::new(Vec::new()));
    tokio::spawn({
        let seen = Arc::clone(&seen);
        async move {
            while let Ok((stream, _)) = tcp.accept().await {
                if let Ok(tls) = acceptor.accept(stream).await {
                    let (_, session) = tls.get_ref();
                    if let Some(chain) = session.peer_certificates() {
                        seen.lock().expect("not poisoned").push(chain[0].clone());
                    }
                }
            }
        }
    });
    (address, seen)
}

#[tokio::test]
async fn the_next_handshake_presents_the_replaced_client_certificate() {
    let (address, seen) = listener().await;
    let client = Arc::new(LiveClientCert::from_pem(CERT, KEY).expect("a pair"));
    let settings = TemporalSettings {
        tls: Some(TlsSettings {
            server_ca: Some(Arc::new(LiveServerCa::from_pem(CA).expect("a CA"))),
            client_identity: Some(Arc::clone(&client)),
            server_name: Some("nodewright-client".to_owned()),
        }),
        ..TemporalSettings::plaintext(address.to_string(), "default", "test")
    };
    let connect = || async {
        let options = settings.connection_options().expect("options");
        // The listener is no Temporal: the connect fails once the handshake is done.
        let _ = tokio::time::timeout(Duration::from_secs(10), Connection::connect(options)).await;
    };
    let handshakes = |count: usize| {
        let seen = Arc::clone(&seen);
        async move {
            for _ in 0..100 {
                if seen.lock().expect("not poisoned").len() >= count {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            seen.lock().expect("not poisoned").clone()
        }
    };
    connect().await;
    let first = handshakes(1).await;
    assert_eq!(first.first(), Some(&der(CERT)));
    client.replace(CERT2, KEY2).expect("a pair");
    connect().await;
    let seen = handshakes(first.len() + 1).await;
    assert!(seen.len() > first.len(), "handshakes seen: {}", seen.len());
    assert_eq!(seen.last(), Some(&der(CERT2)));
}
