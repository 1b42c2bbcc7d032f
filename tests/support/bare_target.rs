//! A bare create target for workload tests, plain HTTP/1 or TLS: `GET /health` 204,
//! `POST /sandboxes` 201 with a sandbox id once its body is whole. It records what a
//! burst test asserts on: when each connection was accepted, each create's connection
//! and whether a request had been served there first, and when each body was whole.

#![allow(dead_code)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use stampede::api_key::ApiKey;
use stampede::profile::SandboxSpec;
use stampede::workload::{run_workload, Pacing, WorkloadOutput, WorkloadRun};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// What the target saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// When each connection was accepted.
    pub accepts: Vec<Instant>,
    /// Per create: its connection, and whether a request was served there before it.
    pub creates: Vec<(usize, bool)>,
    /// When each create's body was whole.
    pub bodies_complete: Vec<Instant>,
}

/// Serves until `stop`; `tls`: speak TLS with that acceptor. Returns the base URL.
pub async fn serve(
    seen: Arc<Mutex<Seen>>,
    stop: CancellationToken,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> String {
    serve_with(seen, stop, tls, false).await
}

/// [`serve`]; with `close_after_health`, `GET /health` answers `Connection: close`.
pub async fn serve_with(
    seen: Arc<Mutex<Seen>>,
    stop: CancellationToken,
    tls: Option<tokio_rustls::TlsAcceptor>,
    close_after_health: bool,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                _ = stop.cancelled() => return,
                a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
            };
            let conn = {
                let mut s = seen.lock().unwrap();
                s.accepts.push(Instant::now());
                s.accepts.len() - 1
            };
            let seen = seen.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                match tls {
                    Some(acceptor) => {
                        if let Ok(s) = acceptor.accept(stream).await {
                            serve_conn(s, conn, seen, close_after_health).await;
                        }
                    }
                    None => serve_conn(stream, conn, seen, close_after_health).await,
                }
            });
        }
    });
    url
}

async fn serve_conn<I>(io: I, conn: usize, seen: Arc<Mutex<Seen>>, close_after_health: bool)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let served = Arc::new(AtomicU64::new(0));
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let before = served.fetch_add(1, Ordering::Relaxed);
        let create = req.method() == hyper::Method::POST;
        if create {
            seen.lock().unwrap().creates.push((conn, before > 0));
        }
        let seen = seen.clone();
        async move {
            if !create {
                let mut no_content = Response::builder().status(204);
                if close_after_health {
                    no_content = no_content.header("connection", "close");
                }
                let no_content = no_content.body(String::new());
                return Ok::<_, Infallible>(no_content.unwrap());
            }
            let body = req.into_body().collect().await;
            assert!(body.is_ok_and(|b| !b.to_bytes().is_empty()));
            seen.lock().unwrap().bodies_complete.push(Instant::now());
            let resp = Response::builder()
                .status(201)
                .header("content-type", "application/json")
                .body(format!("{{\"sandboxID\":\"i{before}c{conn}\"}}"));
            Ok(resp.unwrap())
        }
    });
    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(io), svc)
        .await;
}

/// A burst of `count` creates over `targets`, nothing else set.
pub fn burst(targets: Vec<String>, count: usize) -> WorkloadRun {
    WorkloadRun {
        keep_entries: true,
        audit: None,
        placements: None,
        targets,
        api_key: ApiKey::new("e2b_test"),
        pacing: Pacing::Burst { count },
        sandbox: SandboxSpec::default(),
        lifetime: None,
        lifecycle: None,
        seed: 1,
        request_timeout: Duration::from_secs(10),
        goose_report: None,
        cancel: CancellationToken::new(),
        progress: None,
        cancel_grace: Duration::from_secs(1),
        run_tag: None,
        limit_retry: None,
    }
}

/// Runs `run` (within 60 s), stops the targets, checks that every create got its 201
/// and returns the output with the gate's instant.
pub async fn run_all_created(
    run: WorkloadRun,
    stop: &CancellationToken,
) -> (WorkloadOutput, Instant) {
    let count = run.pacing.total().unwrap_or(0);
    let out = tokio::time::timeout(Duration::from_secs(60), run_workload(run, None))
        .await
        .expect("the burst ends within 60 s")
        .expect("the workload runs");
    stop.cancel();
    assert_eq!(out.ledger.created(), count, "{:?}", out.ledger.statuses());
    let gate = out.gate.expect("the gate opened");
    (out, gate)
}
