//! Bounds on what HTTP clients can hold open, shared by mock-node's admin endpoint and
//! `stampede serve`: a deadline on each request body ([`DeadlineBody`]) and a cap on
//! concurrent connections ([`ConnectionCap`]).
//!
//! A request whose head arrived and whose body never does would otherwise hold its
//! connection, and a descriptor, for ever: enough of them exhaust the process's
//! descriptors and lock every client out. The body deadline ends each such request; the
//! cap keeps connections below the descriptor limit so that the process can still open
//! files and dial its nodes while a flood lasts.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Descriptors kept out of the connection cap for everything else a process opens:
/// listeners, node channels, files, the runtime's own (an assumption: a fleet or a
/// service needs a few dozen; 256 leaves room for a few hundred node channels more).
/// Under a small limit a quarter of it is kept instead.
pub const RESERVED_FDS: usize = 256;

/// A request body not received whole by its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("request body not received within {0:?}")]
pub struct BodyTimedOut(pub Duration);

/// Whether a request's body missed its deadline; shared by the body and whoever answers.
#[derive(Debug, Clone, Default)]
pub struct BodyDeadlineHit(Arc<AtomicBool>);

impl BodyDeadlineHit {
    /// True once the body gave [`BodyTimedOut`].
    pub fn hit(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// A request body that fails with [`BodyTimedOut`] when it is not whole `within` the
/// time the request head was complete.
#[derive(Debug)]
pub struct DeadlineBody<B> {
    inner: B,
    within: Duration,
    deadline: Instant,
    /// Armed at the first poll that finds the body incomplete (most bodies never are).
    sleep: Option<Pin<Box<Sleep>>>,
    hit: BodyDeadlineHit,
}

impl<B> DeadlineBody<B> {
    /// `inner`, which must be whole within `within` from now.
    pub fn new(inner: B, within: Duration) -> (Self, BodyDeadlineHit) {
        let hit = BodyDeadlineHit::default();
        let body = Self {
            inner,
            within,
            deadline: Instant::now() + within,
            sleep: None,
            hit: hit.clone(),
        };
        (body, hit)
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = B::Data;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.as_mut().poll(cx).is_ready() {
            this.hit.0.store(true, Ordering::Release);
            return Poll::Ready(Some(Err(BodyTimedOut(this.within).into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// At most `limit` connections open at once: the accept loop takes a permit before each
/// accept and the connection holds it until it closes. Past the cap, new connections wait
/// in the kernel's backlog until one closes.
#[derive(Debug, Clone)]
pub struct ConnectionCap {
    permits: Arc<Semaphore>,
    limit: usize,
}

impl ConnectionCap {
    /// A cap of `wanted` connections, lowered to what the descriptor limit leaves
    /// ([`fd_room`]; never below 1).
    pub fn new(wanted: usize) -> Self {
        let limit = match fd_room() {
            Some(room) => wanted.min(room),
            None => wanted,
        }
        .max(1);
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    /// Connections allowed at once.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Waits for room for one more connection.
    pub async fn acquire(&self) -> OwnedSemaphorePermit {
        // The semaphore is never closed.
        self.permits
            .clone()
            .acquire_owned()
            .await
            .unwrap_or_else(|_| unreachable!("the connection semaphore is never closed"))
    }
}

/// Descriptors left for connections: the soft `RLIMIT_NOFILE` less [`RESERVED_FDS`] (or
/// less a quarter of it, if that is smaller); `None` where it cannot be read.
pub fn fd_room() -> Option<usize> {
    let (soft, _) = fd_limits()?;
    let soft = usize::try_from(soft).unwrap_or(usize::MAX);
    Some(soft - (soft / 4).min(RESERVED_FDS))
}

/// Raises the soft descriptor limit to the hard one, as the Go runtime does at start
/// (since Go 1.19), so E2B's own servers get it. Returns the soft limit now in force.
pub fn raise_fd_limit() -> Option<u64> {
    let (soft, hard) = fd_limits()?;
    if soft < hard {
        let raised = libc::rlimit {
            rlim_cur: hard as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: setrlimit reads a valid, initialised struct.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Some(hard);
        }
    }
    Some(soft)
}

// `rlim_t` is `u64` on Linux but not on every target.
#[allow(clippy::unnecessary_cast)]
fn fd_limits() -> Option<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a valid struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    Some((lim.rlim_cur as u64, lim.rlim_max as u64))
}

/// Bounds of [`serve_bounded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// A request head must be whole this soon after the connection opened (HTTP/1: or
    /// after the previous answer, which bounds keep-alive idling too).
    pub header_read: Duration,
    /// A request body must be whole this soon after its head.
    pub body_read: Duration,
    /// Connections open at once (lowered to the descriptor limit, [`ConnectionCap`]).
    pub max_connections: usize,
}

/// Serves `app` on `listener` within `limits` until `stop` fires; a request whose body
/// misses its deadline is answered `on_timeout(..)` and its HTTP/1 connection closed.
pub async fn serve_bounded(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: HttpLimits,
    stop: tokio_util::sync::CancellationToken,
    on_timeout: fn(BodyTimedOut) -> axum::response::Response,
) {
    let cap = ConnectionCap::new(limits.max_connections);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let permit = tokio::select! {
            _ = stop.cancelled() => break,
            p = cap.acquire() => p,
        };
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) => {
                let app = app.clone();
                let stop = stop.clone();
                conns.spawn(async move {
                    serve_one(stream, app, limits, stop, on_timeout).await;
                    drop(permit);
                });
            }
            Err(e) => {
                tracing::debug!(error = %e, "accept failed");
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        }
        while conns.try_join_next().is_some() {}
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
}

async fn serve_one(
    stream: tokio::net::TcpStream,
    app: axum::Router,
    limits: HttpLimits,
    stop: tokio_util::sync::CancellationToken,
    on_timeout: fn(BodyTimedOut) -> axum::response::Response,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let cut = tokio_util::sync::CancellationToken::new();
    let on_cut = cut.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let app = app.clone();
        let cut = on_cut.clone();
        let h1 = req.version() < hyper::Version::HTTP_2;
        async move {
            let (req, hit) = bounded_request(req, limits.body_read);
            let answer = tower::ServiceExt::oneshot(app, req).await;
            let Ok(answer) = answer;
            if hit.hit() {
                if h1 {
                    cut.cancel();
                }
                return Ok::<_, std::convert::Infallible>(on_timeout(BodyTimedOut(
                    limits.body_read,
                )));
            }
            Ok(answer)
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let mut closing = false;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "admin connection ended with an error");
                }
                return;
            }
            _ = stop.cancelled(), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = cut.cancelled(), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// `req` with its body under a deadline of `within`, as axum takes it.
pub fn bounded_request<B>(
    req: hyper::Request<B>,
    within: Duration,
) -> (hyper::Request<axum::body::Body>, BodyDeadlineHit)
where
    B: Body<Data = bytes::Bytes> + Unpin + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    let (body, hit) = DeadlineBody::new(body, within);
    (
        hyper::Request::from_parts(parts, axum::body::Body::new(body)),
        hit,
    )
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn a_body_that_never_ends_fails_at_its_deadline() {
        type Never = Result<Frame<bytes::Bytes>, std::convert::Infallible>;
        let never = http_body_util::StreamBody::new(futures::stream::pending::<Never>());
        let within = Duration::from_millis(100);
        let (body, hit) = DeadlineBody::new(never, within);
        let t0 = Instant::now();
        let e = body.collect().await.expect_err("times out");
        assert!(e.to_string().contains("100ms"), "{e}");
        assert!(hit.hit());
        assert!(t0.elapsed() >= within);
    }

    #[tokio::test]
    async fn a_whole_body_passes_untouched() {
        let full = http_body_util::Full::new(bytes::Bytes::from_static(b"{}"));
        let (body, hit) = DeadlineBody::new(full, Duration::from_secs(5));
        let got = body.collect().await.expect("whole").to_bytes();
        assert_eq!(&got[..], b"{}");
        assert!(!hit.hit());
    }

    #[test]
    fn the_cap_stays_below_the_descriptor_limit() {
        let cap = ConnectionCap::new(usize::MAX);
        if let Some(room) = fd_room() {
            assert_eq!(cap.limit(), room.max(1));
        }
        assert_eq!(ConnectionCap::new(0).limit(), 1);
    }
}
