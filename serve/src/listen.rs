//! The HTTP accept loop of one instance. Unlike `axum::serve` it bounds what a client
//! can hold open: hyper's HTTP/1 header-read timeout (which also bounds the wait for
//! the next request on a kept-alive connection); per connection, a watchdog that
//! closes it when no first request head arrived within the header-read timeout (any
//! protocol, before hyper knows which) or when nothing is handled and no byte moved for
//! the idle timeout; per request, a body deadline (a request whose body is not whole in
//! time is answered 408 and its HTTP/1 connection closed); and a cap on connections
//! open at once, kept below the descriptor limit
//! ([`ConnectionCap`](stampede_http_kit::ConnectionCap)), past which the
//! connection that has waited longest on its client is closed to admit a new one (a
//! new one waits only while every connection is being answered). On stop it stops accepting and lets
//! requests in progress finish.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Router;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use stampede_http_kit::{bounded_request, Admitted, BodyTimedOut, ConnectionCap};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::activity::{Activity, Tracked};
use super::arrivals::ConnReads;
use super::error::ApiError;
use super::rx_stamp::RxStamped;

/// How long clients may take, per connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnTimeouts {
    /// From accept (or, on HTTP/1, from the end of the previous request) until a request
    /// head must be complete.
    pub header_read: Duration,
    /// With no request in progress, a connection on which no byte moved for this long
    /// is closed.
    pub idle: Duration,
    /// From the end of a request head until its body must be whole.
    pub body_read: Duration,
}

/// Serves `app` on `listener` until `stop` fires, then waits up to `grace` for the
/// requests in progress.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    timeouts: ConnTimeouts,
    cap: ConnectionCap,
    stop: CancellationToken,
    grace: Duration,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let admitted = tokio::select! {
                        biased;
                        _ = stop.cancelled() => break,
                        a = cap.admit() => a,
                    };
                    conns.spawn(serve_conn(stream, admitted, app.clone(), timeouts, stop.clone()));
                }
                Err(e) => accept_failed(e, &stop).await,
            },
        }
        while conns.try_join_next().is_some() {}
    }
    drop(listener);
    let drained =
        tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            open = conns.len(),
            "placement service: connections still open after the shutdown grace"
        );
    }
}

/// A failed accept: per-connection errors are skipped, others (too many open files)
/// pause accepting briefly, as `axum::serve` does.
async fn accept_failed(e: std::io::Error, stop: &CancellationToken) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!(error = %e, "placement service: accept failed");
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
    }
}

async fn serve_conn(
    stream: TcpStream,
    admitted: Admitted,
    app: Router,
    timeouts: ConnTimeouts,
    stop: CancellationToken,
) {
    let activity = Activity::new();
    let (stream, last_read) = RxStamped::new(stream);
    let io = TokioIo::new(Tracked::new(stream, activity.clone()));
    let inner = TowerToHyperService::new(app);
    let seen = activity.clone();
    let cut = CancellationToken::new();
    let on_cut = cut.clone();
    let conn_mark = admitted.mark().clone();
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let guard = seen.request();
        req.extensions_mut().insert(ConnReads(last_read.clone()));
        let h1 = req.version() < hyper::Version::HTTP_2;
        let (req, hit, mark) = bounded_request(req, timeouts.body_read, &conn_mark);
        let answer = hyper::service::Service::call(&inner, req);
        let cut = on_cut.clone();
        async move {
            let r = answer.await;
            drop(guard);
            drop(mark);
            if hit.hit() {
                // The handler saw the body fail; the client hears why, and an HTTP/1
                // connection with part of a body unread cannot carry another request.
                if h1 {
                    cut.cancel();
                }
                let e = BodyTimedOut(timeouts.body_read);
                return Ok(
                    ApiError::new(StatusCode::REQUEST_TIMEOUT, e.to_string()).into_response()
                );
            }
            r
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header_read);
    let conn = builder.serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    let mut stopping = false;
    // One timer for the connection's life. It is moved only to an earlier check: one
    // that comes too early re-reads the activity and moves it later, so a request does
    // not cost a timer of its own.
    let first = activity.next_check(Instant::now(), timeouts.header_read, timeouts.idle);
    let check = tokio::time::sleep_until(first.into());
    let mut check = std::pin::pin!(check);
    // Made once: a token's waiter registers under the token's lock.
    let mut stopped = std::pin::pin!(stop.cancelled());
    let mut was_cut = std::pin::pin!(cut.cancelled());
    let mut evicted = std::pin::pin!(admitted.evicted());
    loop {
        let check_at = activity.next_check(Instant::now(), timeouts.header_read, timeouts.idle);
        if check.is_elapsed() || tokio::time::Instant::from(check_at) < check.deadline() {
            check.as_mut().reset(check_at.into());
        }
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            () = stopped.as_mut(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            () = was_cut.as_mut(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            () = evicted.as_mut() => {
                tracing::debug!("closing the connection that waited longest: the cap is full");
                return;
            }
            _ = activity.changed() => {}
            () = check.as_mut() => {
                let now = Instant::now();
                if let Some(why) = activity.expired(now, timeouts.header_read, timeouts.idle) {
                    tracing::debug!(?why, "closing a connection");
                    return;
                }
            }
        }
    }
}
