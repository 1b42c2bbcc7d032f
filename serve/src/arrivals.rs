//! When creates reach the service: the first and the last arrival of `POST /sandboxes`
//! (and `/v2/sandboxes`) as this instance sees them. A create arrives when the last
//! byte of its body does: the kernel's receive time of the segment that carried it
//! (see [`super::rx_stamp`]), read when the handler has the whole body. A harness
//! compares this server-side spread with the client's own send spread to see how
//! together a burst really arrived.
//!
//! Recording is four relaxed atomics per create, no lock.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Method, Request};
use http_body::Frame;

use super::rx_stamp::{realtime_ns, LastRead};

/// The receive times of a request's connection (a request extension the accept loop
/// adds); a request without it (a router served by something else) is stamped when
/// its body ends.
#[derive(Debug, Clone)]
pub(crate) struct ConnReads(pub Arc<LastRead>);

/// Arrival times of the creates one instance received.
#[derive(Debug)]
pub(crate) struct Arrivals {
    /// `CLOCK_REALTIME` nanoseconds of the first arrival (`u64::MAX`: none yet).
    first_ns: AtomicU64,
    /// Nanoseconds of the last arrival.
    last_ns: AtomicU64,
    count: AtomicU64,
    /// Arrivals whose time the kernel stamped.
    kernel: AtomicU64,
}

/// The arrivals so far: how many, and the first and the last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArrivalWindow {
    /// Creates received.
    pub count: u64,
    /// Of those, the ones whose arrival is the kernel's receive timestamp (the others
    /// were stamped by the wall clock when their last byte was read).
    pub kernel_stamped: u64,
    /// First and last arrival, `CLOCK_REALTIME` nanoseconds; `None` when nothing arrived.
    pub span: Option<(u64, u64)>,
}

impl ArrivalWindow {
    /// Time from the first to the last arrival.
    pub fn spread(&self) -> Option<Duration> {
        self.span
            .map(|(first, last)| Duration::from_nanos(last.saturating_sub(first)))
    }

    /// The window covering both (replicas of one run share one clock).
    pub fn merge(self, other: ArrivalWindow) -> ArrivalWindow {
        let span = match (self.span, other.span) {
            (Some((a0, a1)), Some((b0, b1))) => Some((a0.min(b0), a1.max(b1))),
            (a, b) => a.or(b),
        };
        ArrivalWindow {
            count: self.count + other.count,
            kernel_stamped: self.kernel_stamped + other.kernel_stamped,
            span,
        }
    }
}

impl Default for Arrivals {
    fn default() -> Self {
        Self::new()
    }
}

impl Arrivals {
    /// No arrivals yet.
    pub(crate) fn new() -> Self {
        Self {
            first_ns: AtomicU64::new(u64::MAX),
            last_ns: AtomicU64::new(0),
            count: AtomicU64::new(0),
            kernel: AtomicU64::new(0),
        }
    }

    /// Records one create arriving at `ns` (`CLOCK_REALTIME` nanoseconds), stamped by
    /// the kernel or not.
    pub(crate) fn record(&self, ns: u64, kernel: bool) {
        let ns = ns.min(u64::MAX - 1);
        self.first_ns.fetch_min(ns, Relaxed);
        self.last_ns.fetch_max(ns, Relaxed);
        if kernel {
            self.kernel.fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
    }

    /// The arrivals recorded so far.
    pub(crate) fn window(&self) -> ArrivalWindow {
        let count = self.count.load(Relaxed);
        let first = self.first_ns.load(Relaxed);
        let last = self.last_ns.load(Relaxed);
        ArrivalWindow {
            count,
            kernel_stamped: self.kernel.load(Relaxed),
            span: (count > 0 && first != u64::MAX).then(|| (first, last.max(first))),
        }
    }
}

/// Whether a request is a create (`POST /sandboxes` or `POST /v2/sandboxes`).
pub(crate) fn is_create<B>(req: &Request<B>) -> bool {
    req.method() == Method::POST && matches!(req.uri().path(), "/sandboxes" | "/v2/sandboxes")
}

/// Tower layer recording every create into an [`Arrivals`].
#[derive(Debug, Clone)]
pub(crate) struct RecordArrivalsLayer {
    arrivals: Arc<Arrivals>,
}

impl RecordArrivalsLayer {
    /// A layer recording into `arrivals`.
    pub(crate) fn new(arrivals: Arc<Arrivals>) -> Self {
        Self { arrivals }
    }
}

impl<S> tower::Layer<S> for RecordArrivalsLayer {
    type Service = RecordArrivals<S>;
    fn layer(&self, inner: S) -> RecordArrivals<S> {
        RecordArrivals {
            inner,
            arrivals: self.arrivals.clone(),
        }
    }
}

/// Service produced by [`RecordArrivalsLayer`]; passes every request on unchanged.
#[derive(Debug, Clone)]
pub(crate) struct RecordArrivals<S> {
    inner: S,
    arrivals: Arc<Arrivals>,
}

impl<S> tower::Service<Request<Body>> for RecordArrivals<S>
where
    S: tower::Service<Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        if !is_create(&req) {
            return self.inner.call(req);
        }
        let arrivals = self.arrivals.clone();
        let reads = req.extensions().get::<ConnReads>().map(|c| c.0.clone());
        self.inner.call(req.map(|inner| {
            Body::new(StampEnd {
                inner,
                arrivals: Some(arrivals),
                reads,
            })
        }))
    }
}

/// A create's body that records its arrival when its last byte has come in: the
/// receive time of the connection's latest read (on HTTP/1 the segment that carried
/// that byte; on HTTP/2, whose streams share the connection, possibly a later one).
struct StampEnd {
    inner: Body,
    /// Taken at the first record.
    arrivals: Option<Arc<Arrivals>>,
    reads: Option<Arc<LastRead>>,
}

impl StampEnd {
    fn stamp(&mut self) {
        if let Some(a) = self.arrivals.take() {
            match self.reads.as_ref().and_then(|r| r.get()) {
                Some((ns, kernel)) => a.record(ns, kernel),
                None => a.record(realtime_ns(), false),
            }
        }
    }
}

impl http_body::Body for StampEnd {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(r) = &polled {
            if r.is_none() || this.inner.is_end_stream() {
                this.stamp();
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_spans_first_to_last_whatever_the_order() {
        let a = Arrivals::new();
        assert_eq!(a.window().spread(), None);
        let ms = |n: u64| 1_700_000_000_000_000_000 + n * 1_000_000;
        a.record(ms(7), true);
        a.record(ms(2), false);
        a.record(ms(5), true);
        let w = a.window();
        assert_eq!(w.count, 3);
        assert_eq!(w.kernel_stamped, 2);
        assert_eq!(w.spread(), Some(Duration::from_millis(5)));
    }

    #[test]
    fn merged_windows_cover_both_replicas() {
        let ms = |n: u64| n * 1_000_000;
        let a = ArrivalWindow {
            count: 2,
            kernel_stamped: 2,
            span: Some((ms(3), ms(4))),
        };
        let b = ArrivalWindow {
            count: 1,
            kernel_stamped: 0,
            span: Some((ms(1), ms(2))),
        };
        let m = a.merge(b).merge(ArrivalWindow::default());
        assert_eq!(m.count, 3);
        assert_eq!(m.kernel_stamped, 2);
        assert_eq!(m.spread(), Some(Duration::from_millis(3)));
    }

    #[test]
    fn only_creates_count() {
        let req = |m: Method, p: &str| Request::builder().method(m).uri(p).body(()).unwrap();
        assert!(is_create(&req(Method::POST, "/sandboxes")));
        assert!(is_create(&req(Method::POST, "/v2/sandboxes")));
        assert!(!is_create(&req(Method::GET, "/sandboxes")));
        assert!(!is_create(&req(Method::POST, "/sandboxes/x")));
        assert!(!is_create(&req(Method::GET, "/health")));
    }
}
