//! A burst against an https target (staging is one): the burst's own connections speak
//! TLS with the platform's verifier (as reqwest does) and the final byte held is the
//! last ciphertext byte, so no create is whole at the target before the gate.
//!
//! The target's certificate is issued by the test CA in `tests/fixtures/tls`, trusted
//! through `SSL_CERT_FILE` (read by the verifier's certificate loader). This file has a
//! single test so that setting the variable touches no other test.

use std::sync::{Arc, Mutex};

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

use crate::support::bare_target;
use bare_target::Seen;

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

/// TLS with the test CA's server certificate for 127.0.0.1.
fn acceptor() -> tokio_rustls::TlsAcceptor {
    let certs = vec![CertificateDer::from_pem_file(fixture("server.pem")).unwrap()];
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let config = tokio_rustls::rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_over_tls_is_held_by_its_last_ciphertext_byte() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    std::env::set_var("SSL_CERT_FILE", fixture("ca.pem"));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = CancellationToken::new();
    let url = bare_target::serve(seen.clone(), stop.clone(), Some(acceptor())).await;
    let count = 12;
    let run = bare_target::burst(vec![url], count);
    let (_out, gate) = bare_target::run_all_created(run, &stop).await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.bodies_complete.len(), count);
    for &(conn, warm) in &seen.creates {
        assert!(warm, "a create was the first request of connection {conn}");
    }
    for at in &seen.bodies_complete {
        assert!(
            *at >= gate,
            "a create was whole at the target before the gate"
        );
    }
}
