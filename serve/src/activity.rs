//! What one HTTP connection is doing, for its watchdog: when bytes last moved, how many
//! requests it started and how many are being handled now.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// Activity of one connection, shared by its IO, its service and its watchdog.
#[derive(Debug)]
pub(crate) struct Activity {
    opened: Instant,
    /// ms after `opened` when bytes were last read or written.
    last_io_ms: AtomicU64,
    /// Requests whose head was parsed.
    started: AtomicU64,
    /// Requests being handled.
    in_flight: AtomicUsize,
    /// Woken when a request ends, so the watchdog re-reads its deadline.
    changed: Notify,
}

/// Why a connection is closed by its watchdog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// No complete request head arrived within the header-read timeout.
    HeaderRead,
    /// No request in progress and no bytes moved within the idle timeout.
    Idle,
}

impl Activity {
    /// A connection opened now.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            opened: Instant::now(),
            last_io_ms: AtomicU64::new(0),
            started: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            changed: Notify::new(),
        })
    }

    fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_io_ms.fetch_max(ms, Relaxed);
    }

    /// Marks a request as being handled until the guard drops.
    pub(crate) fn request(self: &Arc<Self>) -> RequestGuard {
        self.started.fetch_add(1, Relaxed);
        self.in_flight.fetch_add(1, Relaxed);
        RequestGuard(self.clone())
    }

    /// Whether the connection should be closed at `now`: nothing is being handled and
    /// either no first request head arrived within `header_read`, or nothing moved for
    /// `idle`.
    pub(crate) fn expired(
        &self,
        now: Instant,
        header_read: Duration,
        idle: Duration,
    ) -> Option<Expiry> {
        if self.in_flight.load(Relaxed) > 0 {
            return None;
        }
        if self.started.load(Relaxed) == 0 && now >= self.opened + header_read {
            return Some(Expiry::HeaderRead);
        }
        let last = self.opened + Duration::from_millis(self.last_io_ms.load(Relaxed));
        (now >= last + idle).then_some(Expiry::Idle)
    }

    /// When [`expired`](Self::expired) may next become true (re-checked on request ends).
    pub(crate) fn next_check(
        &self,
        now: Instant,
        header_read: Duration,
        idle: Duration,
    ) -> Instant {
        if self.in_flight.load(Relaxed) > 0 {
            return now + idle;
        }
        let last = self.opened + Duration::from_millis(self.last_io_ms.load(Relaxed));
        let mut at = last + idle;
        if self.started.load(Relaxed) == 0 {
            at = at.min(self.opened + header_read);
        }
        at
    }

    /// Resolves when a request ends.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }
}

/// A request being handled; dropping it ends the request.
#[derive(Debug)]
pub(crate) struct RequestGuard(Arc<Activity>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Relaxed);
        self.0.changed.notify_one();
    }
}

/// An IO stream that records in its [`Activity`] when bytes move.
#[derive(Debug)]
pub(crate) struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Tracked<S> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: S, activity: Arc<Activity>) -> Self {
        Self { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: Duration = Duration::from_secs(10);
    const IDLE: Duration = Duration::from_secs(60);

    #[test]
    fn a_silent_connection_expires_at_the_header_read_timeout() {
        let a = Activity::new();
        let t0 = a.opened;
        assert_eq!(a.expired(t0 + HEAD / 2, HEAD, IDLE), None);
        assert_eq!(a.next_check(t0, HEAD, IDLE), t0 + HEAD);
        assert_eq!(a.expired(t0 + HEAD, HEAD, IDLE), Some(Expiry::HeaderRead));
    }

    #[test]
    fn a_request_in_progress_never_expires_and_idle_counts_from_its_end() {
        let a = Activity::new();
        let t0 = a.opened;
        let guard = a.request();
        assert_eq!(a.expired(t0 + IDLE * 3, HEAD, IDLE), None);
        drop(guard);
        let last = a.opened + Duration::from_millis(a.last_io_ms.load(Relaxed));
        assert_eq!(a.expired(last + IDLE / 2, HEAD, IDLE), None);
        assert_eq!(a.next_check(last, HEAD, IDLE), last + IDLE);
        assert_eq!(a.expired(last + IDLE, HEAD, IDLE), Some(Expiry::Idle));
    }
}
