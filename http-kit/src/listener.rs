//! The one hardening policy of every HTTP listener the project opens (mock-node's admin
//! and Nomad APIs, `stampede serve`, a run's metrics endpoint): a deadline on each
//! request head and body ([`DeadlineBody`]), an idle timeout, and a cap on concurrent
//! connections below the descriptor limit that, when full, closes a connection waiting on
//! its client: one that never had a request answered first ([`ConnectionCap`]).
//!
//! A request whose head arrived and whose body never does would otherwise hold its
//! connection, and a descriptor, for ever: enough of them exhaust the process's
//! descriptors and lock every client out. The deadlines end each such request; the cap
//! keeps connections below the descriptor limit so that the process can still open files
//! and dial its nodes while a flood lasts, and its eviction keeps room for clients that
//! send their request at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

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
    /// Told of each frame (life on the connection) and of the body's end.
    mark: Option<Arc<RequestMark>>,
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
            mark: None,
        };
        (body, hit)
    }

    /// The same body, telling `mark` of its frames and of its end.
    pub fn marked(mut self, mark: Arc<RequestMark>) -> Self {
        self.mark = Some(mark);
        self
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
            if let Some(m) = &this.mark {
                match &frame {
                    Some(Ok(_)) if !this.inner.is_end_stream() => m.conn.progress(),
                    Some(Ok(_)) | None => m.answering(),
                    Some(Err(_)) => {}
                }
            }
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

/// At most `limit` connections open at once, admitted fairly: a connection is admitted
/// after it is accepted ([`admit`](Self::admit)) and holds its [`Admitted`] until it
/// closes. When the cap is full, a connection waiting on its client (no request being
/// answered) is closed to make room, in this order:
///
/// 1. connections that never had a request answered (a silent connection, a stalled
///    first head or body), the one waiting longest first;
/// 2. only when there are none, connections that had a request answered (an idle
///    keep-alive, a pooled HTTP/2 channel between calls, one stalled on a later
///    request), the one waiting longest first.
///
/// So a flood of stalled clients, which all share one address on loopback and cannot be
/// told apart by peer, only ever evicts itself: a client that sends its request at once
/// is admitted, answered and gone before a flood's connections get ahead of it, and a
/// known client's pooled connection (a placement service's channel to its node, idle
/// between RPCs and so often the longest waiting) is not closed under it while a
/// connection that never spoke remains. Only when every admitted connection is being
/// answered does a new one wait.
///
/// A full cap closes a batch of connections at once (a 64th of the cap, 1 to 64), not
/// one per admission: a closed connection frees its place only once its task has run,
/// and a flood that fills the cap faster than one task wake-up per connection would
/// otherwise leave the accept queue, and the well-behaved clients at its end, waiting
/// behind those wake-ups one by one. Evictions not yet completed count against the
/// next batch, so a flood never evicts more than a batch ahead of the drops.
#[derive(Debug, Clone)]
pub struct ConnectionCap {
    permits: Arc<Semaphore>,
    limit: usize,
    batch: usize,
    book: Arc<ConnBook>,
}

/// How long an admission waits for an evicted connection's place before it looks
/// again (another admission may have taken the place it freed).
const EVICTION_RECHECK: Duration = Duration::from_millis(50);

/// The open connections of one cap, for eviction.
#[derive(Debug)]
struct ConnBook {
    epoch: std::time::Instant,
    next_id: std::sync::atomic::AtomicU64,
    open: std::sync::Mutex<std::collections::HashMap<u64, Arc<ConnEntry>>>,
    /// Connections evicted whose place is not yet free.
    evicting: AtomicUsize,
}

/// What the cap knows of one connection.
#[derive(Debug)]
struct ConnEntry {
    /// Milliseconds after the book's epoch of the last sign of life from the client: its
    /// accept, a request head, a body frame, the end of an answer.
    since_ms: AtomicU64,
    /// Requests whose body is whole and whose answer is being made.
    answering: AtomicUsize,
    /// Requests whose head arrived and whose answer is not yet made.
    requests: AtomicUsize,
    /// A request of this connection was answered: its client spoke the protocol, and
    /// the connection is evicted only after every one that never did.
    answered: AtomicBool,
    evict: CancellationToken,
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
            batch: (limit / 64).clamp(1, 64),
            book: Arc::new(ConnBook {
                epoch: std::time::Instant::now(),
                next_id: AtomicU64::new(0),
                open: std::sync::Mutex::default(),
                evicting: AtomicUsize::new(0),
            }),
        }
    }

    /// Connections allowed at once.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Connections admitted and not yet closed.
    pub fn open(&self) -> usize {
        self.limit - self.permits.available_permits()
    }

    /// Admits one accepted connection: at once when there is room; otherwise after
    /// closing the connections that have waited longest on their client, or, when every
    /// connection is being answered, once one closes.
    pub async fn admit(&self) -> Admitted {
        let permit = loop {
            if let Ok(p) = self.permits.clone().try_acquire_owned() {
                break p;
            }
            self.book.evict_stalest(self.batch);
            let freed = self.permits.clone().acquire_owned();
            if let Ok(p) = tokio::time::timeout(EVICTION_RECHECK, freed).await {
                break p
                    .unwrap_or_else(|_| unreachable!("the connection semaphore is never closed"));
            }
        };
        let id = self.book.next_id.fetch_add(1, Ordering::Relaxed);
        let entry = Arc::new(ConnEntry {
            since_ms: AtomicU64::new(self.book.now_ms()),
            answering: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            answered: AtomicBool::new(false),
            evict: CancellationToken::new(),
        });
        self.book
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, entry.clone());
        Admitted {
            _permit: permit,
            id,
            mark: ConnMark {
                entry,
                book: self.book.clone(),
            },
        }
    }
}

impl ConnBook {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Closes connections waiting on their client (none being answered) in the cap's
    /// order (never answered before answered, then longest waiting first), up to
    /// `batch` evictions not yet completed. A scan: it runs only when the cap is full.
    fn evict_stalest(&self, batch: usize) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let want = batch.saturating_sub(self.evicting.load(Ordering::Acquire));
        if want == 0 {
            return;
        }
        let mut waiting: Vec<(bool, u64, u64)> = open
            .iter()
            .filter(|(_, e)| e.answering.load(Ordering::Acquire) == 0)
            .map(|(id, e)| {
                let answered = e.answered.load(Ordering::Acquire);
                (answered, e.since_ms.load(Ordering::Relaxed), *id)
            })
            .collect();
        let want = want.min(waiting.len());
        if want == 0 {
            return;
        }
        waiting.select_nth_unstable(want - 1);
        for (_, _, id) in &waiting[..want] {
            if let Some(e) = open.remove(id) {
                self.evicting.fetch_add(1, Ordering::AcqRel);
                e.evict.cancel();
            }
        }
    }
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub struct Admitted {
    _permit: OwnedSemaphorePermit,
    id: u64,
    mark: ConnMark,
}

impl Admitted {
    /// Signs of life of this connection, for its requests.
    pub fn mark(&self) -> &ConnMark {
        &self.mark
    }

    /// Completes when the cap closes this connection to make room: drop it at once.
    pub fn evicted(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.mark.entry.evict.cancelled()
    }

    /// The token the cap cancels to close this connection, for a watcher of its own.
    pub(crate) fn eviction(&self) -> CancellationToken {
        self.mark.entry.evict.clone()
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let book = &self.mark.book;
        let open = book
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
        if open.is_none() {
            // Evicted: its place is free now.
            book.evicting.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A handle on one connection's standing with its cap, shared by its requests.
#[derive(Debug, Clone)]
pub struct ConnMark {
    entry: Arc<ConnEntry>,
    book: Arc<ConnBook>,
}

impl ConnMark {
    /// The client just showed life (a request head, a body frame, an answer's end).
    pub fn progress(&self) {
        self.entry
            .since_ms
            .store(self.book.now_ms(), Ordering::Relaxed);
    }

    /// How long the connection has been idle: no request in progress and no sign of
    /// life from the client; `None` while a request is in progress (its own deadlines
    /// bound it).
    pub fn idle(&self) -> Option<Duration> {
        if self.entry.requests.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = self.entry.since_ms.load(Ordering::Relaxed);
        Some(Duration::from_millis(
            self.book.now_ms().saturating_sub(since),
        ))
    }

    /// The mark of one request on this connection: call at its head.
    pub fn request(&self) -> Arc<RequestMark> {
        self.entry.requests.fetch_add(1, Ordering::AcqRel);
        self.progress();
        Arc::new(RequestMark {
            conn: self.clone(),
            answering: AtomicBool::new(false),
        })
    }
}

/// One request's standing: being answered from the moment its body is whole until the
/// mark (held by the body and by the answer) drops.
#[derive(Debug)]
pub struct RequestMark {
    conn: ConnMark,
    answering: AtomicBool,
}

impl RequestMark {
    /// The body is whole: the connection is no longer waiting on its client.
    pub fn answering(&self) {
        if !self.answering.swap(true, Ordering::AcqRel) {
            self.conn.entry.answering.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for RequestMark {
    fn drop(&mut self) {
        if *self.answering.get_mut() {
            self.conn.entry.answered.store(true, Ordering::Release);
            self.conn.entry.answering.fetch_sub(1, Ordering::AcqRel);
        }
        self.conn.progress();
        self.conn.entry.requests.fetch_sub(1, Ordering::AcqRel);
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
    /// A connection on which nothing is being answered and the client showed no life
    /// (a request head, a body frame) for this long is closed, whatever its protocol.
    pub idle: Duration,
    /// Connections open at once (lowered to the descriptor limit, [`ConnectionCap`]).
    pub max_connections: usize,
}

/// The bounds of the project's small local HTTP APIs (mock-node's admin and Nomad APIs,
/// a run's metrics endpoint). Their clients (the harness's collector and chaos client, a
/// Nomad client, Prometheus, an operator's curl) send small requests at once on a few
/// connections, so the deadlines are E2B's API server's own (`packages/api/main.go`:
/// 5 s to read a request head, 10 s for the whole request), the idle timeout is the
/// placement service's header deadline (10 s), and the cap is 1,024 connections (an
/// assumption: a hundred times what a run opens), below the descriptor limit in any case.
pub const LOCAL_API_LIMITS: HttpLimits = HttpLimits {
    header_read: Duration::from_secs(5),
    body_read: Duration::from_secs(10),
    idle: Duration::from_secs(10),
    max_connections: 1024,
};

/// Serves `app` on `listener` within `limits` until `stop` fires; a request whose body
/// misses its deadline is answered `on_timeout(..)` and its HTTP/1 connection closed.
/// Connections are admitted by a [`ConnectionCap`] of `limits.max_connections`.
pub async fn serve_bounded(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: HttpLimits,
    stop: CancellationToken,
    on_timeout: fn(BodyTimedOut) -> axum::response::Response,
) {
    let cap = ConnectionCap::new(limits.max_connections);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) => {
                let admitted = tokio::select! {
                    _ = stop.cancelled() => break,
                    a = cap.admit() => a,
                };
                let app = app.clone();
                let stop = stop.clone();
                conns.spawn(serve_one(stream, admitted, app, limits, stop, on_timeout));
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
    admitted: Admitted,
    app: axum::Router,
    limits: HttpLimits,
    stop: CancellationToken,
    on_timeout: fn(BodyTimedOut) -> axum::response::Response,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let cut = CancellationToken::new();
    let on_cut = cut.clone();
    let conn_mark = admitted.mark().clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let app = app.clone();
        let cut = on_cut.clone();
        let h1 = req.version() < hyper::Version::HTTP_2;
        let (req, hit, mark) = bounded_request(req, limits.body_read, &conn_mark);
        async move {
            let answer = tower::ServiceExt::oneshot(app, req).await;
            drop(mark);
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
    let mark = admitted.mark().clone();
    let mut evicted = std::pin::pin!(admitted.evicted());
    let check = tokio::time::sleep(limits.idle);
    let mut check = std::pin::pin!(check);
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            () = evicted.as_mut() => {
                tracing::debug!("closing a connection waiting on its client: the cap is full");
                return;
            }
            () = check.as_mut() => {
                match mark.idle() {
                    Some(w) if w >= limits.idle => {
                        tracing::debug!("closing an idle connection");
                        return;
                    }
                    Some(w) => check.as_mut().reset(Instant::now() + (limits.idle - w)),
                    None => check.as_mut().reset(Instant::now() + limits.idle),
                }
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

/// `req` with its body under a deadline of `within`, as axum takes it, and the mark of
/// the request on its connection `conn`: hold it until the answer is made.
pub fn bounded_request<B>(
    req: hyper::Request<B>,
    within: Duration,
    conn: &ConnMark,
) -> (
    hyper::Request<axum::body::Body>,
    BodyDeadlineHit,
    Arc<RequestMark>,
)
where
    B: Body<Data = bytes::Bytes> + Unpin + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mark = conn.request();
    let (parts, body) = req.into_parts();
    if body.is_end_stream() {
        mark.answering();
    }
    let (body, hit) = DeadlineBody::new(body, within);
    let body = body.marked(mark.clone());
    (
        hyper::Request::from_parts(parts, axum::body::Body::new(body)),
        hit,
        mark,
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

    #[tokio::test]
    async fn a_full_cap_evicts_the_connection_waiting_longest_never_one_being_answered() {
        let cap = ConnectionCap::new(3);
        assert_eq!(cap.limit(), 3, "the test needs room for 3 descriptors");
        let answering = cap.admit().await;
        let mark = answering.mark().request();
        mark.answering();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let oldest = cap.admit().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let newer = cap.admit().await;
        assert_eq!(cap.open(), 3);
        // Full: admitting one more evicts `oldest`, which lets go of its place.
        let admit = tokio::spawn({
            let cap = cap.clone();
            async move { cap.admit().await }
        });
        tokio::time::timeout(Duration::from_secs(5), oldest.evicted())
            .await
            .expect("the stalest connection is evicted");
        drop(oldest);
        let fourth = tokio::time::timeout(Duration::from_secs(5), admit)
            .await
            .expect("admitted once a place is free")
            .expect("joins");
        assert_eq!(cap.open(), 3);
        // The one being answered is never chosen: with it and two fresher ones open,
        // the next eviction takes `newer`.
        let admit = tokio::spawn({
            let cap = cap.clone();
            async move { cap.admit().await }
        });
        tokio::time::timeout(Duration::from_secs(5), newer.evicted())
            .await
            .expect("the next stalest is evicted");
        drop(newer);
        let _fifth = admit.await.expect("joins");
        drop((answering, mark, fourth));
    }

    /// Admits one more connection into the full `cap` and returns which of `open` the
    /// cap evicted for it (dropping it, so the admission completes).
    async fn evicted_by_one_more(cap: &ConnectionCap, open: &mut Vec<Admitted>) -> usize {
        let admit = tokio::spawn({
            let cap = cap.clone();
            async move { cap.admit().await }
        });
        let which = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(k) = open.iter().position(|a| a.eviction().is_cancelled()) {
                    return k;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await
        .expect("one connection is evicted");
        open.remove(which);
        let admitted = tokio::time::timeout(Duration::from_secs(5), admit)
            .await
            .expect("admitted once a place is free")
            .expect("joins");
        open.push(admitted);
        which
    }

    #[tokio::test]
    async fn a_full_cap_evicts_a_connection_that_never_spoke_before_a_known_clients_idle_one() {
        let cap = ConnectionCap::new(3);
        assert_eq!(cap.limit(), 3, "the test needs room for 3 descriptors");
        // The oldest and longest idle: a client that had one request answered (a pooled
        // channel between calls).
        let known = cap.admit().await;
        let mark = known.mark().request();
        mark.answering();
        drop(mark);
        tokio::time::sleep(Duration::from_millis(5)).await;
        // Two that never spoke, fresher than it.
        let silent = cap.admit().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let stalled_head = cap.admit().await;
        let head = stalled_head.mark().request();
        let mut open = vec![known, silent, stalled_head];
        // Full: the silent one goes, then the stalled first head, never the known one
        // while one of those remains.
        assert_eq!(
            evicted_by_one_more(&cap, &mut open).await,
            1,
            "the silent one"
        );
        assert_eq!(
            evicted_by_one_more(&cap, &mut open).await,
            1,
            "the stalled head"
        );
        drop(head);
        // Left: the known one and the two silent newcomers; the newcomers go first.
        assert_eq!(evicted_by_one_more(&cap, &mut open).await, 1);
        assert_eq!(evicted_by_one_more(&cap, &mut open).await, 1);
        assert_eq!(cap.open(), 3);
        // Once every connection has had an answer, the longest waiting of them goes.
        tokio::time::sleep(Duration::from_millis(5)).await;
        for a in &open[1..] {
            let m = a.mark().request();
            m.answering();
            drop(m);
        }
        assert_eq!(
            evicted_by_one_more(&cap, &mut open).await,
            0,
            "the known one, now the longest waiting of the answered"
        );
    }
}
