//! A burst against an https target (staging is one): the burst's own connections speak
//! TLS with the platform's verifier (as reqwest does) and the final byte held is the
//! last ciphertext byte, so no create is whole at the target before the gate.
//!
//! The target's certificate is issued by the test CA in `tests/fixtures/tls`, trusted
//! through `SSL_CERT_FILE` (read by the verifier's certificate loader). This file has a
//! single test so that setting the variable touches no other test.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use stampede::profile::SandboxSpec;
use stampede::workload::{run_workload, ApiKey, Pacing, WorkloadRun};
use tokio::net::TcpListener;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

/// An https target: `GET /health` 204, `POST /sandboxes` 201 once its body is whole
/// (the time of which it records).
async fn tls_target(complete: Arc<Mutex<Vec<Instant>>>, stop: CancellationToken) -> String {
    let certs = vec![CertificateDer::from_pem_file(fixture("server.pem")).unwrap()];
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let config = tokio_rustls::rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                _ = stop.cancelled() => return,
                a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
            };
            let acceptor = acceptor.clone();
            let complete = complete.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let complete = complete.clone();
                    async move {
                        let create = req.method() == hyper::Method::POST;
                        if create {
                            use http_body_util::BodyExt;
                            let body = req.into_body().collect().await;
                            assert!(body.is_ok_and(|b| !b.to_bytes().is_empty()));
                            complete.lock().unwrap().push(Instant::now());
                        }
                        let resp = if create {
                            Response::builder()
                                .status(201)
                                .header("content-type", "application/json")
                                .body("{\"sandboxID\":\"tls\"}".to_string())
                        } else {
                            Response::builder().status(204).body(String::new())
                        };
                        Ok::<_, Infallible>(resp.unwrap())
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_over_tls_is_held_by_its_last_ciphertext_byte() {
    std::env::set_var("SSL_CERT_FILE", fixture("ca.pem"));
    let complete = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let url = tls_target(complete.clone(), stop.clone()).await;
    let count = 12;
    let run = WorkloadRun {
        targets: vec![url],
        api_key: ApiKey::new("e2b_test"),
        pacing: Pacing::Burst { count },
        sandbox: SandboxSpec::default(),
        lifetime: None,
        seed: 1,
        request_timeout: Duration::from_secs(10),
        goose_report: None,
        cancel: CancellationToken::new(),
        progress: None,
        cancel_grace: Duration::from_secs(1),
        run_tag: None,
        limit_retry: None,
    };
    let out = tokio::time::timeout(Duration::from_secs(60), run_workload(run, None))
        .await
        .expect("the burst ends within 60 s")
        .expect("the workload runs");
    stop.cancel();
    assert_eq!(out.ledger.created(), count, "{:?}", out.ledger.statuses());
    let gate = out.gate.expect("the gate opened");
    let complete = complete.lock().unwrap();
    assert_eq!(complete.len(), count);
    for at in complete.iter() {
        assert!(
            *at >= gate,
            "a create was whole at the target before the gate"
        );
    }
}
